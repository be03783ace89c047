"""Contrast and trend rows (:data:`lstpe.evidence.tables.CONTRAST_COLUMNS`) read as tests of
a claim, with Holm's adjustment across the contrasts one claim reads."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from lstpe.claims.paper import Quote
from lstpe.claims.verdicts import INHERITED, NO_DIFFERENCE_MARGIN, Test, no_difference, ordering
from lstpe.stats.seed_stats import holm, p_text, tau_text
from lstpe.stats.seed_tests import (
    ALPHA,
    equivalence_test_from_summary,
    no_spread,
    permutation_floor,
    permutation_test,
)

KEYS: list[str] = ["pe", "sigma", "seed"]
"""What names one learnable-PE model in the per-model frames."""
SMALL_SIGMAS: tuple[float, ...] = (0.1, 0.2)
"""The paper's small sigmas (its Table 3's 'sigma <= 0.2')."""


def values_by_pe(frame: pd.DataFrame, value: str = "accuracy") -> dict[str, np.ndarray]:
    """PE -> its models' ``value`` (n,), from one row per model (``pe``, ``value``)."""
    return {str(pe): g[value].to_numpy(float) for pe, g in frame.groupby("pe")}


def adjust(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``p_holm``: Holm's adjustment of ``p_perm`` over the rows that ran."""
    return rows.assign(p_holm=holm(rows["p_perm"].to_numpy(float)))


def with_equivalence(rows: pd.DataFrame, vals: Mapping[str, np.ndarray],
                     margin: float = NO_DIFFERENCE_MARGIN) -> pd.DataFrame:
    """``rows`` with ``p_equiv``, the TOST p of ``|mean_a - mean_b| < margin``, and
    ``equiv_floor``, the smallest p that TOST can give (NaN where a cell has fewer than 2
    values). Welch's TOST (floor 0); where neither cell has a spread Welch's is undefined
    (it would say p = 0 from two tied seeds each), and the exact permutation TOST decides:
    ``a + margin`` above ``b`` and ``a - margin`` below it, one-sided, the larger p."""
    out = rows.copy()
    p, floor = [], []
    for r in out.itertuples():
        a, b = (np.asarray(vals.get(c, ()), float) for c in (r.a, r.b))
        if a.size < 2 or b.size < 2:
            got = (math.nan, math.nan)
        elif no_spread(a) and no_spread(b):
            lo, up = permutation_test(a + margin, b, "greater"), permutation_test(
                a - margin, b, "less")
            got = (max(lo.p, up.p), max(lo.floor, up.floor))
        else:
            got = (equivalence_test_from_summary(a.mean(), a.std(ddof=1), a.size, b.mean(),
                                                 b.std(ddof=1), b.size, margin).p_equiv, 0.0)
        p.append(got[0])
        floor.append(got[1])
    out["p_equiv"], out["equiv_floor"] = p, floor
    return out


def contrast(r: pd.Series, want: int, name: str = "", note: str = "",
             quote: Quote | None = None) -> Test:
    """One contrast ``a - b`` read as a test of ``quote``: ``want`` +1 (the claim says a > b),
    -1 (a < b) or 0 (the claim says no difference: :func:`lstpe.claims.verdicts.no_difference`
    decides, from the difference's p and the TOST's ``p_equiv``, :func:`with_equivalence`).
    Shown means Holm-adjusted p (``p_holm``, else ``p_perm``) below alpha. The test's
    ``floor`` is the smallest p the exact test can give at n_a + n_b
    (:func:`~lstpe.stats.seed_tests.permutation_floor`: what the n allows, not the ties of
    these values; with ``want`` 0 the lower of it and the TOST's): at or above alpha, the
    text says so."""
    name = name or f"{r['a']} vs {r['b']}"
    if r.get("verdict") == "not run" or pd.isna(r.get("diff")):
        return Test(name, "open", f"{name}: not run", quote=quote)
    held = "p_holm" in r and pd.notna(r["p_holm"])
    p = r["p_holm"] if held else r["p_perm"]
    floor = permutation_floor(int(r["n_a"]), int(r["n_b"]))
    pe = r.get("p_equiv", math.nan)
    head = f"{r['a']} − {r['b']} = {r['diff']:+.3f} (n = {int(r['n_a'])} + {int(r['n_b'])}"
    caveat = ""
    if want == 0 and pd.notna(pe):
        floor = min(floor, r.get("equiv_floor", 0.0))
        outcome, clause, caveat = no_difference(float(r["diff"]), float(p), float(pe),
                                                NO_DIFFERENCE_MARGIN)
        text = (f"{head}): {clause}" + (f", exact {p_text(r['p_perm'])} before Holm"
                                        if held else ""))
    else:
        sign = (1 if r["diff"] > 0 else -1) if p < ALPHA else 0
        outcome = "open" if sign == 0 else "supports" if sign == want else "contradicts"
        text = (f"{head}, exact {p_text(r['p_perm'])}" + (f", Holm {p_text(p)}" if held else "")
                + ")")
    if floor >= ALPHA:
        text += f"; no lower than {p_text(floor)} at this n"
    return Test(name, outcome, text + (f"; {note}" if note else ""), floor, quote,
                caveat=caveat)


def trend(r: pd.Series, want: str, name: str, what: str, quote: Quote | None = None,
          init: pd.Series | None = None) -> Test:
    """A trend row (:func:`lstpe.evidence.tables.trend_row`) read as a test of ``quote``:
    ``want`` ``falls`` or ``rises``; the opposite significant trend contradicts the claim.
    With ``init`` (the same trend at initialisation) the trend is a measure of what a model
    learned and :func:`lstpe.claims.verdicts.ordering` decides (an ordering the
    initialisation already showed is inherited, not learned). Every value tied: tau is
    undefined, said in words, and the test cannot reach alpha (floor 1)."""
    n = int(r["n_a"])
    if pd.isna(r["statistic"]):
        return Test(name, "open", f"{what}: Kendall {tau_text(math.nan, n)}, no trend to test",
                    1.0, quote)
    text = f"{what}: Kendall {tau_text(r['statistic'])} over {n} models ({p_text(r['p_perm'])})"
    sign = 1 if want == "rises" else -1
    if init is None:
        word = r["verdict"]
        outcome = "supports" if word == want else "open" if word == "no trend shown" \
            else "contradicts"
        return Test(name, outcome, text, r.get("p_floor", math.nan), quote)
    return _ordered(name, text, float(r["statistic"]), float(r["p_perm"]), sign,
                    float(init["statistic"]), float(init["p_perm"]), "Kendall τ", quote,
                    r.get("p_floor", math.nan))


def correlation(rho: dict | None, rho0: dict | None, want: int, name: str, what: str,
                quote: Quote | None = None) -> Test | None:
    """A Spearman correlation over sigma (:func:`lstpe.stats.seed_stats.rank_correlation`,
    ``rho``) read as a test of ``quote``, beside the same correlation at initialisation
    (``rho0``): :func:`lstpe.claims.verdicts.ordering` decides. None where ``rho`` is None
    (fewer than 3 sigmas)."""
    if rho is None:
        return None
    if pd.isna(rho["rho"]):  # one side constant over sigma: no ranking
        return Test(name, "open", f"{what} undefined: the per-σ means of one side are the "
                                  f"same at all {rho['n']} sigmas", 1.0, quote)
    text = f"{what} = {rho['rho']:+.2f} over {rho['n']} sigmas ({p_text(rho['pvalue'])})"
    init = (None, None) if rho0 is None or pd.isna(rho0["rho"]) else (rho0["rho"],
                                                                      rho0["pvalue"])
    return _ordered(name, text, float(rho["rho"]), float(rho["pvalue"]), want, *init,
                    "ρ", quote)


def _ordered(name: str, text: str, stat: float, p: float, want: int, stat0: float | None,
             p0: float | None, sym: str, quote: Quote | None, floor: float = math.nan) -> Test:
    """An ordering test (:func:`lstpe.claims.verdicts.ordering`) with its text: the trained
    ``text`` and, after it, the initialisation's statistic and what it makes of the test."""
    outcome, inherited = ordering(stat, p, want, stat0, p0)
    if stat0 is None:
        text += "; not measured at initialisation, so not shown to be learned"
    else:
        text += f"; at initialisation {sym} = {stat0:+.2f} ({p_text(p0)})"
        if inherited:
            text += f": {INHERITED}"
        elif outcome == "supports":
            text += ": made by training"
    return Test(name, outcome, text, floor, quote, inherited)


def n_of(vals: Mapping[str, np.ndarray], *pes: str) -> str:
    """``n = 5 + 4``: the models behind ``pes`` (one count per PE; ``n = 5 each`` for more
    than two PEs with the same count)."""
    counts = [len(vals.get(p, ())) for p in pes]
    if len(counts) > 2 and len(set(counts)) == 1:
        return f"n = {counts[0]} each"
    return "n = " + " + ".join(str(c) for c in counts)


def student(a: np.ndarray, b: np.ndarray) -> dict[str, float] | None:
    """The paper's two-sample t-test (Student's, pooled variance: its ``t(13)`` is a pooled
    test's integer df) of ``a`` (n_a,) against ``b`` (n_b,), with the difference's 95%
    interval and the smallest difference the n resolves (``mdd``: alpha 0.05, power 0.8, at
    the pooled SD). None below 2 values a side."""
    from scipy import stats

    from lstpe.stats.power import mdd
    from lstpe.stats.seed_stats import ttest

    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size < 2 or b.size < 2:
        return None
    t = ttest(a, b, "student")
    df = a.size + b.size - 2
    sp = math.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / df)
    half = stats.t.ppf(0.975, df) * sp * math.sqrt(1 / a.size + 1 / b.size)
    return {"t": t.statistic, "df": df, "p": t.pvalue, "diff": t.diff, "lo": t.diff - half,
            "hi": t.diff + half, "mdd": mdd(sp, int(a.size), int(b.size)) if sp > 0 else 0.0}


