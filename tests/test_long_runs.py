"""Long units over epochs and their check against a stored unit
(:mod:`lstpe.analysis.long_runs`), and the mechanism evidence table per sigma
(:mod:`lstpe.analysis.mechanism`), against facts the modules do not compute: a long segment and
an ordinary run trained here with the same seed, hand-built tables, maps of known cosine."""

from __future__ import annotations

import time

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy.linalg import orthogonal_procrustes  # noqa: E402

from lstpe.analysis import long_runs as lr  # noqa: E402
from lstpe.analysis import mechanism as mech  # noqa: E402
from lstpe.analysis import pe_structure as ps  # noqa: E402
from lstpe.campaign import long_train as lt  # noqa: E402
from lstpe.experiments import long_units as lu  # noqa: E402
from lstpe.nn import encodings as enc  # noqa: E402
from lstpe.nn.model import ModelConfig  # noqa: E402
from lstpe.store import results as res  # noqa: E402
from lstpe.training.train import train_many  # noqa: E402

TINY = dict(model=ModelConfig(d_model=16, n_layers=1), n_train=64, eval_train_max=64,
            eval_test_max=64)
UNIT = lu.LongUnit("table2", "learn-0.2", 2235)
NULL = ps.PermutationNull(draws=199)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A long unit trained 2 epochs (one published segment of 2) and the ordinary 2-epoch run
    of the same PE and seed, trained apart (as the campaign's 200-epoch units are)."""
    root = tmp_path_factory.mktemp("long")
    mp = pytest.MonkeyPatch()
    mp.setattr(lu, "LONG_EPOCHS", 6)
    mp.setattr(lu, "SEGMENT", 2)
    try:
        chunk = lu.LongChunk("t", (UNIT,), 2, 4, "test")
        assert lt.train_chunk(chunk, time.monotonic() + 900, root, log=lambda m: None, **TINY)
        cfg = UNIT.config(**TINY, epochs=2)
    finally:
        mp.undo()
    train_many([cfg], [root / "fragment"], progress=False)
    return lu.load_long(UNIT, root), res.load(root / "fragment")


def by_hand_grid(pe: np.ndarray) -> float:
    """Grid score written out: cosine of centred rows against minus the Manhattan distance."""
    c = pe - pe.mean(0)
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    i, j = np.triu_indices(16, 1)
    dist = np.abs(i // 4 - j // 4) + np.abs(i % 4 - j % 4)
    return float(np.corrcoef((c @ c.T)[i, j], -dist)[0, 1])


def test_over_epochs_turns_load_long_into_one_row_per_snapshot(trained):
    long, _ = trained
    t = lr.over_epochs(long, ids={"pe": UNIT.pe, "sigma": 0.2}, null=NULL)
    assert t["epoch"].tolist() == [0, 1, 2] and set(t["sigma"]) == {0.2}
    pe = long["pe"].double().numpy()
    first = t.iloc[0]
    assert first["init_share"] == pytest.approx(1) and np.isnan(first["score_dpe"])
    for k, e in enumerate([0, 1, 2]):
        row = t.iloc[k]
        assert row["score_final"] == pytest.approx(by_hand_grid(pe[k, 0]), abs=1e-9)
        if e:
            assert row["score_dpe"] == pytest.approx(by_hand_grid(pe[k, 0] - pe[0, 0]),
                                                     abs=1e-9)
    # the Procrustes distance, by scipy directly against the 2-D sinusoid of this width
    target = enc.sinusoid_2d(4, 4, 16).double().numpy()
    r, _ = orthogonal_procrustes(pe[2, 0], target)
    assert t.iloc[2]["distance"] == pytest.approx(np.linalg.norm(pe[2, 0] @ r - target))
    assert t["cosine_paper"].isna().all()  # no reference given


def test_the_long_unit_reproduces_the_ordinary_run_of_its_seed(trained):
    """Same machine, same recipe: epochs 0-2 of the long unit are the 2-epoch run's numbers,
    except the train and test rows of the run's last epoch (evaluated on whole splits)."""
    long, frag = trained
    m = lr.fragment_match(long, frag.history, frag.artifacts["pe_init"][0],
                          frag.artifacts["pe_final"][0], epoch=2).set_index("quantity")
    assert m.loc["PE at 0", "diff_last"] == 0 and m.loc["PE at 2", "diff_last"] == 0
    assert m.loc["PE at 2", "scale"] > 0
    acc = m[m.index.str.startswith("accuracy")]
    assert (acc["diff_before"] == 0).all()
    assert acc["epochs"].to_dict() == {f"accuracy: {s}": 3 for s in
                                       ("test", "train", "val", "val_dropout")} | \
        {"accuracy: train_running": 2}  # a running accuracy needs an epoch of training
    assert m.loc["accuracy: val", "diff_last"] == 0
    assert m.loc["accuracy: test", "diff_last"] != 0  # 64 puzzles mid-run, all at the end
    # the difference at the epoch is the two accuracies shown beside it, signed
    assert (acc["diff_last"] == acc["long_at"] - acc["stored_at"]).all()


def test_fragment_match_measures_a_known_difference(trained):
    long, frag = trained
    pe = frag.artifacts["pe_final"][0].clone()
    pe[0, 3, 5] += 0.25  # block 0, cell 3, dimension 5
    h = frag.history.copy()
    h.loc[(h["split"] == "val") & (h["epoch"] == 1) & (h["condition"] == "all"),
          "accuracy"] += 0.125
    h.loc[(h["split"] == "val") & (h["epoch"] == 1) & (h["condition"] == "1"), "accuracy"] += 0.5
    m = lr.fragment_match(long, h, frag.artifacts["pe_init"][0], pe, 2).set_index("quantity")
    assert m.loc["PE at 2", "diff_last"] == pytest.approx(0.25, abs=1e-6)
    assert m.loc["accuracy: val", "diff_before"] == pytest.approx(0.125)  # condition all only
    with pytest.raises(ValueError, match="no PE snapshot at epoch 200"):
        lr.fragment_match(long, h, frag.artifacts["pe_init"][0], pe)


def test_attention_table_uses_the_init_reference_at_epoch_zero():
    rng = np.random.default_rng(0)
    maps = rng.dirichlet(np.ones(16), size=(3, 4, 2, 16))  # (k', N, L, n, n)
    long = {"attention_epochs": [0, 1, 2], "val_attention": maps}
    t = lr.attention_table(long, reference=maps[2], reference_init=maps[0])
    assert t["cosine_paper"].tolist()[0] == pytest.approx(1)  # epoch 0 against its own init
    assert t["cosine_ours"].tolist()[2] == pytest.approx(1)
    a, b = maps[1].mean(1).ravel(), maps[2].mean(1).ravel()  # blocks averaged, then cosine
    assert t["cosine_paper"][1] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    assert lr.attention_table({"attention_epochs": [], "val_attention": None}, maps[0]).empty


def test_plot_long_draws_every_sigma(trained):
    long, _ = trained
    t = pd.concat([lr.over_epochs(long, ids={"sigma": s}, null=NULL) for s in (0.1, 2.0)])
    fig = lr.plot_long(t, paper={0.1: 0.836, 2.0: 0.577})
    assert len(fig.axes) == 3 and len(fig.axes[0].lines) == 4  # dPE and final per sigma


def _structure() -> pd.DataFrame:
    """Two sigmas, three units each, block 0 and a block 1 that must be ignored."""
    rows = []
    for sigma, dpe, p in ((0.1, [0.4, 0.5, 0.3], [0.001, 0.01, 0.2]),
                          (2.0, [0.0, -0.1, 0.1], [0.5, 0.7, 0.04])):
        for k in range(3):
            rows.append({"sigma": sigma, "block": 0, "score_dpe": dpe[k], "p_dpe": p[k],
                         "score_final": dpe[k] / 2, "p_final": 0.5, "init_share": 0.9 + k / 100})
            rows.append({"sigma": sigma, "block": 1, "score_dpe": 9.0, "p_dpe": 0.0,
                         "score_final": 9.0, "p_final": 0.0, "init_share": 9.0})
    rows.append({"sigma": np.nan, "block": 0, "score_dpe": np.nan, "p_dpe": np.nan,
                 "score_final": 0.86, "p_final": 0.0, "init_share": 1.0})  # 2d-fixed
    return pd.DataFrame(rows)


def test_mechanism_table_by_hand():
    per_model = pd.DataFrame({"sigma": [0.1, 0.1, 2.0, np.nan], "cosine_paper": [0.8, 0.9, 0.5,
                                                                                  1.0],
                              "distance": [1.0, 2.0, 30.0, 0.0]})
    t = mech.mechanism_table(_structure(), per_model, per_model.assign(cosine_paper=[.7, .7, .4,
                                                                                     1]),
                             per_model, per_model.assign(distance=[1.5, 2.5, 30.5, 0]),
                             paper={0.1: 0.836})
    assert list(t.columns) == list(mech.MECHANISM_COLUMNS)
    a, b = t.iloc[0], t.iloc[1]
    assert (a["sigma"], a["n"], a["dpe_median"], a["dpe_min"], a["dpe_max"]) == \
        (0.1, 3, 0.4, 0.3, 0.5)
    assert (a["dpe_below"], b["dpe_below"], a["final_below"]) == (2, 1, 0)
    assert (a["init_share_min"], a["init_share_max"]) == pytest.approx((0.90, 0.92))
    assert (a["cos_init"], a["cos_trained"], a["cos_paper"]) == pytest.approx((0.85, 0.7, 0.836))
    assert np.isnan(b["cos_paper"]) and b["procrustes_trained"] == 30.5
    v = mech.mechanism_view(t, epoch=200)
    assert v.loc["0.1", ("dPE (learned) grid score", "median [range]")] == "0.40 [0.30, 0.50]"
    assert v.loc["2", ("dPE (learned) grid score", "p<0.05")] == "1/3"
    assert v.loc["2", ("Table 3 cosine (paper variant)", "paper@4000")] == "–"


def test_long_summary_by_hand():
    """A hand-built unit: the PE moves by known updates, training accuracy reaches 0.99 at
    epoch 2; the summary reads the over-epochs rows at ``at`` and at the last snapshot."""
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal((1, 16, 8))
    d1, d2 = 0.3 * rng.standard_normal((1, 16, 8)), 0.01 * rng.standard_normal((1, 16, 8))
    snaps = np.stack([p0, p0 + d1, p0 + d1 + d2])
    hist = pd.DataFrame([{"epoch": e, "split": s, "condition": c, "accuracy": a}
                         for e, tr, va in ((0, 0.25, 0.3), (2, 0.995, 0.9), (4, 1.0, 0.8))
                         for s, a in (("train", tr), ("val", va))
                         for c in ("all", "1")])
    long = {"pe_epochs": [0, 2, 4], "pe": snaps, "history": hist}
    over = pd.DataFrame({"pe": "learn-1", "sigma": 1.0, "seed": 7, "epoch": [0, 2, 4],
                         "score_dpe": [np.nan, 0.4, 0.5], "p_dpe": [np.nan, 0.01, 0.02],
                         "score_final": [0.1, 0.2, 0.3], "p_final": [0.5, 0.1, 0.04],
                         "init_share": [1.0, 0.9, 0.8], "cosine_paper": [0.9, 0.8, 0.7]})
    s = lr.long_summary(over, {"learn-1": long}, at=2).iloc[0]
    n0 = np.linalg.norm(p0[0])
    assert s["moved_at"] == pytest.approx(np.linalg.norm(d1[0]) / n0)
    assert s["moved_after"] == pytest.approx(np.linalg.norm(d2[0]) / n0)
    assert (s["epoch"], s["fit_epoch"], s["val_at"], s["val_last"]) == (4, 2, 0.9, 0.8)
    assert (s["score_dpe_at"], s["score_dpe"], s["p_final"]) == (0.4, 0.5, 0.04)
    assert (s["init_share_at"], s["init_share"]) == (0.9, 0.8)
    assert (s["cosine_at"], s["cosine"]) == (0.8, 0.7)
    with pytest.raises(ValueError, match="no PE snapshot at epoch 3"):
        lr.long_summary(over, {"learn-1": long}, at=3)
