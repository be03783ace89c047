"""The vendored summary of the authors' training logs and our comparison with it.

Reference numbers are copied from the project's reference notes (README, section
"authors_logs_summary.csv" and the facts about the published experiments); nothing outside
the package is read.
"""

from __future__ import annotations

import fnmatch
import hashlib
import math
import re
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats as sps

from lstpe.references import authors_logs as al

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_cache():
    al._load.cache_clear()
    yield
    al._load.cache_clear()


def _at(pe: str, epoch: int, phase: str = "validation") -> pd.Series:
    return al.authors_at(epoch, phase).loc[pe]


def test_reference_facts_2d_fixed_and_learn_01():
    # 2d-fixed: mean validation 0.938 at epoch 200, 0.977 at 4000 (3 decimals), 15 seeds
    r200, r4000 = _at("2d-fixed", 200), _at("2d-fixed", 4000)
    assert abs(r200["acc_mean"] - 0.938) <= 5e-4 + 1e-12
    assert abs(r4000["acc_mean"] - 0.977) <= 5e-4 + 1e-12
    assert r200["n_seeds"] == 15 and r4000["n_seeds"] == 15
    # 2d-fixed's mean training accuracy is 0.977 at 200 (reference notes)
    assert abs(_at("2d-fixed", 200, "train")["acc_mean"] - 0.977) <= 5e-4 + 1e-12
    # learn-0.1: one seed's log starts at epoch 600
    assert _at("learn-0.1", 200)["n_seeds"] == 14
    assert _at("learn-0.1", 600)["n_seeds"] == 15


def test_table_shape_and_seed_counts():
    t = al.authors_logs()
    assert tuple(t.columns) == al.AUTHORS_LOGS_COLUMNS
    assert set(t["pe"]) == {"2d-fixed"} | {f"learn-{s / 10:g}" for s in range(1, 21)}
    assert set(t["phase"]) == {"train", "test", "validation"}
    assert set(t["condition"]) == {"average", "binary", "ternary", "quaternary"}
    assert sorted(t["epoch"].unique()) == list(range(0, 4001, 200))
    assert len(t) == 21 * 3 * 4 * 21
    odd = t[t["n_seeds"] != 15]
    pairs = set(zip(odd["pe"], odd["epoch"], strict=True))
    assert pairs == {("learn-0.1", e) for e in (0, 200, 400)}
    assert (odd["n_seeds"] == 14).all()
    assert t["acc_mean"].between(0, 1).all() and (t["acc_sd"] >= 0).all()
    # a copy: mutating it does not change the cached table
    t.loc[:, "acc_mean"] = -1.0
    assert (al.authors_logs()["acc_mean"] >= 0).all()


def test_vendored_csv_matches_provenance_sha256():
    text = (ROOT / "lstpe" / "data" / "PROVENANCE.md").read_text()
    section = text[text.index("## `authors_logs_summary.csv`"):]
    digest = re.search(r"sha256 `([0-9a-f]{64})`", section).group(1)
    data = resources.files("lstpe").joinpath("data", al.AUTHORS_LOGS_FILE).read_bytes()
    assert hashlib.sha256(data).hexdigest() == digest


def test_package_data_globs_include_the_csv():
    tomllib = pytest.importorskip("tomllib")
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = cfg["tool"]["setuptools"]["package-data"]["lstpe"]
    assert any(fnmatch.fnmatch(f"data/{al.AUTHORS_LOGS_FILE}", g) for g in globs)


@pytest.mark.parametrize("kwargs, bad", [
    ({"epoch": 201}, "epoch 201"), ({"epoch": 200, "phase": "valid"}, "phase 'valid'"),
    ({"epoch": 200, "condition": "all"}, "condition 'all'"),
])
def test_authors_at_bad_values(kwargs, bad):
    with pytest.raises(ValueError, match=bad) as e:
        al.authors_at(**kwargs)
    assert "valid:" in str(e.value)


def _final() -> pd.DataFrame:
    rows = ([("2d-fixed", s, a) for s, a in enumerate([0.9, 0.95, 1.0, 0.85, 0.8])]
            + [("learn-0.2", 0, 0.9), ("learn-0.2", 1, 1.0), ("rope", 0, 0.7)])
    f = pd.DataFrame(rows, columns=["pe", "seed", "accuracy"])
    return f.assign(epoch=200, split="val", condition="all")


