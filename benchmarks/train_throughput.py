"""Training throughput: a plain single-model loop vs the batched engine of ``lstpe.training.train``,
and both against this machine's matmul floor, all measured in one run.

Measures **model-epochs per second** (how many (model, epoch) pairs of training are done per
second of wall time) of

* ``plain``: one :class:`lstpe.nn.model.LSTTransformer` trained the usual way, a
  ``torch.utils.data.DataLoader`` (shuffled, batch 128) and ``torch.optim.Adam``,
  ``for x, y in loader: loss.backward(); opt.step()``, fp32, eager; and
* ``batched``: M models in one :class:`lstpe.nn.model.BatchedLSTTransformer`, with the loop of
  :func:`lstpe.training.train.train` (per-model data permutations from ``(seed, epoch)``, loss =
  sum of
  the per-model mean losses, one optimizer over the stacked weights), optionally with bf16
  autocast (``--amp``) and a compiled step (``--mode compile``: the forward; ``--mode
  compiled``: the whole step),

on the same training puzzles. Only training steps are timed (no evaluation). Each engine runs
``--warmup`` untimed steps, then ``--steps`` timed steps (default 6; or ``--epochs`` full
epochs of the training split) in three blocks; seconds per step is the median over the blocks, and
rates are extrapolated to epochs of the training-set size. The estimate
of a full Table-2 sweep (20 sigmas x 15 seeds x 200 epochs = 60,000 model-epochs) is
60,000 / rate, training only.

**The floor.** For every model count M of the table, the same run times the matmuls of one
training step of M models at the model's own shapes (:func:`step_gemms`, derived from the
``ModelConfig`` and the batch size: embedding, q/k/v, attention scores and mixing, output
projection, MLP, read-out; each forward GEMM and its backward's grad-input and grad-weight
GEMMs), with ``torch.bmm`` in fp32 (TF32 on CUDA, as the engines run) on the same device and
number of threads as the engines, best of ``--floor-repeats`` per shape. Their FLOPs over their
summed time is the achieved GFLOP/s; divided by the FLOPs of one model-epoch
(:func:`lstpe.training.cost.flops_per_model_epoch`: the last block computes its output projection
and
MLP for the read-out token only, as the engine does; the plain loop computes all 16 tokens and
is not credited the extra work) it gives the **floor** in model-epochs/s, the rate at which
training would run if it were nothing but these matmuls. Each row reports its rate, its ratio
to the plain loop and its fraction of the floor at its own M; the last line sums up the engine
at the chosen setting (the batched row with the highest rate). The CPU's precision-related
flags (``/proc/cpuinfo``: avx512_bf16, amx_bf16, amx_tile, avx512f, avx2) are recorded too.

Usage::

    python benchmarks/train_throughput.py --size preview --models 1 4 15 30
    python benchmarks/train_throughput.py --size paper --models 1 2 4
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

from lstpe.experiments.registry import table1_pes
from lstpe.nn.architecture import ModelConfig
from lstpe.nn.encodings import parse_pe
from lstpe.nn.model import LSTTransformer
from lstpe.runtime import PAPER_SEEDS, PRECISION_FLAGS, cpu_flags, pick_device
from lstpe.store import results as res
from lstpe.training.compiled import CompiledStep
from lstpe.training.config import PAPER_SIGMAS, load_data, preset
from lstpe.training.cost import flops_per_model_epoch
from lstpe.training.engine import STEP_MODES, EagerStep, GraphStep, Running, resolve_mode
from lstpe.training.floor import (  # noqa: F401  (the floor lives in the package; tests use these names)
    FLOOR_REPEATS,
    Gemm,
    measure_floor,
    step_gemms,
    sync,
)
from lstpe.training.opcount import chunk_step_ops
from lstpe.training.optim import StackedOptimizer
from lstpe.training.task import LSTTask, ModelSlot

DEFAULT_STEPS = 6
"""Timed steps per engine when neither ``--epochs`` nor ``--steps`` is given."""

SWEEP_MODEL_EPOCHS = len(PAPER_SIGMAS) * len(PAPER_SEEDS) * 200
"""A full Table-2 sweep: 20 sigmas x 15 seeds x 200 epochs."""

def _time_steps(step: Callable[[], None], warmup: int, steps: int, device: torch.device,
                blocks: int = 3) -> float:
    """Seconds per step of ``step`` after ``warmup`` untimed calls.

    The ``steps`` timed calls are split into up to ``blocks`` consecutive blocks, each timed
    as a whole (no synchronisation inside a block); the result is the median over blocks of
    block time / block steps, which damps bursts of load from other processes.
    """
    for _ in range(warmup):
        step()
    sync(device)
    sizes = [len(b) for b in torch.arange(steps).tensor_split(min(blocks, steps))]
    per_step = []
    for n in sizes:
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        sync(device)
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


BUILT_MODES: tuple[str, ...] = tuple(m for m in STEP_MODES if m != "auto")
"""The step modes :func:`batched_step_fn` builds: every mode of the engine once ``auto`` is
resolved (:func:`lstpe.training.engine.resolve_mode`); each is timed under its own name."""


def batched_step_fn(m: int, cfg, splits: dict, device: torch.device, amp: bool = False,
                    mode: str = "eager", mix: str = "sweep") -> Callable[[], None]:
    """One step of the engine (:mod:`lstpe.training.engine`) over ``m`` stacked models per call: the
    LST task's per-model batches and dropout keys, the per-model optimizer, the running
    metrics, as :func:`lstpe.training.train.train` runs them; ``mode`` a resolved step mode
    (:data:`BUILT_MODES`), built as :func:`lstpe.training.engine.run_chunk` builds it.

    Raises:
        ValueError: a mode not in :data:`BUILT_MODES` (``auto``: resolve it first), naming it.
    """
    if mode not in BUILT_MODES:
        raise ValueError(f"step mode {mode!r} is not one the benchmark builds; valid: "
                         f"{', '.join(BUILT_MODES)} (auto is resolved first by run())")
    pes, seeds = MIXES[mix](m)
    slots = [ModelSlot(0, i, parse_pe(p), sd) for i, (p, sd) in enumerate(zip(pes, seeds,
                                                                              strict=True))]
    task = LSTTask(cfg, slots, ["adam"] * m, splits, {}, device)
    opt = StackedOptimizer(task.model.parameters(), ["adam"] * m, [cfg.lr] * m, [0.0] * m)
    running = Running.zeros(m, device)
    if mode == "compiled":
        stepper: Callable[[torch.Tensor, torch.Tensor | None], None] = CompiledStep(
            task, opt, running, device, amp)
    elif mode == "graph":
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
        mix: str = "sweep", floor_repeats: int = FLOOR_REPEATS) -> dict[str, Any]:
    """Time both engines and the floor; return a JSON-ready dict with one row per engine and
    model count, one floor per model count (:func:`measure_floor`, timed right after the first
    engine row of that count) and the summary of the chosen setting (the fastest batched row).

    Timed steps per engine: ``epochs`` epochs of the training split if given, else ``steps``,
    else :data:`DEFAULT_STEPS`. Warm-up: ``warmup`` steps, default 3 (one epoch + 2 with
    ``compile`` or ``compiled``, so that recompiling for the short last batch of an epoch is
    not timed).

    Raises:
        ValueError: unknown size, a model count < 1, a non-positive number of steps or of
            floor repeats.
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
    compiles = mode in ("compile", "compiled")  # a compilation per batch shape: not timed
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
        warmup = steps_per_epoch + 2 if compiles else 3
    if n_steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0, got {n_steps}, {warmup}")
    if floor_repeats < 1:
        raise ValueError(f"need floor repeats >= 1, got {floor_repeats}")
    fpme = flops_per_model_epoch(cfg.model, N)
    rows: list[dict[str, Any]] = []
    floors: dict[int, dict[str, Any]] = {}

    def record(engine: str, m: int, sec_per_step: float, peak: float | None) -> None:
        rate = m / (sec_per_step * steps_per_epoch)
        ops = chunk_step_ops(cfg, *MIXES[mix](m)) if engine == "batched" else None
        rows.append({"engine": engine, "models": m, "sec_per_step": sec_per_step,
                     "ops_per_step": ops.total if ops else None,
                     "optimizer_ops": ops.optimizer if ops else None,
                     "model_epochs_per_s": rate,
                     "sweep_hours": SWEEP_MODEL_EPOCHS / rate / 3600,
                     "tflops": rate * fpme / 1e12,
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
        if m not in floors:
            fl = floors[m] = measure_floor(cfg.model, bs, m, N, dev, floor_repeats)
            print(f"  floor    M={m:<4d} {fl['seconds_per_step'] * 1e3:9.2f} ms/step of GEMMs, "
                  f"{fl['gflops']:.1f} GFLOP/s", file=sys.stderr, flush=True)

    if plain:
        measure("plain", 1, lambda: plain_step_fn(cfg.model, tr.x, tr.y, bs, cfg.lr, dev))
    for m in models:
        measure("batched", m, lambda m=m: batched_step_fn(m, cfg, splits, dev, amp, mode, mix))
    base = rows[0]["model_epochs_per_s"] if plain else None
    for r in rows:
        fl = floors[r["models"]]
        r["ratio_vs_plain"] = r["model_epochs_per_s"] / base if base else None
        r["floor_model_epochs_per_s"] = fl["model_epochs_per_s"]
        r["floor_gflops"] = fl["gflops"]
        r["fraction_of_floor"] = r["model_epochs_per_s"] / fl["model_epochs_per_s"]
    best = max((r for r in rows if r["engine"] == "batched"),
               key=lambda r: r["model_epochs_per_s"])
    chosen = {"engine": best["engine"], "models": best["models"], "mode": mode, "amp": amp,
              "mix": mix, **{k: best[k] for k in (
                  "model_epochs_per_s", "ratio_vs_plain", "fraction_of_floor",
                  "floor_model_epochs_per_s", "floor_gflops")}}
    return {
        "device": res.device_name(dev), "torch_version": torch.__version__,
        **{k: v for k, v in res.make_manifest({}, dev, 0).items()
           if k in ("git_commit", "finished_at", "python_version", "platform")},
        "size": size,
        "model": cfg.model.to_dict(), "n_train": N, "batch_size": bs,
        "steps_per_epoch": steps_per_epoch, "timed_steps": n_steps, "warmup_steps": warmup,
        "timed_epochs": n_steps / steps_per_epoch, "amp": amp, "compile": compile,
        "mode": mode, "mix": mix, "threads": torch.get_num_threads(),
        "cpu_flags": cpu_flags(), "cpu_flags_checked": list(PRECISION_FLAGS),
        "cpu_capability": _cpu_capability(),
        "flops_per_model_epoch": fpme,
        "flops_count": "lstpe.training.cost.flops_per_model_epoch: matmuls, forward + backward (3x "
                       "forward), last block's output projection and MLP for the read-out "
                       "token only, as the engine computes",
        "all_tokens_flops_per_model_epoch": sum(
            g.flops for g in step_gemms(cfg.model, bs, 1, last_token_only=False)) * N / bs,
        "sweep_model_epochs": SWEEP_MODEL_EPOCHS, "rows": rows,
        "floors": [floors[m] for m in sorted(floors)], "chosen": chosen,
    }


def _cpu_capability() -> str | None:
    """The SIMD level torch's CPU kernels dispatch to (``AVX2``, ``AVX512``, ...), if known."""
    get = getattr(torch.backends.cpu, "get_cpu_capability", None)
    return get() if get is not None else None


def format_report(out: dict[str, Any]) -> str:
    """The human-readable report of :func:`run`'s result: setup, floor, table, summary."""
    m = out["model"]
    flags = " ".join(out["cpu_flags"]) or "none"
    fpme, full = out["flops_per_model_epoch"], out["all_tokens_flops_per_model_epoch"]
    fl0 = out["floors"][0]
    prec = fl0["precision"]
    head = (
        f"device: {out['device']}   torch {out['torch_version']}\n"
        f"CPU precision flags: {flags} (checked: {', '.join(out['cpu_flags_checked'])}; "
        f"torch CPU capability {out['cpu_capability']})\n"
        f"size {out['size']}: d_model={m['d_model']}, {m['n_layers']} layers, "
        f"{m['n_heads']} head(s); {out['n_train']} training puzzles, batch {out['batch_size']} "
        f"= {out['steps_per_epoch']} steps/epoch\n"
        f"timed {out['timed_steps']} steps per engine after {out['warmup_steps']} warm-up steps "
        f"(= {out['timed_epochs']:.2f} epochs; median of 3 blocks, extrapolated to epochs); "
        f"amp={out['amp']}, step mode {out['mode']}, models: {out['mix']} (batched only)\n"
        f"FLOP count used: {fpme:.4g} FLOP per model-epoch = "
        f"lstpe.training.cost.flops_per_model_epoch "
        f"(matmuls, forward + backward; the last block's output projection and MLP for the "
        f"read-out token only, as the engine computes; all tokens, as the plain loop computes: "
        f"{full:.4g}, not credited)\n"
        f"floor: torch.bmm in {prec} at the model's GEMM shapes for one step of M models "
        f"(forward, grad-input, grad-weight; {fl0['threads']} threads, best of "
        f"{fl0['repeats']} per shape), GFLOP/s / (FLOP per model-epoch / 1e9):\n"
        + "".join(f"  M={f['models']:<4d} {f['flops_per_step'] / 1e9:9.3f} GFLOP/step in "
                  f"{f['seconds_per_step'] * 1e3:9.2f} ms = {f['gflops']:9.2f} GFLOP/s -> "
                  f"floor {f['model_epochs_per_s']:.3f} model-epochs/s\n"
                  for f in out["floors"])
        + f"sweep estimate: {out['sweep_model_epochs']:,} model-epochs (20 sigmas x 15 seeds x "
        f"200 epochs) / rate, training only, batches of M models\n"
    )
    peak = out["rows"][0]["peak_mem_gib"] is not None
    lines = [f"{'engine':8s} {'models':>6s} {'ms/step':>9s} {'model-epochs/s':>15s} "
             f"{'ratio':>7s} {'floor/s':>10s} {'of-floor':>8s} {'GFLOP/s':>9s} {'sweep(h)':>9s}"
             f" {'ops/step':>8s} {'opt-ops':>7s}"
             + ("  peak GiB" if peak else "")]
    for r in out["rows"]:
        ratio = f"{r['ratio_vs_plain']:7.2f}" if r["ratio_vs_plain"] is not None else "      -"
        line = (f"{r['engine']:8s} {r['models']:6d} {r['sec_per_step'] * 1e3:9.2f} "
                f"{r['model_epochs_per_s']:15.3f} {ratio} "
                f"{r['floor_model_epochs_per_s']:10.3f} {r['fraction_of_floor']:8.3f} "
                f"{r['tflops'] * 1e3:9.2f} {r['sweep_hours']:9.2f} "
                f"{r['ops_per_step'] or '-':>8} {r['optimizer_ops'] or '-':>7}")
        if peak:
            line += f"  {r['peak_mem_gib']:8.2f}"
        lines.append(line)
    c = out["chosen"]
    ratio = (f"{c['ratio_vs_plain']:.2f} x the plain loop" if c["ratio_vs_plain"] is not None
             else "- x the plain loop (not run)")
    summary = (
        f"engine at chosen setting: {c['model_epochs_per_s']:.3f} model-epochs/s = {ratio} "
        f"= {c['fraction_of_floor']:.3f} of this machine's {prec} floor "
        f"({c['floor_gflops']:.1f} GFLOP/s measured at the model's shapes)\n"
        f"chosen setting: {c['engine']} M={c['models']} (fastest batched row), step mode "
        f"{c['mode']}, amp={c['amp']}, models: {c['mix']}"
    )
    return head + "\n" + "\n".join(lines) + "\n\n" + summary


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="See benchmarks/README.md for what the numbers mean.")
    p.add_argument("--size", default="preview", help="paper (ModelConfig()) or preview "
                   "(lstpe.training.config.preset('preview').model and training subset)")
    p.add_argument("--models", type=int, nargs="+", default=[1, 4, 15, 30],
                   help="model counts M of the batched engine")
    p.add_argument("--epochs", type=float,
                   help="timed epochs of the training split per engine (overrides --steps)")
    p.add_argument("--steps", type=int, help="timed steps per engine, extrapolated to epochs "
                   f"(default {DEFAULT_STEPS})")
    p.add_argument("--warmup", type=int,
                   help="untimed warm-up steps (default 3; one epoch + 2 with --mode compile "
                   "or compiled)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's); 1 gives "
                   "steadier numbers on a machine shared with other jobs")
    p.add_argument("--amp", action="store_true", help="bf16 autocast (CUDA or CPU) for batched")
    p.add_argument("--compile", action="store_true", help="same as --mode compile")
    p.add_argument("--mode", default="eager", help="step mode of the engine: eager, compile "
                   "(the forward compiled), compiled (forward, backward and optimizer as one "
                   "inductor graph, under a CUDA graph on CUDA), graph (CUDA graph of the whole "
                   "step) or auto (graph on CUDA)")
    p.add_argument("--mix", default="sweep", help="models in the batch: sweep (Table 2's "
                   "learn-sigma) or table1 (Table 1's 10 PEs mixed)")
    p.add_argument("--no-plain", action="store_true", help="skip the plain loop")
    p.add_argument("--floor-repeats", type=int, default=FLOOR_REPEATS,
                   help=f"timings per GEMM shape of the floor, best counts (default "
                   f"{FLOOR_REPEATS})")
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
                  args.amp, mode, plain=not args.no_plain, mix=args.mix,
                  floor_repeats=args.floor_repeats)
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
