"""Chapter 8's long runs by optimizer: AdamW (and SGD, once stored) against Adam at the same
epochs, with the paper's values as references."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lstpe.chapters import long_optimizers as lo
from lstpe.experiments import long_units as lu


def test_paper_references_pick_each_optimizers_table() -> None:
    """AdamW from Table 5 (Table 6 for a PE it lacks), SGD from Table 4, Adam from Table 4,
    else 1, else 2: the paper's numbers as printed."""
    r = lo.paper_references(["learn-0.2", "learn-2", "2d-fixed"]).set_index(["pe", "optimizer"])
    got = {k: (row.table, row.accuracy) for k, row in r.iterrows()}
    assert got == {("learn-0.2", "adamw"): ("5", 0.995), ("learn-0.2", "adam"): ("4", 0.956),
                   ("learn-0.2", "sgd"): ("4", 0.930), ("learn-2", "adamw"): ("5", 0.586),
                   ("learn-2", "adam"): ("2", 0.377), ("2d-fixed", "adamw"): ("6", 0.997),
                   ("2d-fixed", "adam"): ("1", 0.977)}


def _long(last: int, acc: float) -> dict:
    """A long model's dict as ``load_long`` gives it: validation accuracy ``acc`` + epoch/1e4
    every 100 epochs up to ``last`` (dropout on), and a train row that is never read."""
    eps = list(range(0, last + 1, 100))
    rows = [{"epoch": e, "split": s, "condition": c, "accuracy": acc + e / 1e4}
            for e in eps for s in ("val_dropout", "train") for c in ("all", "1")]
    return {"history": pd.DataFrame(rows), "epoch": last}


def test_an_sgd_model_joins_the_curves_when_it_is_stored(monkeypatch) -> None:
    """An SGD long model of learn-0.2 stored to epoch 400 and Adam's to 1000: Adam is read
    to 400, beside SGD; learn-2, with only its Adam model, has no curve."""
    fake = {("table4/sgd", "learn-0.2"): _long(400, 0.5), ("table2", "learn-0.2"): _long(1000, 0.7),
            ("table2", "learn-2"): _long(1000, 0.3)}
    monkeypatch.setattr(lo.lu, "load_long",
                        lambda u, results_dir=None: fake.get((u.run, u.pe)) if u.seed == 2235
                        else None)
    c = lo.optimizer_curves(seed=2235)
    assert list(c.columns) == list(lo.CURVE_COLUMNS)
    assert set(c["pe"]) == {"learn-0.2"}
    by = c.groupby("optimizer")["epoch"].agg(["min", "max", "count"])
    assert by.to_dict("index") == {"adam": {"min": 0, "max": 400, "count": 5},
                                   "sgd": {"min": 0, "max": 400, "count": 5}}
    assert c.set_index(["optimizer", "epoch"]).loc[("sgd", 400), "accuracy"] == pytest.approx(0.54)
    refs = lo.paper_references(["learn-0.2"])
    t = lo.side_by_side(c, refs)
    assert list(t.columns) == ["Adam", "SGD"]  # no AdamW: no AdamW − Adam
    assert t.loc[("learn-0.2", "paper, 4000 ep. (Tables 4, 4)"), "SGD"] == 0.930
    f = lo.optimizer_facts(c, refs)
    assert f["sgd"] == "SGD: `learn-0.2` to epoch 400"
    assert f["pairs"] == ("`learn-0.2` at epoch 400: Adam 0.740, SGD 0.540 (the paper after "
                          "4000 epochs: Adam 0.956 (Table 4), SGD 0.930 (Table 4))")


def test_side_by_side_and_facts_by_hand() -> None:
    rows = [("learn-2", 2.0, 2235, o, e, a) for o, vals in
            (("adamw", (0.25, 0.30, 0.36)), ("adam", (0.25, 0.38, 0.35)))
            for e, a in zip((0, 200, 300), vals, strict=True)]
    c = pd.DataFrame(rows, columns=list(lo.CURVE_COLUMNS))
    refs = lo.paper_references(["learn-2"])
    t = lo.side_by_side(c, refs)
    assert list(t.index.get_level_values("epoch")) == ["0", "200", "300",
                                                       "paper, 4000 ep. (Tables 5, 2)"]
    assert t["AdamW − Adam"].round(3).tolist() == [0.0, -0.08, 0.01, 0.209]
    f = lo.optimizer_facts(c, refs)
    assert f["at"] == "300" and f["seed"] == "2235"
    assert "AdamW 0.360, Adam 0.350; AdamW − Adam +0.010" in f["pairs"]
    assert f["sgd"].startswith("Table 4's SGD column has no model trained past 200 epochs")
    assert lo.optimizer_facts(c.iloc[:0], refs) is None


def test_the_stored_adamw_pair_beside_adam_at_the_same_epochs() -> None:
    """The stored AdamW pair (seed 2235) and the Adam long runs of the same PEs, which go
    further: Adam is cut at AdamW's last epoch, and each value is the history's, read here
    from the segment's CSV."""
    wd = next(c for c in lu.LONG_PLAN if c.name == "weight-decay")
    last = lu.chunk_epoch(wd)
    if last == 0:
        pytest.skip("no AdamW long model stored in this checkout")
    c = lo.optimizer_curves(pes=["learn-0.2", "learn-2"])
    c = c[c["optimizer"].isin(["adam", "adamw"])]  # (an SGD long model may stand beside them)
    ends = c.groupby(["pe", "optimizer"])["epoch"].max()
    assert sorted(ends.index) == [(p, o) for p in ("learn-0.2", "learn-2")
                                  for o in ("adam", "adamw")]
    assert (ends == last).all()
    for u in wd.units:
        h = pd.read_csv(u.path() / "history.csv")
        want = h[(h["epoch"] == last) & (h["split"] == "val_dropout")
                 & (h["condition"].astype(str) == "all")]["accuracy"].mean()
        got = c[(c["pe"] == u.pe) & (c["optimizer"] == "adamw") & (c["epoch"] == last)]
        assert got["accuracy"].iloc[0] == pytest.approx(want)


def test_plot_optimizer_curves_one_panel_per_pe() -> None:
    import matplotlib

    matplotlib.use("Agg")
    rows = [(pe, s, 2235, o, e, 0.3 + e / 1e4) for pe, s in (("learn-0.2", 0.2), ("learn-2", 2.0))
            for o in ("adamw", "adam") for e in (0, 100, 200)]
    c = pd.DataFrame(rows, columns=list(lo.CURVE_COLUMNS))
    fig = lo.plot_optimizer_curves(c, lo.paper_references(["learn-0.2", "learn-2"]))
    axes = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in axes] == ["learn-0.2", "learn-2"]
    levels = sorted(round(float(np.asarray(ln.get_ydata())[0]), 3) for ln in axes[1].lines
                    if ln.get_linestyle() == ":")
    assert levels == [0.377, 0.586]  # the paper's Adam (Table 2) and AdamW (Table 5)
    with pytest.raises(ValueError, match="no long-run curves"):
        lo.plot_optimizer_curves(c.iloc[:0], lo.paper_references([]))
