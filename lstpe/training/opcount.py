"""How many operators one training step dispatches: forward, backward and optimizer.

On a GPU a step of a small chunk is bounded by kernel launches, not arithmetic: each non-view
ATen operator is about one kernel (a few microseconds each, also inside a CUDA graph). This
module counts them on any device with a ``TorchDispatchMode`` (which sees every operator the
dispatcher runs below autograd), leaving out views (``is_view`` operators, ``detach``, ``t``,
...), which launch nothing. ``tests/test_opcount.py`` bounds the counts; the benchmark prints
them beside its rates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_NO_KERNEL = {"detach", "t", "view", "_unsafe_view", "alias", "expand", "as_strided",
              "permute", "transpose", "unsqueeze", "squeeze", "select", "slice", "split",
              "split_with_sizes", "unbind", "reshape", "_reshape_alias", "lift_fresh",
              "empty", "empty_strided", "empty_like", "unfold", "diagonal", "narrow"}
"""Operators that launch no kernel (views, allocations), beside every ``is_view`` operator."""


class OpCounter(TorchDispatchMode):
    """Counts the non-view operators dispatched inside it: ``counts`` (name -> n)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        name = func.overloadpacket.__name__
        if not (getattr(func, "is_view", False) or name in _NO_KERNEL):
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class StepOps:
    """Non-view operators of one training step, by phase."""

    forward: int
    backward: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.forward + self.backward + self.optimizer


def count(fn: Callable[[], Any]) -> tuple[Any, OpCounter]:
    """Run ``fn()`` under an :class:`OpCounter`; return its result and the counter."""
    with OpCounter() as c:
        out = fn()
    return out, c


def step_ops(pes: Sequence[str], preset: str = "paper", rule: str = "adam",
             weight_decay: float = 0.0, seed: int = 2235) -> StepOps:
    """The operators of one training step of a chunk of models with PEs ``pes`` (one seed),
    the model of ``preset`` and one optimizer rule, on the CPU, as the engine runs it
    (dropout on, per-model losses summed, one :class:`~lstpe.training.optim.StackedOptimizer`
    step)."""
    from lstpe.training.config import preset as make_config

    cfg = make_config(preset, pes=list(pes), seeds=[seed], device="cpu", amp=False)
    return chunk_step_ops(cfg, [spec.label for spec in cfg.specs], [seed] * len(cfg.specs),
                          rule, weight_decay)


def chunk_step_ops(cfg: Any, pes: Sequence[str], seeds: Sequence[int], rule: str = "adam",
                   weight_decay: float = 0.0) -> StepOps:
    """:func:`step_ops` for any models: PE labels ``pes`` and ``seeds`` (one each) with the
    model and batch of ``cfg`` (a :class:`~lstpe.training.config.TrainConfig`). The step
    after a warm-up step is counted (the first builds the optimizer's constants)."""
    from lstpe.nn.encodings import parse_pe
    from lstpe.training.config import load_data
    from lstpe.training.optim import StackedOptimizer
    from lstpe.training.task import LSTTask, ModelSlot

    splits = load_data(cfg)
    slots = [ModelSlot(0, k, parse_pe(pe), sd) for k, (pe, sd) in enumerate(zip(pes, seeds,
                                                                                 strict=True))]
    task = LSTTask(cfg, slots, [rule] * len(slots), splits, {}, torch.device("cpu"))
    M = len(slots)
    opt = StackedOptimizer(task.model.parameters(), [rule] * M, [cfg.lr] * M,
                           [weight_decay] * M)
    task.model.train()
    steps = task.batches(1)
    counts = []
    for _ in range(2):
        s, idx = next(steps)
        keys = task.dropout_keys(1, s)
        opt.zero_grad(set_to_none=True)
        (loss, _acc), fwd = count(lambda idx=idx, keys=keys: task.losses(task.model, idx, keys))
        _, bwd = count(lambda loss=loss: loss.sum().backward())
        _, upd = count(opt.step)
        counts.append(StepOps(fwd.total, bwd.total, upd.total))
    return counts[-1]
