"""StackedOptimizer equals torch.optim model by model, for every rule, and mixes rules."""

from __future__ import annotations

import pytest
import torch

from lstpe.training.optim import StackedOptimizer


def _run(rules, lrs, wds, steps=5, seed=0):
    """Stacked params (M, 3, 4) trained on per-model quadratic losses; also each model alone
    with torch.optim. Returns (stacked final, list of torch.optim finals)."""
    g = torch.Generator().manual_seed(seed)
    M = len(rules)
    init = torch.randn(M, 3, 4, generator=g)
    targets = [torch.randn(M, 3, 4, generator=g) for _ in range(steps)]
    p = torch.nn.Parameter(init.clone())
    opt = StackedOptimizer([p], rules, lrs, wds)
    for t in targets:
        opt.zero_grad()
        ((p - t) ** 3).abs().sum().backward()
        opt.step()
    singles = []
    for m in range(M):
        q = torch.nn.Parameter(init[m].clone())
        cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
        o = cls[rules[m]]([q], lr=lrs[m], weight_decay=wds[m])
        for t in targets:
            o.zero_grad()
            ((q - t[m]) ** 3).abs().sum().backward()
            o.step()
        singles.append(q.detach())
    return p.detach(), singles


@pytest.mark.parametrize("rule, lr, wd", [("adam", 1e-2, 0.0), ("adam", 1e-2, 0.1),
                                          ("adamw", 1e-2, 0.1), ("sgd", 1e-3, 0.0),
                                          ("sgd", 1e-3, 0.2)])
def test_each_rule_equals_torch_optim(rule, lr, wd):
    stacked, singles = _run([rule] * 3, [lr, lr * 2, lr / 2], [wd] * 3)
    for m, s in enumerate(singles):
        torch.testing.assert_close(stacked[m], s, atol=1e-6, rtol=1e-5)
    assert not torch.equal(stacked[0], stacked[1])  # the lrs differ, so must the results


def test_mixed_rules_in_one_optimizer():
    rules = ["adam", "sgd", "adamw", "adam", "sgd"]
    stacked, singles = _run(rules, [1e-2, 1e-3, 1e-2, 3e-3, 5e-3], [0.0, 0.1, 0.1, 0.05, 0.0])
    for m, s in enumerate(singles):
        torch.testing.assert_close(stacked[m], s, atol=1e-6, rtol=1e-5)


def test_structural_zeros_stay_zero():
    """Entries that are zero with an exactly-zero gradient never move, under any rule."""
    p = torch.nn.Parameter(torch.tensor([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]))
    mask = torch.tensor([0.0, 1.0])
    opt = StackedOptimizer([p], ["adam", "adamw", "sgd"], [0.1] * 3, [0.1] * 3)
    for _ in range(4):
        opt.zero_grad()
        ((p * mask) ** 2).sum().backward()
        opt.step()
    assert torch.equal(p[:, 0], torch.zeros(3))
    assert (p[:, 1] != 1.0).all()


def test_state_dict_roundtrip_and_errors():
    p = torch.nn.Parameter(torch.ones(2, 3))
    opt = StackedOptimizer([p], ["adam", "sgd"], [0.1, 0.1], [0.0, 0.0])
    (p ** 2).sum().backward()
    opt.step()
    other = StackedOptimizer([torch.nn.Parameter(torch.ones(2, 3))], ["adam", "sgd"],
                             [0.1, 0.1], [0.0, 0.0])
    other.load_state_dict(opt.state_dict())
    assert torch.equal(other.exp_avg[0], opt.exp_avg[0])
    assert torch.equal(other.step_count, torch.ones(2)) and other.uniform
    with pytest.raises(ValueError, match="other per-model rules"):
        StackedOptimizer([torch.nn.Parameter(torch.ones(2, 3))], ["sgd", "sgd"], [0.1] * 2,
                         [0.0] * 2).load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="unknown optimizer rule"):
        StackedOptimizer([p], ["adam", "rmsprop"], [0.1] * 2, [0.0] * 2)
    with pytest.raises(ValueError, match="no model axis"):
        StackedOptimizer([p], ["adam"] * 3, [0.1] * 3, [0.0] * 3)


@pytest.mark.parametrize("rules, wds", [(["adam"] * 3, [0.0, 0.01, 0.1]),
                                        (["adamw"] * 3, [0.1, 0.01, 0.0]),
                                        (["sgd"] * 3, [0.0, 0.1, 0.01]),
                                        (["adam", "adamw", "sgd"], [0.05, 0.1, 0.1])])
