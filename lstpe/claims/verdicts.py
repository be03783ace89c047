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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lstpe.analysis.evidence import ALPHA
from lstpe.analysis.seed_stats import p_text

__all__ = ["SCORE_VERDICTS", "OUTCOMES", "Test", "Verdict", "weigh", "untestable"]

SCORE_VERDICTS: tuple[str, ...] = ("shown", "partly shown", "contradicted", "not shown",
                             "not testable yet")
"""Every verdict word, in the order the scorecard counts them."""

OUTCOMES: tuple[str, ...] = ("supports", "contradicts", "open")
"""What one test says of its claim."""


@dataclass(frozen=True)
class Test:
    """One test of a claim: ``name`` (what it compares), ``outcome`` (:data:`OUTCOMES`),
    ``text`` (its numbers, as the page quotes them) and ``floor``: the smallest p it can give
    at its n (NaN where none bounds it, e.g. a t-test)."""

    name: str
    outcome: str
    text: str
    floor: float = math.nan

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"test {self.name!r}: outcome {self.outcome!r} is not one of "
                             f"{', '.join(OUTCOMES)}")


@dataclass
class Verdict:
    """A claim's verdict: ``claim`` (its id), ``line`` (the paper's claim in one line),
    ``where`` (the chapter with its evidence), ``verdict`` (:data:`SCORE_VERDICTS`), ``at`` (the
    epoch the units reached; 0: none), ``part`` (for ``partly shown``: the tests that hold),
    ``tests``, ``evidence`` (the numbers in one paragraph) and ``numbers`` (named values a page
    glues into its own sentences)."""

    claim: str
    line: str
    where: str
    verdict: str
    at: int = 0
    part: str = ""
    tests: list[Test] = field(default_factory=list)
    evidence: str = ""
    numbers: dict[str, Any] = field(default_factory=dict)

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
                               ("shown", "partly shown", "contradicted") else "")
        if self.verdict == "partly shown" and self.part:
            return f"{head} ({self.part}" + (
                f"; contradicted: {', '.join(against)}" if against else "") + ")"
        return head

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


def untestable(claim: str, line: str, where: str, why: str, until: int = 0) -> Verdict:
    """A ``not testable yet`` verdict saying ``why`` (and, with ``until``, the epoch the claim
    is read at)."""
    text = why + (f" (the paper reads this claim at epoch {until})" if until else "")
    return Verdict(claim, line, where, "not testable yet", evidence=text)
