"""Statistics fit for 3-5 seeds and the evidence tables, against independent facts: scipy's
t distribution, Student and Welch tests, their level under simulated nulls, exact permutation
p values enumerated by hand, a TOST computed step by step, the power of a t-test at its minimum
detectable difference (noncentral t), and the stored units of the authors' recipe."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from lstpe.evidence import tables as ev  # noqa: E402
from lstpe.figures.forest import plot_forest  # noqa: E402
from lstpe.stats import power as pw  # noqa: E402
from lstpe.stats import seed_tests as st  # noqa: E402
from lstpe.stats.trend import trend_test  # noqa: E402

LEARN02 = [0.954, 0.972, 0.963, 0.963, 0.963]
LEARN2 = [0.296, 0.583, 0.361, 0.361]


def test_evidence_ci_is_the_t_interval_at_any_n_from_two():
    for x in ([0.9, 0.95], [0.88, 0.944, 0.926], LEARN02):
        a = np.array(x)
        half = stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size)
        r = ev.evidence_rows({"c": x}, paper={"c": ev.Reference(0.9, 0.05, 15, "paper@4000")})
        assert r.loc[0, "n"] == a.size
        assert r.loc[0, "ci_low"] == pytest.approx(max(a.mean() - half, 0))
        assert r.loc[0, "ci_high"] == pytest.approx(min(a.mean() + half, 1))
    one = ev.evidence_rows({"c": [0.9]}, paper={"c": ev.Reference(0.9, 0.05, 15, "p")})
    assert math.isnan(one.loc[0, "ci_low"]) and one.loc[0, "why"].startswith("n=1")


def test_welch_diff_is_scipys_welch_test_with_its_interval():
    r = st.welch_diff(LEARN02, LEARN2)
    s = stats.ttest_ind(LEARN02, LEARN2, equal_var=False)
    lo, hi = s.confidence_interval(0.95)
    assert r.t == pytest.approx(s.statistic) and r.p == pytest.approx(s.pvalue)
    assert r.df == pytest.approx(s.df)
    assert (r.low, r.high) == (pytest.approx(lo), pytest.approx(hi))
    with pytest.raises(ValueError, match="at least 2"):
        st.welch_diff([0.9], LEARN2)


def test_permutation_p_by_hand_enumeration_and_its_floor():
    # {1, 2, 3, 4} into pairs: mean differences -2, -1, 0, 0, 1, 2; [3, 4] vs [1, 2] gives 2,
    # and so does its mirror: two-sided p = 2/6 = 2 / C(4, 2), the floor at 2 + 2
    r = st.permutation_test([3, 4], [1, 2])
    assert r.splits == 6 and r.p == pytest.approx(2 / 6) and r.floor == pytest.approx(2 / 6)
    assert st.permutation_floor(2, 2) == pytest.approx(2 / math.comb(4, 2))
    # [10] vs [1, 2, 3]: differences 8, -4, -8/3, -4/3: only the observed split reaches 8
    r = st.permutation_test([10], [1, 2, 3])
    assert r.p == pytest.approx(1 / 4) == st.permutation_floor(1, 3)
    # one-sided: 1 of the 6 splits reaches +2
    assert st.permutation_test([3, 4], [1, 2], "greater").p == pytest.approx(1 / 6)
    # the floor depends on the values: equally spaced [4] vs [1, 2, 3] mirror (+2, -2)
    assert st.permutation_test([4], [1, 2, 3]).floor == pytest.approx(2 / 4)
    # learn-0.2 (5 seeds) above every learn-2 seed (4): the floor 1/C(9, 4) = 1/126
    r = st.permutation_test(LEARN02, LEARN2)
    assert r.p == pytest.approx(1 / 126) == st.permutation_floor(5, 4)
    assert st.permutation_floor(3, 3) == pytest.approx(0.1)


def test_one_sided_permutation_p_matches_scipys_exact_permutation_test():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.9, 0.05, 4), rng.normal(0.85, 0.05, 5)
    ref = stats.permutation_test((a, b), lambda x, y, axis: x.mean(axis) - y.mean(axis),
                                 permutation_type="independent", n_resamples=np.inf,
                                 alternative="greater", vectorized=True)
    assert st.permutation_test(a, b, "greater").p == pytest.approx(ref.pvalue)
    assert st.permutation_test(b, a, "less").p == pytest.approx(ref.pvalue)


def test_tost_by_hand():
    """Ours 0.95, 0.96, 0.97 (mean 0.96, SD 0.01) against 0.95 +- 0.03 (15 seeds), margin 0.05.
    Pooled: s_p^2 = (2 * 0.01^2 + 14 * 0.03^2) / 16 = 8.0e-4, se = s_p * sqrt(1/3 + 1/15) =
    0.017889 on 16 df; the upper test (diff >= 0.05) binds: p = P(T_16 <= -2.2361) = 0.020.
    Welch: se^2 = 0.01^2/3 + 0.03^2/15 = 9.333e-5 on 10.72 df: p = P(T_10.72 <= -4.140).
    The row takes the larger of each p (the pooled test's here) and the union of the
    intervals."""
    r = st.vs_reference([0.95, 0.96, 0.97], 0.95, 0.03, 15, margin=0.05)
    assert r.test == "pooled+welch"
    assert r.se == pytest.approx(math.sqrt(8.0e-4 * (1 / 3 + 1 / 15)), rel=1e-6)
    assert r.df == 16
    assert r.p_equiv == pytest.approx(stats.t.cdf(-2.2361, 16), rel=2e-4)
    assert 0.01 < r.p_equiv < 0.05
    assert r.p == pytest.approx(stats.ttest_ind_from_stats(
        0.96, 0.01, 3, 0.95, 0.03, 15, equal_var=True).pvalue)
    w = st.vs_reference([0.95, 0.96, 0.97], 0.95, 0.03, 15, margin=0.05, seeds=False)
    assert w.test == "welch" and w.df == pytest.approx(10.72, abs=0.01)
    assert w.se == pytest.approx(math.sqrt(9.3333e-5), rel=1e-4)
    assert w.p_equiv == pytest.approx(stats.t.cdf(-4.140, 10.72), rel=2e-3) and w.p_equiv < 0.01
    assert r.low == pytest.approx(min(r.low, w.low)) and r.high >= w.high


def test_tost_equivalence_is_the_90_percent_interval_inside_the_margin():
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.normal(rng.uniform(0.85, 0.99), rng.uniform(0.005, 0.05), rng.integers(2, 6))
        m, s = rng.uniform(0.88, 0.96), rng.uniform(0.01, 0.1)
        for seeds in (True, False):
            r = st.vs_reference(x, m, s, 15, margin=0.05, seeds=seeds)
            h = st.vs_reference(x, m, s, 15, margin=0.05, level=0.90, seeds=seeds)
            assert (r.p_equiv < 0.05) == (-0.05 < h.low and h.high < 0.05)
            assert (r.p < 0.05) == (r.low > 0 or r.high < 0)  # verdict and interval agree


def test_the_test_against_a_reference_keeps_its_level_whichever_spread_is_right():
    """Our seeds drawn with the reference's SD, or twice it, and the reference's 15, 40,000
    times each: the rates the module cites. Student's pooled test holds its 5% with one SD and
    fails with ours twice theirs; Welch's fails at 2-3 seeds with one SD; the row's test (the
    larger p of the two, checked against scipy's tests on 300 draws) holds in both."""
    rng = np.random.default_rng(1)
    cases = {(2, 1.0): (0.050, 0.113, 0.020), (3, 1.0): (0.050, 0.071, 0.023),
             (5, 1.0): (0.050, 0.055, 0.032), (2, 2.0): (0.246, 0.119, 0.065),
             (5, 2.0): (0.157, 0.055, 0.051)}
    for (n, ratio), (pooled_rate, welch_rate, row_rate) in cases.items():
        a, b = ratio * rng.normal(size=(40_000, n)), rng.normal(size=(40_000, 15))
        student = stats.ttest_ind(a, b, axis=1, equal_var=True).pvalue
        welch = stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue
        row = np.maximum(student, welch)
        ours = [st.vs_reference(x, y.mean(), y.std(ddof=1), 15).p for x, y in zip(
            a[:300], b[:300], strict=True)]
        assert np.allclose(ours, row[:300], rtol=1e-9)
        for got, want in ((student, pooled_rate), (welch, welch_rate), (row, row_rate)):
            assert np.mean(got < 0.05) == pytest.approx(want, abs=0.007)


def test_pooled_at_one_model_is_the_single_case_test_and_a_null_reference_keeps_welch():
    """The pooled formula at n = 1 is Crawford & Howell's; two tied seeds against a reference
    with spread get a finite test, where Welch's alone would lean on the reference's SD and
    call learn-0.8's two stored seeds (0.954, 0.954 against the authors' 0.913 +- 0.048)
    different."""
    one = st.vs_reference([0.8], 0.9, 0.05, 15)
    eq = st.equivalence_test_from_summary(0.8, 0.0, 2, 0.9, 0.05, 15, variance="pooled")
    sp = math.sqrt(14 * 0.05**2 / 15)
    assert eq.se == pytest.approx(sp * math.sqrt(1 / 2 + 1 / 15)) and eq.df == 15
    assert one.se == pytest.approx(0.05 * math.sqrt(1 + 1 / 15)) and one.df == 14
    tied = st.vs_reference([0.954, 0.954], 0.913, 0.048, 15)
    welch = st.vs_reference([0.954, 0.954], 0.913, 0.048, 15, seeds=False)
    assert tied.test == "pooled+welch" and welch.test == "welch"
    assert welch.se == pytest.approx(0.048 / math.sqrt(15)) and welch.p < 0.01
    assert tied.p > 0.2 and tied.df == 15
    null = ev.Reference(0.0, 1.0, 10_000, "shuffled networks", seeds=False)
    row = ev.evidence_rows({"c": [2.0, 4.0, 6.0]}, {"c": null}, value_range=(-9, 9))
    assert row.loc[0, "test"] == "welch"  # our SD 2, the null's 1: pooled would say p ~ 1e-11
    assert row.loc[0, "p_diff"] == pytest.approx(stats.ttest_1samp([2.0, 4.0, 6.0], 0.0).pvalue,
                                                  rel=1e-3)
    with pytest.raises(ValueError, match="variance"):
        st.equivalence_test_from_summary(0.8, 0.1, 2, 0.9, 0.05, 15, variance="student")


def test_single_model_uses_the_crawford_howell_test():
    r = st.vs_reference([0.5], 0.9537, 0.041, 15)
    t = (0.5 - 0.9537) / (0.041 * math.sqrt(1 + 1 / 15))
    assert r.test == "single-case" and r.df == 14
    assert r.p == pytest.approx(2 * stats.t.sf(abs(t), 14))
    row = ev.evidence_rows({"c": [0.5]}, {"c": ev.Reference(0.9537, 0.041, 15, "authors@200")})
    assert row.loc[0, "verdict"] == "differs"


def test_mdd_closed_form_and_its_power():
    """(t_0.975,16 + t_0.8,16) * 0.1 * sqrt(1/3 + 1/15) = (2.1199 + 0.8647) * 0.06325 = 0.1888;
    the exact power of Student's t-test (noncentral t) there is close to 0.8."""
    assert pw.mdd(0.1, 3, 15) == pytest.approx(0.1888, abs=2e-4)
    for n_a, n_b in ((2, 15), (3, 3), (5, 15), (4, 5)):
        d = pw.mdd(0.1, n_a, n_b)
        nu = n_a + n_b - 2
        nc = d / (0.1 * math.sqrt(1 / n_a + 1 / n_b))
        crit = stats.t.ppf(0.975, nu)
        power = stats.nct.sf(crit, nu, nc) + stats.nct.cdf(-crit, nu, nc)
        assert 0.77 < power < 0.81
    z = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * math.sqrt(2 / 1000)
    assert pw.mdd(1.0, 1000, 1000) == pytest.approx(z, rel=1e-3)


def test_trend_is_kendalls_tau_b_with_a_permutation_p_and_the_log2_slope():
    x = [0.1] * 3 + [0.5] * 3 + [2.0] * 3
    y = [0.95, 0.96, 0.95, 0.93, 0.90, 0.94, 0.40, 0.58, 0.30]
    t = trend_test(x, y)
    assert t.tau == pytest.approx(stats.kendalltau(x, y).statistic)
    lr = stats.linregress(np.log2(x), y)
    assert t.slope == pytest.approx(lr.slope) and t.slope_high < 0
    # five points in perfect order: the exact two-sided p is 2/5! = 1/60
    mono = trend_test([1, 2, 3, 4, 5], [5, 4, 3, 2, 1])
    assert mono.tau == -1 and mono.p_perm == pytest.approx(2 / 120, abs=0.003)
    flat = trend_test([1, 1, 2, 2, 3, 3], [0.5, 0.6, 0.6, 0.5, 0.5, 0.6])
    assert flat.p_perm > 0.5


def test_rows_say_what_they_show_at_their_n():
    ref = {"a": ev.Reference(0.95, 0.03, 15, "authors@200"),
           "b": ev.Reference(0.95, 0.03, 15, "authors@200"),
           "c": ev.Reference(0.60, 0.19, 15, "authors@200")}
    paper = {"d": ev.Reference(0.90, 0.04, 15, "paper@4000")}
    rows = ev.evidence_rows({"a": [0.95, 0.96, 0.955], "b": [0.70, 0.72, 0.71],
                             "c": [0.9, 0.3, 0.6], "d": [0.89, 0.91, 0.93]}, ref, paper,
                            cells=["a", "b", "c", "d", "e"], margin=0.05)  # "a" is within
    assert list(rows.columns) == list(ev.ROW_COLUMNS)  # 0.05 of its reference, not 0.03
    r = rows.set_index("cell")
    assert r.loc["a", "verdict"] == "equivalent"
    assert r.loc["b", "verdict"] == "differs" and r.loc["b", "p_diff"] < 0.001
    assert r.loc["b", "diff_high"] < 0 and "-0.2" in r.loc["b", "why"]
    assert r.loc["c", "verdict"] == "inconclusive" and "n=3" in r.loc["c", "why"]
    assert r.loc["d", "ref"] == "paper@4000" and "no authors' log" in r.loc["d", "why"]
    assert (r.loc["e", "verdict"], r.loc["e", "n"]) == ("not run", 0)


def test_contrast_floor_is_stated_when_the_exact_test_cannot_reach_alpha():
    c = ev.contrast_rows({"a": [0.99, 0.98], "b": [0.30, 0.31]}, [("a", "b")]).iloc[0]
    assert c["p_perm"] == pytest.approx(1 / 3) and c["p_floor"] == pytest.approx(1 / 3)
    assert c["verdict"] == "no difference shown" and "can go no lower than 0.33" in c["why"]
    assert c["p_welch"] < 0.01  # Welch is shown beside it


def test_shift_interval_is_where_the_exact_test_flips():
    """Against the test itself: scanning shifts with permutation_test on shifted data gives
    the same hull, to the scan's step."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.2, 0.05, 5), rng.normal(0.0, 0.2, 4)
    lo, hi = st.shift_interval(x, y)
    grid = np.linspace(-1, 1.5, 5001)
    kept = [d for d in grid if st.permutation_test(x - d, y).p >= 0.05 - 1e-12]
    step = grid[1] - grid[0]
    assert lo == pytest.approx(min(kept), abs=step) and hi == pytest.approx(max(kept), abs=step)


def test_shift_interval_is_unbounded_where_the_floor_is_above_alpha():
    assert st.shift_interval([0.9, 0.91, 0.92], [0.1, 0.2, 0.3]) == (-math.inf, math.inf)
    lo, hi = st.shift_interval([0.9, 0.91, 0.92], [0.1, 0.2, 0.3], level=0.8)  # floor 0.1
    assert 0 < lo < hi < math.inf
    with pytest.raises(ValueError, match="level"):
        st.shift_interval([1, 2], [3, 4], level=95)


def test_a_contrast_verdict_and_its_interval_always_agree():
    """0 lies in the exact interval exactly when no difference is shown, including a
    complete separation whose Welch interval spans 0 (a wide group beside a tight one)."""
    rng = np.random.default_rng(0)
    vals = {"tight": [0.95, 0.951, 0.952, 0.953, 0.954],
            "wide": [0.94, 0.90, 0.60, 0.30, 0.10]}
    c = ev.contrast_rows(vals, [("tight", "wide")]).iloc[0]
    assert c["verdict"] == "higher" and c["diff_low"] < 0 < c["exact_low"]
    for _ in range(200):
        na, nb = rng.integers(1, 6, 2)
        v = {"a": rng.normal(rng.normal(0, 0.5), 0.3, na), "b": rng.normal(0, 0.3, nb)}
        r = ev.contrast_rows(v, [("a", "b")]).iloc[0]
        inside = r["exact_low"] <= 0 <= r["exact_high"]
        assert inside == (r["verdict"] == "no difference shown"), r.to_dict()


@pytest.fixture(scope="module")
def stored_final() -> pd.DataFrame:
    """The validation accuracy, as the authors evaluated it, of the stored 200-epoch units."""
    from lstpe.experiments.runs import get_run
    from lstpe.runtime import repo_root

    base = repo_root() / "results"
    fs = [get_run(n, "paper", results_dir=base, require_stored=True, epochs=200)
          .final("val_dropout") for n in ("table1", "table2")]
    return pd.concat(fs, ignore_index=True).drop_duplicates(["pe", "seed"])


def test_stored_units_show_learn02_above_learn2(stored_final):
    c = ev.contrast_table("small_sigma_generalises", stored_final).set_index(["a", "b"])
    row = c.loc[("learn-0.2", "learn-2")]
    assert row["verdict"] == "higher"
    assert row["p_welch"] < 0.01 and row["p_perm"] < 0.01 and row["diff_low"] > 0.3
    trend = c.loc[("trend over sigma", "")]
    assert trend["verdict"] == "falls" and trend["statistic"] < 0
    assert row["exact_low"] > 0.3  # the exact test's interval agrees with its verdict


def test_stacked_table_covers_every_claim_and_plots(stored_final):
    t = ev.stack_claims(stored_final, contrasts=True)
    assert set(t["claim"]) == set(ev.CLAIMS)
    cells = t[t["kind"] == "cell"]
    assert set(cells.loc[cells["claim"] == "learnable_beats_fixed", "cell"]) == {
        "2d-fixed", "learn-0.2", "relative", "random", "rope", "1d-fixed", "nope", "c-nope"}
    assert cells["verdict"].isin(list(ev.EVIDENCE_VERDICTS)).all() and (cells["n"] >= 1).all()
    # Tables 1-2's core cells stand at several seeds; the campaign adds new sigmas a seed at a
    # time (item 7), so a cell of one unit is stored too, with no interval
    core = cells[cells["claim"] == "learnable_beats_fixed"]
    assert (core["n"] >= 3).all()
    one = cells[cells["n"] == 1]
    assert one["ci_low"].isna().all() and one["ci_high"].isna().all()
    lr = cells[(cells["cell"] == "learn-0.2")].iloc[0]
    assert lr["ref"] == "authors@200" and lr["authors_n"] == 15
    fig = plot_forest(t)
    ax = fig.axes[0]
    assert fig.get_figwidth() == pytest.approx(7.0)
    assert len(ax.get_yticks()) == cells["cell"].nunique()
    sizes = [tx.get_fontsize() for tx in ax.texts] + [
        lb.get_fontsize() for lb in ax.get_yticklabels() + ax.get_xticklabels()]
    assert min(sizes) >= 9
    plt.close(fig)


def test_evidence_from_collected_prefers_the_authors_evaluation(stored_final):
    rows = pd.concat([stored_final.assign(split="val_dropout"),
                      stored_final.assign(split="val", accuracy=0.25)], ignore_index=True)
    got = ev.evidence_from_collected(rows)
    assert set(got["split"]) == {"val_dropout"}
    assert got.loc[got["cell"] == "learn-0.2", "mean"].iloc[0] == pytest.approx(
        np.mean(LEARN02), abs=1e-3)
    assert ev.evidence_from_collected(pd.DataFrame({"x": [1]})) is None


def test_batch_writes_the_evidence_table_next_to_its_summary(tmp_path, capsys):
    """Two grid points, each saving per-model accuracies of other seeds: evidence.csv pools
    them (learn-0.2 and learn-2 at 3 + 3 seeds: every learn-0.2 seed above every learn-2
    one, the exact two-sided p 2/C(6, 3) = 0.1, the floor at that n)."""
    import nbformat

    from lstpe.chapters.batch import run_batch

    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("seeds = [0]\nresults_out = None")
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell(
        "import os, pandas as pd\n"
        "acc = {'learn-0.2': [0.95, 0.96, 0.97], 'learn-2': [0.3, 0.4, 0.5]}\n"
        "rows = [{'pe': pe, 'seed': s, 'accuracy': acc[pe][s % 3], 'split': sp,\n"
        "         'epoch': 200} for pe in acc for s in seeds for sp in ('val', 'val_dropout')]\n"
        "os.makedirs(results_out, exist_ok=True)\n"
        "pd.DataFrame(rows).to_csv(os.path.join(results_out, 'final.csv'), index=False)\n")
    nb.cells = [params, body]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, tmp_path / "nb.ipynb")
    out = tmp_path / "batch"
    run_batch(tmp_path / "nb.ipynb", {"seeds": [[0, 1], [2]]}, {}, out)
    capsys.readouterr()
    assert (out / "summary.csv").exists()
    got = pd.read_csv(out / "evidence.csv")
    cell = got[(got["kind"] == "cell") & (got["cell"] == "learn-0.2")].iloc[0]
    assert cell["n"] == 3 and cell["ref"] == "authors@200"
    c = got[(got["a"] == "learn-0.2") & (got["b"] == "learn-2")].iloc[0]
    assert c["p_perm"] == pytest.approx(0.1) and c["p_floor"] == pytest.approx(0.1)
    assert set(got["split"]) == {"val_dropout"}


def test_shift_interval_bisects_large_groups_to_the_scanned_answer(monkeypatch):
    """Past SHIFT_SCAN the bounds come from bisection; on data where p rises towards the
    observed difference they equal the full scan's, and 9+9 seeds (48620 splits) stay
    quick."""
    rng = np.random.default_rng(5)
    x, y = rng.normal(0.3, 0.1, 6), rng.normal(0.0, 0.1, 5)
    scanned = st.shift_interval(x, y)
    monkeypatch.setattr(st, "SHIFT_SCAN", 0)
    assert st.shift_interval(x, y) == pytest.approx(scanned)
    lo, hi = st.shift_interval(rng.normal(0.3, 0.1, 9), rng.normal(0.0, 0.1, 9))
    assert 0 < lo < 0.3 < hi < 0.6


def test_an_exact_reference_gets_the_one_sample_mdd():
    x = [0.10, 0.12, 0.15, 0.11, 0.13]
    rows = ev.evidence_rows({"a": x}, {"a": ev.Reference(0.0, 0.0, 2, "no loss")},
                            margin=0.01).set_index("cell")
    sd = float(np.std(x, ddof=1))
    want = (stats.t.ppf(0.975, 4) + stats.t.ppf(0.8, 4)) * sd / np.sqrt(5)  # closed form
    assert rows.loc["a", "mdd"] == pytest.approx(want) == pytest.approx(pw.mdd(sd, 5))
    assert rows.loc["a", "verdict"] == "differs"
    one = ev.evidence_rows({"a": [0.1]}, {"a": ev.Reference(0.0, 0.0, 2, "no loss")})
    assert np.isnan(one["mdd"].iloc[0])  # one model: no SD to size it by
