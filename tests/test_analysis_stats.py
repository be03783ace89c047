"""Statistics: CIs (hand values and coverage), t-tests (hand / scipy), paper comparison."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats as sps  # noqa: E402

from lstpe.evidence import paper_compare as pc  # noqa: E402
from lstpe.figures import plots  # noqa: E402
from lstpe.references import paper_tables as pt  # noqa: E402
from lstpe.stats import power as pw  # noqa: E402
from lstpe.stats import seed_stats as ss  # noqa: E402
from lstpe.stats import seed_tests as st  # noqa: E402
from lstpe.store.results import HISTORY_COLUMNS  # noqa: E402


def test_mean_ci_hand_value():
    m, lo, hi = ss.mean_ci([1, 2, 3, 4])
    half = 3.182446305284263 * math.sqrt(5 / 3) / 2  # t_{3, 0.975} * s / sqrt(n)
    assert m == 2.5
    assert lo == pytest.approx(2.5 - half) and hi == pytest.approx(2.5 + half)
    m, lo, hi = ss.mean_ci([7.0])
    assert m == 7.0 and math.isnan(lo) and math.isnan(hi)
    with pytest.raises(ValueError, match="empty"):
        ss.mean_ci([])
    with pytest.raises(ValueError, match="NaN"):
        ss.mean_ci([1.0, float("nan")])
    with pytest.raises(ValueError, match="level"):
        ss.mean_ci([1, 2], level=95)


def test_t_ci_coverage_on_normal_draws():
    rng = np.random.default_rng(0)
    draws = rng.normal(3.0, 2.0, size=(2000, 15))
    hits = 0
    for x in draws:
        _, lo, hi = ss.mean_ci(x)
        hits += lo <= 3.0 <= hi
    assert 0.93 <= hits / 2000 <= 0.97  # binomial SD 0.005 around 0.95


def test_bootstrap_ci_coverage_and_hand_case():
    rng = np.random.default_rng(1)
    draws = rng.normal(0.0, 1.0, size=(600, 40))
    hits = sum(lo <= 0.0 <= hi for lo, hi in
               (ss.bootstrap_ci(x, n_boot=1000, seed=i) for i, x in enumerate(draws)))
    assert 0.90 <= hits / 600 <= 0.98  # percentile bootstrap: ~0.94 at n = 40
    # a constant sample has a degenerate interval at the constant
    assert ss.bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    lo, hi = ss.bootstrap_ci([0.0, 1.0], n_boot=4000)
    assert lo == 0.0 and hi == 1.0  # resample means of {0, 1}: 0, 0.5 or 1
    with pytest.raises(ValueError, match="at least 2"):
        ss.bootstrap_ci([1.0])


def test_summarize():
    t = pd.DataFrame({"pe": ["a", "a", "a", "b"], "accuracy": [0.5, 0.7, 0.9, 0.4]})
    s = ss.summarize(t).set_index("pe")
    assert s.loc["a", "n"] == 3 and s.loc["a", "mean"] == pytest.approx(0.7)
    assert s.loc["a", "sd"] == pytest.approx(0.2)
    assert s.loc["a", "sem"] == pytest.approx(0.2 / math.sqrt(3))
    assert s.loc["a", "ci_high"] == pytest.approx(0.7 + sps.t.ppf(0.975, 2) * 0.2 / math.sqrt(3))
    assert math.isnan(s.loc["b", "sd"]) and math.isnan(s.loc["b", "ci_low"])
    with pytest.raises(ValueError, match="empty"):
        ss.summarize(t.iloc[:0])
    with pytest.raises(ValueError, match="unknown columns"):
        ss.summarize(t, value="loss")


def test_ttests_by_hand_and_scipy():
    a = np.array([0.9, 1.0, 0.95, 0.97, 0.99])
    b = np.array([0.8, 0.9, 0.85, 0.99, 0.7])
    w = ss.ttest(a, b, "welch")
    va, vb = a.var(ddof=1) / 5, b.var(ddof=1) / 5
    assert w.statistic == pytest.approx((a.mean() - b.mean()) / math.sqrt(va + vb))
    assert w.df == pytest.approx((va + vb) ** 2 / (va**2 / 4 + vb**2 / 4))
    assert w.pvalue == pytest.approx(2 * sps.t.sf(abs(w.statistic), w.df))
    s = ss.ttest(a, b, "student")
    assert s.df == 8 and s.pvalue == pytest.approx(sps.ttest_ind(a, b).pvalue)
    p = ss.ttest(a, b, "paired")
    d = a - b
    assert p.statistic == pytest.approx(d.mean() / (d.std(ddof=1) / math.sqrt(5)))
    assert p.df == 4 and p.diff == pytest.approx(d.mean())
    assert "paired t(4)" in str(p)
    with pytest.raises(ValueError, match="equal lengths"):
        ss.ttest(a, b[:4], "paired")
    with pytest.raises(ValueError, match="unknown t-test"):
        ss.ttest(a, b, "mann-whitney")
    with pytest.raises(ValueError, match=">= 2 values"):
        ss.ttest(a[:1], b)


def test_welch_with_equal_seeds_is_the_one_sample_test_and_warns_nothing():
    """Five seeds that each solve 107 of 108 puzzles (stored in float32) against five that vary:
    Welch's t reduces to (mean_a - mean_b) / (sd_b / sqrt(5)) with 4 degrees of freedom."""
    import warnings

    a = np.full(5, np.float32(107 / 108)).astype(float)
    b = np.array([0.954, 0.972, 0.963, 0.972, 0.954])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w = ss.ttest(a, b, "welch")
    t = (a[0] - b.mean()) / (b.std(ddof=1) / math.sqrt(5))
    assert w.statistic == pytest.approx(t) and w.df == pytest.approx(4)
    assert w.pvalue == pytest.approx(2 * sps.t.sf(abs(t), 4))


