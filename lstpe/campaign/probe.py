"""Measuring this machine for the campaign: what it is, how fast it trains a chunk, its floor.

:func:`lstpe.campaign.scheduler.run` prices every chunk with these before it starts it:

* :func:`probe`: a few real training steps and one evaluation of the chunk's models batched
  together. Seconds per model-epoch = (median step time x steps per epoch + evaluation time x
  evaluations per epoch) / models in the probe;
* :func:`estimate_s`: that rate times the chunk's models and epochs, plus :data:`MARGIN_S`
  (the evaluations and noise test after training, publishing);
* :func:`floor_of`: the fp32 matmul floor at the chunk's shapes, recorded beside the measured
  rate;
* :func:`machine`: the processor, threads and CPU flags every manifest records.

Each fragment's manifest keeps the estimate beside the measured wall time
(``campaign.estimate_s``, ``unit_wall_s``).
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from lstpe.experiments import units as un
from lstpe.runtime import cpu_flags

MARGIN_S = 120.0
"""Seconds kept free at the end of a budget (final evaluation, noise test, publishing)."""


def machine() -> dict[str, Any]:
    """What the manifest records of the machine: processor, threads, CPU flags."""
    return {"processor": platform.processor() or platform.machine(),
            "cpu_model": _cpu_model(), "threads": torch.get_num_threads(),
            "cpu_flags": cpu_flags()}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def probe(units: Sequence[un.Unit], device: torch.device, steps: int = 4,
          **overrides: Any) -> dict[str, Any]:
    """Time real training steps and one evaluation of ``units`` batched together.

    Returns:
        ``models``, ``n_train`` (training puzzles per epoch), ``step_s`` (median of
        ``steps`` timed steps after 2 warm-up steps),
        ``eval_s``, ``epoch_s`` (steps per epoch x step_s), ``evals_per_epoch`` and
        ``s_per_model_epoch`` (training and evaluation, per model).
    """
    from lstpe.training.engine import EagerStep, Running
    from lstpe.training.task import one_model_chunk

    cfgs = [u.config(device=str(device), **overrides) for u in units]
    base = cfgs[0]
    task, opt = one_model_chunk(cfgs, device)
    splits = task.splits
    step = EagerStep(task, opt, task.model, Running.zeros(len(units), device), device, False)
    times = []
    task.model.train()
    epoch = 0
    while len(times) < steps:  # (tiny test recipes have one step per epoch)
        epoch += 1
        for s, batch in task.batches(epoch):
            t0 = time.perf_counter()
            step(batch, task.dropout_keys(epoch, s))
            if epoch > 1 or s >= 2:  # two warm-up steps
                times.append(time.perf_counter() - t0)
            if len(times) >= steps:
                break
    task.model.eval()
    t0 = time.perf_counter()
    task.evaluate(1, False, None)
    eval_s = time.perf_counter() - t0
    n_steps = -(-len(splits["train"]) // base.batch_size)
    evals = len(base.schedule()) / base.epochs
    step_s = statistics.median(times)
    per = (step_s * n_steps + eval_s * evals) / len(units)
    return {"models": len(units), "n_train": len(splits["train"]),
            "step_s": round(step_s, 4), "eval_s": round(eval_s, 3),
            "epoch_s": round(step_s * n_steps, 2), "evals_per_epoch": round(evals, 3),
            "s_per_model_epoch": round(per, 3)}


def floor_of(cfg: Any, models: int, n_train: int, device: torch.device) -> dict[str, Any]:
    """This machine's fp32 matmul floor at the chunk's shapes
    (:func:`lstpe.training.floor.measure_floor`; ``n_train``: training puzzles per epoch, as
    the probe read them): GFLOP/s and model-epochs/s, for the manifest beside the measured
    rate."""
    from lstpe.training.floor import measure_floor

    fl = measure_floor(cfg.model, cfg.batch_size, max(1, models), n_train, device, repeats=3)
    return {"gflops": round(fl["gflops"], 1),
            "model_epochs_per_s": round(fl["model_epochs_per_s"], 4),
            "flops_per_model_epoch": fl["flops_per_model_epoch"]}


def estimate_s(n_units: int, s_per_model_epoch: float, epochs: int) -> float:
    """Seconds for a chunk of ``n_units`` (per-model cost taken as constant in the chunk size,
    which the probe's batch of models supports on 2 cores)."""
    return n_units * epochs * s_per_model_epoch + MARGIN_S


# --------------------------------------------------------------------------- run
