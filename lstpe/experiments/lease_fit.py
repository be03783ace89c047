"""How long a chunk of models takes on a device: measured, fitted and predicted.

:func:`step_seconds` times one training step of a chunk (and its evaluation, and its
captures); :func:`fit_steps` fits seconds per step = a + b x models through two measurements;
:func:`predict_seconds` and :func:`affordable_epochs` turn a fit into seconds and epochs. The
lease (:mod:`lstpe.experiments.lease`, which re-exports them) chooses its chunk with them, and
the stored-unit precision pair (:mod:`lstpe.experiments.lease_pair`) prices itself with them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch


def n_train(cfg: Any) -> int:
    """Training puzzles of ``cfg``'s data."""
    from lstpe.training.config import load_data

    return len(load_data(cfg)["train"].x)


def n_evals(cfg: Any, lo: int, hi: int) -> int:
    """Evaluations of ``cfg``'s schedule in epochs ``lo`` (excluded) to ``hi``."""
    return sum(lo < e <= hi for e in cfg.schedule())


def _free(device: torch.device) -> None:
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def step_seconds(cfgs: Sequence[Any], device: torch.device, amp: Any = False,
                 steps: int = 20, mode: str = "auto") -> dict[str, float]:
    """Seconds per training step of a chunk of ``cfgs`` in step mode ``mode`` on ``device``
    (``auto``: a CUDA graph on a GPU; its captures, of the full minibatch and of the epoch's
    last, smaller one, timed apart as ``s_capture``, with the compilation of a ``compiled``
    step), and seconds per evaluation."""
    from lstpe.training.compiled import CompiledStep
    from lstpe.training.engine import EagerStep, GraphStep, Running, resolve_mode
    from lstpe.training.floor import sync
    from lstpe.training.task import one_model_chunk

    task, opt = one_model_chunk(list(cfgs), device)
    running = Running.zeros(task.n_models, device)
    mode = resolve_mode(mode, device)
    step: Any = GraphStep(task, opt, running, device, amp) if mode == "graph" else \
        CompiledStep(task, opt, running, device, amp) if mode == "compiled" else \
        EagerStep(task, opt, task.model, running, device, amp)
    task.model.train()
    epoch = [b for _, b in task.batches(1)]
    batches = epoch[:steps + 1]
    t_capture = time.perf_counter()
    step(batches[0], task.dropout_keys(1, 0))
    if epoch[-1].shape != batches[0].shape:
        step(epoch[-1], task.dropout_keys(1, len(epoch) - 1))
    sync(device)
    t0 = time.perf_counter()
    for s, b in enumerate(batches[1:], 1):
        step(b, task.dropout_keys(1, s))
    sync(device)
    t1 = time.perf_counter()
    task.model.eval()
    task.evaluate(1, False, running.means())
    sync(device)
    t2 = time.perf_counter()
    n = task.n_models
    del step, task, opt, running
    _free(device)
    return {"models": n, "s_per_step": (t1 - t0) / (len(batches) - 1),
            "s_capture": t0 - t_capture, "s_per_eval": t2 - t1}


def predict_seconds(n_models: int, fit: dict[str, float], n_evals: int, epochs: int,
                    steps_per_epoch: int) -> float:
    """Predicted wall seconds of ``epochs`` epochs of a chunk of ``n_models``: steps at
    ``a + b n`` seconds, evaluations at ``e n`` seconds each, a capture."""
    step = fit["a"] + fit["b"] * n_models
    return epochs * steps_per_epoch * step + n_evals * fit["e"] * n_models + fit["capture"]


def fit_steps(small: dict[str, float], large: dict[str, float]) -> dict[str, float]:
    """Seconds per step = a + b x models through two measurements; evaluation seconds per
    model (from the larger); the capture's seconds (the larger)."""
    dm = large["models"] - small["models"]
    b = max((large["s_per_step"] - small["s_per_step"]) / dm, 0.0) if dm else 0.0
    a = max(large["s_per_step"] - b * large["models"], 0.0)
    return {"a": a, "b": b, "e": large["s_per_eval"] / large["models"],
            "capture": large["s_capture"]}


def affordable_epochs(n_models: int, fit: dict[str, float], seconds: float,
                      steps_per_epoch: int, evals_per_epoch: float) -> int:
    """The most epochs a chunk of ``n_models`` is predicted to train in ``seconds``
    (:func:`predict_seconds` solved for the epochs; 0 if not one)."""
    per_epoch = steps_per_epoch * (fit["a"] + fit["b"] * n_models) + \
        evals_per_epoch * fit["e"] * n_models
    return max(int((seconds - fit["capture"]) // per_epoch), 0) if per_epoch > 0 else 0