def test_ttest_from_summary_reproduces_paper():
    """Table 1, 15 seeds: 2d-fixed 0.977 +- 0.073 vs learn-0.2 0.956 +- 0.039; the paper
    reports t = 0.96, p = 0.35 (and 2.51, p = 0.03 for learn-0.2 vs relative 0.920 +- 0.042)."""
    r = ss.ttest_from_summary(0.977, 0.073, 15, 0.956, 0.039, 15)
    assert r.statistic == pytest.approx(0.98, abs=0.01)
    assert r.pvalue == pytest.approx(0.34, abs=0.01)
    r2 = ss.ttest_from_summary(0.956, 0.039, 15, 0.920, 0.042, 15)
    assert r2.statistic == pytest.approx(2.43, abs=0.01) and r2.pvalue < 0.05
    x = np.random.default_rng(2).normal(size=(2, 9))
    raw = ss.ttest(x[0], x[1], "student")
    summ = ss.ttest_from_summary(x[0].mean(), x[0].std(ddof=1), 9, x[1].mean(),
                                 x[1].std(ddof=1), 9, "student")
    assert summ.statistic == pytest.approx(raw.statistic) and summ.df == raw.df
    with pytest.raises(ValueError, match="per-seed values"):
        ss.ttest_from_summary(1, 1, 3, 1, 1, 3, kind="paired")


def test_compare_pes_pairs_by_seed():
    t = pd.DataFrame({"pe": ["2d-fixed"] * 3 + ["learn-0.2"] * 3, "seed": [1, 2, 3, 3, 1, 2],
                      "accuracy": [0.9, 0.8, 1.0, 0.95, 0.85, 0.7]})
    r = ss.compare_pes(t, "2d-fixed", "learn-0.2", kind="paired")
    d = np.array([0.9 - 0.85, 0.8 - 0.7, 1.0 - 0.95])
    assert r.statistic == pytest.approx(d.mean() / (d.std(ddof=1) / math.sqrt(3)))
    with pytest.raises(ValueError, match="no rows for PE 'rope'"):
        ss.compare_pes(t, "2d-fixed", "rope")
    with pytest.raises(ValueError, match="seeds differ"):
        ss.compare_pes(t.iloc[:5], "2d-fixed", "learn-0.2", kind="paired")


def history(acc: dict[int, float]) -> pd.DataFrame:
    rows = []
    for m, a in acc.items():
        for ep, val in ((0, 0.25), (5, a)):
            rows.append({"model": m, "pe": f"learn-{0.1 * (m + 1):g}", "pe_name": "learn",
                         "sigma": 0.1 * (m + 1), "seed": 0, "optimizer": "adam", "epoch": ep,
                         "split": "val", "condition": "all", "accuracy": val, "loss": 1.0})
    return pd.DataFrame(rows, columns=HISTORY_COLUMNS)


