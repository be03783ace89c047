"""Kernels per training step, eager against compiled, beside model-epochs/s and the floor.

For a chunk of M models (``--mix learnable``: learnable PEs; ``mixed``: Table 1's PEs), on
the CPU by default (``--device cuda`` on a card):

* **eager ops**: the non-view operators one eager step dispatches (forward, backward,
  optimizer), each about one kernel on a GPU (:func:`lstpe.training.opcount.chunk_step_ops`);
* **compiled kernels**: the kernels one call of the compiled whole step launches, read from
  the wrapper inductor generated for it (:func:`lstpe.training.compiled.kernel_calls`):
  fused kernels it generated and library kernels (matmuls);
* **model-epochs/s** of the eager step (``graph`` on CUDA) and of the compiled step, from
  :func:`measure` (which also checks the step against the eager one over
  :data:`CHECK_STEPS` steps from the same weights and batches: ``max_diff``, the largest
  relative difference of the models' summed losses), and the **fraction of the fp32 matmul
  floor** (:func:`lstpe.training.floor.measure_floor`) at that M; and the compile's seconds.

Usage::

    python benchmarks/kernels.py --models 3 --size preview
    python benchmarks/kernels.py --models 3 12 --mix mixed --size paper --device cuda

Timings depend on the machine and on what else runs on it; nothing here asserts them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import torch

CHECK_STEPS = 3
"""Steps over which a step mode is checked against the eager step."""

SIGMAS = ("0.1", "0.2", "0.5", "1", "1.5", "2")
TABLE1 = ("2d-fixed", "1d-fixed", "learn-0.2", "random", "relative", "rope", "nope", "c-nope")


def configs(m: int, mix: str, size: str, device: str) -> list[Any]:
    """``m`` one-model configurations of the chunk kind ``mix`` at ``size``."""
    from lstpe.experiments.registry import run_config

    pes = [f"learn-{SIGMAS[i % 6]}" for i in range(m)] if mix == "learnable" \
        else [TABLE1[i % len(TABLE1)] for i in range(m)]
    run = "table2" if mix == "learnable" else "table1"
    return [run_config(run, size, pes=[pe], seeds=[2235 + i], device=device, amp=False)
            for i, pe in enumerate(pes)]


def _run(cfgs: Sequence[Any], device: torch.device, mode: str, batches: list, keys: list
         ) -> tuple[torch.Tensor, float, float]:
    """A fresh chunk of ``cfgs`` trained over ``batches`` in step mode ``mode`` (``eager``,
    ``graph``, ``compiled``), fp32 with TF32 off: (running loss sums, seconds of the first
    call, seconds per later step)."""
    import time

    from lstpe.runtime import tf32_mode
    from lstpe.training.compiled import CompiledStep
    from lstpe.training.engine import EagerStep, GraphStep, Running
    from lstpe.training.floor import sync
    from lstpe.training.task import one_model_chunk

    with tf32_mode(device, False):
        task, opt = one_model_chunk(list(cfgs), device)
        running = Running.zeros(task.n_models, device)
        step: Any = CompiledStep(task, opt, running, device, False) if mode == "compiled" \
            else GraphStep(task, opt, running, device, False) if mode == "graph" \
            else EagerStep(task, opt, task.model, running, device, False)
        task.model.train()
        t0 = time.perf_counter()
        step(batches[0], keys[0])
        sync(device)
        first = time.perf_counter() - t0
        t1 = time.perf_counter()
        for b, k in zip(batches[1:], keys[1:], strict=True):
            step(b, k)
        sync(device)
        per = (time.perf_counter() - t1) / max(len(batches) - 1, 1)
    return running.loss.detach().clone(), first, per


def measure(cfgs: Sequence[Any], device: torch.device, mode: str, steps: int
            ) -> dict[str, float]:
    """``ms_per_step``, ``model_epochs_per_s``, ``compile_s`` (the first call: compile and
    capture) and ``max_diff`` (against the eager step, each from a fresh chunk: inf where a
    loss is not finite) of step mode ``mode`` on a chunk of ``cfgs``."""
    from lstpe.training.task import one_model_chunk

    task, _ = one_model_chunk(list(cfgs), device)
    epoch = list(task.batches(1))
    n = min(len(epoch), CHECK_STEPS + steps + 1)
    batches = [b for _, b in epoch[:n]]
    keys = [task.dropout_keys(1, s) for s, _ in epoch[:n]]
    _, first, per = _run(cfgs, device, mode, batches, keys)
    ref = _run(cfgs, device, "eager", batches[:CHECK_STEPS], keys[:CHECK_STEPS])[0]
    got = _run(cfgs, device, mode, batches[:CHECK_STEPS], keys[:CHECK_STEPS])[0]
    diff = float(((got - ref).abs() / ref.abs().clamp_min(1e-12)).max()) \
        if bool(torch.isfinite(got).all()) else float("inf")
    return {"ms_per_step": per * 1e3, "model_epochs_per_s": len(cfgs) / (len(epoch) * per),
            "compile_s": first, "max_diff": diff}


def row(m: int, mix: str, size: str, device: torch.device, steps: int) -> dict[str, Any]:
    """One line of the table (module docstring)."""
    from torch._inductor.codecache import PyCodeCache

    from lstpe.training.compiled import kernel_calls, wrapper_sources
    from lstpe.training.config import load_data
    from lstpe.training.floor import measure_floor
    from lstpe.training.opcount import chunk_step_ops

    cfgs = configs(m, mix, size, str(device))
    ops = chunk_step_ops(cfgs[0], [c.specs[0].label for c in cfgs],
                         [c.seeds[0] for c in cfgs], cfgs[0].optimizer)
    base = measure(cfgs, device, "graph" if device.type == "cuda" else "eager", steps)
    before = len(PyCodeCache.modules)
    comp = measure(cfgs, device, "compiled", steps)
    calls = [kernel_calls(s) for s in wrapper_sources(before)]
    kernels = max(calls, key=lambda c: c["total"]) if calls else None  # the step's wrapper
    n_train = len(load_data(cfgs[0])["train"].x)
    floor = measure_floor(cfgs[0].model, cfgs[0].batch_size, m, n_train, device,
                          repeats=3)["model_epochs_per_s"]
    return {"models": m, "mix": mix, "eager_ops": ops.total, "eager_optimizer_ops": ops.optimizer,
            "compiled_kernels": kernels["total"] if kernels else None,
            "compiled_fused": kernels["fused"] if kernels else None,
            "compiled_matmuls": kernels["extern"] if kernels else None,
            "eager_model_epochs_per_s": base["model_epochs_per_s"],
            "compiled_model_epochs_per_s": comp["model_epochs_per_s"],
            "floor_model_epochs_per_s": floor,
            "eager_fraction_of_floor": base["model_epochs_per_s"] / floor,
            "compiled_fraction_of_floor": comp["model_epochs_per_s"] / floor,
            "compile_s": comp["compile_s"], "max_diff": comp["max_diff"]}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=int, nargs="+", default=[3])
    p.add_argument("--mix", choices=("learnable", "mixed"), default="learnable")
    p.add_argument("--size", default="preview", help="preview, cpu or paper")
    p.add_argument("--device", default="cpu")
    p.add_argument("--steps", type=int, default=10, help="timed steps per step mode")
    p.add_argument("--json", help="also write the rows here")
    a = p.parse_args(argv)
    device = torch.device(a.device)
    rows = []
    for m in a.models:
        r = row(m, a.mix, a.size, device, a.steps)
        rows.append(r)
        print(f"M={m} {a.mix}: eager {r['eager_ops']} ops/step (optimizer "
              f"{r['eager_optimizer_ops']}), compiled {r['compiled_kernels']} kernels/step "
              f"({r['compiled_fused']} fused + {r['compiled_matmuls']} matmuls); "
              f"{r['eager_model_epochs_per_s']:.3g} vs {r['compiled_model_epochs_per_s']:.3g} "
              f"model-epochs/s, {r['eager_fraction_of_floor']:.3g} vs "
              f"{r['compiled_fraction_of_floor']:.3g} of the fp32 floor "
              f"({r['floor_model_epochs_per_s']:.3g}); compile {r['compile_s']:.0f} s, "
              f"largest difference {r['max_diff']:.2g}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
