r"""Tests fit for 3-5 seeds: what a handful of models can and cannot show, with n stated.

Every function here works from n = 2 seeds per group (the single-case test from n = 1) and
says what its n allows: an interval's width, a permutation test's smallest attainable p, the
smallest difference it would detect (:mod:`lstpe.stats.power`).

* :func:`equivalence_test_from_summary`: two one-sided t-tests (TOST) of
  ``|mean_a - mean_b| < margin`` and the two-sided t-test, from two summaries: Welch's,
  Student's pooled-variance test, or both (each p the larger).
* :func:`welch_diff`: the difference of two of our samples with its Welch 95% interval, t, df
  and two-sided p.
* :func:`vs_reference`: our sample against a reference summary (mean, SD, n; e.g. the
  authors' 15 seeds at epoch 200): the difference with its interval, t, df, two-sided p and
  the TOST p. Two readings of the spread compete here. If our seeds are draws from the
  reference's distribution (the reproduction's null), both sides share one SD, which the
  reference's 15 seeds estimate far better than our 2-5: Student's pooled test,
  :math:`s_p^2 = ((n_a - 1)s_a^2 + (n_y - 1)s_y^2) / (n_a + n_y - 2)`,
  :math:`se = s_p\sqrt{1/n_a + 1/n_y}`, :math:`\nu = n_a + n_y - 2`, is exact there, while
  Welch's, leaning on our own SD (two seeds that tie give 0), rejects 11% of the time at its
  5% from n = 2 against 15 and 7% from n = 3. If our spread differs from theirs, the pooled
  test is the one that fails: with our SD twice theirs it rejects 25% (n = 2) and 16%
  (n = 5). A row therefore claims only what both tests support: each p is the larger of
  the two and the interval the union of theirs, which rejects a true null 2-3% of the time
  with one SD (n = 2-5), 6.5% (n = 2) to 5% (n = 5) with ours twice theirs (normal draws,
  ``tests/test_evidence.py``). At n = 1 it is the single-case t-test of Crawford & Howell
  (1998), :math:`t = (x - \bar y) / (s_y \sqrt{1 + 1/n_y})`, :math:`\nu = n_y - 1` (the
  pooled test at n = 1). An exact reference (SD 0, e.g. "no loss") is no sample of seeds: our
  sample is tested against the value with its own SD (one-sample t).
* :func:`permutation_test`, :func:`permutation_floor`: the exact permutation test of a
  difference in means, enumerating all :math:`\binom{n_a + n_b}{n_a}` splits, and its smallest
  attainable p (two-sided: :math:`2/\binom{n_a+n_b}{n_a}` when :math:`n_a = n_b`, else
  :math:`1/\binom{n_a+n_b}{n_a}`; ties raise it, :attr:`Permutation.floor` counts them).
* :func:`shift_interval`: the interval that belongs to that test, the shifts :math:`\delta`
  of ``a`` it does not reject (unbounded where its floor is at or above alpha), so a verdict
  and the interval beside it always agree.

What each of these tests can resolve at its n (its minimum detectable difference) is
:mod:`lstpe.stats.power`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy import stats

from lstpe.stats.formulas import pooled_sd, sign_flip_p, split_weights, tost_p, welch_df

__all__ = [
    "ALPHA", "EQUIVALENCE_MARGIN", "Equivalence", "equivalence_test_from_summary", "Diff",
    "welch_diff", "vs_reference", "Permutation", "permutation_test", "permutation_floor",
    "shift_interval", "SPLIT_TOL", "NO_SPREAD", "no_spread", "VARIANCES",
]

SPLIT_TOL = 1e-12
"""Statistics this close count as equal (sums of the same accuracies in another order)."""

NO_SPREAD = "no spread in either group: the t-test is undefined"
"""Said of a t-test whose groups are each all equal (accuracies count puzzles: seeds tie), not
t = inf, p = 0 and a zero-width interval: t, p and interval are NaN, and the exact tests, whose
smallest p at n is bounded (permutation; sign-flip against an exact reference), decide."""


def no_spread(x: Sequence[float] | np.ndarray) -> bool:
    """Whether the values ``x`` (n,) are all equal, up to float32 storage noise (a range of
    at most 1e-6 of their scale: one puzzle in 108 over 15 seeds is 6e-4)."""
    a = np.asarray(x, dtype=np.float64).ravel()
    return bool(np.ptp(a) <= 1e-6 * max(1.0, float(np.abs(a).max()))) if a.size else True


EQUIVALENCE_MARGIN = 0.03
"""Default equivalence margin of :func:`equivalence_test_from_summary` and
:func:`lstpe.evidence.paper_compare.compare_to_paper`, in units of the metric (0.03 = 3
accuracy points, 3.2 of the 108 validation puzzles): narrower than the smallest gap the paper
calls significant (learn-0.2 against relative in Table 1, 0.956 - 0.920 = 0.036, t(13) = 2.51,
p = 0.03), so that "equivalent" never covers a difference the paper itself would call one."""

ALPHA = 0.05
"""The level of every test whose verdict the book reports (evidence rows, contrasts, trends,
the claims' tests and the measures' permutation p values)."""

VARIANCES: tuple[str, ...] = ("welch", "pooled", "both")
"""How :func:`equivalence_test_from_summary` sizes the difference's standard error."""