def test_with_accuracy_and_rank_correlation():
    h = history({0: 0.9, 1: 0.8, 2: 0.6, 3: 0.7})
    t = pd.DataFrame({"model": [0, 1, 2, 3], "sigma": [0.1, 0.2, 0.3, 0.4],
                      "distance": [1.0, 2.0, 4.0, 3.0]})
    t = ss.with_accuracy(t, h)
    np.testing.assert_allclose(t["accuracy"], [0.9, 0.8, 0.6, 0.7])  # last epoch, not epoch 0
    r = ss.rank_correlation(t, "distance", level="model")
    assert r["rho"] == pytest.approx(-1.0) and r["n"] == 4
    # per-sigma means: two seeds per sigma, averaged first
    two = pd.DataFrame({"sigma": [0.1, 0.1, 0.2, 0.2, 0.3, 0.3],
                        "x": [1, 3, 2, 6, 10, 0], "accuracy": [0.1, 0.3, 0.5, 0.5, 0.9, 0.9]})
    r = ss.rank_correlation(two, "x", level="sigma")  # means x 2, 4, 5 vs 0.2, 0.5, 0.9
    assert r["rho"] == pytest.approx(1.0) and r["n"] == 3
    # sigma itself as the measure: accuracy means 0.2, 0.5, 0.9 rise with sigma
    r = ss.rank_correlation(two, "sigma", level="sigma")
    assert r["rho"] == pytest.approx(1.0) and r["n"] == 3
    with pytest.raises(ValueError, match="at least 3"):
        ss.rank_correlation(two[two["sigma"] < 0.3], "x")
    with pytest.raises(ValueError, match="not in the history"):
        ss.with_accuracy(pd.DataFrame({"model": [9]}), h)
    with pytest.raises(ValueError, match="unknown level"):
        ss.rank_correlation(two, "x", level="seed")


def test_load_paper_tables():
    p = pt.load_paper_tables()
    assert set(p["table"]) == {"1", "2", "3", "4", "5", "6"}
    assert set(p["metric"]) == set(pt.PAPER_METRICS)
    one = p[(p["table"] == "1") & (p["pe"] == "2d-fixed") & (p["metric"] == "val_acc")]
    assert one[["mean", "sd"]].iloc[0].tolist() == [0.977, 0.073]
    t3 = p[(p["table"] == "3") & (p["pe"] == "learn-0.2")].iloc[0]
    assert (t3["mean"], t3["sd"], t3["sigma"]) == (0.838, 0.016, 0.2)
    assert len(p[p["table"] == "2"]) == 40 and (p["n"] == 15).all()
    assert "learn-1" in set(p["pe"])  # sigma 1.0 labelled as parse_pe does


def synthetic_ours(paper: pd.DataFrame, shift: float = 0.0) -> pd.DataFrame:
    """15 per-seed values per PE with exactly the paper's mean and SD."""
    z = np.random.default_rng(5).normal(size=15)
    z = (z - z.mean()) / z.std(ddof=1)
    return pd.DataFrame([{"pe": r.pe, "seed": s, "accuracy": r.mean + shift + r.sd * z[s]}
                         for r in paper.itertuples() for s in range(15)])


def _seeds(mean: float, sd: float, n: int, seed: int = 0) -> np.ndarray:
    """n values with exactly this mean and SD (ddof=1)."""
    z = np.random.default_rng(seed).normal(size=n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)


def _paper_row(table: str, pe: str, metric: str = "val_acc") -> pd.Series:
    p = pt.load_paper_tables()
    return p[(p["table"] == table) & (p["pe"] == pe) & (p["metric"] == metric)].iloc[0]


def test_constants_and_columns():
    assert ss.MIN_SEEDS_FOR_CI == 2
    # the margin is narrower than the smallest gap the paper calls significant: Table 1's
    # learn-0.2 (0.956) against relative (0.920), t(13) = 2.51, p = 0.03 (vendored tables)
    t1 = pt.load_paper_tables().query("table == '1' and metric == 'val_acc'").set_index("pe")
    assert st.EQUIVALENCE_MARGIN < t1.loc["learn-0.2", "mean"] - t1.loc["relative", "mean"]
    assert set(pc.VERDICTS) == {"equivalent", "differs", "inconclusive", "n=1"}
    p = pt.load_paper_tables()
    cmp = pc.compare_to_paper(synthetic_ours(p[(p["table"] == "1") & (p["metric"] == "val_acc")]),
                              1)
    assert list(cmp.columns) == ["table", "setting", "pe", "sigma", "n", "mean", "sd", "ci_low",
                                 "ci_high", "paper_mean", "paper_sd", "diff", "p_equiv",
                                 "p_diff", "mdd", "verdict"]
    assert "paper_in_ci" not in cmp


