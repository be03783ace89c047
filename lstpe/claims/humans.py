"""Fig. 6 (first version): models and people find the same puzzles hard, learn-0.2 most.

Per PE, the Spearman correlation over the 108 validation puzzles of its accuracy (mean over
its seeds) with people's (:func:`lstpe.analysis.humans.human_similarity`). One test per PE
is run, so learn-0.2's correlation is read with Holm's adjustment over all of them (the page
shows every PE: reading the one that passes out of 13 without it would overstate it). Tests:
learn-0.2's correlation is positive (Holm p < 0.05); no other PE's is higher. Where
learn-0.2's correlation is undefined (its per-puzzle accuracy, or people's, is constant: every
seed solves every puzzle), the claim is not testable, and the verdict says why.
"""

from __future__ import annotations

import pandas as pd

from lstpe.analysis.evidence import ALPHA
from lstpe.analysis.seed_stats import holm, p_text
from lstpe.claims.inputs import Inputs, have
from lstpe.claims.verdicts import Test, Verdict, untestable, weigh

CLAIM = "humans"
LINE = "models and people find the same puzzles hard, learn-0.2 most (Fig. 6)"
WHERE = "09_models_and_humans.ipynb"
PAPER_RHO = 0.45
"""The paper's correlation for learn-0.2."""


def _undefined_why(r: pd.Series) -> str:
    """Why a PE's row of the similarity table (``spearman`` NaN) has no correlation: its
    ``spearman_note``, else what ``model_accuracy`` shows."""
    if isinstance(r.get("spearman_note"), str) and r["spearman_note"]:
        return r["spearman_note"]
    acc = r.get("model_accuracy", float("nan"))
    if acc in (0.0, 1.0):
        return (f"constant per-puzzle accuracy ({acc:.3f} on every puzzle): rank correlation "
                "undefined")
    return "rank correlation undefined: a constant per-puzzle accuracy (its own or people's)"


def judge(x: Inputs, best: str = "learn-0.2") -> Verdict:
    """The verdict (module docstring); ``numbers``: ``table`` (per PE rho, p, Holm p)."""
    if not have(x.similarity) or best not in set(x.similarity["pe"]):
        return untestable(CLAIM, LINE, WHERE, f"no stored {best} unit")
    mine = x.similarity[x.similarity["pe"] == best].iloc[0]
    if pd.isna(mine["spearman"]):
        return untestable(CLAIM, LINE, WHERE, f"{best} against people: "
                          f"{_undefined_why(mine)}")
    s = x.similarity.dropna(subset=["spearman"])
    s = s.assign(p_holm=holm(s["spearman_p"].to_numpy(float))).reset_index(drop=True)
    r = s.set_index("pe").loc[best]
    top = s.loc[s["spearman"].idxmax()]
    pos = r["spearman"] > 0 and r["p_holm"] < ALPHA
    tests = [Test(f"{best} follows people", "supports" if pos else "open",
                  f"{best} ρ = {r['spearman']:.2f} ({p_text(r['spearman_p'])}, Holm over "
                  f"{len(s)} PEs {p_text(r['p_holm'])}; the paper: {PAPER_RHO})"),
             Test(f"{best} closest to people", "supports" if top["pe"] == best else "open",
                  f"highest: {top['pe']} ρ = {top['spearman']:.2f}")]
    n_pass = int((s["p_holm"] < ALPHA).sum())
    verdict, part = weigh(tests)
    text = "; ".join(t.text for t in tests) + (
        f"; {n_pass} of {len(s)} PEs correlate with people after Holm")
    return Verdict(CLAIM, LINE, WHERE, verdict, x.epoch, part, tests, text, {"table": s})
