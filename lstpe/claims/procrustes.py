"""Fig. 10: a small-sigma PE is closer to the 2-D PE (Procrustes distance), and that is what
training writes.

Tests, on the learnable PEs aligned to 2d-fixed by an orthogonal Procrustes map (block mean,
:func:`lstpe.analysis.procrustes.pe_alignment`):

* the trained distance rises with sigma (Kendall's tau over units), as in the paper;
* the rise is not the PE's norm alone: the normalised distance (each PE scaled to unit norm
  first, ours) also rises;
* training brings small-sigma PEs closer: the change from initialisation at sigma <= 0.2
  (exact sign-flip test over units).

A distance that rises over sigma at initialisation as much as after training is set by the
init's norm (sigma times the square root of the PE's size), not by learning: the text gives
both.
"""

from __future__ import annotations

import pandas as pd

from lstpe.analysis import evidence as ev
from lstpe.analysis.seed_stats import p_text, sign_flip_test
from lstpe.claims._common import SMALL_SIGMAS, trend
from lstpe.claims.inputs import Inputs, have
from lstpe.claims.verdicts import Test, Verdict, untestable, weigh

CLAIM = "procrustes"
LINE = "small-sigma PEs are closer to the 2-D PE, by training (Procrustes, Fig. 10)"
WHERE = "07_inside_the_models.ipynb"


def judge(x: Inputs) -> Verdict:
    """The verdict (module docstring); ``numbers``: ``change`` (per small-sigma unit) and
    ``by_sigma`` (mean distance per sigma, trained and at init)."""
    if not have(x.procrustes) or x.procrustes["sigma"].nunique() < 2:
        return untestable(CLAIM, LINE, WHERE, "fewer than two stored sigmas")
    t = x.procrustes.dropna(subset=["sigma", "distance"])
    tests = [trend(ev.trend_row(t["sigma"], t["distance"]).iloc[0], "rises",
                   "distance rises over sigma", "the trained distance over σ"),
             trend(ev.trend_row(t["sigma"], t["distance_normalized"]).iloc[0], "rises",
                   "normalised distance rises over sigma", "the normalised distance over σ")]
    keys = ["pe", "sigma", "seed"]
    by = t.groupby("sigma")["distance"].mean().rename("trained").to_frame()
    ch = pd.DataFrame()
    if have(x.procrustes_init):
        i = x.procrustes_init[keys + ["distance"]]
        by["init"] = i.groupby("sigma")["distance"].mean()
        ch = t[keys + ["distance"]].merge(i, on=keys, suffixes=("", "_init"))
        ch = ch[ch["sigma"].isin(SMALL_SIGMAS)].assign(change=lambda d: d["distance"]
                                                - d["distance_init"])
    if len(ch) >= 2:
        mean, p = sign_flip_test(ch["change"])
        outcome = "open" if p >= ev.ALPHA else "supports" if mean < 0 else "contradicts"
        tests.append(Test("training brings small-sigma PEs closer", outcome,
                          f"σ ≤ 0.2: distance {ch['distance_init'].mean():.2f} at "
                          f"initialisation → {ch['distance'].mean():.2f} trained (change "
                          f"{mean:+.3f} over {len(ch)} units, sign-flip {p_text(p)})",
                          2 / 2 ** len(ch)))
    text = "; ".join(t.text for t in tests)
    if "init" in by:
        text += "; per σ, trained (init): " + ", ".join(
            f"{s:g}: {r.trained:.1f} ({r.init:.1f})" for s, r in by.iterrows())
    verdict, part = weigh(tests)
    return Verdict(CLAIM, LINE, WHERE, verdict, x.epoch, part, tests, text,
                   {"change": ch, "by_sigma": by})