def test_tost_matches_hand_computation():
    # ours: 6 seeds, mean 0.90, SD 0.04; paper: 15 seeds, mean 0.92, SD 0.03; margin 0.05
    ma, sa, na, mb, sb, nb, m = 0.90, 0.04, 6, 0.92, 0.03, 15, 0.05
    eq = st.equivalence_test_from_summary(ma, sa, na, mb, sb, nb, m)
    va, vb = sa**2 / na, sb**2 / nb
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    p_lower = 1 - sps.t.cdf((-0.02 + 0.05) / se, df)  # H0: diff <= -0.05
    p_upper = sps.t.cdf((-0.02 - 0.05) / se, df)  # H0: diff >= +0.05
    assert eq.diff == pytest.approx(-0.02) and eq.se == pytest.approx(se)
    assert eq.df == pytest.approx(df)
    assert eq.p_lower == pytest.approx(p_lower) and eq.p_upper == pytest.approx(p_upper)
    assert eq.p_equiv == pytest.approx(max(p_lower, p_upper))
    # the two-sided Welch test is scipy's
    ref = sps.ttest_ind_from_stats(ma, sa, na, mb, sb, nb, equal_var=False)
    assert eq.p_diff == pytest.approx(ref.pvalue)
    # TOST at alpha <=> the 90% Welch interval of the difference lies inside (-m, m)
    half = sps.t.ppf(0.95, df) * se
    assert (eq.p_equiv < 0.05) == (-m < -0.02 - half and -0.02 + half < m)


def test_tost_on_raw_seeds_agrees_with_scipy_one_sided_welch():
    rng = np.random.default_rng(11)
    a, b = rng.normal(0.8, 0.02, 7), rng.normal(0.81, 0.03, 15)
    eq = st.equivalence_test_from_summary(a.mean(), a.std(ddof=1), 7, b.mean(),
                                          b.std(ddof=1), 15, 0.05)
    lower = sps.ttest_ind(a + 0.05, b, equal_var=False, alternative="greater")
    upper = sps.ttest_ind(a - 0.05, b, equal_var=False, alternative="less")
    assert eq.p_lower == pytest.approx(lower.pvalue)
    assert eq.p_upper == pytest.approx(upper.pvalue)


def test_tost_with_zero_spread_and_bad_inputs():
    eq = st.equivalence_test_from_summary(1.0, 0.0, 5, 0.99, 0.0, 15, 0.05)
    assert eq.p_equiv == 0.0 and eq.p_diff == 0.0 and math.isnan(eq.df)
    eq = st.equivalence_test_from_summary(1.0, 0.0, 5, 0.9, 0.0, 15, 0.05)
    assert eq.p_equiv == 1.0 and eq.p_diff == 0.0
    with pytest.raises(ValueError, match="margin"):
        st.equivalence_test_from_summary(0.9, 0.1, 5, 0.9, 0.1, 15, 0.0)
    with pytest.raises(ValueError, match="n >= 2"):
        st.equivalence_test_from_summary(0.9, 0.1, 1, 0.9, 0.1, 15)


