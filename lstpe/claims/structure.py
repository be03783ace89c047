"""Fig. 3, read with our own measure: small-sigma PEs learn the task's 2-D structure.

Per small-sigma unit (block 0), whether the learned update dPE and the final PE score 2-D
structure above their permutation null (:func:`lstpe.analysis.pe_structure.pe_structure`
grid score, p < 0.05). Two tests: the learned part is 2-D in every small-sigma unit, and the
final PE is (the paper's claim is about the trained PE). The long units' last epoch is quoted
beside them (the verdict stays with the stored units, at every seed).
"""

from __future__ import annotations

from lstpe.analysis.evidence import ALPHA
from lstpe.claims._common import SMALL_SIGMAS
from lstpe.claims.inputs import Inputs, have
from lstpe.claims.verdicts import Test, Verdict, untestable, weigh

CLAIM = "structure"
LINE = "small-sigma PEs learn the task's 2-D structure (Fig. 3; our grid score)"
WHERE = "07_inside_the_models.ipynb"


def _count(ok: int, n: int, name: str, text: str) -> Test:
    return Test(name, "supports" if ok == n else "open" if ok else "contradicts", text)


def judge(x: Inputs, block: int = 0) -> Verdict:
    """The verdict (module docstring) of ``block``."""
    s = x.structure
    t = s[(s["block"] == block) & s["sigma"].isin(SMALL_SIGMAS)] if have(s) else None
    if t is None or t.empty:
        return untestable(CLAIM, LINE, WHERE, "no stored learnable unit at σ ≤ 0.2")
    n = len(t)
    dpe, fin = int((t["p_dpe"] < ALPHA).sum()), int((t["p_final"] < ALPHA).sum())
    tests = [_count(dpe, n, "the learned part is 2-D",
                    f"σ ≤ 0.2, block {block}: the learned part dPE is 2-D in {dpe} of {n} units "
                    f"(grid score {t['score_dpe'].min():.2f} to {t['score_dpe'].max():.2f})"),
             _count(fin, n, "the trained PE is 2-D",
                    f"the final PE in {fin} of {n} (its init carries "
                    f"{t['init_share'].min():.0%} to {t['init_share'].max():.0%} of it)")]
    text = "; ".join(t_.text for t_ in tests)
    big = s[(s["block"] == block) & (s["sigma"] >= 0.5)]
    if len(big):
        text += (f"; σ ≥ 0.5: dPE 2-D in {int((big['p_dpe'] < ALPHA).sum())} of {len(big)} "
                 f"units")
    long = x.mechanism_long
    if have(long):
        text += (f"; long units (seed {', '.join(str(int(v)) for v in sorted(set(long['seed'])))}"
                 f") at epoch {int(long['epoch'].min())}: the init still carries "
                 f"{long['init_share'].min():.0%} to {long['init_share'].max():.0%} of the PE, "
                 f"the final PE is 2-D in {int((long['p_final'] < ALPHA).sum())} of "
                 f"{len(long)}")
    verdict, part = weigh(tests)
    return Verdict(CLAIM, LINE, WHERE, verdict, x.epoch, part, tests, text,
                   {"dpe": dpe, "final": fin, "n": n})
