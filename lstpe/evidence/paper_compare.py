r"""Our per-seed results lined up against one of the paper's tables
(:func:`~lstpe.references.paper_tables.load_paper_tables`), with a verdict (``equivalent``,
``differs``, ``inconclusive``; ``n=1`` for a single model) that wide intervals cannot win, and
the smallest difference the seeds could resolve (``mdd``): :func:`compare_to_paper`.

The means, SDs and t intervals over seeds come from :mod:`lstpe.stats.seed_stats`, the TOST
and the difference test against the paper's 15 seeds (Student's pooled test and Welch's, each
p the larger: :func:`~lstpe.stats.seed_tests.equivalence_test_from_summary` with
``variance="both"``; why: :mod:`lstpe.stats.seed_tests`) and the minimum detectable
difference of that test from :mod:`lstpe.stats.power`.
"""

from __future__ import annotations

import math

import pandas as pd

from lstpe.evidence.verdict import row_verdict
from lstpe.nn.encodings import parse_pe
from lstpe.references.paper_tables import METRIC_RANGE, load_paper_tables
from lstpe.stats.power import mdd, mdd_vs_reference
from lstpe.stats.seed_stats import MIN_SEEDS_FOR_CI, summarize
from lstpe.stats.seed_tests import (
    EQUIVALENCE_MARGIN,
    equivalence_test_from_summary,
)

__all__ = ["compare_to_paper", "VERDICTS"]

VERDICTS: tuple[str, ...] = ("equivalent", "differs", "inconclusive", "n=1")
"""The values of :func:`compare_to_paper`'s ``verdict`` column (``n=1``: one model, no SD,
so no interval and no test)."""


