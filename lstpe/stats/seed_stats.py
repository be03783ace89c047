r"""Statistics over seeds: summaries with confidence intervals, t-tests and rank correlation.

* :func:`mean_ci`, :func:`summarize`: mean, SD (ddof=1), SEM and the Student-t confidence
  interval :math:`\bar x \pm t_{n-1,\,(1+\ell)/2}\, s/\sqrt n` over seeds.
* :func:`bootstrap_ci`: percentile bootstrap interval of any statistic.
* :func:`ttest`, :func:`compare_pes`, :func:`ttest_from_summary`: Welch, Student and paired
  t-tests (scipy.stats). The paper reports "t-test, t(13) = 0.96, p = 0.35" for 2d-fixed vs
  learn-0.2 over 15 seeds without naming the variant; from Table 1's means and SDs Welch's
  test gives t = 0.98, p = 0.34 (:func:`ttest_from_summary`), close to the report.
* :func:`holm`: Holm's step-down adjustment of several p-values read as one claim's support.
* :func:`sign_flip_test`: exact paired test of a mean change (every sign flip enumerated).
* :func:`p_text`, :func:`tau_text`: a p value and Kendall's tau as the book prints them, the
  one format of every page and verdict (an undefined tau in words, never ``nan``).
* :func:`check_range`: a value outside its range (an accuracy outside [0, 1]) is an error
  naming it and where it came from, never an input to a verdict.
* Degenerate inputs: a t-test of groups with no spread at all is undefined (NaN, not t = inf
  and p = 0; :data:`lstpe.stats.seed_tests.NO_SPREAD`).
* :func:`rank_correlation`: Spearman correlation of an alignment measure with accuracy across
  sigma (per-sigma means, as in the paper's Fig. 4B / 10C) or across models.

The comparison with the paper's tables (TOST equivalence, verdicts) builds on this module in
:mod:`lstpe.evidence.paper_compare`.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from lstpe.nn.encodings import parse_pe
from lstpe.stats.formulas import sign_flip_p, welch_df
from lstpe.stats.seed_tests import NO_SPREAD, no_spread

__all__ = [
    "mean_ci", "summarize", "bootstrap_ci", "TTest", "ttest", "ttest_from_summary",
    "compare_pes", "with_accuracy", "rank_correlation", "for_ranking", "TIE_TOL",
    "MIN_SEEDS_FOR_CI", "holm", "sign_flip_test", "t_half", "p_text", "tau_text",
    "check_range",
]

MIN_SEEDS_FOR_CI = 2
"""Fewest seeds for an interval, a test and a verdict: an SD needs two. Everything the book
computes from seeds states its n; small n shows as wide intervals and a large minimum
detectable difference, not as a missing test."""


def p_text(p: float | None) -> str:
    """``p = 0.0079`` / ``p = 0.024`` / ``p < 0.0001``: two significant digits below 0.01,
    three decimals above; ``p –`` for a test that did not run (None or NaN)."""
    if p is None or p != p:
        return "p –"
    return "p < 0.0001" if p < 1e-4 else f"p = {p:.2g}" if p < 0.01 else f"p = {p:.3f}"


def tau_text(tau: float | None, n: int | None = None) -> str:
    """``τ = -0.52`` / ``τ undefined (all 6 values tied)``: Kendall's tau as a page prints it;
    a NaN tau (every value tied: no pair is ordered) is said in words, never ``nan``."""
    if tau is None or tau != tau:
        return "τ undefined (all" + (f" {n}" if n is not None else "") + " values tied)"
    return f"τ = {tau:+.2f}"


def check_range(values: Any, low: float, high: float, what: str,
                where: Sequence[str] | None = None) -> None:
    """Raise if a value of ``values`` (n,) lies outside ``[low, high]``, naming the first
    such value, ``what`` it is and ``where`` it came from (``where[i]``: e.g. ``pe learn-0.2,
    seed 3``). NaN passes (missing values are the caller's business).

    Raises:
        ValueError: ``Inputs.final accuracy: value 1.3 outside [0, 1] (pe learn-0.2, seed 3)``.
    """
    a = np.asarray(values, dtype=np.float64).ravel()
    bad = np.flatnonzero((a < low) | (a > high))
    if bad.size:
        i = int(bad[0])
        at = f" ({where[i]})" if where is not None else ""
        more = f"; {bad.size - 1} more" if bad.size > 1 else ""
        raise ValueError(f"{what}: value {a[i]:g} outside [{low:g}, {high:g}]{at}{more}")

TTEST_KINDS: tuple[str, ...] = ("welch", "student", "paired")


def _values(x: Sequence[float] | np.ndarray | pd.Series, name: str = "x") -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return a


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")


def mean_ci(x: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval ``(mean, low, high)``; NaN bounds for n = 1.

    Raises:
        ValueError: empty or non-finite data, level outside (0, 1).
    """
    _check_level(level)
    a = _values(x)
    m = float(a.mean())
    if a.size < 2:
        return m, math.nan, math.nan
    half = t_half(a.std(ddof=1), a.size, level)
    return m, m - half, m + half


def t_half(sd: Any, n: Any, level: float = 0.95) -> Any:
    r"""Half-width of the Student-t interval of a mean from its SD and n (scalars or arrays of
    one shape): :math:`t_{n-1,(1+\ell)/2}\, s/\sqrt n`."""
    _check_level(level)
    n = np.asarray(n, dtype=np.float64)
    half = stats.t.ppf((1 + level) / 2, n - 1) * np.asarray(sd, dtype=np.float64) / np.sqrt(n)
    return float(half) if np.ndim(half) == 0 else half


def summarize(table: pd.DataFrame, value: str = "accuracy", by: str | Sequence[str] = "pe",
              level: float = 0.95) -> pd.DataFrame:
    """Mean, SD, SEM and t confidence interval of ``value`` per group (e.g. over seeds).

    Args:
        table: per-seed rows (e.g. ``lstpe.store.results.final_table(history)``).
        value: the column to summarise.
        by: grouping column(s), kept in first-seen order.
    Returns:
        ``*by, n, mean, sd, sem, ci_low, ci_high`` (sd, sem and the CI NaN for n = 1).
    Raises:
        ValueError: empty table, unknown columns, NaN values.
    """
    by = [by] if isinstance(by, str) else list(by)
    _check_level(level)
    if table.empty:
        raise ValueError("the table is empty")
    missing = [c for c in [value, *by] if c not in table]
    if missing:
        raise ValueError(f"unknown columns {missing}; columns: {', '.join(table.columns)}")
    rows = []
    for key, g in table.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        a = _values(g[value], f"{value} of {dict(zip(by, key, strict=True))}")
        m, lo, hi = mean_ci(a, level)
        sd = float(a.std(ddof=1)) if a.size > 1 else math.nan
        rows.append({**dict(zip(by, key, strict=True)), "n": a.size, "mean": m, "sd": sd,
                     "sem": sd / math.sqrt(a.size), "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def bootstrap_ci(x: Sequence[float], statistic: Callable[..., np.ndarray] = np.mean,
                 level: float = 0.95, n_boot: int = 10_000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval ``(low, high)`` of ``statistic``.

    Args:
        statistic: vectorised statistic called as ``statistic(samples, axis=-1)`` on an
            (n_boot, n) array (``np.mean``, ``np.median``, ...).
        n_boot: bootstrap resamples; seed: for the resampling.
    Raises:
        ValueError: fewer than 2 values, ``n_boot < 1``, level outside (0, 1).
    """
    _check_level(level)
    a = _values(x)
    if a.size < 2:
        raise ValueError(f"bootstrap needs at least 2 values, got {a.size}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    rng = np.random.default_rng(seed)
    boots = statistic(a[rng.integers(0, a.size, size=(n_boot, a.size))], axis=-1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return float(lo), float(hi)


@dataclass(frozen=True)
class TTest:
    """Result of a two-sample or paired t-test (``diff`` = mean_a - mean_b)."""

    kind: str
    statistic: float
    df: float
    pvalue: float
    mean_a: float
    mean_b: float
    diff: float
    n_a: int
    n_b: int

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        if self.statistic != self.statistic:
            return f"{self.kind} t-test undefined ({NO_SPREAD.split(':')[0]})"
        return f"{self.kind} t({self.df:.3g}) = {self.statistic:.3f}, p = {self.pvalue:.3g}"


def _check_kind(kind: str) -> None:
    if kind not in TTEST_KINDS:
        raise ValueError(f"unknown t-test {kind!r}; valid: {', '.join(TTEST_KINDS)}")


def ttest(a: Sequence[float], b: Sequence[float], kind: str = "welch") -> TTest:
    """Two-sided t-test of ``a`` (n_a,) against ``b`` (n_b,).

    Args:
        kind: ``welch`` (unequal variances), ``student`` (pooled variance) or ``paired``
            (``a[i]`` and ``b[i]`` belong together, e.g. the same seed).
    Returns:
        The test; with no spread at all (every value of each group equal; paired: every
        difference equal) ``statistic``, ``df`` and ``pvalue`` are NaN (:data:`NO_SPREAD`), not
        t = inf and p = 0: two tied seeds are no certainty. One group with a spread is a test.
    Raises:
        ValueError: unknown kind, fewer than 2 values, or unequal lengths for ``paired``.
    """
    _check_kind(kind)
    a, b = _values(a, "a"), _values(b, "b")
    if a.size < 2 or b.size < 2:
        raise ValueError(f"a t-test needs >= 2 values per group, got {a.size} and {b.size}")
    if kind == "paired" and a.size != b.size:
        raise ValueError(f"a paired t-test needs equal lengths, got {a.size} and {b.size}")
    if no_spread(a - b) if kind == "paired" else no_spread(a) and no_spread(b):
        return TTest(kind, math.nan, math.nan, math.nan, float(a.mean()), float(b.mean()),
                     float(a.mean() - b.mean()), a.size, b.size)
    with warnings.catch_warnings():  # seeds with equal values (e.g. 107/108 puzzles each) are
        # data; their variance is 0 up to rounding, and scipy's "precision loss" warning moot
        warnings.filterwarnings("ignore", "Precision loss occurred in moment calculation",
                                RuntimeWarning)
        if kind == "paired":
            r = stats.ttest_rel(a, b)
            df = a.size - 1
        else:
            r = stats.ttest_ind(a, b, equal_var=kind == "student")
            df = float(r.df)
    return TTest(kind, float(r.statistic), float(df), float(r.pvalue), float(a.mean()),
                 float(b.mean()), float(a.mean() - b.mean()), a.size, b.size)


def ttest_from_summary(mean_a: float, sd_a: float, n_a: int, mean_b: float, sd_b: float,
                       n_b: int, kind: str = "welch") -> TTest:
    """Two-sample t-test from means and SDs (e.g. the paper's tables; no paired version).

    Both SDs 0: the test is undefined (NaN statistic, df and p; :data:`NO_SPREAD`).

    Raises:
        ValueError: ``kind="paired"`` (needs the raw pairs), n < 2 or a negative SD.
    """
    _check_kind(kind)
    if kind == "paired":
        raise ValueError("a paired t-test needs the per-seed values, not summaries; "
                         "use kind='welch' or 'student'")
    if n_a < 2 or n_b < 2 or sd_a < 0 or sd_b < 0:
        raise ValueError(f"need n >= 2 and sd >= 0, got n=({n_a}, {n_b}), sd=({sd_a}, {sd_b})")
    if sd_a == 0 and sd_b == 0:
        return TTest(kind, math.nan, math.nan, math.nan, float(mean_a), float(mean_b),
                     float(mean_a - mean_b), int(n_a), int(n_b))
    equal = kind == "student"
    r = stats.ttest_ind_from_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b, equal_var=equal)
    df = float(n_a + n_b - 2) if equal else welch_df(sd_a**2 / n_a, sd_b**2 / n_b, n_a, n_b)
    return TTest(kind, float(r.statistic), float(df), float(r.pvalue), float(mean_a),
                 float(mean_b), float(mean_a - mean_b), int(n_a), int(n_b))


def compare_pes(table: pd.DataFrame, a: str, b: str, value: str = "accuracy",
                kind: str = "welch") -> TTest:
    """t-test of ``value`` between the seeds of PEs ``a`` and ``b`` (e.g. 2d-fixed vs learn-0.2).

    ``kind="paired"`` pairs rows by ``seed`` (both PEs must have the same seeds).

    Raises:
        ValueError: unknown PE or column; mismatched seeds for a paired test.
    """
    for col in ("pe", value) + (("seed",) if kind == "paired" else ()):
        if col not in table:
            raise ValueError(f"table has no {col!r} column; columns: {', '.join(table.columns)}")
    groups = {}
    for pe in (a, b):
        label = parse_pe(pe).label
        g = table[table["pe"] == label]
        if g.empty:
            raise ValueError(f"no rows for PE {pe!r}; PEs present: "
                             f"{', '.join(dict.fromkeys(table['pe'].astype(str)))}")
        groups[pe] = g
    if kind == "paired":
        ga, gb = (groups[p].set_index("seed")[value] for p in (a, b))
        if ga.index.duplicated().any() or gb.index.duplicated().any():
            raise ValueError("a paired test needs one row per (PE, seed)")
        if set(ga.index) != set(gb.index):
            raise ValueError(f"paired test: seeds differ ({sorted(ga.index)} vs "
                             f"{sorted(gb.index)})")
        return ttest(ga.sort_index(), gb.sort_index(), "paired")
    return ttest(groups[a][value], groups[b][value], kind)


def with_accuracy(table: pd.DataFrame, history: pd.DataFrame, split: str = "val",
                  condition: str = "all") -> pd.DataFrame:
    """Add each model's final ``accuracy`` (from the history table) to a per-model table.

    Rows are matched on the ``model`` column (artefact index = history model id).

    Raises:
        ValueError: empty tables, no ``model`` column, or models missing from the history.
    """
    from lstpe.store.results import final_table

    if table.empty:
        raise ValueError("the table is empty")
    if "model" not in table:
        raise ValueError("the table has no 'model' column")
    final = final_table(history, split, condition)[["model", "accuracy"]]
    missing = sorted(set(table["model"]) - set(final["model"]))
    if missing:
        raise ValueError(f"models {missing[:10]} are not in the history ({split}, {condition})")
    return table.drop(columns=["accuracy"], errors="ignore").merge(final, on="model",
                                                                   how="left")


TIE_TOL = 1e-6
"""Values this close are one value to :func:`for_ranking` (float32 noise is ~1e-7)."""


def for_ranking(x: Any, tol: float = TIE_TOL) -> np.ndarray:
    """``x`` (n,) as float64 with values within ``tol`` of their sorted neighbour made equal, for
    a rank correlation.

    Accuracies are stored in float32 (about 7 significant digits), so two seed means of the
    same count of correct puzzles (e.g. 300/324 from different seeds) differ by ~1e-8 and a
    ranking would order them by that noise; here they tie (mean ranks). Rounding to a fixed
    number of decimals would not do: a value near a rounding boundary falls on either side.
    Sorted values closer than ``tol`` to the previous one take its value (a chain joins; real
    differences of the measures ranked here are far larger: one puzzle of 108 over 15 seeds
    is 6e-4). NaN stays NaN.
    """
    v = np.array(x, dtype=float).ravel()
    order = np.argsort(v, kind="stable")
    s = v[order]
    for i in range(1, len(s)):
        if s[i] - s[i - 1] <= tol:  # False for NaN
            s[i] = s[i - 1]
    v[order] = s
    return v


EXACT_SPEARMAN_MAX = 8
"""Up to this many points :func:`rank_correlation` enumerates every pairing (8! = 40,320) for
an exact p value."""


def rank_correlation(table: pd.DataFrame, x: str, y: str = "accuracy",
                     level: str = "sigma") -> dict[str, float]:
    """Spearman rank correlation of columns ``x`` and ``y``.

    Args:
        level: ``"sigma"`` -- correlate the per-sigma means (rows with NaN sigma dropped; the
            paper's Fig. 4B and 10C); ``"model"`` -- correlate the rows as given (one per model,
            e.g. after :func:`lstpe.analysis.attention.average_layers`).
    Returns:
        ``{"rho", "pvalue", "n"}``; rho and pvalue are NaN when either column is constant. The
        two-sided p value is exact (all ``n!`` pairings) up to :data:`EXACT_SPEARMAN_MAX`
        points, where SciPy's t approximation is far off (it gives p = 0 for a perfect
        correlation of 6 points; the exact p is 2/720); above, SciPy's. Values within
        :data:`TIE_TOL` of each other tie (:func:`for_ranking`: float32 noise is no order).
    Raises:
        ValueError: unknown level or column, fewer than 3 points.
    """
    if level not in ("sigma", "model"):
        raise ValueError(f"unknown level {level!r}; valid: sigma, model")
    need = [x, y] + (["sigma"] if level == "sigma" else [])
    missing = [c for c in need if c not in table]
    if missing:
        raise ValueError(f"unknown columns {missing}; columns: {', '.join(table.columns)}")
    t = table.dropna(subset=need)
    if level == "sigma":
        cols = [c for c in dict.fromkeys((x, y)) if c != "sigma"]  # x may be sigma itself
        t = t.groupby("sigma")[cols].mean().reset_index()
    if len(t) < 3:
        raise ValueError(f"a rank correlation needs at least 3 points, got {len(t)}")
    a, b = for_ranking(t[x]), for_ranking(t[y])  # float32 noise is not an order
    if len(np.unique(a)) < 2 or len(np.unique(b)) < 2:  # undefined, not a warning on the page
        return {"rho": math.nan, "pvalue": math.nan, "n": len(t)}
    r = stats.spearmanr(a, b)
    p = float(r.pvalue)
    if len(t) <= EXACT_SPEARMAN_MAX:
        p = _exact_spearman_p(a, b)
    return {"rho": float(r.statistic), "pvalue": p, "n": len(t)}


def _exact_spearman_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact p of Spearman's rho of ``a`` and ``b`` (n,): the share of all n!
    pairings whose |rho| reaches the observed one. Rho is the correlation of the ranks (ties
    get mean ranks), and its denominator is the same for every pairing, so the centred rank
    products stand in for it."""
    ra, rb = stats.rankdata(a), stats.rankdata(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    perms = np.array(list(itertools.permutations(range(len(rb)))))
    null = np.abs(rb[perms] @ ra)
    return float(np.mean(null >= abs(rb @ ra) - 1e-9))


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (same order as ``p``): the k-th smallest is
    multiplied by ``m - k + 1``, made monotone and capped at 1. Rejecting where the adjusted p
    is below alpha keeps the chance of any false rejection among the ``m`` at most alpha.
    NaN entries (tests that did not run) stay NaN and do not count in ``m``.

    >>> holm([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.06, 0.06]
    >>> holm([0.01, float("nan"), 0.03]).round(3).tolist()
    [0.02, nan, 0.03]
    """
    x = np.asarray(p, dtype=np.float64)
    out = np.full_like(x, np.nan)
    ran = np.flatnonzero(~np.isnan(x))
    if ran.size == 0:
        return out
    order = ran[np.argsort(x[ran])]
    m = ran.size
    out[order] = np.minimum(np.maximum.accumulate(x[order] * (m - np.arange(m))), 1.0)
    return out


def sign_flip_test(d: Sequence[float]) -> tuple[float, float]:
    """Exact two-sided test that paired changes ``d`` (n,) have mean 0: every one of the
    ``2**n`` sign flips is enumerated (n <= 20). Returns ``(mean, p)``; the smallest p it can
    give is ``2 / 2**n`` (0.0625 at n = 5)."""
    x = _values(d, "d")
    return float(x.mean()), sign_flip_p(x)
