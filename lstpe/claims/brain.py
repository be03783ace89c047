"""Figs. 3-4: learnable PEs initialised small recover the brain's network modularity (masked
prediction on HCP resting-state data), the paper's sentences :data:`QUOTES` (the later version
only). The book trains a preview of it on the real data; the claim needs the paper-scale
runs."""

from __future__ import annotations

from lstpe.claims.inputs import Inputs
from lstpe.claims.paper import Quote, label
from lstpe.claims.verdicts import Check, Verdict, untestable

CLAIM = "brain"
LINE = ("learnable PEs recover the brain's network modularity when initialised small "
        f"({label('brain')})")
QUOTES: tuple[Quote, ...] = (
    Quote("We found that the modularity of small-norm initialized PEs (`learn-0.1` and "
          "`learn-0.2`) had the highest overall network modularity and segregation relative to "
          "other learnable PEs.", "v2", "§3.4, Fig. 4C,D"),
    Quote("Models that had learnable PEs initialized from small-norm distributions learned a "
          "modular PE organization that was consistent with prior neuroscience studies", "v2",
          "Fig. 4C"),
    Quote("Notably, learnable PEs initialized with small norms (`learn-0.1` and `learn-0.2`) "
          "converged to the lowest MSE for both training and validation datasets.", "v2",
          "Fig. 3D"),
)
"""The paper's sentences this claim will test."""
WHERE = "10_brain.ipynb"


def judge(x: Inputs) -> Verdict:
    """``not testable yet`` without paper-scale brain runs."""
    why = ("preview runs only: they show the analysis on HCP surrogates, not the claim"
           if not x.brain_runs else
           f"{x.brain_runs} paper-scale runs stored; their evidence is not scored here yet")
    checks = [Check(QUOTES[2], "learn-0.1 and learn-0.2 the lowest MSE, training and "
                    "validation (Fig. 3D)", why, "not testable yet",
                    what="small σ predicts masked brain activity best"),
              Check(QUOTES[0], "learn-0.1 and learn-0.2 the most modular (Fig. 4C,D)", why,
                    "not testable yet")]
    return untestable(CLAIM, LINE, WHERE, why, quotes=QUOTES, checks=checks)