def compare_to_paper(ours: pd.DataFrame, table: int | str, metric: str = "val_acc",
                     value: str = "accuracy", setting: str | None = None,
                     level: float = 0.95, margin: float = EQUIVALENCE_MARGIN,
                     alpha: float = 0.05, min_seeds: int = MIN_SEEDS_FOR_CI) -> pd.DataFrame:
    """Line our per-seed results up against one of the paper's tables, with a verdict.

    Per PE: our mean and SD over seeds and the Student-t interval at ``level``, clipped to the
    metric's range (:data:`METRIC_RANGE`, [0, 1] for accuracies and attention cosines; the
    clipping is the only change to the t interval). The verdict compares our seeds with the
    paper's mean and SD over its 15 seeds:

    * ``"equivalent"``: the TOST, pooled and Welch's each
      (:func:`~lstpe.stats.seed_tests.equivalence_test_from_summary`, ``variance="both"``),
      shows
      ``|ours - paper| < margin`` at level ``alpha`` (``p_equiv < alpha``). This needs a
      precise comparison -- small SDs on both sides or many seeds -- so a wide interval cannot
      earn it: with the paper's 15 seeds, an SD of 0.06 on both sides is already too noisy for
      a margin of 0.03. It can coexist with a significant difference smaller than the margin
      (see ``p_diff``).
    * ``"differs"``: otherwise, when the two-sided pooled and Welch t-tests both reject equal
      means
      (``p_diff < alpha``).
    * ``"inconclusive"``: neither.
    * ``"n=1"``: a single model (``"n=<n>: under min_seeds=<m>"`` where a caller asks for
      more seeds than the default 2); the interval, both p values and ``mdd`` are left out
      (NaN).

    At 3-5 seeds ``inconclusive`` is the common verdict; ``mdd`` says how large a difference
    those seeds could have shown to that test (:func:`lstpe.stats.power.mdd_vs_reference`
    at alpha, power 0.8, with the larger of the two SDs, our n and the paper's 15; against a
    paper SD of 0 the one-sample t-test's, :func:`lstpe.stats.power.mdd`).

    Args:
        ours: one row per seed with a ``pe`` label column and ``value`` (e.g. the history's
            final validation rows, or a layer-averaged attention-similarity table).
        table: paper table ``1``-``6``.
        metric: ``val_acc``, ``train_acc`` or ``attention_cosine`` (Table 3).
        value: our column holding the per-seed value.
        setting: optimiser setting of the table (needed for Table 4: ``adam`` or ``sgd``).
        level: of our confidence interval.
        margin: equivalence margin in units of the metric (default
            :data:`~lstpe.stats.seed_tests.EQUIVALENCE_MARGIN` = 0.03, i.e. 3 accuracy points).
        alpha: level of the TOST and the t-test.
        min_seeds: fewest seeds for an interval and a verdict (default
            :data:`~lstpe.stats.seed_stats.MIN_SEEDS_FOR_CI` = 2: an SD needs two).
    Returns:
        One row per PE present in both, in the paper's row order: ``table, setting, pe,
        sigma, n, mean, sd`` (ours), ``ci_low, ci_high`` (ours, clipped t interval; NaN under
        ``min_seeds``), ``paper_mean, paper_sd, diff`` (ours - paper), ``p_equiv`` (TOST),
        ``p_diff`` (two-sided, the larger of pooled and Welch), ``mdd`` (minimum detectable
        difference), ``verdict``.
    Raises:
        ValueError: unknown table / metric / setting, empty input, no PE in common, margin
            <= 0, alpha outside (0, 1), min_seeds < 2.
    """
    if not margin > 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if min_seeds < 2:
        raise ValueError(f"min_seeds must be >= 2 (an interval needs an SD), got {min_seeds}")
    paper = load_paper_tables()
    table = str(table)
    if table not in set(paper["table"]):
        raise ValueError(f"unknown paper table {table!r}; valid: "
                         f"{', '.join(sorted(set(paper['table'])))}")
    p = paper[paper["table"] == table]
    if metric not in set(p["metric"]):
        raise ValueError(f"table {table} has no metric {metric!r}; valid: "
                         f"{', '.join(sorted(set(p['metric'])))}")
    p = p[p["metric"] == metric]
    settings = list(dict.fromkeys(p["setting"]))
    if setting is None:
        if len(settings) > 1:
            raise ValueError(f"table {table} has several settings {settings}: pass setting=")
        setting = settings[0]
    if setting not in settings:
        raise ValueError(f"table {table} has no setting {setting!r}; valid: {settings}")
    p = p[p["setting"] == setting]
    if ours.empty:
        raise ValueError("our table is empty")
    for col in ("pe", value):
        if col not in ours:
            raise ValueError(f"our table has no {col!r} column; columns: "
                             f"{', '.join(ours.columns)}")
    ours = ours.assign(pe=[parse_pe(str(x)).label for x in ours["pe"]])
    summ = summarize(ours, value, "pe", level)
    merged = p.merge(summ, on="pe", how="inner")
    if merged.empty:
        raise ValueError(f"no PE in common: ours {sorted(set(ours['pe']))}, paper table "
                         f"{table} {sorted(set(p['pe']))}")
    merged = merged.rename(columns={"mean_x": "paper_mean", "sd_x": "paper_sd",
                                    "n_x": "paper_n", "mean_y": "mean", "sd_y": "sd",
                                    "n_y": "n"})
    merged["diff"] = merged["mean"] - merged["paper_mean"]
    lo, hi = METRIC_RANGE[metric]
    few = merged["n"] < min_seeds
    merged["ci_low"] = merged["ci_low"].clip(lo, hi).mask(few)
    merged["ci_high"] = merged["ci_high"].clip(lo, hi).mask(few)
    p_equiv, p_diff, mdds, verdict = [], [], [], []
    for r in merged.itertuples(index=False):
        if r.n < min_seeds:
            p_equiv.append(math.nan)
            p_diff.append(math.nan)
            mdds.append(math.nan)
            verdict.append(row_verdict(math.nan, math.nan, 1) if r.n == 1  # no test at n=1
                           else f"n={r.n}: under min_seeds={min_seeds}")
            continue
        eq = equivalence_test_from_summary(r.mean, r.sd, r.n, r.paper_mean, r.paper_sd,
                                           r.paper_n, margin, "both")
        p_equiv.append(eq.p_equiv)
        p_diff.append(eq.p_diff)
        mdds.append(mdd_vs_reference(max(r.sd, r.paper_sd), int(r.n), int(r.paper_n), alpha)
                    if r.paper_sd > 0 else mdd(r.sd, int(r.n), None, alpha))
        verdict.append(row_verdict(eq.p_diff, eq.p_equiv, int(r.n), alpha))
    merged["p_equiv"], merged["p_diff"], merged["mdd"] = p_equiv, p_diff, mdds
    merged["verdict"] = verdict
    cols = ["table", "setting", "pe", "sigma", "n", "mean", "sd", "ci_low", "ci_high",
            "paper_mean", "paper_sd", "diff", "p_equiv", "p_diff", "mdd", "verdict"]
    return merged[cols].reset_index(drop=True)