def t_text(a: str, b: str, t: dict[str, float] | None, at: int, n: str) -> str:
    """``learn-0.2 − relative = +0.031 [−0.01, +0.07], Student's t(8) = 1.62, p = 0.14; the
    smallest difference this n resolves: 0.058 (epoch 200, n = 5 + 5)``."""
    if t is None:
        return f"{a} − {b}: fewer than 2 models a side (epoch {at}, {n})"
    stat = ("t undefined (no spread)" if not math.isfinite(t["t"]) else
            f"Student's t({t['df']:g}) = {t['t']:.2f}, {p_text(t['p'])}")
    return (f"{a} − {b} = {t['diff']:+.3f} [{t['lo']:+.3f}, {t['hi']:+.3f}], {stat}; the "
            f"smallest difference this n resolves: {t['mdd']:.3f} (epoch {at}, {n})")


def means_text(vals: Mapping[str, np.ndarray], pes: list[str]) -> str:
    """``2d-fixed 0.962, learn-0.2 0.931, ...``: the seed means of ``pes`` in that order."""
    return ", ".join(f"{p} {vals[p].mean():.3f}" for p in pes if p in vals)


def rho_text(rho: dict | None, what: str, at: int) -> str:
    """``ρ = +0.96 over 9 sigmas (p < 0.0001; epoch 200)``: a Spearman correlation of
    per-sigma means, as the paper computes it."""
    if rho is None or not math.isfinite(rho.get("rho", math.nan)):
        return f"{what}: no ranking (fewer than 3 sigmas or one side constant)"
    return (f"{what} ρ = {rho['rho']:+.2f} over {rho['n']} sigmas ({p_text(rho['pvalue'])}; "
            f"epoch {at})")
