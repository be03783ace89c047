"""The vocabulary of every verdict, written once: the paper's own analysis judged in two words
(:class:`Check`: ``result`` and ``explanation``), then our analyses weighed into one.

**The paper's own analysis first.** Each sentence a claim tests is recomputed with the
paper's own measure, aggregation and test at our epoch and n (:class:`Check`), and judged
twice:

* ``result`` (:data:`RESULTS`): does the paper's number or ordering reproduce?
  ``reproduced`` (the same direction at alpha, or, for a sentence of no difference, no
  difference found either: the paper's failure to reject, repeated), ``same direction,
  smaller`` (the sign holds, alpha does not), ``not reproduced`` (the other sign, or a
  difference where the paper found none), ``not testable yet`` (no model of its recipe, or
  not at the epoch its number needs);
* ``explanation`` (:data:`EXPLANATIONS`), where the sentence gives one ("by training", "via
  the feature-learning regime", "depends on initialisation", "due to Adam"): ``supported``,
  ``not supported`` (with :data:`AT_INIT` as the reason when the ordering is there before
  any training step), ``not testable yet``.

The rules are :func:`result_of_contrast`, :func:`result_of_no_difference`,
:func:`result_of_order` and :func:`explanation_of_ordering`.

**Our analyses after, labelled as ours.** They never decide the paper's row.

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
  against 2d-fixed: "we did not find a robust statistical difference"), its sentence is a
  failure to reject, and the paper's row is judged as such (:func:`result_of_no_difference`).
  Our analysis adds the equivalence test (TOST within :data:`NO_DIFFERENCE_MARGIN`, ours, no
  wider than the smallest gap the paper calls significant) beside the difference test: a
  difference shown contradicts the sentence, equivalence without a difference supports it,
  neither is open.
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
from lstpe.stats.seed_tests import ALPHA, EQUIVALENCE_MARGIN

__all__ = ["RESULTS", "EXPLANATIONS", "AT_INIT", "Check", "result_of_contrast",
           "result_of_no_difference", "result_of_order", "explanation_of_ordering",
           "SCORE_VERDICTS", "OUTCOMES", "INHERITED", "NO_DIFFERENCE_MARGIN", "Test", "Verdict",
           "weigh", "untestable", "no_difference", "ordering"]

RESULTS: tuple[str, ...] = ("reproduced", "same direction, smaller", "not reproduced",
                             "not testable yet")
"""Whether the paper's number or ordering reproduces at our epoch and n (module docstring)."""

EXPLANATIONS: tuple[str, ...] = ("supported", "not supported", "not testable yet")
"""Whether the paper's explanation of a result holds (module docstring)."""

AT_INIT = "already present at initialisation"
"""Why an explanation that credits training is not supported when the ordering is there
before the first step."""


@dataclass(frozen=True)
class Check:
    """The paper's own analysis of one of its sentences, recomputed on our models.

    ``quote`` (the sentence, verbatim), ``paper`` (the paper's number, as it gives it),
    ``ours`` (the same statistic on our models, with epoch and n), ``result``
    (:data:`RESULTS`), ``explanation`` (:data:`EXPLANATIONS`; empty where the sentence
    gives none), ``why`` (the reason for the explanation word, e.g. :data:`AT_INIT`), ``what``
    (the sentence's point in a few words, for a summary; empty: the claim's name serves)."""

    quote: Quote
    paper: str
    ours: str
    result: str
    explanation: str = ""
    why: str = ""
    what: str = ""

    def __post_init__(self) -> None:
        if self.result not in RESULTS:
            raise ValueError(f"check of {self.quote.text[:40]!r}: result {self.result!r} is "
                             f"not one of {', '.join(RESULTS)}")
        if self.explanation and self.explanation not in EXPLANATIONS:
            raise ValueError(f"check of {self.quote.text[:40]!r}: explanation "
                             f"{self.explanation!r} is not one of {', '.join(EXPLANATIONS)}")

    @property
    def explained(self) -> str:
        """The explanation as the scorecard prints it: ``not supported: already present at
        initialisation``; ``none given`` where the sentence offers no explanation."""
        if not self.explanation:
            return "none given"
        return f"{self.explanation}: {self.why}" if self.why else self.explanation


