"""Fig. 2D-F: a small-sigma PE is closer to the 2-D PE (Procrustes distance), the closer the
better it generalises, and training is what brings it there.

The paper's sentences (:data:`QUOTES`) make three claims, each one test here, on the learnable
PEs aligned to 2d-fixed by an orthogonal Procrustes map (block mean,
:func:`lstpe.analysis.procrustes.pe_alignment`):

* "small-norm initialized PEs could better approximate the PEs from the 2d-fixed PE scheme":
  the distance rises with sigma (Kendall's tau over units, permutation p);
* "more similar ground truth PE approximation ... near perfectly predicted downstream
  generalization (ρ = -0.98)": Spearman's rho of the distance with accuracy over the per-sigma
  means is negative;
* small-norm PEs "approximate the ground truth PE scheme via the feature learning regime"
  (v1, Fig. 10): training brings small-sigma PEs closer, the change of the distance from
  initialisation at sigma <= 0.2 (exact sign-flip test over units).

The first two are orderings a model may have learned or inherited: each is computed after
training and at initialisation (``procrustes_init``; accuracy stays the trained one), and
:func:`lstpe.claims.verdicts.ordering` counts as support only an ordering the initialisation
did not already show. A distance that rises over sigma at initialisation as much as after
training is set by the init's norm (sigma times the square root of the PE's size): the text
gives both per sigma, and the normalised distance (each PE scaled to unit norm first, ours)
beside them, untested.
"""

from __future__ import annotations

import pandas as pd

from lstpe.claims._common import KEYS, SMALL_SIGMAS, correlation, rho_text, trend
from lstpe.claims.inputs import Inputs, have
from lstpe.claims.paper import Quote, label
from lstpe.claims.verdicts import (
    Check,
    Test,
    Verdict,
    explanation_of_ordering,
    result_of_contrast,
    untestable,
    weigh,
)
from lstpe.evidence import tables as ev
from lstpe.stats.seed_stats import p_text, rank_correlation, sign_flip_test
from lstpe.stats.seed_tests import ALPHA

CLAIM = "procrustes"
LINE = ("small-sigma PEs are closer to the 2-D PE, by training, and the closer the better "
        f"they generalise (Procrustes, {label('procrustes')})")
WHERE = "07b_alignment.ipynb"
QUOTES: tuple[Quote, ...] = (
    Quote("We found that small-norm initialized PEs could better approximate the PEs from the "
          "`2d-fixed` PE scheme (Fig. 2E).", "v2", "§3.3, Fig. 2E"),
    Quote("Critically, more similar ground truth PE approximation (measured by L2 norm) near "
          "perfectly predicted downstream generalization ($\\rho = -0.98$, $p < 0.0001$; Fig. "
          "2F).", "v2", "§3.3, Fig. 2F"),
    Quote("This suggests that small-norm initialized PEs can approximate the ground truth PE "
          "scheme via the feature learning regime, and this leads to improved downstream "
          "generalization.", "v1", "Fig. 10"),
    Quote("Indeed, consistent with our prior results, we found that small-norm initialized PEs "
          "could better approximate the PEs from the 2d-fixed PE scheme.", "v1", "§3.4"),
    Quote("Critically, more similar ground truth PE approximation (measured by L2 norm) near "
          "perfectly predicted downstream generalization … Appendix Fig. 10B,C).", "v1",
          "§3.4, Fig. 10C"),
)
"""The paper's sentences this claim tests, from each version."""


def _rho(d: pd.DataFrame | None, final: pd.DataFrame) -> dict | None:
    """Spearman of ``distance`` with the trained accuracy over the per-sigma means (None below
    3 sigmas or without ``d``)."""
    if d is None:
        return None
    m = d.merge(final[["pe", "seed", "accuracy"]], on=["pe", "seed"])
    return rank_correlation(m, "distance") if m["sigma"].nunique() >= 3 else None


def _change(t: pd.DataFrame, i: pd.DataFrame) -> Test | None:
    """Training brings small-sigma PEs closer: the sign-flip test of the change at sigma <=
    0.2, or None below 2 units."""
    ch = t[KEYS + ["distance"]].merge(i[KEYS + ["distance"]], on=KEYS, suffixes=("", "_init"))
    ch = ch[ch["sigma"].isin(SMALL_SIGMAS)]
    if len(ch) < 2:
        return None
    mean, p = sign_flip_test(ch["distance"] - ch["distance_init"])
    outcome = "open" if p >= ALPHA else "supports" if mean < 0 else "contradicts"
    return Test("training brings small-sigma PEs closer", outcome,
                f"σ ≤ 0.2: distance {ch['distance_init'].mean():.2f} at initialisation → "
                f"{ch['distance'].mean():.2f} trained (change {mean:+.3f} over {len(ch)} models, "
                f"sign-flip {p_text(p)})", 2 / 2 ** len(ch), QUOTES[2])


