"""lstpe.chapters.findings: a table's cells of one verdict listed in a sentence (names, having,
grouped, reference), and the columns an evidence table shows (evidence_view)."""

from __future__ import annotations

import math

import pandas as pd
from scipy import stats

from lstpe.chapters import findings as fd
from lstpe.evidence import tables as ev
from lstpe.stats import power as pw


def test_names_reads_as_a_list_and_never_leaves_a_hole() -> None:
    assert fd.names([]) == "none"
    assert fd.names([], empty="no PE") == "no PE"
    assert fd.names(["nope"]) == "`nope`"
    assert fd.names(["a", "b"]) == "`a` and `b`"
    assert fd.names(["a", "b", "c"]) == "`a`, `b` and `c`"
    assert fd.names([0.1, 0.2], code=False) == "0.1 and 0.2"


def test_having_keeps_the_table_order() -> None:
    t = pd.DataFrame({"a": ["x"] * 3, "b": ["r", "s", "t"],
                      "verdict": ["higher", "no difference shown", "higher"]})
    assert fd.having(t, "higher", "b") == ["r", "t"]
    assert fd.having(t, "lower", "b") == []


def test_reference_names_what_the_row_was_tested_against() -> None:
    row = pd.Series({"ref": "authors@200", "authors_mean": 0.954, "authors_sd": 0.041,
                     "authors_n": 15, "paper_mean": 0.956, "paper_sd": 0.039})
    assert fd.reference(row) == "`authors@200`: 0.954 ± 0.041 (n = 15)"
    row2 = row.copy()
    row2["ref"], row2["authors_mean"] = "paper@4000", float("nan")
    assert fd.reference(row2) == "`paper@4000`: 0.956 ± 0.039"
    row2["ref"] = ""
    assert fd.reference(row2) == "no reference"


def test_grouped_leaves_out_empty_groups() -> None:
    g = {"equivalent": ["a", "b"], "differs": [], "inconclusive at its n": ["c"]}
    assert fd.grouped(g) == "equivalent: `a` and `b`; inconclusive at its n: `c`"
    assert fd.grouped({"differs": []}) == "none"


def test_evidence_view_shows_the_detectable_difference_of_each_row() -> None:
    ref = {"a": ev.Reference(0.95, 0.04, 15, "authors@200"),
           "b": ev.Reference(0.50, 0.20, 15, "authors@200")}
    t = ev.evidence_rows({"a": [0.94, 0.96, 0.95], "b": [0.5], "c": []}, ref, cells=["a", "b", "c"])
    view = fd.evidence_view(t)
    assert list(view.columns) == ["n", "ours [95% CI]", "verdict", "diff vs ref [CI]", "ref",
                                  "authors@200", "paper@4000", "p (t)", "p (TOST)", "MDD"]
    # the row test's (the larger p of pooled and Welch) at the reference's SD: more than the
    # pooled test's closed form (t_0.975 + t_0.8 at 3 + 15 - 2 df) * SD * sqrt(1/3 + 1/15)
    pooled = (stats.t.ppf(0.975, 16) + stats.t.ppf(0.8, 16)) * 0.04 * math.sqrt(1 / 3 + 1 / 15)
    want = pw.mdd_vs_reference(0.04, 3, 15)
    assert view.loc["a", "MDD"] == f"{want:.2f}" and want > 1.4 * pooled
    # one model: the single-case test, the pooled closed form at 1 + 15 - 2 df
    one = (stats.t.ppf(0.975, 14) + stats.t.ppf(0.8, 14)) * 0.20 * math.sqrt(1 + 1 / 15)
    assert view.loc["b", "MDD"] == f"{one:.2f}"
    assert view.loc["b", "n"] == 1 and view.loc["c", "MDD"] == "–"  # not run: nothing to detect


def test_signed_ci_never_prints_a_negative_zero() -> None:
    assert fd.signed_ci(-0.0001, -0.144, 0.144) == "+0.000 [-0.144, +0.144]"
    assert fd.signed_ci(-0.0004, -0.0003, 0.02) == "+0.000 [+0.000, +0.020]"
    assert fd.signed_ci(0.563, 0.363, 0.762) == "+0.563 [+0.363, +0.762]"
    assert fd.signed_ci(-0.01, float("nan"), float("nan")) == "-0.010"