def test_two_seeds_give_an_interval_a_test_and_their_detectable_difference():
    row = _paper_row("1", "learn-0.2")  # paper 0.956 +- 0.039
    ours = pd.DataFrame({"pe": "learn-0.2", "accuracy": [0.955, 0.957]})
    c = pc.compare_to_paper(ours, 1, margin=0.05).iloc[0]  # the closed forms below: at 0.05
    assert c["n"] == 2 and c["mean"] == pytest.approx(0.956)
    assert c["paper_mean"] == row["mean"]
    half = sps.t.ppf(0.975, 1) * np.std([0.955, 0.957], ddof=1) / math.sqrt(2)
    assert c["ci_low"] == pytest.approx(0.956 - half) and c["ci_high"] == pytest.approx(
        0.956 + half)
    sd2 = np.std([0.955, 0.957], ddof=1)
    eq = st.equivalence_test_from_summary(0.956, sd2, 2, row["mean"], row["sd"], 15,
                                          0.05, variance="both")
    assert c["p_equiv"] == pytest.approx(eq.p_equiv) and c["p_diff"] == pytest.approx(eq.p_diff)
    # the paper's SD sizes both sides in the pooled test, so two near-tied seeds do not buy a
    # precise equivalence: Welch's, leaning on their SD of 0.0014, would give p_equiv ~ 1e-4
    pooled = st.equivalence_test_from_summary(0.956, sd2, 2, row["mean"], row["sd"], 15,
                                              0.05, variance="pooled")
    sp = math.sqrt((sd2**2 + 14 * row["sd"] ** 2) / 15)
    assert pooled.se == pytest.approx(sp * math.sqrt(1 / 2 + 1 / 15)) and pooled.df == 15
    welch = st.equivalence_test_from_summary(0.956, sd2, 2, row["mean"], row["sd"], 15, 0.05)
    assert eq.p_equiv == max(pooled.p_equiv, welch.p_equiv) == pooled.p_equiv
    assert welch.p_equiv < 1e-3 < 0.01 < c["p_equiv"]
    # the smallest difference 2 seeds against 15 resolve, with the larger SD (the paper's), is
    # the larger-p rule's: Welch's side, on our SD's one degree of freedom, needs more than
    # three times what Student's pooled test alone would (its closed form below)
    nu = 15
    t_mdd = (sps.t.ppf(0.975, nu) + sps.t.ppf(0.8, nu)) * row["sd"] * math.sqrt(1 / 2 + 1 / 15)
    assert c["mdd"] == pytest.approx(pw.mdd_vs_reference(row["sd"], 2, 15))
    assert c["mdd"] > 3 * t_mdd
    one = pc.compare_to_paper(ours.iloc[:1], 1).iloc[0]
    assert one["verdict"] == "n=1" and one[["ci_low", "p_equiv", "p_diff", "mdd"]].isna().all()
    # the mdd shrinks as seeds arrive
    five = pd.DataFrame({"pe": "learn-0.2", "accuracy": _seeds(0.956, 0.001, 5)})
    assert pc.compare_to_paper(five, 1).iloc[0]["mdd"] < c["mdd"]


def test_matching_paper_with_small_sd_is_equivalent():
    # Table 3 (attention cosine): SDs 0.013-0.023. 15 seeds with exactly the paper's mean and
    # SD are shown equivalent within 0.05.
    p = pt.load_paper_tables()
    p3 = p[p["table"] == "3"]
    ours3 = synthetic_ours(p3).rename(columns={"accuracy": "cosine"})
    c3 = pc.compare_to_paper(ours3, table=3, metric="attention_cosine", value="cosine")
    assert len(c3) == 20 and (c3["verdict"] == "equivalent").all()
    assert (c3["p_equiv"] < 0.05).all()
    np.testing.assert_allclose(c3["diff"], 0.0, atol=1e-12)


def test_wide_noisy_seeds_with_the_same_mean_are_never_equivalent():
    # SD 0.3 over 15 seeds, exactly the paper's mean: nothing can be concluded.
    row = _paper_row("2", "learn-1.7")  # paper 0.480 +- 0.167
    z = np.linspace(-1, 1, 15)
    acc = row["mean"] + 0.3 * z / z.std(ddof=1)
    assert acc.min() >= 0 and acc.max() <= 1
    c = pc.compare_to_paper(pd.DataFrame({"pe": "learn-1.7", "accuracy": acc}), 2).iloc[0]
    assert c["diff"] == pytest.approx(0.0, abs=1e-12) and c["sd"] == pytest.approx(0.3)
    assert c["verdict"] == "inconclusive"
    assert c["ci_low"] <= c["paper_mean"] <= c["ci_high"]  # the old rule would have "agreed"
    # noise cannot win at any seed count up to the paper's, whatever the margin reading
    for n in range(5, 16):
        d = pd.DataFrame({"pe": "learn-1.7", "accuracy": row["mean"] + _seeds(0, 0.3, n, n)})
        assert pc.compare_to_paper(d, 2).iloc[0]["verdict"] != "equivalent"


