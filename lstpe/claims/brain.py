"""Fig. 4C: learnable PEs initialised small recover the brain's network modularity
(masked prediction on HCP connectivity). The book trains a preview of it on the real data;
the claim needs the paper-scale runs."""

from __future__ import annotations

from lstpe.claims.inputs import Inputs
from lstpe.claims.verdicts import Verdict, untestable

CLAIM = "brain"
LINE = "learnable PEs recover the brain's network modularity when initialised small (Fig. 4C)"
WHERE = "10_brain.ipynb"


def judge(x: Inputs) -> Verdict:
    """``not testable yet`` without paper-scale brain runs."""
    if not x.brain_runs:
        return untestable(CLAIM, LINE, WHERE, "preview runs only: they show the analysis on "
                          "real HCP data, not the claim")
    return untestable(CLAIM, LINE, WHERE, f"{x.brain_runs} paper-scale runs stored; their "
                      "evidence is not scored here yet")