def test_compare_with_authors_hand_values():
    out = al.compare_with_authors(_final()).set_index("pe")
    assert list(out.index) == ["2d-fixed", "learn-0.2", "rope"]
    d = out.loc["2d-fixed"]
    # mean 0.9; squared deviations sum to 0.025 -> sd sqrt(0.025 / 4)
    assert d["n_ours"] == 5 and d["ours_mean"] == pytest.approx(0.9)
    assert d["ours_sd"] == pytest.approx(math.sqrt(0.025 / 4))
    assert d["authors_n"] == 15 and d["diff"] == pytest.approx(0.9 - d["authors_mean"])
    assert d["like_for_like"] and d["ours_epoch"] == 200 and d["note"] == ""
    # Student's pooled test and Welch's by hand: the larger p
    sp2 = (0.025 + 14 * d["authors_sd"] ** 2) / 18
    pooled = 2 * sps.t.sf(abs(d["diff"]) / math.sqrt(sp2 * (1 / 5 + 1 / 15)), 18)
    va, vb = 0.025 / 4 / 5, d["authors_sd"] ** 2 / 15
    df = (va + vb) ** 2 / (va**2 / 4 + vb**2 / 14)
    p = max(pooled, 2 * sps.t.sf(abs(d["diff"]) / math.sqrt(va + vb), df))
    assert math.isfinite(d["test"]) and d["test"] == pytest.approx(p)
    # the paper's 4000-epoch numbers: Table 1 (2d-fixed 0.977 / 0.073), Table 2 (learn-0.2)
    assert (d["paper_mean"], d["paper_sd"]) == pytest.approx((0.977, 0.073))
    assert d["paper_table"] == "Table 1 (4000 epochs)"
    l2 = out.loc["learn-0.2"]
    assert l2["ours_mean"] == pytest.approx(0.95) and l2["ours_sd"] == pytest.approx(0.5**0.5 / 10)
    assert l2["diff"] == pytest.approx(0.95 - _at("learn-0.2", 200)["acc_mean"])
    sp2 = (0.005 + 14 * _at("learn-0.2", 200)["acc_sd"] ** 2) / 15  # two seeds, pooled
    se2 = math.sqrt(sp2 * (1 / 2 + 1 / 15))
    va2, vb2 = 0.005 / 2, _at("learn-0.2", 200)["acc_sd"] ** 2 / 15  # and Welch
    df2 = (va2 + vb2) ** 2 / (va2**2 / 1 + vb2**2 / 14)
    assert l2["test"] == pytest.approx(max(
        2 * sps.t.sf(abs(l2["diff"]) / se2, 15),
        2 * sps.t.sf(abs(l2["diff"]) / math.sqrt(va2 + vb2), df2)))
    assert l2["note"] == ""
    one = al.compare_with_authors(_final().iloc[5:6]).iloc[0]  # one model: no SD, no test
    assert math.isnan(one["test"]) and one["note"] == "n=1: no SD, no test"
    assert (l2["paper_mean"], l2["paper_sd"]) == pytest.approx((0.956, 0.039))
    assert l2["paper_table"] == "Table 2 (4000 epochs)"
    r = out.loc["rope"]
    assert math.isnan(r["ours_sd"]) and math.isnan(r["authors_mean"]) and math.isnan(r["diff"])
    assert math.isnan(r["authors_n"]) and math.isnan(r["test"])
    assert r["note"] == "no authors' log for this PE"
    assert r["paper_mean"] == pytest.approx(0.805)


def test_compare_not_like_for_like_and_labels():
    f = pd.DataFrame({"pe": ["learn-1.0"] * 5, "seed": range(5), "accuracy": 0.8,
                      "epoch": [150, 200, 200, 200, 200]})
    out = al.compare_with_authors(f).iloc[0]
    assert out["pe"] == "learn-1" and out["ours_epoch"] == "150, 200"
    assert not out["like_for_like"]
    assert out["authors_mean"] == _at("learn-1", 200)["acc_mean"]
    assert out["ours_sd"] == 0 and math.isfinite(out["test"])


def test_compare_phase_from_split_and_errors():
    test = al.compare_with_authors(_final().assign(split="test"), phase="test").iloc[0]
    assert test["authors_mean"] == _at("2d-fixed", 200, "test")["acc_mean"]
    assert math.isnan(test["paper_mean"])  # the paper has no test-accuracy table
    with pytest.raises(ValueError, match="split 'test'"):
        al.compare_with_authors(_final().assign(split="test"))
    with pytest.raises(ValueError, match="epoch 300"):
        al.compare_with_authors(_final(), epoch=300)
    with pytest.raises(ValueError, match="phase 'val'"):
        al.compare_with_authors(_final(), phase="val")
    with pytest.raises(ValueError, match="accuracy"):
        al.compare_with_authors(_final().drop(columns="accuracy"))
    with pytest.raises(ValueError, match="duplicated"):
        al.compare_with_authors(pd.concat([_final(), _final()]))


def test_missing_or_malformed_file(tmp_path, monkeypatch, fresh_cache):
    class Files:
        @staticmethod
        def files(_pkg):
            return tmp_path

    monkeypatch.setattr(al, "resources", Files)
    with pytest.raises(FileNotFoundError, match="authors_logs_summary.csv"):
        al.authors_logs()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / al.AUTHORS_LOGS_FILE).write_text("pe,phase,epoch\n2d-fixed,test,0\n")
    with pytest.raises(ValueError, match=r"authors_logs_summary.csv is malformed.*condition"):
        al.authors_logs()