def test_paper_sd_alone_can_prevent_equivalence():
    # perfect agreement is still inconclusive when the paper's own SD is 0.1 or more
    row = _paper_row("2", "learn-1.1")  # paper 0.835 +- 0.101
    c = pc.compare_to_paper(pd.DataFrame({"pe": "learn-1.1",
                                          "accuracy": _seeds(row["mean"], 0.101, 15)}), 2)
    assert c.iloc[0]["verdict"] == "inconclusive"


def test_means_two_tenths_apart_are_different():
    p = pt.load_paper_tables()
    p3 = p[p["table"] == "3"]
    ours3 = synthetic_ours(p3, shift=-0.2).rename(columns={"accuracy": "cosine"})
    c3 = pc.compare_to_paper(ours3, table=3, metric="attention_cosine", value="cosine")
    assert (c3["verdict"] == "differs").all() and (c3["p_diff"] < 1e-6).all()
    np.testing.assert_allclose(c3["diff"], -0.2)
    # a significant difference smaller than the margin is still within it: equivalent
    row = _paper_row("3", "learn-0.2", "attention_cosine")  # 0.838 +- 0.016
    d = pd.DataFrame({"pe": "learn-0.2", "cosine": _seeds(row["mean"] + 0.02, 0.005, 15)})
    c = pc.compare_to_paper(d, 3, metric="attention_cosine", value="cosine").iloc[0]
    assert c["p_diff"] < 0.05 and c["verdict"] == "equivalent"
    assert pc.compare_to_paper(d, 3, metric="attention_cosine", value="cosine",
                               margin=0.01).iloc[0]["verdict"] == "differs"


def test_intervals_stay_inside_zero_one():
    rng = np.random.default_rng(3)
    p = pt.load_paper_tables()
    p1 = p[(p["table"] == "1") & (p["metric"] == "val_acc")]
    rows = []
    for i, r in enumerate(p1.itertuples()):
        n = 1 if i == 0 else int(rng.integers(2, 16))
        centre = rng.choice([0.0, 0.02, 0.5, 0.98, 1.0])
        acc = np.clip(centre + rng.normal(0, 0.3, n), 0, 1)  # piles up at 0 or 1
        rows += [{"pe": r.pe, "seed": s, "accuracy": a} for s, a in enumerate(acc)]
    c = pc.compare_to_paper(pd.DataFrame(rows), 1)
    ok = c["n"] >= ss.MIN_SEEDS_FOR_CI
    assert ok.any() and (~ok).any()
    assert (c.loc[ok, "ci_low"] >= 0).all() and (c.loc[ok, "ci_high"] <= 1).all()
    assert (c.loc[ok, "ci_low"] <= c.loc[ok, "mean"]).all()
    assert (c.loc[ok, "mean"] <= c.loc[ok, "ci_high"]).all()
    assert c.loc[~ok, ["ci_low", "ci_high"]].isna().all().all()
    # an unclipped t interval of these seeds would leave [0, 1] somewhere
    raw = ss.summarize(pd.DataFrame(rows), "accuracy", "pe")
    raw = raw[raw["n"] >= ss.MIN_SEEDS_FOR_CI]
    assert ((raw["ci_low"] < 0) | (raw["ci_high"] > 1)).any()