def test_100_steps_equal_torch_optim_per_model(rules, wds):
    """Several parameters of different shapes, 100 steps: the flat buffers change nothing."""
    g = torch.Generator().manual_seed(1)
    M, shapes = len(rules), [(4, 3), (7,), (2, 2, 5)]
    lrs = [3e-3, 1e-3, 5e-3]
    init = [torch.randn(M, *s, generator=g) for s in shapes]
    targets = [[torch.randn(M, *s, generator=g) for s in shapes] for _ in range(100)]
    ps = [torch.nn.Parameter(t.clone()) for t in init]
    opt = StackedOptimizer(ps, rules, lrs, wds)
    for tg in targets:
        opt.zero_grad()
        sum(((p - t) ** 2 * (1 + p.abs())).sum() for p, t in zip(ps, tg, strict=True)).backward()
        opt.step()
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
    for m in range(M):
        qs = [torch.nn.Parameter(t[m].clone()) for t in init]
        o = cls[rules[m]](qs, lr=lrs[m], weight_decay=wds[m])
        for tg in targets:
            o.zero_grad()
            loss = sum(((q - t[m]) ** 2 * (1 + q.abs())).sum()
                       for q, t in zip(qs, tg, strict=True))
            loss.backward()
            o.step()
        for p, q in zip(ps, qs, strict=True):
            torch.testing.assert_close(p[m].detach(), q.detach(), atol=1e-5, rtol=1e-4)


def test_a_parameter_no_model_uses_stays_as_torch_optim_leaves_it():
    """A parameter without a gradient (a chunk with no relative PE leaves the relative tables
    unused) keeps its value and moments under every rule, weight decay included."""
    used, unused = torch.nn.Parameter(torch.ones(3, 2)), torch.nn.Parameter(torch.ones(3, 4))
    opt = StackedOptimizer([used, unused], ["adam", "adamw", "sgd"], [0.1] * 3, [0.1] * 3)
    for _ in range(3):
        opt.zero_grad()
        (used ** 2).sum().backward()
        opt.step()
    assert torch.equal(unused, torch.ones(3, 4))
    assert torch.count_nonzero(opt.exp_avg[1]) == 0 and (used != 1).all()


def test_models_at_different_steps_each_equal_torch_optim():
    """Model 0 has trained 30 steps alone (torch.optim.Adam), model 1 (AdamW) 7, model 2 none:
    one optimizer loaded with each model's moments and step count continues each exactly as
    its own torch.optim would (its own bias correction), and an old single step count still
    loads for every model."""
    g = torch.Generator().manual_seed(3)
    rules, lrs, wds, before = ["adam", "adamw", "adam"], [1e-2, 5e-3, 2e-2], [0.0, 0.1, 0.0], \
        [30, 7, 0]
    init = torch.randn(3, 4, 5, generator=g)
    targets = [torch.randn(3, 4, 5, generator=g) for _ in range(50)]
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    qs, os_ = [], []
    for m in range(3):  # each model alone: its first steps, then the 20 shared ones
        q = torch.nn.Parameter(init[m].clone())
        o = cls[rules[m]]([q], lr=lrs[m], weight_decay=wds[m])
        for t in targets[:before[m]]:
            o.zero_grad()
            ((q - t[m]) ** 2).sum().backward()
            o.step()
        qs.append(q)
        os_.append(o)
    p = torch.nn.Parameter(torch.stack([q.detach().clone() for q in qs]))
    opt = StackedOptimizer([p], rules, lrs, wds)
    for m, o in enumerate(os_):
        st = o.state[qs[m]] if qs[m] in o.state else {}
        if st:
            opt.exp_avg[0][m].copy_(st["exp_avg"])
            opt.exp_avg_sq[0][m].copy_(st["exp_avg_sq"])
    opt.set_steps(before)
    assert not opt.uniform
    for k in range(20):
        opt.zero_grad()
        sum(((p[m] - targets[before[m] + k][m]) ** 2).sum() for m in range(3)).backward()
        opt.step()
        for m in range(3):
            os_[m].zero_grad()
            ((qs[m] - targets[before[m] + k][m]) ** 2).sum().backward()
            os_[m].step()
    for m in range(3):
        torch.testing.assert_close(p[m].detach(), qs[m].detach(), atol=1e-6, rtol=1e-5)
    assert torch.equal(opt.step_count, torch.tensor([50.0, 27.0, 20.0]))
    old = {**opt.state_dict(), "step": torch.tensor(12.0)}  # a checkpoint of before
    opt.load_state_dict(old)
    assert torch.equal(opt.step_count, torch.full((3,), 12.0)) and opt.uniform
    with pytest.raises(ValueError, match="2 step counts for 3 models"):
        opt.set_steps([1, 2])
