"""Training throughput: a plain single-model loop vs the batched engine of ``lstpe.train``.

Measures **model-epochs per second** (how many (model, epoch) pairs of training are done per
second of wall time) of

* ``plain``: one :class:`lstpe.model.LSTTransformer` trained the usual way, a
  ``torch.utils.data.DataLoader`` (shuffled, batch 128) and ``torch.optim.Adam``,
  ``for x, y in loader: loss.backward(); opt.step()``, fp32, eager; and
* ``batched``: M models in one :class:`lstpe.model.BatchedLSTTransformer`, with the loop of
  :func:`lstpe.train.train` (per-model data permutations from ``(seed, epoch)``, loss = sum of
  the per-model mean losses, one optimizer over the stacked weights), optionally with bf16
  autocast (``--amp``) and ``torch.compile`` (``--compile``),

on the same training puzzles. Only training steps are timed (no evaluation). Each engine runs
``--warmup`` untimed steps, then ``--steps`` timed steps (default 6; or ``--epochs`` full
epochs of the training split) in three blocks; seconds per step is the median over the blocks, and
rates are extrapolated to epochs of the training-set size. The estimate
of a full Table-2 sweep (20 sigmas x 15 seeds x 200 epochs = 60,000 model-epochs) is
60,000 / rate, training only.

Usage::

    python benchmarks/train_throughput.py --size preview --models 1 4 15 30
    python benchmarks/train_throughput.py --size paper --device cuda --amp --json bench.json

Timings depend on the machine and on what else runs on it; nothing here asserts them.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from lstpe import results as res
from lstpe.encodings import parse_pe
from lstpe.engine import EagerStep, GraphStep, Running, resolve_mode
from lstpe.experiments import table1_pes
from lstpe.model import LSTTransformer, ModelConfig
from lstpe.optim import StackedOptimizer
from lstpe.plan import flops_per_model_epoch
from lstpe.runtime import pick_device
from lstpe.train import PAPER_SEEDS, PAPER_SIGMAS, LSTTask, ModelSlot, load_data, preset

DEFAULT_STEPS = 6
"""Timed steps per engine when neither ``--epochs`` nor ``--steps`` is given."""

SWEEP_MODEL_EPOCHS = len(PAPER_SIGMAS) * len(PAPER_SEEDS) * 200
"""A full Table-2 sweep: 20 sigmas x 15 seeds x 200 epochs."""


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_steps(step: Callable[[], None], warmup: int, steps: int, device: torch.device,
                blocks: int = 3) -> float:
    """Seconds per step of ``step`` after ``warmup`` untimed calls.

    The ``steps`` timed calls are split into up to ``blocks`` consecutive blocks, each timed
    as a whole (no synchronisation inside a block); the result is the median over blocks of
    block time / block steps, which damps bursts of load from other processes.
    """
    for _ in range(warmup):
        step()
    _sync(device)
    sizes = [len(b) for b in torch.arange(steps).tensor_split(min(blocks, steps))]
    per_step = []
    for n in sizes:
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        _sync(device)
        per_step.append((time.perf_counter() - t0) / n)
    return statistics.median(per_step)


def plain_step_fn(mcfg: ModelConfig, x: torch.Tensor, y: torch.Tensor, batch_size: int,
                  lr: float, device: torch.device) -> Callable[[], None]:
    """One step of a textbook single-model loop per call (cycling over shuffled epochs).

    Args:
        x: (N, 16, 5) training puzzles (CPU), y: (N,) answers.
    """
    model = LSTTransformer("learn-0.2", PAPER_SEEDS[0], mcfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(0))

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield from loader

    it = batches()
    model.train()

    def step() -> None:
        xb, yb = next(it)
        xb, yb = xb.to(device), yb.to(device)
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def sweep_models(m: int) -> tuple[list[str], list[int]]:
    """PEs and seeds of the first ``m`` models of a Table-2 sweep (sigma-major, seed-minor)."""
    pes = [f"learn-{PAPER_SIGMAS[(i // len(PAPER_SEEDS)) % len(PAPER_SIGMAS)]:g}"
           for i in range(m)]
    seeds = [PAPER_SEEDS[i % len(PAPER_SEEDS)] for i in range(m)]
    return pes, seeds


def mixed_models(m: int) -> tuple[list[str], list[int]]:
    """``m`` models cycling over Table 1's 10 PEs (every kind of block in one batch)."""
    pes = table1_pes()
    return [pes[i % len(pes)] for i in range(m)], \
        [PAPER_SEEDS[(i // len(pes)) % len(PAPER_SEEDS)] for i in range(m)]


MIXES = {"sweep": sweep_models, "table1": mixed_models}
"""Which models a batch holds: the learn-sigma sweep, or every PE of Table 1 mixed."""


def batched_step_fn(m: int, cfg, splits: dict, device: torch.device, amp: bool = False,
                    mode: str = "eager", mix: str = "sweep") -> Callable[[], None]:
    """One step of the engine (:mod:`lstpe.engine`) over ``m`` stacked models per call: the
    LST task's per-model batches and dropout keys, the per-model optimizer, the running
    metrics, as :func:`lstpe.train.train` runs them; ``mode`` eager, compile or graph."""
    pes, seeds = MIXES[mix](m)
    slots = [ModelSlot(0, i, parse_pe(p), sd) for i, (p, sd) in enumerate(zip(pes, seeds,
                                                                              strict=True))]
    task = LSTTask(cfg, slots, ["adam"] * m, splits, {}, device)
    opt = StackedOptimizer(task.model.parameters(), ["adam"] * m, [cfg.lr] * m, [0.0] * m)
    running = Running.zeros(m, device)
    if mode == "graph":
        stepper = GraphStep(task, opt, running, device, amp)
    else:
        fwd = torch.compile(task.model) if mode == "compile" else task.model
        stepper = EagerStep(task, opt, fwd, running, device, amp)

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor | None]]:
        epoch = 0
        while True:
            epoch += 1
            for s, idx in task.batches(epoch):
                yield idx, task.dropout_keys(epoch, s)

    it = batches()
    task.model.train()

    def step() -> None:
        stepper(*next(it))

    return step


def run(size: str = "preview", models: Sequence[int] = (1, 4, 15, 30),
        epochs: float | None = None, steps: int | None = None, warmup: int | None = None,
        device: str = "auto", amp: bool = False, mode: str = "eager", plain: bool = True,
        mix: str = "sweep") -> dict[str, Any]:
    """Time both engines; return a JSON-ready dict with one row per engine and model count.

    Timed steps per engine: ``epochs`` epochs of the training split if given, else ``steps``,
    else :data:`DEFAULT_STEPS`. Warm-up: ``warmup`` steps, default 3 (one epoch + 2 with
    ``compile``, so that recompiling for the short last batch of an epoch is not timed).

    Raises:
        ValueError: unknown size, a model count < 1, or a non-positive number of steps.
    """
    if mix not in MIXES:
        raise ValueError(f"unknown mix {mix!r}; valid: {', '.join(MIXES)}")
    if size not in ("paper", "preview"):
        raise ValueError(f"unknown size {size!r}; valid sizes: paper, preview")
    if not models or min(models) < 1:
        raise ValueError(f"model counts must be >= 1, got {list(models)}")
    cfg = preset(size)
    dev = pick_device(device)
    mode = resolve_mode(mode, dev)
    compile = mode == "compile"
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    splits = load_data(cfg)
    tr = splits["train"]
    N, bs = len(tr), cfg.batch_size
    steps_per_epoch = math.ceil(N / bs)
    if epochs is not None:
        n_steps = max(1, round(epochs * steps_per_epoch))
    else:
        n_steps = steps if steps is not None else DEFAULT_STEPS
    if warmup is None:
        warmup = steps_per_epoch + 2 if compile else 3
    if n_steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0, got {n_steps}, {warmup}")
    rows: list[dict[str, Any]] = []

    def record(engine: str, m: int, sec_per_step: float, peak: float | None) -> None:
        rate = m / (sec_per_step * steps_per_epoch)
        rows.append({"engine": engine, "models": m, "sec_per_step": sec_per_step,
                     "model_epochs_per_s": rate,
                     "sweep_hours": SWEEP_MODEL_EPOCHS / rate / 3600,
                     "tflops": rate * flops_per_model_epoch(cfg.model, N) / 1e12,
                     "peak_mem_gib": peak})

    def measure(engine: str, m: int, make: Callable[[], Callable[[], None]]) -> None:
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(dev)
        step = make()
        sec = _time_steps(step, warmup, n_steps, dev)
        peak = torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else None
        record(engine, m, sec, peak)
        del step
        print(f"  {engine:8s} M={m:<4d} {sec * 1e3:9.2f} ms/step", file=sys.stderr, flush=True)

    if plain:
        measure("plain", 1, lambda: plain_step_fn(cfg.model, tr.x, tr.y, bs, cfg.lr, dev))
    for m in models:
        measure("batched", m, lambda m=m: batched_step_fn(m, cfg, splits, dev, amp, mode, mix))
    base = rows[0]["model_epochs_per_s"] if plain else None
    for r in rows:
        r["ratio_vs_plain"] = r["model_epochs_per_s"] / base if base else None
    return {
        "device": res.device_name(dev), "torch_version": torch.__version__,
        **{k: v for k, v in res.make_manifest({}, dev, 0).items()
           if k in ("git_commit", "finished_at", "python_version", "platform")},
        "size": size,
        "model": cfg.model.to_dict(), "n_train": N, "batch_size": bs,
        "steps_per_epoch": steps_per_epoch, "timed_steps": n_steps, "warmup_steps": warmup,
        "timed_epochs": n_steps / steps_per_epoch, "amp": amp, "compile": compile,
        "mode": mode, "mix": mix,
        "flops_per_model_epoch": flops_per_model_epoch(cfg.model, N),
        "sweep_model_epochs": SWEEP_MODEL_EPOCHS, "rows": rows,
    }


def format_report(out: dict[str, Any]) -> str:
    """The human-readable table of :func:`run`'s result."""
    m = out["model"]
    head = (
        f"device: {out['device']}   torch {out['torch_version']}\n"
        f"size {out['size']}: d_model={m['d_model']}, {m['n_layers']} layers, "
        f"{m['n_heads']} head(s); {out['n_train']} training puzzles, batch {out['batch_size']} "
        f"= {out['steps_per_epoch']} steps/epoch\n"
        f"timed {out['timed_steps']} steps per engine after {out['warmup_steps']} warm-up steps "
        f"(= {out['timed_epochs']:.2f} epochs; median of 3 blocks, extrapolated to epochs); "
        f"amp={out['amp']}, step mode {out['mode']}, models: {out['mix']} (batched only)\n"
        f"FLOP floor: {out['flops_per_model_epoch']:.3g} FLOP per model-epoch "
        f"(forward + backward, matmuls only)\n"
        f"sweep estimate: {out['sweep_model_epochs']:,} model-epochs (20 sigmas x 15 seeds x "
        f"200 epochs) / rate, training only, batches of M models\n"
    )
    lines = [f"{'engine':8s} {'models':>6s} {'ms/step':>9s} {'model-epochs/s':>15s} "
             f"{'ratio':>7s} {'sweep (h)':>10s} {'TFLOP/s':>8s}"
             + ("  peak GiB" if out["rows"][0]["peak_mem_gib"] is not None else "")]
    for r in out["rows"]:
        ratio = f"{r['ratio_vs_plain']:7.2f}" if r["ratio_vs_plain"] is not None else "      -"
        line = (f"{r['engine']:8s} {r['models']:6d} {r['sec_per_step'] * 1e3:9.2f} "
                f"{r['model_epochs_per_s']:15.3f} {ratio} {r['sweep_hours']:10.2f} "
                f"{r['tflops']:8.3f}")
        if r["peak_mem_gib"] is not None:
            line += f"  {r['peak_mem_gib']:8.2f}"
        lines.append(line)
    return head + "\n" + "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="See benchmarks/README.md for what the numbers mean.")
    p.add_argument("--size", default="preview", help="paper (ModelConfig()) or preview "
                   "(lstpe.train.preset('preview').model and training subset)")
    p.add_argument("--models", type=int, nargs="+", default=[1, 4, 15, 30],
                   help="model counts M of the batched engine")
    p.add_argument("--epochs", type=float,
                   help="timed epochs of the training split per engine (overrides --steps)")
    p.add_argument("--steps", type=int, help="timed steps per engine, extrapolated to epochs "
                   f"(default {DEFAULT_STEPS})")
    p.add_argument("--warmup", type=int,
                   help="untimed warm-up steps (default 3; one epoch + 2 with --compile)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's); 1 gives "
                   "steadier numbers on a machine shared with other jobs")
    p.add_argument("--amp", action="store_true", help="bf16 autocast (CUDA or CPU) for batched")
    p.add_argument("--compile", action="store_true", help="same as --mode compile")
    p.add_argument("--mode", default="eager", help="step mode of the engine: eager, compile, "
                   "graph (CUDA graph of the whole step) or auto (graph on CUDA)")
    p.add_argument("--mix", default="sweep", help="models in the batch: sweep (Table 2's "
                   "learn-sigma) or table1 (Table 1's 10 PEs mixed)")
    p.add_argument("--no-plain", action="store_true", help="skip the plain loop")
    p.add_argument("--json", help="also write the results to this JSON file")
    args = p.parse_args(argv)
    threads = torch.get_num_threads()
    try:
        if args.threads is not None:
            if args.threads < 1:
                raise ValueError(f"--threads must be >= 1, got {args.threads}")
            torch.set_num_threads(args.threads)
        mode = "compile" if args.compile else args.mode
        out = run(args.size, args.models, args.epochs, args.steps, args.warmup, args.device,
                  args.amp, mode, plain=not args.no_plain, mix=args.mix)
    except ValueError as e:
        print(f"train_throughput: error: {e}", file=sys.stderr)
        return 2
    finally:
        torch.set_num_threads(threads)
    print(format_report(out))
    if args.json:
        res.save_json(out, Path(args.json))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