def test_compare_to_paper_on_matching_synthetic_table_and_plot():
    p = pt.load_paper_tables()
    p2 = p[(p["table"] == "2") & (p["metric"] == "val_acc")]
    cmp = pc.compare_to_paper(synthetic_ours(p2), table=2)
    assert len(cmp) == 20 and list(cmp["pe"]) == list(p2["pe"])
    np.testing.assert_allclose(cmp["diff"], 0.0, atol=1e-12)
    np.testing.assert_allclose(cmp["sd"], cmp["paper_sd"], rtol=1e-10)
    assert (cmp["n"] == 15).all()
    # exact agreement: equivalent where the SDs allow it, never "differs"
    assert not (cmp["verdict"] == "differs").any()
    small = cmp["paper_sd"] <= 0.05
    assert (cmp.loc[small, "verdict"] == "equivalent").all()
    assert (cmp.loc[cmp["paper_sd"] >= 0.1, "verdict"] == "inconclusive").all()
    far = pc.compare_to_paper(synthetic_ours(p2, shift=-0.3), table=2)
    np.testing.assert_allclose(far["diff"], -0.3)
    assert (far["verdict"] == "differs").all()
    # the plot: one series per verdict present, then the paper; legend outside the axes
    mixed = cmp.iloc[:5].copy()
    mixed["verdict"] = ["equivalent", "differs", "equivalent", "inconclusive",
                        "n=1"]
    mixed.loc[4, ["ci_low", "ci_high"]] = np.nan
    ax = plots.plot_vs_paper(mixed)
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["ours (mean, 95% CI): equivalent", "ours (mean, 95% CI): differs",
                      "ours (mean, 95% CI): inconclusive", "ours (mean): n=1",
                      "paper (mean ± SD, 15 seeds)"]
    assert len(ax.containers) == 5
    # the legend sits below the axes (and their tick labels), where no series can hide it
    assert ax.get_legend().get_bbox_to_anchor().y1 < ax.get_window_extent().y0
    assert ax.get_xlabel() and ax.get_ylabel() == "validation accuracy"
    green = ax.containers[0].lines[0]
    np.testing.assert_allclose(np.asarray(green.get_ydata(), float), mixed["mean"].iloc[[0, 2]])
    assert ax.containers[3].lines[1] == ()  # no interval, no error bar
    ax = plots.plot_vs_paper(cmp, x="sigma")
    assert ax.get_xlabel().startswith("σ")
    with pytest.raises(ValueError, match="verdict"):
        plots.plot_vs_paper(cmp.drop(columns="verdict"))
    s = ss.summarize(synthetic_ours(p2).assign(
        sigma=lambda d: [float(x.split("-")[1]) for x in d["pe"]]), by="sigma")
    ax = plots.plot_sigma_curve(s, label="ours")
    np.testing.assert_allclose(ax.lines[0].get_ydata(), p2["mean"], atol=1e-12)
    plt.close("all")


def test_compare_to_paper_bad_inputs():
    p = pt.load_paper_tables()
    ours = synthetic_ours(p[(p["table"] == "1") & (p["metric"] == "val_acc")])
    with pytest.raises(ValueError, match="unknown paper table '7'"):
        pc.compare_to_paper(ours, 7)
    with pytest.raises(ValueError, match="no metric 'attention_cosine'"):
        pc.compare_to_paper(ours, 1, metric="attention_cosine")
    with pytest.raises(ValueError, match="several settings"):
        pc.compare_to_paper(ours, 4)
    with pytest.raises(ValueError, match="no setting 'rmsprop'"):
        pc.compare_to_paper(ours, 4, setting="rmsprop")
    with pytest.raises(ValueError, match="no PE in common"):
        pc.compare_to_paper(ours[ours["pe"] == "nope"], 2)
    with pytest.raises(ValueError, match="empty"):
        pc.compare_to_paper(ours.iloc[:0], 1)
    with pytest.raises(ValueError, match="no 'loss' column"):
        pc.compare_to_paper(ours, 1, value="loss")
    with pytest.raises(ValueError, match="margin"):
        pc.compare_to_paper(ours, 1, margin=-0.1)
    with pytest.raises(ValueError, match="alpha"):
        pc.compare_to_paper(ours, 1, alpha=1.5)
    with pytest.raises(ValueError, match="min_seeds"):
        pc.compare_to_paper(ours, 1, min_seeds=1)
    c = pc.compare_to_paper(ours.iloc[:16], 1).set_index("pe")  # 2d-fixed x 15 + learn-0.2 x 1
    assert len(c) == 2 and c.loc["learn-0.2", "verdict"] == "n=1"
    assert c.loc["2d-fixed", "verdict"] in {"equivalent", "inconclusive"}


