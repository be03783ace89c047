"""A monotone trend over units (accuracy over sigma): :func:`trend_test` -- Kendall's
:math:`\tau_b` with a permutation p -- and the least-squares slope per doubling of sigma with
its t interval, as the effect size (:class:`Trend`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from lstpe.stats.seed_tests import _arr, no_spread

__all__ = ["Trend", "trend_test"]


@dataclass(frozen=True)
class Trend:
    """A monotone trend of ``y`` over ``x`` across units.

    Attributes:
        n: units; levels: distinct ``x`` values.
        tau: Kendall's tau-b; p_perm: its two-sided permutation p (``y`` shuffled over the
            units ``n_perm`` times, ``(1 + #{|S*| >= |S|}) / (1 + n_perm)``, so never below
            ``1 / (1 + n_perm)``); p_asymptotic: scipy.stats.kendalltau's.
        slope, slope_low, slope_high, slope_p: least-squares slope of ``y`` per doubling of
            ``x`` (on log2 x), its t interval (df n - 2) and two-sided p: the size of the
            trend, not its shape (accuracy over sigma is flat, then falls).
        tied: every ``y`` equal: tau, its p and the slope's interval and p are NaN, slope 0.
    """

    n: int
    levels: int
    tau: float
    p_perm: float
    p_asymptotic: float
    n_perm: int
    slope: float
    slope_low: float
    slope_high: float
    slope_p: float
    tied: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def trend_test(x: Sequence[float], y: Sequence[float], n_perm: int = 20_000, seed: int = 0,
               level: float = 0.95) -> Trend:
    """Kendall's tau-b of ``y`` (N,) over ``x`` (N,) with a permutation p, and the slope of
    ``y`` per doubling of ``x`` (``x > 0``) with its interval (see :class:`Trend`).

    Raises:
        ValueError: unequal lengths, fewer than 3 units or 2 levels of ``x``, ``x <= 0``,
            non-finite values, ``n_perm < 1``.
    """
    xs, ys = _arr(x, "x", 3), _arr(y, "y", 3)
    if xs.size != ys.size:
        raise ValueError(f"x and y differ in length: {xs.size} and {ys.size}")
    if np.unique(xs).size < 2 or np.any(xs <= 0):
        raise ValueError("x needs at least 2 distinct values, all > 0")
    if n_perm < 1:
        raise ValueError(f"n_perm must be >= 1, got {n_perm}")
    levels = int(np.unique(xs).size)
    if no_spread(ys):
        return Trend(xs.size, levels, *[math.nan] * 3, n_perm, 0.0, *[math.nan] * 3, True)
    i, j = np.triu_indices(xs.size, 1)
    sx = np.sign(xs[i] - xs[j])
    denom = math.sqrt((i.size - np.sum(sx == 0)) * (i.size - np.sum(ys[i] == ys[j])))
    s_obs = float(np.sign(ys[i] - ys[j]) @ sx)
    tau = s_obs / denom
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_perm, 2000):
        k = min(2000, n_perm - start)
        yp = ys[rng.permuted(np.tile(np.arange(ys.size), (k, 1)), axis=1)]
        s = np.sign(yp[:, i] - yp[:, j]) @ sx
        hits += int(np.sum(np.abs(s) >= abs(s_obs) - 1e-9))
    p_perm = (1 + hits) / (1 + n_perm)
    p_asym = float(stats.kendalltau(xs, ys).pvalue)
    lr = stats.linregress(np.log2(xs), ys)
    half = float(stats.t.ppf((1 + level) / 2, xs.size - 2)) * lr.stderr
    return Trend(xs.size, levels, tau, p_perm, p_asym, n_perm,
                 float(lr.slope), float(lr.slope - half), float(lr.slope + half),
                 float(lr.pvalue))
