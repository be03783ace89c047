"""Contrast and trend rows (:data:`lstpe.analysis.evidence.CONTRAST_COLUMNS`) read as tests of
a claim, with Holm's adjustment across the contrasts one claim reads."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from lstpe.analysis.evidence import ALPHA, MARGIN
from lstpe.analysis.seed_stats import holm, p_text
from lstpe.analysis.seed_tests import equivalence_test_from_summary
from lstpe.claims.verdicts import Test

SMALL_SIGMAS: tuple[float, ...] = (0.1, 0.2)
"""The paper's small sigmas (its Table 3's 'sigma <= 0.2')."""


def values_by_pe(frame: pd.DataFrame, value: str = "accuracy") -> dict[str, np.ndarray]:
    """PE -> its models' ``value`` (n,), from one row per model (``pe``, ``value``)."""
    return {str(pe): g[value].to_numpy(float) for pe, g in frame.groupby("pe")}


def adjust(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``p_holm``: Holm's adjustment of ``p_perm`` over the rows that ran."""
    return rows.assign(p_holm=holm(rows["p_perm"].to_numpy(float)))


def with_equivalence(rows: pd.DataFrame, vals: Mapping[str, np.ndarray],
                     margin: float = MARGIN) -> pd.DataFrame:
    """``rows`` with ``p_equiv``: the TOST p of ``|mean_a - mean_b| < margin`` (Welch; NaN
    where a cell has fewer than 2 values)."""
    out = rows.copy()
    p = []
    for r in out.itertuples():
        a, b = (np.asarray(vals.get(c, ()), float) for c in (r.a, r.b))
        p.append(equivalence_test_from_summary(a.mean(), a.std(ddof=1), a.size, b.mean(),
                                               b.std(ddof=1), b.size, margin).p_equiv
                 if a.size >= 2 and b.size >= 2 else math.nan)
    out["p_equiv"] = p
    return out


def contrast(r: pd.Series, want: int, name: str = "", note: str = "") -> Test:
    """One contrast ``a - b`` read as a test: ``want`` +1 (the claim says a > b), -1 (a < b)
    or 0 (the claim says no difference: a difference shown contradicts it, equivalence within
    the margin (``p_equiv`` below alpha, :func:`with_equivalence`) supports it, else open).
    Shown means Holm-adjusted p (``p_holm``, else ``p_perm``) below alpha."""
    name = name or f"{r['a']} vs {r['b']}"
    if r.get("verdict") == "not run" or pd.isna(r.get("diff")):
        return Test(name, "open", f"{name}: not run")
    held = "p_holm" in r and pd.notna(r["p_holm"])
    p = r["p_holm"] if held else r["p_perm"]
    sign = (1 if r["diff"] > 0 else -1) if p < ALPHA else 0
    outcome = ("open" if sign == 0 else "supports" if sign == want else "contradicts")
    pe = r.get("p_equiv", math.nan)
    if want == 0 and sign == 0 and pd.notna(pe) and pe < ALPHA:
        outcome = "supports"
    text = (f"{r['a']} − {r['b']} = {r['diff']:+.3f} (n = {int(r['n_a'])} + {int(r['n_b'])}, "
            f"exact {p_text(r['p_perm'])}" + (f", Holm {p_text(p)}" if held else "")
            + (f", within ±{MARGIN:g}: TOST {p_text(pe)}" if want == 0 and pd.notna(pe) else "")
            + ")")
    return Test(name, outcome, text + (f"; {note}" if note else ""))


def trend(r: pd.Series, want: str, name: str, what: str) -> Test:
    """A trend row (:func:`lstpe.analysis.evidence.trend_row`) read as a test: ``want``
    ``falls`` or ``rises``; the opposite significant trend contradicts the claim."""
    word = r["verdict"]
    outcome = "supports" if word == want else "open" if word == "no trend shown" \
        else "contradicts"
    return Test(name, outcome, f"{what}: Kendall τ = {r['statistic']:+.2f} over "
                               f"{int(r['n_a'])} units ({p_text(r['p_perm'])})")
