"""One training step dispatches few operators: the optimizer a handful at any M (flat buffers),
the whole step of a 3-model chunk at most 300 (it was 837 with a loop over 57 parameters)."""

from __future__ import annotations

import pytest
import torch

from lstpe.training.opcount import count, step_ops
from lstpe.training.optim import StackedOptimizer


def test_a_three_model_step_dispatches_at_most_300_operators():
    ops = step_ops(["learn-0.1", "learn-0.2", "learn-2"])
    assert ops.optimizer <= 20, ops
    assert ops.total <= 300, ops
    assert ops.forward > 20 and ops.backward > ops.forward  # the counter sees the model


@pytest.mark.parametrize("rules, wds", [(["adam"] * 12, [0.0] * 12),
                                        (["adamw"] * 12, [0.1] * 12),
                                        (["sgd"] * 12, [0.0] * 12),
                                        (["adam", "adamw", "sgd"] * 4, [0.1] * 12)])
def test_the_optimizer_step_does_not_grow_with_models_or_parameters(rules, wds):
    counts = []
    for n_params in (3, 60):
        ps = [torch.nn.Parameter(torch.randn(len(rules), 4, 3)) for _ in range(n_params)]
        opt = StackedOptimizer(ps, rules, [1e-3] * len(rules), wds)
        for _ in range(2):  # the first step builds its constants
            for p in ps:
                p.grad = torch.randn_like(p)
            _, c = count(opt.step)
        counts.append(c.total)
    assert counts[0] == counts[1] <= 20, counts


def test_parameters_live_in_the_flat_buffer_and_keep_their_values():
    ps = [torch.nn.Parameter(torch.randn(2, 3, 4)), torch.nn.Parameter(torch.randn(2, 5))]
    before = [p.detach().clone() for p in ps]
    opt = StackedOptimizer(ps, ["adam", "adam"], [0.1, 0.1], [0.0, 0.0])
    assert all(torch.equal(p, b) for p, b in zip(ps, before, strict=True))
    opt.flat.zero_()
    assert all(torch.count_nonzero(p) == 0 for p in ps)  # views, not copies


def test_models_at_different_steps_cost_three_more_operators():
    """Per-model bias corrections (models resumed at different epochs in one chunk) spread a
    (2, M) table over the flat buffer: three more operators than one shared step count."""
    rules = ["adam"] * 12
    ps = [torch.nn.Parameter(torch.randn(12, 4, 3)) for _ in range(5)]
    opt = StackedOptimizer(ps, rules, [1e-3] * 12, [0.0] * 12)
    counts = []
    for steps in ([3] * 12, list(range(12))):
        opt.set_steps(steps)
        for _ in range(2):
            for p in ps:
                p.grad = torch.randn_like(p)
            _, c = count(opt.step)
        counts.append(c.total)
    assert counts[1] - counts[0] <= 3 and counts[1] <= 20, counts
