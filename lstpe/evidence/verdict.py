"""The one rule that turns a row's tests into its verdict word.

A row compares our seeds with a reference (the authors' logs, a paper table, an exact value):
``p_diff`` is its test of a difference (Holm-adjusted where a page reads several rows one by
one), ``p_equiv`` the TOST p of equivalence within the margin. Every evidence table decides its
rows' words here: :func:`lstpe.evidence.tables.evidence_rows`,
:func:`lstpe.evidence.paper_compare.compare_to_paper` and the Holm step of
:mod:`lstpe.evidence.claim_tables`; a page that shows a row of models at chance shows the word
of :func:`shown_verdict` (:data:`AT_CHANCE`) instead.
"""

from __future__ import annotations

import math

from lstpe.stats.seed_tests import ALPHA

__all__ = ["row_verdict", "ROW_VERDICTS", "AT_CHANCE", "shown_verdict"]

ROW_VERDICTS: tuple[str, ...] = ("equivalent", "differs", "inconclusive", "n=1")
"""The words :func:`row_verdict` gives."""
AT_CHANCE = "at chance"
"""The word of a row whose models guess (:func:`shown_verdict`)."""


def row_verdict(p_diff: float, p_equiv: float, n: int, alpha: float = ALPHA) -> str:
    """A row's verdict word from its two tests at level ``alpha``.

    * ``n`` = 1 (one model: no interval, no equivalence): ``differs`` where a single-case
      test's ``p_diff`` is below alpha, else ``n=1``; a table that runs no test at n = 1
      passes NaN and gets ``n=1``.
    * from n = 2: ``equivalent`` where the TOST shows it (``p_equiv < alpha``; a difference
      smaller than the margin may be significant too, and the row's ``why`` says so), else
      ``differs`` where ``p_diff < alpha``, else ``inconclusive`` (neither shown at this n).

    NaN p values show nothing. Raises ValueError for ``n`` < 1 or ``alpha`` outside (0, 1).
    """
    if n < 1 or not 0 < alpha < 1:
        raise ValueError(f"need n >= 1 and alpha in (0, 1), got n={n}, alpha={alpha}")
    def below(p: float) -> bool:
        return not math.isnan(p) and p < alpha

    if n == 1:
        return "differs" if below(p_diff) else "n=1"
    if below(p_equiv):
        return "equivalent"
    return "differs" if below(p_diff) else "inconclusive"


def shown_verdict(word: str, at_chance: bool) -> str:
    """The word a page shows for a row of ours against a reference: :data:`AT_CHANCE` where
    the row's models are at chance (their validation accuracy within noise of guessing,
    :func:`lstpe.stats.chance.chance_test`), whatever ``word`` (the row's :func:`row_verdict`)
    says, since a guessing model is not compared with a reference; else ``word``."""
    return AT_CHANCE if at_chance else word
