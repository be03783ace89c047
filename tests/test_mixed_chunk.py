"""Models at different epochs in one chunk (issue 47): a model resumed beside a new one trains
exactly as it would alone, and retires at its own target.

Model A (``2d-fixed``, seed 1: a dropout model) has trained 3 epochs alone; it joins model B
(``learn-0.2``, seed 2, new) in one chunk, A from its epoch 3 to 6 and B from 0 to 5. Each
model's history rows (its own epochs, its own schedule, its final evaluation at its target)
and its weights at its target must equal those of the same model trained alone, bit for bit
on one thread (``tests/conftest.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from lstpe.nn.encodings import parse_pe
from lstpe.training.config import preset
from lstpe.training.engine import LoopOptions, run_chunk
from lstpe.training.optim import StackedOptimizer
from lstpe.training.task import LSTTask, ModelSlot, stratified_subset

DEVICE = torch.device("cpu")


def _task(cfg, pes_seeds, splits, **kw) -> tuple[LSTTask, StackedOptimizer]:
    sub = {k: stratified_subset(splits[k].vectors, 24, 0) for k in ("train", "test")}
    slots = [ModelSlot(0, i, parse_pe(pe), seed) for i, (pe, seed) in enumerate(pes_seeds)]
    task = LSTTask(cfg, slots, ["adam"] * len(slots), splits, sub, DEVICE, **kw)
    opt = StackedOptimizer(task.model.parameters(), ["adam"] * len(slots),
                           [cfg.lr] * len(slots), [0.0] * len(slots))
    return task, opt


def _run(task, opt, epochs: int, schedule: set[int], hook: Any = None) -> list[dict]:
    opts = LoopOptions(epochs=epochs, schedule=schedule, device=DEVICE, hook=hook)
    return run_chunk(task, opt, opts, lambda: {})[0]


def _rows(history: list[dict], pe: str, lo: int = 0) -> list[tuple]:
    return sorted((r["epoch"], r["split"], r["condition"], r["accuracy"], r["loss"])
                  for r in history if r["pe"] == pe and r["epoch"] > lo)


class Weights:
    """An epoch hook keeping each model's trainable weights after every loop epoch."""

    def __init__(self) -> None:
        self.at: dict[int, list[torch.Tensor]] = {}

    def after_epoch(self, epoch: int, model: Any, history: list[dict]) -> None:
        self.at[epoch] = [p.detach().clone() for p in model.parameters() if p.requires_grad]

    def state(self) -> dict:
        return {}

    def load(self, state: dict) -> None:
        pass


@pytest.fixture(scope="module")
def cfg(tiny_cfg):
    return preset("preview", pes=["learn-0.2"], seeds=[1], epochs=6, model=tiny_cfg,
                  batch_size=16)


def test_a_model_resumed_beside_a_new_one_trains_as_it_would_alone(cfg, small_splits):
    a, b = ("2d-fixed", 1), ("learn-0.2", 2)
    sched6 = set(cfg.schedule())  # 0, 2, 4, 6
    alone_a, opt_a = _task(cfg, [a], small_splits)
    hook_a = Weights()
    hist_a = _run(alone_a, opt_a, 6, sched6, hook_a)
    cfg5 = preset("preview", pes=["learn-0.2"], seeds=[1], epochs=5, model=cfg.model,
                  batch_size=16)
    alone_b, opt_b = _task(cfg5, [b], small_splits)
    hist_b = _run(alone_b, opt_b, 5, set(cfg5.schedule()))
    first_a, opt_a3 = _task(cfg, [a], small_splits)  # A's first 3 epochs, alone
    _run(first_a, opt_a3, 3, {1, 2, 3})

    mixed, opt_m = _task(cfg, [a, b], small_splits, offsets=[3, 0], targets=[6, 5])
    opt_m.adopt(0, opt_a3, 0)
    assert mixed.loop_epochs == 5 and not opt_m.uniform
    hook = Weights()
    hist_m = _run(mixed, opt_m, mixed.loop_epochs, set(range(1, 6)), hook)

    assert _rows(hist_m, "2d-fixed") == _rows(hist_a, "2d-fixed", lo=3)  # epochs 4 and 6
    assert {r["epoch"] for r in hist_m if r["pe"] == "2d-fixed"} == {4, 6}
    assert _rows(hist_m, "learn-0.2") == _rows(hist_b, "learn-0.2")  # 0, 2, 4 and 5
    for w, solo in zip(hook.at[3], hook_a.at[6], strict=True):  # A at its target
        assert torch.equal(w[0], solo[0])
    for w, p in zip(hook.at[5], (q for q in alone_b.model.parameters() if q.requires_grad),
                    strict=True):
        assert torch.equal(w[1], p.detach()[0])
    assert opt_m.step_count[1] == opt_b.step_count[0]


def test_offsets_and_targets_are_checked(cfg, small_splits):
    with pytest.raises(ValueError, match="past its offset"):
        _task(cfg, [("learn-0.2", 1)], small_splits, offsets=[4], targets=[4])
    with pytest.raises(ValueError, match="one offset and one target per model"):
        _task(cfg, [("learn-0.2", 1)], small_splits, offsets=[0, 1])
    _, opt = _task(cfg, [("learn-0.2", 1)], small_splits)
    _, sgd = _task(cfg, [("learn-0.2", 1)], small_splits)
    sgd.rules = ["sgd"]
    with pytest.raises(ValueError, match="uses sgd"):
        opt.adopt(0, sgd, 0)