def result_of_contrast(diff: float, p: float, want: int) -> str:
    """The result of a difference the paper reports with the sign ``want`` (+1 or -1), from
    ours ``diff`` and the p of the paper's test on our models.

    >>> result_of_contrast(0.03, 0.01, +1), result_of_contrast(0.03, 0.2, +1)
    ('reproduced', 'same direction, smaller')
    >>> result_of_contrast(-0.03, 0.01, +1)
    'not reproduced'
    """
    if not (math.isfinite(diff) and diff != 0):
        return "not reproduced" if math.isfinite(diff) else "not testable yet"
    if (diff > 0) != (want > 0):
        return "not reproduced"
    return "reproduced" if p < ALPHA else "same direction, smaller"


def result_of_no_difference(p: float) -> str:
    """The result of a sentence of no difference (the paper's test failed to reject): the
    same test on our models failing to reject reproduces it; a difference found does not.

    >>> result_of_no_difference(0.35), result_of_no_difference(0.008)
    ('reproduced', 'not reproduced')
    """
    if not math.isfinite(p):
        return "not testable yet"
    return "reproduced" if p >= ALPHA else "not reproduced"


def result_of_order(ours: Sequence[str], paper: Sequence[str],
                    p_adjacent: Sequence[float] | None = None) -> str:
    """The result of an ordering the paper reads off its means (``paper``, best first) from
    ours (``ours``, the same names in our order). The same order reproduces it only where
    each neighbouring pair of it is also resolved: ``p_adjacent``, the p (adjusted for the
    family) of each pair of ``paper``'s neighbours in turn, each below alpha; the same order
    with a pair unresolved, or an order that agrees in more pairs than it reverses (Kendall's
    tau between the two > 0), keeps its direction only; else not reproduced.

    >>> result_of_order(["a", "b", "c"], ["a", "b", "c"]), result_of_order("acb", "abc")
    ('reproduced', 'same direction, smaller')
    >>> result_of_order("abc", "abc", [0.01, 0.4])
    'same direction, smaller'
    """
    ours, paper = list(ours), list(paper)
    if sorted(ours) != sorted(paper) or len(paper) < 2:
        return "not testable yet"
    if ours == paper:
        resolved = p_adjacent is None or all(p < ALPHA for p in p_adjacent)
        return "reproduced" if resolved else "same direction, smaller"
    rank = {n: i for i, n in enumerate(ours)}
    pairs = [(a, b) for i, a in enumerate(paper) for b in paper[i + 1:]]
    agree = sum(rank[a] < rank[b] for a, b in pairs)
    return "same direction, smaller" if agree > len(pairs) - agree else "not reproduced"


def explanation_of_ordering(stat: float, p: float, want: int, stat0: float | None,
                            p0: float | None) -> tuple[str, str]:
    """``(explanation, why)`` for a sentence that credits training (or the feature-learning
    regime) with an ordering: the trained statistic ``stat`` (its ``p``, the sign ``want``)
    beside the same statistic at initialisation (``stat0``, ``p0``).

    >>> explanation_of_ordering(-0.7, 0.001, -1, -0.9, 0.001)
    ('not supported', 'already present at initialisation')
    >>> explanation_of_ordering(-0.7, 0.001, -1, 0.1, 0.5)[0]
    'supported'
    """
    if stat0 is None or p0 is None or not math.isfinite(stat0):
        return "not testable yet", "not measured at initialisation"
    if not (p < ALPHA) or (stat > 0) != (want > 0):
        return "not supported", "no such ordering after training"
    if p0 < ALPHA and (stat0 > 0) == (want > 0):
        return "not supported", AT_INIT
    return "supported", "absent at initialisation, made by training"


SCORE_VERDICTS: tuple[str, ...] = ("shown", "partly shown", "contradicted", "not shown",
                             "not testable yet")
"""Every verdict word, in the order the scorecard counts them."""

OUTCOMES: tuple[str, ...] = ("supports", "contradicts", "open")
"""What one test says of its claim."""

NO_DIFFERENCE_MARGIN = EQUIVALENCE_MARGIN
"""Our equivalence margin where the paper finds no difference: the book's one margin
(:data:`lstpe.stats.seed_tests.EQUIVALENCE_MARGIN`, 0.03), below 0.036, the smallest gap the
paper calls significant (learn-0.2 against relative, Table 1: t(13) = 2.51, p = 0.03), so that
"equivalent" never covers a difference the paper itself would call one."""

