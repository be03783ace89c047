"""The compiled whole step (step mode ``compiled``, :mod:`lstpe.training.compiled`, issue 63)
against the eager step on the CPU.

Tiny models (d=16, one layer) on 48 training puzzles in minibatches of 16: 7 epochs are 21
optimizer steps. Three chunks cover every kind the campaign trains, each trained once eagerly
and once compiled (module-scoped: one compile per kind):

* ``learnable``: two learnable PEs, Adam (a lease's long units);
* ``packed``: Table 1's mix of PEs (dropout, relative tables, RoPE, a causal mask, ALiBi, a
  learnable PE) with Adam, AdamW (weight decay) and SGD side by side, one model resumed at
  epoch 3 beside new ones (per-model step counts and epoch offsets, as a packed lease chunk);
* ``sgd``: SGD only (no Adam moments at all).

The comparison is the models' function (every history row: loss and accuracy on every split,
to float tolerance) and their weights. Adam divides a gradient by its own root mean square,
so a parameter whose gradient is rounding noise (the attention's key bias of a PE without
RoPE: adding it shifts every score of a query by the same amount, which softmax ignores) takes
steps of the learning rate's size in a direction set by that noise, in either step: those
elements (the eager run's gradient RMS above 0 and under 1e-6) are left out of the weight
comparison, and they do not change the function (the history rows above include them).
"""

from __future__ import annotations

import pytest
import torch

from lstpe.nn.architecture import ModelConfig
from lstpe.nn.encodings import parse_pe
from lstpe.training import compiled as cs
from lstpe.training.config import preset
from lstpe.training.engine import LoopOptions, Running, resolve_mode, run_chunk
from lstpe.training.optim import StackedOptimizer
from lstpe.training.task import LSTTask, ModelSlot, stratified_subset

DEVICE = torch.device("cpu")
SMALL = ModelConfig(d_model=16, n_layers=1)
EPOCHS = 7  # 21 steps of 16 puzzles

KINDS = {
    "learnable": dict(pes=[("learn-0.2", 1), ("learn-2", 2)], rules=["adam", "adam"],
                      wds=[0.0, 0.0]),
    "packed": dict(pes=[("2d-fixed", 1), ("relative", 2), ("rope", 1), ("c-nope", 2),
                        ("alibi", 3), ("learn-0.2", 3)],
                   rules=["adam", "adam", "adamw", "adamw", "sgd", "adam"],
                   wds=[0.0, 1e-4, 0.01, 0.1, 1e-3, 0.0], offsets=[3, 0, 0, 2, 0, 0]),
    "sgd": dict(pes=[("learn-0.2", 1), ("learn-1", 2)], rules=["sgd", "sgd"], wds=[0.0, 1e-4]),
}


def _chunk(kind: str, splits: dict) -> tuple[LSTTask, StackedOptimizer]:
    k = KINDS[kind]
    cfg = preset("preview", pes=["learn-0.2"], seeds=[1], epochs=EPOCHS, model=SMALL,
                 batch_size=16, lr=0.01)
    sub = {s: stratified_subset(splits[s].vectors, 24, 0) for s in ("train", "test")}
    slots = [ModelSlot(0, i, parse_pe(pe), seed) for i, (pe, seed) in enumerate(k["pes"])]
    offsets = k.get("offsets")
    kw = dict(offsets=offsets, targets=[o + EPOCHS for o in offsets]) if offsets else {}
    task = LSTTask(cfg, slots, k["rules"], splits, sub, DEVICE, **kw)
    M = len(slots)
    opt = StackedOptimizer(task.model.parameters(), k["rules"], [cfg.lr] * M, k["wds"])
    if offsets:  # models resumed at their offsets: their own step counts (3 steps an epoch)
        opt.set_steps([3 * o for o in offsets])
    return task, opt


def _train(kind: str, splits: dict, mode: str) -> dict:
    task, opt = _chunk(kind, splits)
    opts = LoopOptions(epochs=EPOCHS, schedule=set(range(1, EPOCHS + 1)), device=DEVICE,
                       mode=mode)
    start = opt.flat.clone()
    history = run_chunk(task, opt, opts, lambda: {})[0]
    return {"history": history, "start": start, "flat": opt.flat.clone(),
            "steps": opt.step_count.clone(),
            "v": None if opt.v_flat is None else opt.v_flat.clone(), "opt": opt}