@dataclass(frozen=True)
class Equivalence:
    """TOST of ``|mean_a - mean_b| < margin`` and the two-sided t-test of equality.

    Attributes:
        diff: ``mean_a - mean_b``; se: its standard error; df: its degrees of freedom
            (Welch-Satterthwaite, or ``n_a + n_b - 2`` pooled; NaN when ``se == 0``).
        p_lower: p of H0 ``diff <= -margin``; p_upper: p of H0 ``diff >= margin``.
        p_equiv: ``max(p_lower, p_upper)``; equivalence is shown at level alpha when
            ``p_equiv < alpha`` (equivalently: the ``1 - 2 alpha`` t interval of ``diff`` lies
            inside ``(-margin, margin)``).
        p_diff: two-sided p of H0 ``diff == 0``.
        variance: the test that gave them: ``welch``, ``pooled``, or ``both`` (each p the
            larger of the two tests', ``se`` and ``df`` those of the larger ``p_diff``).
    """

    diff: float
    se: float
    df: float
    margin: float
    p_lower: float
    p_upper: float
    p_equiv: float
    p_diff: float
    variance: str = "welch"

    def to_dict(self) -> dict:
        return asdict(self)


def equivalence_test_from_summary(mean_a: float, sd_a: float, n_a: int, mean_b: float,
                                  sd_b: float, n_b: int, margin: float = EQUIVALENCE_MARGIN,
                                  variance: str = "welch") -> Equivalence:
    r"""Two one-sided t-tests (TOST) of equivalence within ``margin``, from summaries.

    With :math:`\delta = \bar a - \bar b` and its standard error :math:`s` on :math:`\nu`
    degrees of freedom: :math:`p_\text{lower} = P(T_\nu \ge (\delta + m)/s)` (H0
    :math:`\delta \le -m`), :math:`p_\text{upper} = P(T_\nu \le (\delta - m)/s)` (H0
    :math:`\delta \ge m`), ``p_equiv`` their maximum; also the two-sided p of
    :math:`\delta = 0`. ``variance``: ``welch`` (default), :math:`s = \sqrt{s_a^2/n_a +
    s_b^2/n_b}` with the Welch-Satterthwaite :math:`\nu`; ``pooled``, Student's
    :math:`s = s_p\sqrt{1/n_a + 1/n_b}`, :math:`\nu = n_a + n_b - 2`; ``both``, each p the
    larger of the two (module docstring: our seeds against a reference's). ``pooled`` and
    ``both`` are Welch's where ``sd_b`` is 0 (an exact reference). When both SDs are 0 the
    difference is known exactly: p values are 0 or 1.

    Raises:
        ValueError: ``margin <= 0``, n < 2, negative SD, non-finite inputs or an unknown
            ``variance``.
    """
    vals = (mean_a, sd_a, mean_b, sd_b, margin)
    if not all(math.isfinite(v) for v in vals):
        raise ValueError(f"non-finite input {vals}")
    if not margin > 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    if n_a < 2 or n_b < 2 or sd_a < 0 or sd_b < 0:
        raise ValueError(f"need n >= 2 and sd >= 0, got n=({n_a}, {n_b}), sd=({sd_a}, {sd_b})")
    if variance not in VARIANCES:
        raise ValueError(f"variance must be one of {VARIANCES}, got {variance!r}")
    diff = float(mean_a - mean_b)
    if sd_b == 0 or variance == "welch":
        va, vb = sd_a**2 / n_a, sd_b**2 / n_b
        return _tost(diff, math.sqrt(va + vb), welch_df(va, vb, n_a, n_b), margin, "welch")
    se = pooled_sd(sd_a, n_a, sd_b, n_b) * math.sqrt(1 / n_a + 1 / n_b)
    pooled = _tost(diff, se, float(n_a + n_b - 2), margin, "pooled")
    if variance == "pooled":
        return pooled
    welch = equivalence_test_from_summary(mean_a, sd_a, n_a, mean_b, sd_b, n_b, margin)
    top = max((pooled, welch), key=lambda e: e.p_diff)
    lo, up = max(pooled.p_lower, welch.p_lower), max(pooled.p_upper, welch.p_upper)
    return Equivalence(diff, top.se, top.df, float(margin), lo, up, max(lo, up), top.p_diff,
                       "both")