def test_lagging_seeds_reads_a_spread_as_a_few_slow_seeds():
    from math import comb

    from lstpe.references.authors_logs import lagging_seeds

    # 13 seeds at 0.99 and 2 at 0.6: the mixture is found again from its mean and SD
    vals = [0.99] * 13 + [0.6] * 2
    m = sum(vals) / 15
    sd = (sum((v - m) ** 2 for v in vals) / 14) ** 0.5
    r = lagging_seeds(m, sd, 15, 0.99, 5)
    assert r["k"] == 2 and abs(r["slow"] - 0.6) < 1e-9 and abs(r["sd_model"] - sd) < 1e-9
    assert r["p_all_fast"] == comb(13, 5) / comb(15, 5)
    assert math.isnan(lagging_seeds(0.9, 0.1, 15, 0.8, 5)["k"])  # ours below: nothing lags
    with pytest.raises(ValueError, match="draws"):
        lagging_seeds(0.9, 0.1, 15, 0.99, 16)


def test_rank_order_counts_the_pairs_the_two_curves_order_differently():
    """Our σ curve against the authors' at epoch 200: their own means give τ = 1 and no flip;
    swapping two σ's values flips exactly that pair (and τ drops by 2/C(n,2))."""
    import math

    from lstpe.references.authors_logs import authors_at, rank_order

    auth = authors_at(200)["acc_mean"]
    pes = ["learn-0.1", "learn-0.5", "learn-1", "learn-1.5", "learn-2"]
    rows = [{"pe": pe, "sigma": float(pe[6:]), "accuracy": auth[pe]} for pe in pes]
    rows.append({"pe": "2d-fixed", "sigma": math.nan, "accuracy": 0.99})  # no σ: left out
    same = rank_order(pd.DataFrame(rows), 200)
    assert same["n"] == 5 and same["tau"] == pytest.approx(1.0) and same["flipped"] == []
    rows[0]["accuracy"], rows[1]["accuracy"] = rows[1]["accuracy"], rows[0]["accuracy"]
    swapped = rank_order(pd.DataFrame(rows), 200)
    assert swapped["flipped"] == ["0.1/0.5"]
    assert swapped["tau"] == pytest.approx(1 - 2 * 1 / 10)
    two = rank_order(pd.DataFrame(rows[:2]), 200)
    assert two["n"] == 2 and math.isnan(two["tau"])


def test_possible_range_holds_every_sample_and_is_reached() -> None:
    """Samuelson's inequality on samples of several shapes: no value of a sample lies beyond
    mean ± s (n - 1) / sqrt(n), and n - 1 equal values with one apart reach the bound."""
    import numpy as np

    rng = np.random.default_rng(0)
    for draw in (lambda k: rng.normal(0, 1, k), lambda k: rng.exponential(1, k),
                 lambda k: rng.integers(0, 2, k).astype(float)):
        for n in (2, 3, 15):
            for _ in range(300):
                x = draw(n)
                lo, hi = al.possible_range(x.mean(), x.std(ddof=1), n)
                assert lo - 1e-12 <= x.min() and x.max() <= hi + 1e-12
    x = np.array([0.3] * 14 + [0.9])
    assert al.possible_range(x.mean(), x.std(ddof=1), 15)[1] == pytest.approx(0.9)
    with pytest.raises(ValueError, match="n=1"):
        al.possible_range(0.5, 0.1, 1)


def test_a_unit_beyond_every_seed_of_the_authors_is_named() -> None:
    """At sigma 1.9 and epoch 200 the authors' 15 seeds average 0.391 with SD 0.149: none of
    them can lie above 0.391 + 0.149 * 14 / sqrt(15) = 0.930, so a model of ours at 0.981 is
    outside the range of all their seeds; one at 0.90 and a PE they did not log are not."""
    final = pd.DataFrame({"pe": ["learn-1.9", "learn-1.9", "rope", "learn-1.9"],
                          "seed": [1, 2, 1, 3], "accuracy": [0.981, 0.90, 0.2, 0.99],
                          "epoch": [200, 200, 200, 7]})
    out = al.authors_range_check(final)  # epoch 7 is not logged: left out, as is rope
    assert out[["pe", "seed", "outside"]].values.tolist() == [["learn-1.9", 1, True],
                                                               ["learn-1.9", 2, False]]
    assert out["high"].iloc[0] == pytest.approx(0.391 + 0.149 * 14 / 15**0.5, abs=3e-3)
    assert al.authors_range_check(final, epoch=200)["seed"].tolist() == [1, 2, 3]