def test_rank_correlation_of_a_constant_column_is_nan_without_a_warning():
    import warnings

    t = pd.DataFrame({"sigma": [0.1, 0.2, 0.5], "accuracy": [0.25, 0.25, 0.25]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy's ConstantInputWarning would fail the book build
        r = ss.rank_correlation(t, "sigma")
    assert math.isnan(r["rho"]) and math.isnan(r["pvalue"]) and r["n"] == 3


def test_rank_correlation_p_is_exact_for_few_points():
    """A perfect order of n points is 2 of the n! pairings (both directions): p = 2/n!, where
    SciPy's t approximation says 0. With ties, the enumeration agrees with scipy's own
    permutation test over all pairings."""
    from scipy import stats

    for n in (4, 6, 8):
        t = pd.DataFrame({"sigma": np.arange(1, n + 1) / 10, "accuracy": np.linspace(1, 0.3, n)})
        r = ss.rank_correlation(t, "sigma")
        assert r["rho"] == pytest.approx(-1.0)
        assert r["pvalue"] == pytest.approx(2 / math.factorial(n))
    a = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
    b = np.array([0.3, 0.1, 0.3, 0.5, 0.4, 0.9, 0.8])  # a tie in b
    t = pd.DataFrame({"sigma": a, "x": b})
    ref = stats.permutation_test((a,), lambda u: stats.spearmanr(u, b).statistic,
                                 permutation_type="pairings", n_resamples=np.inf)
    assert ss.rank_correlation(t, "x", "sigma", level="model")["pvalue"] == pytest.approx(
        ref.pvalue)
    # nine points: SciPy's approximation, unchanged
    t9 = pd.DataFrame({"sigma": np.arange(9.0), "accuracy": [3, 1, 4, 1, 5, 9, 2, 6, 5]})
    assert ss.rank_correlation(t9, "sigma")["pvalue"] == pytest.approx(
        stats.spearmanr(t9["sigma"], t9["accuracy"]).pvalue)


def test_rank_correlation_ties_seed_means_that_float32_storage_splits():
    """Accuracies are stored in float32: two σ whose 3 seeds got 300 of 324 puzzles right have
    seed means that differ by ~1e-8. They tie; rho and its exact p are those of the exact
    fractions (as on the stored table2 run: -0.90, p = 0.028, not -0.94)."""
    from fractions import Fraction

    counts = {0.1: (104, 90, 106), 0.2: (104, 104, 104), 0.5: (102, 101, 97),
              1.0: (96, 100, 101), 1.5: (99, 36, 84), 2.0: (32, 63, 39)}
    t = pd.DataFrame([{"sigma": s, "accuracy": float(np.float32(k / 108))}
                      for s, ks in counts.items() for k in ks])
    means = t.groupby("sigma")["accuracy"].mean()
    assert means[0.1] != means[0.5]  # the float32 noise this test is about
    exact = [float(sum(Fraction(k, 108) for k in ks) / 3) for ks in counts.values()]
    assert exact[0] == exact[2]
    ref = sps.spearmanr(list(counts), exact).statistic
    r = ss.rank_correlation(t, "sigma")
    assert r["rho"] == pytest.approx(ref) and r["rho"] == pytest.approx(-0.8986, abs=1e-4)
    assert r["pvalue"] == pytest.approx(20 / 720)  # 20 of the 720 pairings reach |rho|


def test_for_ranking_ties_equal_counts_even_at_a_rounding_boundary():
    """187/324 = 0.5771604...: split as (0, 79, 108) or (1, 82, 104) correct of 108, stored
    in float32, the two means straddle 0.577160|5 and round to different 6-decimal values;
    grouped by closeness they tie, while one puzzle more (188/324) stays apart."""
    def mean(ks):
        return float(np.mean([np.float32(k / 108) for k in ks], dtype=np.float64))

    a, b, c = mean((0, 79, 108)), mean((1, 82, 104)), mean((1, 83, 104))
    assert round(a, 6) != round(b, 6)  # the boundary this test is about
    r = ss.for_ranking([c, a, math.nan, b])
    assert r[1] == r[3] and r[0] > r[1] and math.isnan(r[2])
    assert list(sps.rankdata(r[[0, 1, 3]])) == [3.0, 1.5, 1.5]


def test_holm_against_a_hand_computation_and_tests_that_did_not_run():
    from lstpe.stats.seed_stats import holm, sign_flip_test

    # sorted 0.01, 0.03, 0.04 times 3, 2, 1: 0.03, 0.06, 0.04 -> monotone 0.03, 0.06, 0.06
    np.testing.assert_allclose(holm([0.04, 0.01, 0.03]), [0.06, 0.03, 0.06])
    got = holm([0.04, np.nan, 0.01, 0.03])  # a NaN neither counts in m nor moves
    assert np.isnan(got[1])
    np.testing.assert_allclose(got[[0, 2, 3]], [0.06, 0.03, 0.06])
    assert holm([0.9, 0.8]).max() == 1.0  # capped
    assert sign_flip_test([1.0, 2.0, 3.0]) == (2.0, 0.25)  # 2 of the 8 flips as extreme