def test_a_contrast_is_shown_with_the_interval_of_its_verdict() -> None:
    """A pair shows the exact test's interval (infinite where 3 + 3 seeds cannot bound it) and
    Welch's beside it; a trend shows its slope's interval."""
    c = ev.contrast_rows({"a": [0.95, 0.951, 0.952, 0.953, 0.954],
                          "b": [0.94, 0.90, 0.60, 0.30, 0.10],
                          "c": [0.9, 0.91, 0.92], "d": [0.1, 0.2, 0.3]}, [("a", "b"), ("c", "d")])
    v = fd.contrast_view(c)
    lo, hi = c.loc[0, ["exact_low", "exact_high"]]
    assert v.loc["a − b", "diff [95% CI]"] == fd.signed_ci(c.loc[0, "diff"], lo, hi)
    assert v.loc["a − b", "Welch CI"].startswith("[-") and v.loc["a − b", "verdict"] == "higher"
    assert v.loc["c − d", "diff [95% CI]"] == "+0.710 [−∞, +∞]"
    t = ev.trend_row([0.1, 0.2, 0.4, 0.8, 1.6], [0.9, 0.8, 0.7, 0.5, 0.3], n_perm=200)
    tv = fd.contrast_view(t)
    assert tv.iloc[0]["Welch CI"] == "–"
    assert tv.iloc[0]["diff [95% CI]"] == fd.signed_ci(*t.iloc[0][["diff", "diff_low",
                                                                    "diff_high"]])


def test_dashed_shows_a_missing_value_as_a_dash_and_keeps_the_numbers() -> None:
    t = pd.DataFrame({"rho": [0.94286, math.nan], "n": [6, 6], "name": ["x", None],
                      "p_dpe": [0.0001, 0.0234]})
    d = fd.dashed(t)
    assert list(d["rho"]) == ["0.943", "—"] and list(d["n"]) == [6, 6]
    assert list(d["p_dpe"]) == ["<0.001", "0.023"]
    assert math.isnan(t.loc[1, "rho"])  # the table itself is not changed


def test_contrast_ci_reads_a_row_whatever_its_index() -> None:
    """Chapters index contrasts by ``b`` or by ``(a, b)``: the row then lacks those keys."""
    c = ev.contrast_rows({"a": [0.95, 0.951, 0.952, 0.953, 0.954],
                          "b": [0.94, 0.90, 0.60, 0.30, 0.10]}, [("a", "b")])
    want = fd.contrast_ci(c.iloc[0])
    assert fd.contrast_ci(c.set_index("b").loc["b"]) == want
    assert fd.contrast_ci(c.set_index(["a", "b"]).loc[("a", "b")]) == want
    assert "∞" not in want and want.startswith("+0.")


def test_show_evidence_opens_the_key_columns_and_folds_the_rest() -> None:
    """Issue 51: an evidence table shows n, ours, the reference and the verdict first; every
    other column sits in a <details> fold under it, and the reference is the authors' value
    when the row was tested against their logs."""
    ref = {"a": ev.Reference(0.95, 0.04, 15, "authors@200")}
    t = ev.evidence_rows({"a": [0.94, 0.96, 0.95]}, ref, cells=["a"])
    c = ev.contrast_rows({"a": [0.95, 0.951, 0.952], "b": [0.5, 0.4, 0.6]}, [("a", "b")])
    shown = fd.show_evidence(t, c)
    assert list(shown.key[0].columns) == ["n", "ours [95% CI]", "reference", "verdict"]
    assert shown.key[0].loc["a", "reference"] == "0.950 (authors@200)"
    assert list(shown.key[1].columns) == ["n", "diff [95% CI]", "verdict"]
    html = shown._repr_html_()
    key_part, folded = html.split("<details", 1)
    assert key_part.count("lstpe-key") == 2 and "MDD" not in key_part
    assert "MDD" in folded and "p (Welch)" in folded and "</summary>" in folded
    plain = fd.show_claim(t)
    assert list(plain.key[0].columns) == ["n", "estimate [95% CI]", "against", "verdict"]
