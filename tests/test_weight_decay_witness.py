"""Weight decay's witness: AdamW's decay in closed form, the PE's norm over a long unit's
snapshots, and the stored AdamW long units paired with the Adam ones of the same seed."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from lstpe.analysis import long_runs
from lstpe.chapters import long_mechanism as lmm
from lstpe.claims import Inputs, weight_decay
from lstpe.experiments import long_units as lu


def test_decay_factor_is_torch_adamw_with_a_zero_gradient():
    """AdamW with lr 1e-4 and weight decay 0.1 on a parameter whose gradient is zero: after 64
    steps x 3 epochs it is (1 - 1e-5)^192 of itself; the issue's figures (0.88 at 200 epochs,
    0.53 at 1000, 0.08 at 4000) follow."""
    p = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    opt = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.1)
    for _ in range(64 * 3):
        p.grad = torch.zeros_like(p)
        opt.step()
    assert p.detach()[0].item() == pytest.approx(long_runs.decay_factor(3, 1e-4, 0.1, 64),
                                                 rel=1e-12)
    got = long_runs.decay_factor([200, 1000, 4000], 1e-4, 0.1, 64)
    assert np.round(got, 2).tolist() == [0.88, 0.53, 0.08]
    assert got[1] == pytest.approx(math.exp(64_000 * math.log1p(-1e-5)))


def test_decay_factor_refuses_a_step_that_flips_the_sign():
    with pytest.raises(ValueError, match="lr \\* weight_decay"):
        long_runs.decay_factor(1, 10.0, 0.1, 64)


def test_norm_over_epochs_by_hand():
    """Snapshots scaled by known factors per block: the ratio is their mean over blocks; an
    epoch the history does not hold gets NaN accuracy."""
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=(2, 16, 8))
    scale = np.array([[1.0, 1.0], [0.5, 0.7], [2.0, 4.0]])
    pe = np.stack([p0 * s[:, None, None] for s in scale])
    hist = pd.DataFrame({"epoch": [0, 5, 0, 5], "split": ["val", "val", "train", "train"],
                         "condition": "all", "accuracy": [0.25, 0.5, 0.3, 0.6]})
    t = long_runs.norm_over_epochs({"pe_epochs": [0, 5, 9], "pe": pe, "history": hist})
    assert t["norm_ratio"].tolist() == pytest.approx([1.0, 0.6, 3.0])
    assert t["accuracy"].iloc[:2].tolist() == [0.25, 0.5] and np.isnan(t["accuracy"].iloc[2])


def test_the_stored_witness_pairs_each_adamw_unit_with_its_adam_twin():
    wd = next(c for c in lu.LONG_PLAN if c.name == "weight-decay")
    if lu.chunk_epoch(wd) == 0:
        pytest.skip("no AdamW long unit published in this checkout")
    w = lmm.weight_decay_witness()
    assert list(w.columns) == list(lmm.WITNESS_COLUMNS)
    cfg = lu.LongUnit("tables56", "learn-2", 2235).config()  # the AdamW recipe
    assert w.attrs["decay"] == {"lr": cfg.lr, "weight_decay": cfg.weight_decay,
                                "steps_per_epoch": 64}
    for pe, g in w.groupby("pe"):
        a, b = (g[g["optimizer"] == o].set_index("epoch") for o in ("adam", "adamw"))
        assert list(a.index) == list(b.index), pe  # the same snapshot epochs, up to AdamW's last
        assert (a["decay_only"] == 1.0).all() and b["decay_only"].iloc[0] == 1.0
        assert (b["decay_only"].iloc[1:] < 1.0).all() and b["decay_only"].is_monotonic_decreasing
        assert b["norm_ratio"].iloc[0] == a["norm_ratio"].iloc[0] == 1.0
        # its accuracy is the stored history's, as the authors evaluated (dropout on; chapter 8)
        last = int(b.index.max())
        h = pd.read_csv(lu.LongUnit("tables56", pe, 2235).path() / "history.csv")
        h = h[(h["split"] == "val_dropout") & (h["condition"] == "all") & (h["epoch"] == last)]
        assert b.loc[last, "accuracy"] == pytest.approx(float(h["accuracy"].iloc[0]), abs=0)


def test_decay_epochs_inverts_decay_factor():
    e = long_runs.decay_epochs(0.1, 1e-4, 0.1, 64)
    assert long_runs.decay_factor(e, 1e-4, 0.1, 64) == pytest.approx(0.1)
    assert 3590 < e < 3610  # ln(10) / (64 * 1e-5), to first order
    with pytest.raises(ValueError, match="target 0"):
        long_runs.decay_epochs(0, 1e-4, 0.1, 64)


def test_the_scorecard_quotes_the_witness_but_does_not_score_it():
    """The witness is one seed per sigma: the weight-decay row stays ``not testable yet`` and
    quotes the largest sigma at the witness's last epoch."""
    rows = [(pe, s, o, e, r, a) for pe, s in (("learn-0.2", 0.2), ("learn-2", 2.0))
            for o, e, r, a in (("adam", 0, 1.0, 0.25), ("adamw", 0, 1.0, 0.25),
                               ("adam", 400, 1.0, 0.36), ("adamw", 400, 0.77, 0.31),
                               ("adam", 600, 1.0, 0.37))]
    w = pd.DataFrame(rows, columns=["pe", "sigma", "optimizer", "epoch", "norm_ratio",
                                    "accuracy"])
    final = pd.DataFrame(columns=["pe", "seed", "accuracy", "epoch"])
    v = weight_decay.judge(Inputs(final, optimizer_units={"tables56": 0}, witness=w))
    assert v.verdict == "not testable yet"
    assert "epoch 400, σ = 2: AdamW 0.310 against Adam 0.360" in v.evidence
    assert "shrunk to 0.77" in v.evidence
    assert "witness" not in weight_decay.judge(Inputs(final)).evidence
