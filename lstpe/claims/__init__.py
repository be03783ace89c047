"""The paper's claims, one module each, and the scorecard that is a loop over them.

A floor between :mod:`lstpe.experiments` (the stored units) and :mod:`lstpe.chapters` (the
pages): each module holds one claim's line, its tests and its verdict, decided once, with the
numbers its page quotes (:class:`~lstpe.claims.verdicts.Verdict`). Pages print verdicts and
never decide them.

In the paper's order:

* :mod:`~lstpe.claims.table1`: learn-0.2 beats the common fixed PEs and matches 2d-fixed;
* :mod:`~lstpe.claims.sigma`: small sigma generalises, large does not;
* :mod:`~lstpe.claims.attention`: attention similarity to 2d-fixed;
* :mod:`~lstpe.claims.procrustes`: Procrustes distance to the 2-D PE;
* :mod:`~lstpe.claims.structure`: the 2-D structure of the PE (our grid score);
* :mod:`~lstpe.claims.noise`: robustness to embedding noise;
* :mod:`~lstpe.claims.humans`: similarity to people (the first version only);
* :mod:`~lstpe.claims.optimizers`: SGD against Adam at small sigma;
* :mod:`~lstpe.claims.weight_decay`: weight decay;
* :mod:`~lstpe.claims.brain`: the brain experiment.

Each claim module quotes the paper's sentences it tests (``QUOTES``, verbatim, from each
version that states them: :class:`~lstpe.claims.paper.Quote`) and takes its figure and table
numbers from :data:`lstpe.claims.paper.NUMBERING`, the one numbering of both versions. The
vocabulary and the rules that weigh tests (no difference, learned or inherited) are
:mod:`~lstpe.claims.verdicts`; what the claims read is :class:`~lstpe.claims.inputs.Inputs`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from lstpe.claims import (
    attention,
    brain,
    humans,
    noise,
    optimizers,
    procrustes,
    sigma,
    structure,
    table1,
    weight_decay,
)
from lstpe.claims.inputs import Inputs
from lstpe.claims.verdicts import EXPLANATIONS, RESULTS, SCORE_VERDICTS, Check, Test, Verdict, weigh
from lstpe.evidence.tables import contrast_table

__all__ = ["CLAIMS", "SCORE_VERDICTS", "RESULTS", "EXPLANATIONS", "Inputs", "Check", "Test",
           "Verdict", "weigh", "judge", "judge_all", "scorecard", "verdict_counts",
           "SCORECARD_COLUMNS", "CHECK_COLUMNS", "paper_checks", "result_counts"]

CLAIMS = (table1, sigma, attention, procrustes, structure, noise, humans, optimizers,
          weight_decay, brain)
"""Every claim module, in the paper's order; each has ``CLAIM``, ``LINE``, ``WHERE``,
``QUOTES`` and ``judge(inputs) -> Verdict``."""

SCORECARD_COLUMNS = ("claim", "verdict", "label", "at", "part", "evidence", "where", "id")


CHECK_COLUMNS = ("id", "claim", "what", "sentence", "version", "where_in_paper", "paper", "ours",
                 "result", "explanation", "our_analyses", "where")
"""The columns of :func:`paper_checks`: one row per sentence of the paper a claim tests."""


def paper_checks(verdicts: list[Verdict]) -> pd.DataFrame:
    """The scorecard a reviewer reads: one row per sentence each claim tests (its
    :class:`~lstpe.claims.verdicts.Check`), :data:`CHECK_COLUMNS`: the sentence verbatim with
    its version and place, the paper's number, ours (epoch, n), the ``result`` and
    ``explanation`` words, our analyses' verdict (``our_analyses``, labelled as ours) and the
    chapter. A claim without checks (previews) gives one row for its first sentence, not
    testable yet."""
    rows = []
    for v in verdicts:
        checks = v.checks or [Check(q, "", v.evidence, "not testable yet")
                              for q in v.quotes[:1]]
        for c in checks:
            rows.append({"id": v.claim, "claim": v.line, "what": c.what,
                         "sentence": c.quote.text,
                         "version": c.quote.version, "where_in_paper": c.quote.where,
                         "paper": c.paper, "ours": c.ours, "result": c.result,
                         "explanation": c.explained, "our_analyses": v.label,
                         "where": v.where})
    out = pd.DataFrame(rows, columns=list(CHECK_COLUMNS))
    out["result"] = pd.Categorical(out["result"], categories=list(RESULTS))
    return out


def result_counts(checks: pd.DataFrame) -> dict[str, int]:
    """How many of the paper's tested sentences have each result (zeros included)."""
    counts = checks["result"].value_counts()
    return {v: int(counts.get(v, 0)) for v in RESULTS}


def judge(claim: Any, x: Inputs) -> Verdict:
    """The verdict of one claim module on ``x``, as a page asks for it; a preview
    (``x.paper_scale`` False) tests no claim: ``not testable yet``, saying why, with the
    contrast table a claim module that names its ``EVIDENCE`` table reads
    (``numbers["contrasts"]``, :func:`lstpe.evidence.tables.contrast_table`: the page shows
    the same table whether or not the claim is tested)."""
    if not x.paper_scale:
        table = getattr(claim, "EVIDENCE", None)
        shown = {"contrasts": contrast_table(table, x.final)} \
            if table and x.final is not None else {}
        return Verdict(claim.CLAIM, claim.LINE, claim.WHERE, "not testable yet",
                       evidence="preview runs only: they show that the analysis runs, not "
                                "the claim", numbers=shown, quotes=claim.QUOTES)
    return claim.judge(x)


def judge_all(x: Inputs) -> list[Verdict]:
    """Every claim's verdict on ``x`` (:func:`judge`, in the paper's order)."""
    return [judge(m, x) for m in CLAIMS]


def scorecard(x: Inputs | list[Verdict]) -> pd.DataFrame:
    """One row per claim (:data:`SCORECARD_COLUMNS`), ``verdict`` a categorical over
    :data:`~lstpe.claims.verdicts.SCORE_VERDICTS`."""
    verdicts = judge_all(x) if isinstance(x, Inputs) else x
    out = pd.DataFrame([v.row() for v in verdicts], columns=list(SCORECARD_COLUMNS))
    out["verdict"] = pd.Categorical(out["verdict"], categories=list(SCORE_VERDICTS))
    return out


def verdict_counts(card: pd.DataFrame) -> dict[str, int]:
    """How many claims have each verdict (every verdict listed, zeros included)."""
    counts = card["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in SCORE_VERDICTS}
