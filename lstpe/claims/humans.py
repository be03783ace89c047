"""Fig. 6 (first version): models and people find the same puzzles hard, learn-0.2 most.

Per PE, the Spearman correlation over the 108 validation puzzles of its accuracy (mean over
its seeds) with people's (:func:`lstpe.analysis.humans.human_similarity`). One test per PE
is run, so learn-0.2's correlation is read with Holm's adjustment over all of them (the page
shows every PE: reading the one that passes out of 13 without it would overstate it). Tests:
learn-0.2's correlation is positive (Holm p < 0.05); no other PE's is higher.
"""

from __future__ import annotations

from lstpe.analysis.evidence import ALPHA
from lstpe.analysis.seed_stats import holm, p_text
from lstpe.claims.inputs import Inputs, have
from lstpe.claims.verdicts import Test, Verdict, untestable, weigh

CLAIM = "humans"
LINE = "models and people find the same puzzles hard, learn-0.2 most (Fig. 6)"
WHERE = "09_models_and_humans.ipynb"
PAPER_RHO = 0.45
"""The paper's correlation for learn-0.2."""


def judge(x: Inputs, best: str = "learn-0.2") -> Verdict:
    """The verdict (module docstring); ``numbers``: ``table`` (per PE rho, p, Holm p)."""
    s = x.similarity.dropna(subset=["spearman"]) if have(x.similarity) else None
    if s is None or best not in set(s["pe"]):
        return untestable(CLAIM, LINE, WHERE, f"no stored {best} unit")
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
