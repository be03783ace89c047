"""The CUDA-graph step (issue 47, item 3) against the eager step, on a GPU only.

48 training puzzles in minibatches of 20 end every epoch with a smaller one (20 + 20 + 8),
the shape of the paper's 8100 = 63 x 128 + 36. Step mode ``graph`` must capture both shapes
(the full one at the first step, the last at the end of the first epoch) and train two models
as the eager step does: the same history and weights, to float tolerance (the captured
kernels are the eager ones, replayed). On a CPU these tests are skipped: run them on a GPU
(``python3 -m pytest tests/test_graph_step.py``).
"""

from __future__ import annotations

import pytest
import torch

from lstpe.nn.encodings import parse_pe
from lstpe.training import engine
from lstpe.training.config import preset
from lstpe.training.engine import LoopOptions, run_chunk
from lstpe.training.optim import StackedOptimizer
from lstpe.training.task import LSTTask, ModelSlot, stratified_subset

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


def _train(cfg, splits, mode: str) -> tuple[list[dict], list[torch.Tensor]]:
    device = torch.device("cuda")
    sub = {k: stratified_subset(splits[k].vectors, 24, 0) for k in ("train", "test")}
    slots = [ModelSlot(0, i, parse_pe(pe), seed)
             for i, (pe, seed) in enumerate([("2d-fixed", 1), ("learn-0.2", 2)])]
    task = LSTTask(cfg, slots, ["adam", "adam"], splits, sub, device)
    opt = StackedOptimizer(task.model.parameters(), ["adam", "adam"], [cfg.lr] * 2, [0.0] * 2)
    opts = LoopOptions(epochs=3, schedule={1, 2, 3}, device=device, mode=mode)
    history = run_chunk(task, opt, opts, lambda: {})[0]
    return history, [p.detach().cpu() for p in task.model.parameters()]


def test_graph_step_captures_the_last_minibatch_and_trains_as_eager(tiny_cfg, small_splits,
                                                                    monkeypatch):
    cfg = preset("preview", pes=["learn-0.2"], seeds=[1], epochs=3, model=tiny_cfg,
                 batch_size=20)
    assert len(small_splits["train"].vectors) % cfg.batch_size == 8
    shapes: list[tuple[int, ...]] = []
    capture = engine.GraphStep._capture

    def counted(self, batch, keys):
        shapes.append(tuple(batch.shape))
        capture(self, batch, keys)

    monkeypatch.setattr(engine.GraphStep, "_capture", counted)
    hist_g, w_g = _train(cfg, small_splits, "graph")
    assert len(shapes) == 2 and shapes[0] != shapes[1]  # captured once each, in epoch 1
    hist_e, w_e = _train(cfg, small_splits, "eager")
    key = ("epoch", "split", "condition", "pe", "seed")
    for g, e in zip(sorted(hist_g, key=lambda r: [str(r.get(k)) for k in key]),
                    sorted(hist_e, key=lambda r: [str(r.get(k)) for k in key]), strict=True):
        assert [g.get(k) for k in key] == [e.get(k) for k in key]
        assert g["accuracy"] == pytest.approx(e["accuracy"], abs=1e-6)
        assert g["loss"] == pytest.approx(e["loss"], rel=1e-4, abs=1e-5)
    for a, b in zip(w_g, w_e, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
