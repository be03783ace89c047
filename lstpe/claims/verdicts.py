"""One verdict vocabulary for every claim, and the one rule that turns tests into a verdict.

A claim of the paper is checked by a few :class:`Test`\\ s, each of which ``supports`` the
claim, ``contradicts`` it (a significant effect the other way, or a difference where the paper
finds none) or is ``open`` (neither shown at this n). :func:`weigh` weighs them:

* ``shown``: every test supports the claim;
* ``partly shown``: some support it, others are open or contradict it (``part`` names the
  part that holds);
* ``contradicted``: at least one test contradicts it and none supports it;
* ``not shown``: every test is open at today's n;
* ``not testable yet``: no stored unit of the recipe the claim needs (``until`` names the
  epoch the claim is read at, where the units exist but have not reached it), or every test
  is open and none could be anything else at its n: the smallest p it can give (its
  ``floor``; e.g. 1 for one seed against one under the exact test) is not below alpha. Its
  label then reads ``not testable at this n`` with that p: no test could have found the
  effect, so ``not shown`` (looked for and not found) would say more than the seeds can.

Each verdict carries ``at``: the epoch of the units it rests on, so that "contradicted" reads
"contradicted at epoch 200" and never as a verdict on the paper's 4000-epoch models.

Two rules decide what a test's numbers say, each written once here:

* **No difference** (:func:`no_difference`). Where the paper finds no difference (learn-0.2
  against 2d-fixed: "we did not find a robust statistical difference"), the test reports both
  the equivalence test (TOST within a stated margin) and the difference test, in one sentence.
  Equivalence within the margin supports the claim, whether or not a difference is also shown:
  a difference smaller than the margin is within what "no difference" can mean at any n (the
  paper's own test, at its SD of 0.073, could not have found a gap below the margin), and the
  test's ``caveat`` carries it into the scorecard's label ("with a difference of −0.030 inside
  ±0.05"). A difference shown without equivalence contradicts it; neither shown: open.
* **Learned or inherited** (:func:`ordering`). A measure of what a model learned (attention
  cosine, Procrustes distance, a correlation of either with accuracy) is read after training
  and at initialisation. A trained ordering counts as support only where the initialisation
  did not already show it (the same direction at alpha); where it did, the test is open and
  marked ``inherited``: its text and the label say "inherited from the initialisation".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lstpe.claims.paper import Quote
from lstpe.stats.seed_stats import p_text
from lstpe.stats.seed_tests import ALPHA

__all__ = ["SCORE_VERDICTS", "OUTCOMES", "INHERITED", "Test", "Verdict", "weigh", "untestable",
           "no_difference", "ordering"]

SCORE_VERDICTS: tuple[str, ...] = ("shown", "partly shown", "contradicted", "not shown",
                             "not testable yet")
"""Every verdict word, in the order the scorecard counts them."""

OUTCOMES: tuple[str, ...] = ("supports", "contradicts", "open")
"""What one test says of its claim."""

INHERITED = "inherited from the initialisation"
"""What a verdict says of an ordering the initialisation already showed (:func:`ordering`)."""


@dataclass(frozen=True)
class Test:
    """One test of a claim: ``name`` (what it compares), ``outcome`` (:data:`OUTCOMES`),
    ``text`` (its numbers, as the page quotes them), ``floor``: the smallest p it can give
    at its n (NaN where none bounds it, e.g. a t-test), ``quote``: the paper's sentence it
    tests (:class:`~lstpe.claims.paper.Quote`), ``inherited``: an ordering the initialisation
    already showed (:func:`ordering`), ``caveat``: what the label adds to a supporting test
    (:func:`no_difference`)."""

    name: str
    outcome: str
    text: str
    floor: float = math.nan
    quote: Quote | None = None
    inherited: bool = False
    caveat: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"test {self.name!r}: outcome {self.outcome!r} is not one of "
                             f"{', '.join(OUTCOMES)}")


@dataclass
class Verdict:
    """A claim's verdict: ``claim`` (its id), ``line`` (the paper's claim in one line),
    ``where`` (the chapter with its evidence), ``verdict`` (:data:`SCORE_VERDICTS`), ``at`` (the
    epoch the units reached; 0: none), ``part`` (for ``partly shown``: the tests that hold),
    ``tests``, ``evidence`` (the numbers in one paragraph), ``numbers`` (named values a page
    glues into its own sentences) and ``quotes`` (the paper's sentences the claim tests)."""

    claim: str
    line: str
    where: str
    verdict: str
    at: int = 0
    part: str = ""
    tests: list[Test] = field(default_factory=list)
    evidence: str = ""
    numbers: dict[str, Any] = field(default_factory=dict)
    quotes: tuple[Quote, ...] = ()

    @property
    def label(self) -> str:
        """The verdict as the scorecard prints it: ``contradicted at epoch 200``, ``partly
        shown at epoch 200 (above 6 of 6 fixed PEs; contradicted: no difference from
        2d-fixed)``, ``not testable yet``, ``not testable at this n (no test can reach α =
        0.05 at these n: the smallest attainable p = 1.000)``."""
        if self.verdict == "not testable yet" and self.part:
            return f"not testable at this n ({self.part})"
        against = [t.name for t in self.tests if t.outcome == "contradicts"]
        head = self.verdict + (f" at epoch {self.at}" if self.at and self.verdict in
                               ("shown", "partly shown", "contradicted", "not shown") else "")
        extra = [f"{t.name}, {t.caveat}" for t in self.tests
                 if t.outcome == "supports" and t.caveat]
        if against:
            extra.append(f"contradicted: {', '.join(against)}")
        inherited = [t.name for t in self.tests if t.inherited]
        if inherited:
            extra.append(f"{INHERITED}: {', '.join(inherited)}")
        if self.verdict == "partly shown" and self.part:
            extra.insert(0, self.part)
        return head + (f" ({'; '.join(extra)})" if extra else "")

    def row(self) -> dict[str, Any]:
        """The scorecard's row: claim, verdict, label, at, part, evidence, where, id."""
        return {"claim": self.line, "verdict": self.verdict, "label": self.label,
                "at": self.at, "part": self.part, "evidence": self.evidence,
                "where": self.where, "id": self.claim}


def weigh(tests: Sequence[Test]) -> tuple[str, str]:
    """The verdict of ``tests`` (module docstring) and the part that holds (the names of the
    supporting tests where some do not).

    >>> weigh([Test("a", "supports", ""), Test("b", "contradicts", "")])
    ('partly shown', 'a')
    >>> weigh([Test("a", "open", ""), Test("b", "contradicts", "")])
    ('contradicted', '')
    """
    if not tests:
        return "not testable yet", ""
    pro = [t.name for t in tests if t.outcome == "supports"]
    con = [t for t in tests if t.outcome == "contradicts"]
    if len(pro) == len(tests):
        return "shown", ""
    if pro:
        return "partly shown", "; ".join(pro)
    if con:
        return "contradicted", ""
    floors = [t.floor for t in tests]
    if all(f >= ALPHA for f in floors):  # NaN (unbounded) is False: a test could have shown it
        return "not testable yet", (f"no test can reach α = {ALPHA:g} at these n: the "
                                    f"smallest attainable {p_text(min(floors))}")
    return "not shown", ""


def no_difference(diff: float, p_diff: float, p_equiv: float, margin: float
                  ) -> tuple[str, str, str]:
    """The one rule for a claim of no difference (module docstring): ``(outcome, clause,
    caveat)`` from the difference ``diff`` with its test's ``p_diff`` and the TOST's
    ``p_equiv`` within ``±margin``. ``clause`` says both results in words a reader can check
    against the numbers beside it; ``caveat`` (supporting tests with a difference shown) is
    what the label adds.

    >>> no_difference(-0.03, 0.008, 0.0004, 0.05)[0::2]
    ('supports', 'with a difference of -0.030 inside ±0.05')
    >>> no_difference(-0.2, 0.001, 0.9, 0.05)[0]
    'contradicts'
    """
    equivalent = bool(p_equiv < ALPHA)
    different = bool(p_diff < ALPHA)
    eq = (f"equivalent within ±{margin:g} (TOST {p_text(p_equiv)})" if equivalent else
          f"not shown equivalent within ±{margin:g} (TOST {p_text(p_equiv)})")
    df = (f"different from 0 ({p_text(p_diff)})" if different else
          f"no difference shown ({p_text(p_diff)})")
    clause = f"{eq} and {df}" if equivalent == different else f"{eq}, {df}"
    if equivalent:
        caveat = f"with a difference of {diff:+.3f} inside ±{margin:g}" if different else ""
        return "supports", clause, caveat
    return ("contradicts" if different else "open"), clause, ""


def ordering(stat: float, p: float, want: int, stat0: float | None = None,
             p0: float | None = None) -> tuple[str, bool]:
    """The one rule for an ordering a model may have learned (module docstring): the trained
    statistic ``stat`` (a Kendall tau or a Spearman rho) with its ``p``, the claim's sign
    ``want`` (+1 or -1) and the same statistic at initialisation (``stat0``, ``p0``; None:
    not measured). Returns ``(outcome, inherited)``: the trained ordering in the claim's
    direction supports it only where the initialisation did not already show it; where no
    initialisation was measured nothing says training made it (open).

    >>> ordering(-0.7, 0.001, -1, -0.9, 0.001)
    ('open', True)
    >>> ordering(-0.7, 0.001, -1, 0.05, 0.6)
    ('supports', False)
    """
    if not (p < ALPHA) or math.isnan(stat):
        return "open", False
    if (stat > 0) != (want > 0):
        return "contradicts", False
    if stat0 is None or p0 is None:
        return "open", False
    if p0 < ALPHA and (stat0 > 0) == (want > 0):
        return "open", True
    return "supports", False


def untestable(claim: str, line: str, where: str, why: str, until: int = 0,
               quotes: tuple[Quote, ...] = (), numbers: dict[str, Any] | None = None
               ) -> Verdict:
    """A ``not testable yet`` verdict saying ``why`` (and, with ``until``, the epoch the claim
    is read at), with the claim's ``quotes`` and the ``numbers`` it read (a page shows them
    also when nothing could be tested)."""
    text = why + (f" (the paper reads this claim at epoch {until})" if until else "")
    return Verdict(claim, line, where, "not testable yet", evidence=text,
                   numbers=dict(numbers or {}), quotes=quotes)
