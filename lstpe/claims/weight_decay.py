"""Tables 5-6: with weight decay (AdamW, 0.1) the learnable PEs generalise better, except at
particularly high sigma (Table 5: 0.98 or more up to sigma 1.6, then falling to 0.59 at sigma
2), and learn-0.2 is virtually indistinguishable from 2d-fixed (Table 6: 0.994 and 0.997).

The paper's sentences are :data:`QUOTES`. Read at 4000 epochs: AdamW's decoupled decay shrinks
the initial PE by a factor ``(1 - lr wd)^steps`` (0.53 of it at epoch 1000, 0.08 at 4000 at
the paper's lr and decay), so its effect forms late. Testable once AdamW units of Tables 5-6
are stored; the long witness (ours: AdamW and Adam long units of one seed per sigma) is quoted
beside the verdict and tests nothing.
"""

from __future__ import annotations

from lstpe.claims.inputs import Inputs, have
from lstpe.claims.paper import Quote, label
from lstpe.claims.verdicts import Check, Verdict, untestable

CLAIM = "weight_decay"
LINE = ("with weight decay the learnable PEs generalise better except at particularly high "
        "sigma: 0.98 or more up to sigma 1.6, then falling to 0.59 at sigma 2; learn-0.2 "
        f"matches 2d-fixed ({label('weight_decay')})")
QUOTES: tuple[Quote, ...] = (
    Quote("In general, weight decay improves the generalization of learnable PE models across "
          "initializations, except for particularly high σ .", "v2", "Fig. A6"),
    Quote("Further, when applying L2 regularization (via weight decay), the generalization "
          "performance of learnable PEs was virtually indistinguishable from the ground truth "
          "`2d-fixed` PE (both models generalized with 99% accuracy; Table A6; Fig. A6).",
          "v2", "§3.2, Table A6"),
    Quote("Nevertheless, the general pattern remains for learnable PE models: the smaller the "
          "σ , the greater the generalization.", "v2", "Fig. A6, Table A5"),
    Quote("Further, when applying L2 regularization (via weight decay), the generalization "
          "performance of learnable PEs was virtually indistinguishable from the ground truth "
          "2d-fixed PE (both models generalized with 99% accuracy; Appendix Fig. 8, Table 6).",
          "v1", "§3.2, Table 6"),
)
"""The paper's sentences this claim will test, from each version."""
WHERE = "08_robustness.ipynb"


def witness_line(w: object) -> str:
    """What the long witness shows at its last AdamW epoch at the largest sigma; where it
    holds no AdamW row there, or no Adam twin at that epoch, it says so (nothing to quote)."""
    if not have(w):
        return "no AdamW long run saved"
    top = w["sigma"].max()
    w = w[w["sigma"] == top]
    adamw = w.loc[w["optimizer"] == "adamw", "epoch"]
    if adamw.empty:
        return f"the long AdamW run holds no row at σ = {top:g} (only Adam's): nothing to compare"
    at = int(adamw.max())
    w = w[w["epoch"] == at].set_index("optimizer")
    if "adam" not in w.index:
        return (f"the long AdamW run at σ = {top:g} reached epoch {at}, where it has "
                "no Adam twin to compare with")
    return (f"the long AdamW and Adam runs (ours, one seed) at epoch {at}, "
            f"σ = {w['sigma'].iloc[0]:g}: "
            f"AdamW {w.loc['adamw', 'accuracy']:.3f} against Adam "
            f"{w.loc['adam', 'accuracy']:.3f}, its PE shrunk to "
            f"{w.loc['adamw', 'norm_ratio']:.2f} of its initial norm")


def judge(x: Inputs) -> Verdict:
    """``not testable yet`` until Tables 5-6's units are stored; the witness in the text."""
    n = x.optimizer_units.get("tables56", 0)
    why = (f"{n} AdamW unit{'s' if n != 1 else ''} of Tables 5-6 stored, too few for the "
           "paper's contrasts" if n else "no AdamW model of Tables 5-6 stored")
    ours = f"{why}; {witness_line(x.witness)}"
    checks = [Check(QUOTES[0], "Table 5: 0.98 or more up to σ = 1.6, then down to 0.59 at σ = 2 "
                    "(AdamW 0.1, 4000 epochs)", ours, "not testable yet"),
              Check(QUOTES[1], "Table 6: learn-0.2 0.994 against 2d-fixed 0.997", ours,
                    "not testable yet")]
    return untestable(CLAIM, LINE, WHERE, ours, until=4000, quotes=QUOTES, checks=checks)