def _tost(diff: float, se: float, df: float, margin: float, variance: str) -> Equivalence:
    """:class:`Equivalence` of ``diff`` with standard error ``se`` on ``df`` degrees of
    freedom (``se`` 0: the difference is exact, every p 0 or 1)."""
    p_lo, p_up = tost_p(diff, se, df, margin)
    if se == 0:
        return Equivalence(diff, 0.0, math.nan, float(margin), p_lo, p_up, max(p_lo, p_up),
                           float(diff == 0), variance)
    p_diff = float(2 * stats.t.sf(abs(diff) / se, df))
    return Equivalence(diff, se, float(df), float(margin), p_lo, p_up, max(p_lo, p_up), p_diff,
                       variance)


def _arr(x: Sequence[float], name: str, least: int = 1) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size < least:
        raise ValueError(f"{name} needs at least {least} value(s), got {a.size}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return a


@dataclass(frozen=True)
class Diff:
    """A difference of means ``diff = mean_a - mean_b`` and its test.

    Attributes:
        low, high: the t interval of ``diff`` at ``level`` (NaN when ``se = 0``: ``note``).
        se, df: its standard error and degrees of freedom (NaN df when ``se = 0``).
        t, p: the statistic and the two-sided p of ``diff = 0`` (``se = 0``: ``note``).
        p_equiv: TOST p of ``|diff| < margin`` (NaN for two samples).
        test: ``welch`` (two of our samples), against a reference :func:`vs_reference`'s
            ``pooled+welch``, ``welch`` (a null reference), ``single-case`` (n_a = 1),
            ``one-sample`` (an exact reference) or ``sign-flip``.
        note: why the t-test is undefined, else empty (:data:`NO_SPREAD`): two samples without
            spread get NaN t, p and interval; no spread against an exact reference (SD 0), the
            sign-flip test's p (at least ``2 / 2**n_a``; TOST ``1 / 2**n_a``), no interval.
    """

    diff: float
    low: float
    high: float
    se: float
    df: float
    t: float
    p: float
    p_equiv: float
    margin: float
    n_a: int
    n_b: int
    test: str
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _diff(d: float, se: float, df: float, level: float, n_a: int, n_b: int, test: str,
          margin: float = math.nan, exact_ref: bool = False) -> Diff:
    if se == 0:  # no spread anywhere: no t; against an exact value, the sign-flip test
        if not exact_ref:
            return Diff(d, math.nan, math.nan, 0.0, math.nan, math.nan, math.nan, math.nan,
                        margin, n_a, n_b, test, NO_SPREAD)
        p = sign_flip_p(np.full(n_a, d))  # n_a equal changes: 1 at d = 0, else 2 / 2**n_a
        # TOST: each one-sided flip test of d -/+ margin, 1 / 2**n_a where it lies inside
        pe = math.nan if math.isnan(margin) else 1 / 2**n_a if abs(d) < margin else 1.0
        return Diff(d, math.nan, math.nan, 0.0, math.nan, math.nan, p, pe, margin, n_a, n_b,
                    "sign-flip", f"{NO_SPREAD} (the reference is exact); exact sign-flip test")
    half = float(stats.t.ppf((1 + level) / 2, df)) * se
    t = d / se
    p = float(2 * stats.t.sf(abs(t), df))
    pe = math.nan if math.isnan(margin) else max(tost_p(d, se, df, margin))
    return Diff(d, d - half, d + half, se, float(df), t, p, pe, margin, n_a, n_b, test)


def welch_diff(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Diff:
    """Welch's test of two samples (scipy.stats.ttest_ind(equal_var=False)) with the interval
    of the difference: ``diff ± t_{(1+level)/2, df} * se``, se and df Welch-Satterthwaite.

    No spread in either group: NaN t, p and interval (:data:`NO_SPREAD`; ``note`` says so).
    Raises:
        ValueError: fewer than 2 values in a group, non-finite values.
    """
    x, y = _arr(a, "a", 2), _arr(b, "b", 2)
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = 0.0 if no_spread(x) and no_spread(y) else math.sqrt(va + vb)
    df = welch_df(va, vb, x.size, y.size) if se > 0 else math.nan
    return _diff(float(x.mean() - y.mean()), se, df, level, x.size, y.size, "welch")


def vs_reference(a: Sequence[float], mean: float, sd: float, n: int,
                 margin: float = EQUIVALENCE_MARGIN, level: float = 0.95,
                 seeds: bool = True) -> Diff:
    """Our sample ``a`` (n_a,) against a reference summary (``mean``, ``sd``, ``n`` seeds).

    ``seeds`` (the reference is seeds of the same kind of model), from n_a = 2: Student's
    pooled test and Welch's test, each p the larger of the two and the interval the union of
    theirs, so that the verdict holds whichever reading of the spread is right (module
    docstring); ``test`` ``pooled+welch``, ``se`` and ``df`` those of the larger p. At n_a = 1
    the single-case test, ``sd * sqrt(1 + 1/n)`` on ``n - 1`` degrees of freedom.
    ``seeds=False``: Welch's test alone (a null distribution of another kind, e.g. shuffled
    networks, whose SD says nothing of the spread of our models). An exact reference (``sd =
    0``, e.g. an exact "no loss"): the one-sample t-test with our SD, and with no spread in
    ``a`` either the sign-flip test (:class:`Diff`'s ``note``).

    Raises:
        ValueError: empty ``a``, ``n < 2``, negative or non-finite reference values.
    """
    x = _arr(a, "a", 1)
    if not (n >= 2 and sd >= 0 and math.isfinite(sd) and math.isfinite(mean)):
        raise ValueError(f"the reference needs n >= 2 and a finite sd >= 0, got mean={mean}, "
                         f"sd={sd}, n={n}")
    if x.size == 1:
        se = sd * math.sqrt(1 + 1 / n)
        return _diff(float(x[0] - mean), se, n - 1, level, 1, int(n), "single-case", margin,
                     exact_ref=True)
    if sd == 0 and no_spread(x):  # nothing varies: the exact test (Diff's note)
        return _diff(float(x.mean() - mean), 0.0, math.nan, level, x.size, int(n),
                     "one-sample", margin, exact_ref=True)
    m, s = float(x.mean()), float(x.std(ddof=1))
    kinds = ("pooled", "welch") if seeds and sd > 0 else ("welch",)
    ds = []
    for kind in kinds:
        eq = equivalence_test_from_summary(m, s, x.size, mean, sd, int(n), margin, kind)
        name = kind if sd > 0 else "one-sample"
        ds.append(_diff(eq.diff, eq.se, eq.df, level, x.size, int(n), name, margin))
    if len(ds) == 1:
        return ds[0]
    top = max(ds, key=lambda d: d.p)
    return replace(top, low=min(d.low for d in ds), high=max(d.high for d in ds),
                   p_equiv=max(d.p_equiv for d in ds), test="pooled+welch")


# --------------------------------------------------------------------------- permutation


@dataclass(frozen=True)
class Permutation:
    """Exact permutation test of ``mean_a - mean_b``.

    Attributes:
        p: share of the ``splits`` whose statistic is at least as extreme as the observed one.
        floor: the smallest p these pooled values can give (the most extreme split's p;
            ties between values can raise it above :func:`permutation_floor`).
        splits: ``C(n_a + n_b, n_a)``, all enumerated.
    """

    diff: float
    p: float
    floor: float
    splits: int
    n_a: int
    n_b: int
    alternative: str

    def to_dict(self) -> dict:
        return asdict(self)


_ALTERNATIVES = ("two-sided", "greater", "less")


def _check_alt(alternative: str) -> None:
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"unknown alternative {alternative!r}; valid: {', '.join(_ALTERNATIVES)}")


def permutation_floor(n_a: int, n_b: int, alternative: str = "two-sided") -> float:
    """The smallest p an exact permutation test of a difference in means can reach with
    ``n_a`` and ``n_b`` distinct values: ``1 / C(n_a + n_b, n_a)``, doubled for a two-sided
    test with ``n_a == n_b`` (the mirror split, groups swapped, is as extreme).

    Examples: 3 vs 3 seeds, two-sided: 2/20 = 0.1; 4 vs 3: 1/35; 5 vs 4: 1/126.
    """
    _check_alt(alternative)
    if n_a < 1 or n_b < 1:
        raise ValueError(f"need n_a, n_b >= 1, got {n_a}, {n_b}")
    c = math.comb(n_a + n_b, n_a)
    return (2 if alternative == "two-sided" and n_a == n_b else 1) / c


def permutation_test(a: Sequence[float], b: Sequence[float],
                     alternative: str = "two-sided") -> Permutation:
    """Exact permutation test of ``mean(a) - mean(b)``: every way of splitting the pooled
    values into groups of ``n_a`` and ``n_b`` is enumerated.

    ``two-sided``: p = share of splits with ``|diff| >= |observed|``; ``greater``: ``diff >=
    observed``; ``less``: ``diff <= observed`` (within :data:`SPLIT_TOL`).

    Raises:
        ValueError: an empty group, non-finite values, more than
            :data:`~lstpe.stats.formulas.MAX_SPLITS` splits.
    """
    _check_alt(alternative)
    x, y = _arr(a, "a"), _arr(b, "b")
    d = split_weights(x.size, y.size) @ np.concatenate([x, y])  # (S,) each split's diff
    n_a, splits = x.size, d.size
    obs = float(x.mean() - y.mean())
    if alternative == "two-sided":
        d, obs_ = np.abs(d), abs(obs)
        extreme = d.max()
    elif alternative == "greater":
        obs_, extreme = obs, d.max()
    else:
        d, obs_ = -d, -obs
        extreme = d.max()
    p = float(np.mean(d >= obs_ - SPLIT_TOL))
    floor = float(np.mean(d >= extreme - SPLIT_TOL))
    return Permutation(obs, p, floor, splits, n_a, y.size, alternative)


def shift_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95
                   ) -> tuple[float, float]:
    r"""The exact permutation test's interval for a shift: the hull of the shifts
    :math:`\delta` for which :func:`permutation_test` (two-sided) of ``a - delta`` against
    ``b`` gives :math:`p \ge 1 - \text{level}`.

    Each split's difference is linear in :math:`\delta` (:math:`D_s - c_s\delta`, with
    :math:`c_s` the share of ``a`` in the split's first group minus its share in the second),
    so p changes only where two such lines cross in absolute value; p is evaluated at every
    crossing and between them (up to :data:`SHIFT_SCAN` split-evaluations, 7+7 seeds; beyond,
    each bound is found by bisection over the crossings, which assumes p rises towards the
    observed difference on each side, the usual shape). Where the test's floor is at or above
    ``1 - level`` (3 + 3 seeds: 0.1) no shift is rejected and the interval is
    ``(-inf, inf)``: the seeds cannot bound the difference at this level.

    Raises:
        ValueError: as :func:`permutation_test`; ``level`` outside (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    x, y = _arr(a, "a"), _arr(b, "b")
    alpha = 1 - level
    w = split_weights(x.size, y.size)                      # (S, n)
    c = w[:, :x.size].sum(axis=1)                          # (S,) slope of each split in delta
    d0 = w @ np.concatenate([x, y])                        # (S,) each split at delta = 0
    obs = float(x.mean() - y.mean())                       # the identity split: obs - delta

    def p_at(delta: np.ndarray) -> np.ndarray:             # (K,) two-sided p at each shift
        out = np.empty(delta.size)
        for i in range(0, delta.size, 64):                 # 64 shifts at a time: (64, S)
            k = delta[i:i + 64, None]
            out[i:i + 64] = (np.abs(d0 - c * k) >= np.abs(obs - k) - SPLIT_TOL).mean(axis=1)
        return out

    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.concatenate([(d0 - obs) / (c - 1), (d0 + obs) / (c + 1)])
    cross = np.unique(cross[np.isfinite(cross)])
    span = 1.0 + (np.abs(cross).max() if cross.size else abs(obs))
    mids = (cross[1:] + cross[:-1]) / 2
    grid = np.sort(np.concatenate([cross, mids, [obs, cross.min(initial=obs) - span,
                                                 cross.max(initial=obs) + span]]))
    def kept(g: np.ndarray) -> np.ndarray:                  # (K,) bool: not rejected
        return p_at(g) >= alpha - SPLIT_TOL

    if grid.size * d0.size <= SHIFT_SCAN:
        ok = grid[kept(grid)]                              # obs is in it: p(obs) = 1
        low = -math.inf if ok[0] == grid[0] else float(ok[0])
        high = math.inf if ok[-1] == grid[-1] else float(ok[-1])
        return (low, high)
    at = int(np.searchsorted(grid, obs))
    return (_first_kept(grid[:at + 1], kept, -math.inf),
            -_first_kept(-grid[at:][::-1], lambda g: kept(-g), -math.inf))


def _first_kept(pts: np.ndarray, kept, outside: float) -> float:
    """The first of ascending ``pts`` that ``kept`` accepts, by bisection (``kept`` false up
    to a point and true after it; its last point is kept); ``outside`` if the first is."""
    if kept(pts[:1])[0]:
        return outside
    lo, hi = 0, pts.size - 1                               # kept(pts[lo]) false, pts[hi] true
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if kept(pts[mid:mid + 1])[0] else (mid, hi)
    return float(pts[hi])


SHIFT_SCAN = 50_000_000
"""Split-evaluations up to which :func:`shift_interval` scans every crossing (7 + 7 seeds:
about 5e7); beyond, it bisects."""