INHERITED = "inherited from the initialisation"
"""What a verdict says of an ordering the initialisation already showed (:func:`ordering`)."""


@dataclass(frozen=True)
class Test:
    """One test of a claim: ``name`` (what it compares), ``outcome`` (:data:`OUTCOMES`),
    ``text`` (its numbers, as the page quotes them), ``floor``: the smallest p it can give
    at its n (NaN where none bounds it, e.g. a t-test), ``quote``: the paper's sentence it
    tests (:class:`~lstpe.claims.paper.Quote`), ``inherited``: an ordering the initialisation
    already showed (:func:`ordering`), ``caveat``: what the label adds to a supporting test
    (:func:`no_difference`), ``ours_only``: a measure the paper did not use (such a test can
    support a claim or leave it open, never contradict it: "contradicted" needs the paper's
    own measure)."""

    name: str
    outcome: str
    text: str
    floor: float = math.nan
    quote: Quote | None = None
    inherited: bool = False
    caveat: str = ""
    ours_only: bool = False

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
    glues into its own sentences), ``quotes`` (the paper's sentences the claim tests) and
    ``checks`` (the paper's own analysis of each sentence it tests, :class:`Check`, which
    decides the scorecard's row; ``verdict`` is our analyses', labelled as ours)."""

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
    checks: list[Check] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The verdict as the scorecard prints it: ``contradicted at epoch 200``, ``partly
        shown at epoch 200 (above 6 of 6 fixed PEs; contradicted: no difference from
        2d-fixed)``, ``not testable yet``, ``not testable at this n (no test can reach α =
        0.05 at these n: the smallest attainable p = 1.000)``."""
        if self.verdict == "not testable yet" and self.part:
            return f"not testable at this n ({self.part})"
        against = [t.name for t in self.tests if t.outcome == "contradicts" and not t.ours_only]
        ours_against = [t.name for t in self.tests if t.outcome == "contradicts" and t.ours_only]
        head = self.verdict + (f" at epoch {self.at}" if self.at and self.verdict in
                               ("shown", "partly shown", "contradicted", "not shown") else "")
        extra = [f"{t.name}, {t.caveat}" for t in self.tests
                 if t.outcome == "supports" and t.caveat]
        if against:
            extra.append(f"contradicted: {', '.join(against)}")
        if ours_against:
            extra.append(f"against it on our own measure: {', '.join(ours_against)}")
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
    con = [t for t in tests if t.outcome == "contradicts" and not t.ours_only]
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
    ``p_equiv`` within ``±margin`` (ours). A difference shown contradicts the sentence;
    equivalence without one supports it; neither is open. ``clause`` says both results in
    words a reader can check against the numbers beside it; ``caveat`` is empty (kept for
    the label's shape).

    >>> no_difference(-0.03, 0.008, 0.0004, 0.03)[0]
    'contradicts'
    >>> no_difference(-0.005, 0.6, 0.01, 0.03)[0]
    'supports'
    """
    equivalent = bool(p_equiv < ALPHA)
    different = bool(p_diff < ALPHA)
    eq = (f"equivalent within ±{margin:g} (ours; TOST {p_text(p_equiv)})" if equivalent else
          f"not shown equivalent within ±{margin:g} (ours; TOST {p_text(p_equiv)})")
    df = (f"different from 0 ({p_text(p_diff)})" if different else
          f"no difference shown ({p_text(p_diff)})")
    clause = f"{eq} and {df}" if equivalent == different else f"{eq}, {df}"
    if different:
        return "contradicts", clause, ""
    return ("supports" if equivalent else "open"), clause, ""


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
               quotes: tuple[Quote, ...] = (), numbers: dict[str, Any] | None = None,
               checks: Sequence[Check] = ()) -> Verdict:
    """A ``not testable yet`` verdict saying ``why`` (and, with ``until``, the epoch the claim
    is read at), with the claim's ``quotes``, the ``numbers`` it read (a page shows them
    also when nothing could be tested) and its ``checks``."""
    text = why + (f" (the paper reads this claim at epoch {until})" if until else "")
    return Verdict(claim, line, where, "not testable yet", evidence=text,
                   numbers=dict(numbers or {}), quotes=quotes, checks=list(checks))