@pytest.fixture(scope="module", params=list(KINDS))
def pair(request, small_splits):
    """(kind, eager run, compiled run) of each kind."""
    kind = request.param
    eager = _train(kind, small_splits, "eager")
    with pytest.MonkeyPatch.context() as mp:  # the update is the compiled one, never this
        mp.setattr(StackedOptimizer, "step", lambda self: pytest.fail("eager update called"))
        comp = _train(kind, small_splits, "compiled")
    return kind, eager, comp


def _key(r: dict) -> tuple:
    return tuple(str(r[k]) for k in ("epoch", "split", "condition", "pe", "seed"))


def test_the_compiled_step_trains_every_kind_as_the_eager_step(pair):
    kind, eager, comp = pair
    he, hc = sorted(eager["history"], key=_key), sorted(comp["history"], key=_key)
    assert [_key(r) for r in hc] == [_key(r) for r in he]
    assert len({r["epoch"] for r in he}) >= EPOCHS  # an evaluation after every epoch
    for a, b in zip(hc, he, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-3, abs=1e-4), _key(a)
        assert a["accuracy"] == pytest.approx(b["accuracy"], abs=1e-6), _key(a)
    # 21 steps each, from each model's own count
    offsets = KINDS[kind].get("offsets") or [0] * len(KINDS[kind]["pes"])
    want = torch.tensor([3.0 * o + 3 * EPOCHS for o in offsets])
    assert torch.equal(comp["steps"], want) and torch.equal(eager["steps"], want)
    opt = eager["opt"]
    if eager["v"] is not None:  # Adam: leave out what a gradient of rounding noise moved
        rms = (eager["v"] / (1 - opt.beta2 ** eager["steps"].max())).sqrt()
        noise = (eager["v"] > 0) & (rms <= 1e-6)  # v == 0: no gradient ever, compared too
        keep = ~noise | opt.sgd_e if opt.sgd_e is not None else ~noise
        assert keep.float().mean() > 0.95
    else:
        keep = torch.ones_like(eager["flat"], dtype=torch.bool)
    moved = (eager["flat"] - eager["start"]).abs()
    assert moved.max() > 1e-4  # the weights moved: the comparison says something
    torch.testing.assert_close(comp["flat"][keep], eager["flat"][keep], rtol=1e-3, atol=2e-5)


def test_structural_zeros_stay_zero_in_the_compiled_step(pair):
    """A weight a PE does not have (no output projection of c-nope, a missing bias) is a zero
    with an exactly zero gradient: zero after 21 compiled steps, as after the eager ones."""
    kind, eager, comp = pair
    zero = (eager["start"] == 0) & (eager["flat"] == 0)
    assert (comp["flat"][zero] == 0).all()
    if kind == "packed":
        assert zero.sum() > 0  # c-nope's missing weights are there to check


def test_one_graph_no_break_with_the_update_inside(small_splits):
    """dynamo traces the whole step (forward, backward, update and the write-back) as one
    graph without a break, and the update's square root of Adam's second moment is in it."""
    task, opt = _chunk("learnable", small_splits)
    step = cs.CompiledStep(task, opt, Running.zeros(task.n_models, DEVICE), DEVICE, False)
    task.model.train()
    _, batch = next(task.batches(1))
    ex = cs.explain(step, batch, task.dropout_keys(1, 0))
    assert ex.graph_break_count == 0 and ex.graph_count == 1
    ops = [str(n.target) for g in ex.graphs for n in g.graph.nodes]
    assert any("sqrt" in o for o in ops)  # Adam's update (the forward has no sqrt)
    assert sum("copy_" in o for o in ops) >= 4  # flat, both moments, the step counts
    assert float(opt.step_count[0]) == 1.0  # explain ran the step once


def test_the_mode_is_known_and_fp16_is_refused():
    assert resolve_mode("compiled", DEVICE) == "compiled"
    with pytest.raises(ValueError, match="compiled.*fp16|fp16"):
        from lstpe.training.engine import LossScaler

        cs.CompiledStep.__init__(object.__new__(cs.CompiledStep), None, None, None, DEVICE,
                                 torch.float16, LossScaler(1, DEVICE))
