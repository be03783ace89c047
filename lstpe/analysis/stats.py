r"""Statistics over seeds and the comparison with the paper's tables.

This module gathers the names of two modules (``from lstpe.analysis import stats`` gives both):

* :mod:`lstpe.analysis.seed_stats` -- statistics over seeds:

  * :func:`mean_ci`, :func:`summarize`: mean, SD (ddof=1), SEM and the Student-t confidence
    interval :math:`\bar x \pm t_{n-1,\,(1+\ell)/2}\, s/\sqrt n` over seeds.
  * :func:`bootstrap_ci`: percentile bootstrap interval of any statistic.
  * :func:`ttest`, :func:`compare_pes`, :func:`ttest_from_summary`: Welch, Student and paired
    t-tests (scipy.stats). The paper reports "t-test, t(13) = 0.96, p = 0.35" for 2d-fixed vs
    learn-0.2 over 15 seeds without naming the variant; from Table 1's means and SDs Welch's
    test gives t = 0.98, p = 0.34 (:func:`ttest_from_summary`), close to the report.
  * :func:`rank_correlation`: Spearman correlation of an alignment measure with accuracy
    across sigma (per-sigma means, as in the paper's Fig. 4B / 10C) or across models.

* :mod:`lstpe.analysis.paper_compare` -- the comparison with the paper:

  * :func:`equivalence_test_from_summary`: Welch two one-sided tests (TOST) of equivalence
    within a margin.
  * :func:`load_paper_tables`, :func:`compare_to_paper`: the paper's Tables 1-6 in long form,
    and our per-seed results lined up against them with a verdict (``equivalent``,
    ``different``, ``inconclusive`` or ``too few seeds (n<5)``) that wide intervals cannot win.

Imports go one way: ``seed_stats`` <- ``paper_compare`` <- ``stats``.
"""

from __future__ import annotations

from lstpe.analysis.paper_compare import (
    EQUIVALENCE_MARGIN,
    METRIC_RANGE,
    PAPER_METRICS,
    PAPER_N_SEEDS,
    VERDICTS,
    Equivalence,
    compare_to_paper,
    equivalence_test_from_summary,
    load_paper_tables,
)
from lstpe.analysis.seed_stats import (
    MIN_SEEDS_FOR_CI,
    TTEST_KINDS,  # noqa: F401  (public, though not in __all__)
    TTest,
    bootstrap_ci,
    compare_pes,
    mean_ci,
    rank_correlation,
    summarize,
    ttest,
    ttest_from_summary,
    with_accuracy,
)

__all__ = [
    "mean_ci", "summarize", "bootstrap_ci", "TTest", "ttest", "ttest_from_summary",
    "compare_pes", "with_accuracy", "rank_correlation", "Equivalence",
    "equivalence_test_from_summary", "load_paper_tables", "compare_to_paper", "PAPER_N_SEEDS",
    "PAPER_METRICS", "METRIC_RANGE", "MIN_SEEDS_FOR_CI", "EQUIVALENCE_MARGIN", "VERDICTS",
]
