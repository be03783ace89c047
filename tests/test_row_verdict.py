"""One rule for a row's verdict word (:func:`lstpe.evidence.verdict.row_verdict`): by hand, and
the word every evidence table prints is the rule's on the row's own p values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lstpe.evidence import claim_tables as ct
from lstpe.evidence import paper_compare as pc
from lstpe.evidence import tables as ev
from lstpe.evidence.verdict import ROW_VERDICTS, row_verdict

NAN = math.nan


@pytest.mark.parametrize("p_diff, p_equiv, n, word", [
    (0.01, 0.01, 5, "equivalent"),      # both shown: equivalent within the margin, why says both
    (0.01, 0.20, 5, "differs"),
    (0.20, 0.20, 5, "inconclusive"),
    (0.05, 0.05, 5, "inconclusive"),    # alpha itself is not below alpha
    (NAN, NAN, 3, "inconclusive"),      # no test ran: nothing shown
    (0.01, 0.01, 1, "differs"),         # one model: the single-case test, no equivalence
    (0.20, 0.01, 1, "n=1"),
    (NAN, NAN, 1, "n=1"),               # a table that runs no test at n = 1
])
def test_the_rule_by_hand(p_diff, p_equiv, n, word):
    assert row_verdict(p_diff, p_equiv, n) == word
    assert word in ROW_VERDICTS


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="n=0"):
        row_verdict(0.1, 0.1, 0)
    with pytest.raises(ValueError, match="alpha=1.5"):
        row_verdict(0.1, 0.1, 3, alpha=1.5)


def test_evidence_rows_print_the_rules_word():
    """Rows of every kind: n = 1 near and far, a tight equivalent, a clear difference, a
    noisy inconclusive, tied seeds against an exact reference (the sign-flip test)."""
    vals = {"one_near": [0.90], "one_far": [0.30], "tight": [0.901, 0.899, 0.902, 0.900],
            "far": [0.60, 0.62, 0.61], "noisy": [0.5, 0.9, 0.7], "tied": [0.8] * 4}
    ref = {c: ev.Reference(0.9, 0.02, 15, "authors@200") for c in vals}
    ref["tied"] = ev.Reference(0.8, 0.0, 15, "exact", seeds=False)
    rows = ev.evidence_rows(vals, ref)
    want = [row_verdict(r.p_diff, r.p_equiv, int(r.n)) for r in rows.itertuples()]
    assert list(rows["verdict"]) == want
    assert set(want) == {"n=1", "differs", "equivalent", "inconclusive"}  # every word met


def test_compare_to_paper_prints_the_rules_word():
    rows = [{"pe": pe, "seed": s, "accuracy": a} for pe, accs in {
        "2d-fixed": [0.95, 0.96, 0.955], "learn-0.2": [0.5, 0.55, 0.6],
        "learn-1": [0.93], "1d-fixed": [0.3, 0.9]}.items() for s, a in enumerate(accs)]
    cmp = pc.compare_to_paper(pd.DataFrame(rows), 1)
    want = [row_verdict(r.p_diff, r.p_equiv, int(r.n)) for r in cmp.itertuples()]
    assert list(cmp["verdict"]) == want


def test_holm_decides_the_word_again_with_the_same_rule():
    """A row that differs on its own p but not after Holm: inconclusive from n = 2, ``n=1``
    for one model (the rule at n = 1: the single-case test no longer shows a difference)."""
    cells = pd.DataFrame({
        "cell": ["a", "b", "c"], "n": [3, 1, 3], "p_diff": [0.03, 0.02, 0.5],
        "p_equiv": [0.4, NAN, 0.3], "verdict": ["differs", "differs", "inconclusive"],
        "why": ["", "", ""]})
    out = ct._holm_cells(cells)
    np.testing.assert_allclose(out["p_holm"], [0.06, 0.06, 0.5])
    assert list(out["verdict"]) == ["inconclusive", "n=1", "inconclusive"]
    assert list(out["verdict"]) == [row_verdict(r.p_holm, r.p_equiv, int(r.n))
                                    for r in out.itertuples()]
    assert "Holm over 3 PEs" in out.loc[0, "why"]


def test_at_chance_is_the_one_rules_word_too():
    """A row of models at chance shows ``at chance`` whatever its tests say (the rule in
    :mod:`lstpe.evidence.verdict`), and no other module spells that word itself."""
    import ast
    from pathlib import Path

    import lstpe
    from lstpe.chapters import tables as chapter_tables
    from lstpe.evidence import verdict

    assert [verdict.shown_verdict(w, True) for w in ROW_VERDICTS] == [verdict.AT_CHANCE] * 4
    assert [verdict.shown_verdict(w, False) for w in ROW_VERDICTS] == list(ROW_VERDICTS)
    cmp = pd.DataFrame({"pe": ["nope", "2d-fixed"], "n": [3, 3], "mean": [0.26, 0.95],
                        "sd": [0.01, 0.01], "ci_low": [NAN, NAN], "ci_high": [NAN, NAN],
                        "paper_mean": [0.3, 0.97], "paper_sd": [0.02, 0.01],
                        "diff": [-0.04, -0.02], "verdict": ["differs", "equivalent"],
                        "at_chance": [True, False]})
    assert list(chapter_tables.compact(cmp)["verdict"]) == ["at chance", "equivalent"]
    home = Path(verdict.__file__)
    spelled = [str(p.relative_to(home.parents[1])) for p in Path(lstpe.__file__).parent.rglob(
        "*.py") if p != home and any(isinstance(n, ast.Constant) and n.value == "at chance"
                                     for n in ast.walk(ast.parse(p.read_text())))]
    assert spelled == []