def distances(x: Inputs) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The learnable PEs' distances to 2d-fixed after training and at initialisation (rows
    with a sigma and a distance; None where not measured)."""
    return tuple(d.dropna(subset=["sigma", "distance"]) if have(d) else None
                 for d in (x.procrustes, x.procrustes_init))


def sigma_rho(d: pd.DataFrame | None) -> dict | None:
    """Spearman of the per-sigma mean distance with sigma (Fig. 2E read as an ordering over
    sigma); None below 3 sigmas."""
    if d is None or d["sigma"].nunique() < 3:
        return None
    return rank_correlation(d.assign(_s=d["sigma"]), "distance", "_s")


def checks(x: Inputs, rho: dict | None, rho0: dict | None) -> list[Check]:
    """The paper's own analysis: Fig. 2E read as an ordering of the per-sigma mean distance
    over sigma, and Fig. 2F's Spearman of the per-sigma mean distance with the per-sigma mean
    accuracy (``rho``, ``rho0`` at initialisation); the first version's "via the feature
    learning regime" credits training, so its ordering is read at initialisation too."""
    t, i = distances(x)
    r, r0 = sigma_rho(t), sigma_rho(i)
    if r is None:
        return [Check(q, "", "fewer than three stored sigmas", "not testable yet")
                for q in QUOTES[:3]]
    init = (f"; at initialisation ρ = {r0['rho']:+.2f} ({p_text(r0['pvalue'])})" if r0
            else "")
    norm = ""
    if "distance_normalized" in t and t["sigma"].nunique() >= 2:
        nt = ev.trend_row(t["sigma"], t["distance_normalized"]).iloc[0]
        norm = (f"; the distance of PEs scaled to unit norm first (ours): Kendall "
                f"τ = {nt['statistic']:+.2f} over σ ({p_text(nt['p_perm'])}), so the raw "
                "distance's order is that of the PEs' norms")
    order = Check(QUOTES[0], "Fig. 2E: the distance grows with σ (no number in the text)",
                  rho_text(r, "distance against σ:", x.epoch) + init + norm,
                  result_of_contrast(r["rho"], r["pvalue"], +1))
    tracks = Check(QUOTES[1], "ρ = −0.98, p < 0.0001 (Fig. 2F, over σ)",
                   rho_text(rho, "distance against accuracy:", x.epoch)
                   + (f"; at initialisation ρ = {rho0['rho']:+.2f}" if rho0 else ""),
                   result_of_contrast(rho["rho"], rho["pvalue"], -1) if rho else
                   "not testable yet")
    regime = Check(QUOTES[2], "ρ = −0.977 (Fig. 10C of the first version), "
                   "by feature learning",
                   rho_text(rho, "distance against accuracy:", x.epoch)
                   + (f", at initialisation ρ = {rho0['rho']:+.2f}" if rho0 else "")
                   + "; " + rho_text(r, "distance against σ:", x.epoch) + init,
                   result_of_contrast(rho["rho"], rho["pvalue"], -1) if rho else
                   "not testable yet",
                   *explanation_of_ordering(r["rho"], r["pvalue"], +1,
                                            r0["rho"] if r0 else None,
                                            r0["pvalue"] if r0 else None))
    return [order, tracks, regime]


def judge(x: Inputs) -> Verdict:
    """The verdict (module docstring); ``numbers``: ``by_sigma`` (mean distance per sigma,
    trained and at init), ``rho`` and ``rho_init``, ``trend`` and ``trend_init``."""
    if not have(x.procrustes) or x.procrustes["sigma"].nunique() < 2:
        return untestable(CLAIM, LINE, WHERE, "fewer than two stored sigmas", quotes=QUOTES)
    t = x.procrustes.dropna(subset=["sigma", "distance"])
    i = x.procrustes_init.dropna(subset=["sigma", "distance"]) if have(x.procrustes_init) \
        else None
    tr = ev.trend_row(t["sigma"], t["distance"]).iloc[0]
    tr0 = ev.trend_row(i["sigma"], i["distance"]).iloc[0] if i is not None \
        and i["sigma"].nunique() >= 2 else None
    rho, rho0 = _rho(t, x.final), _rho(i, x.final)
    tests = [trend(tr, "rises", "distance rises over sigma", "the trained distance over σ",
                   QUOTES[0], tr0),
             correlation(rho, rho0, -1, "distance tracks accuracy",
                         "Spearman ρ(distance, accuracy)", QUOTES[1]),
             _change(t, i) if i is not None else None]
    tests = [u for u in tests if u is not None]
    by = t.groupby("sigma")["distance"].mean().rename("trained").to_frame()
    text = "; ".join(u.text for u in tests)
    if "distance_normalized" in t:
        nt = ev.trend_row(t["sigma"], t["distance_normalized"]).iloc[0]
        text += f"; shown, not tested: the normalised distance over σ, {nt['why']}"
    if i is not None:
        by["init"] = i.groupby("sigma")["distance"].mean()
        text += "; per σ, trained (init): " + ", ".join(
            f"{s:g}: {r.trained:.1f} ({r.init:.1f})" for s, r in by.iterrows())
    verdict, part = weigh(tests)
    return Verdict(CLAIM, LINE, WHERE, verdict, x.epoch, part, tests, text,
                   {"by_sigma": by, "rho": rho, "rho_init": rho0, "trend": tr,
                    "trend_init": tr0}, QUOTES, checks(x, rho, rho0))
