r"""The formulas the tests of :mod:`lstpe.stats` are built of, each written here once.

The floor's own bottom (it imports nothing of lstpe); every other module of the package that
needs one of them calls it (``tests/test_one_home.py`` greps the package for a second copy of
the first two):

* :func:`welch_df`: the Welch-Satterthwaite degrees of freedom of a difference of two means;
* :func:`pooled_sd`: Student's pooled standard deviation of two groups;
* :func:`tost_p`: the two one-sided t-tests (TOST) of equivalence within a margin;
* :func:`sign_flip_p`: the exact sign-flip test of paired changes (every flip enumerated);
* :func:`split_weights`: every split of ``n_a + n_b`` values into two groups, as the weights
  that give each split's difference of means (the exact permutation test's statistics).

Each works element-wise on numpy arrays as on numbers, except :func:`sign_flip_p` and
:func:`split_weights`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

__all__ = ["welch_df", "pooled_sd", "tost_p", "sign_flip_p", "split_weights", "MAX_FLIPS",
           "MAX_SPLITS"]

MAX_FLIPS = 20
"""The most paired changes :func:`sign_flip_p` enumerates (2**20 flips)."""

MAX_SPLITS = 500_000
"""The most splits :func:`split_weights` enumerates (C(20, 10) = 184,756)."""


def welch_df(va: Any, vb: Any, n_a: Any, n_b: Any) -> Any:
    r"""Welch-Satterthwaite degrees of freedom of :math:`\bar a - \bar b`:
    :math:`(v_a + v_b)^2 / (v_a^2/(n_a - 1) + v_b^2/(n_b - 1))`.

    Args:
        va, vb: the squared standard errors of the two means, :math:`s^2/n` (numbers or
            arrays that broadcast); n_a, n_b: the group sizes (>= 2).
    Returns:
        The degrees of freedom (NaN where both ``va`` and ``vb`` are 0: no spread, no t).
    """
    if np.ndim(va + vb) == 0 and not va + vb > 0:
        return math.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    return float(df) if np.ndim(df) == 0 else np.where(np.asarray(va + vb) > 0, df, np.nan)


def pooled_sd(sd_a: Any, n_a: Any, sd_b: Any, n_b: Any) -> Any:
    r"""Student's pooled SD of two groups: :math:`\sqrt{((n_a - 1)s_a^2 + (n_b - 1)s_b^2) /
    (n_a + n_b - 2)}`, on :math:`n_a + n_b - 2` degrees of freedom.

    Args:
        sd_a, sd_b: the groups' SDs (ddof = 1; a group of one has none: pass 0, it weighs 0);
            n_a, n_b: their sizes, ``n_a + n_b >= 3``. Numbers or arrays that broadcast.
    """
    var = ((n_a - 1) * sd_a**2 + (n_b - 1) * sd_b**2) / (n_a + n_b - 2)
    return float(np.sqrt(var)) if np.ndim(var) == 0 else np.sqrt(var)


def tost_p(diff: float, se: float, df: float, margin: float) -> tuple[float, float]:
    r"""The two one-sided t-tests of equivalence within ``margin``: ``(p_lower, p_upper)``,
    :math:`P(T_\nu \ge (\delta + m)/s)` (H0 :math:`\delta \le -m`) and :math:`P(T_\nu \le
    (\delta - m)/s)` (H0 :math:`\delta \ge m`); equivalence is shown where the larger is below
    alpha. ``se`` 0 (the difference is exact): each p is 0 or 1."""
    if se == 0:
        return float(not diff > -margin), float(not diff < margin)
    return (float(stats.t.sf((diff + margin) / se, df)),
            float(stats.t.cdf((diff - margin) / se, df)))


def sign_flip_p(d: Sequence[float] | np.ndarray, tol: float = 1e-12) -> float:
    """The exact two-sided sign-flip p of paired changes ``d`` (n,) having mean 0: the share of
    the ``2**n`` sign flips whose ``|mean|`` is at least the observed one (within ``tol``).
    The smallest p it can give is ``2 / 2**n``.

    Raises:
        ValueError: no values, or more than :data:`MAX_FLIPS` (naming n).
    """
    x = np.asarray(d, dtype=np.float64).ravel()
    if not 1 <= x.size <= MAX_FLIPS:
        raise ValueError(f"the sign-flip test enumerates 2**n flips: n = {x.size} is not in "
                         f"1..{MAX_FLIPS}")
    signs = 1 - 2 * ((np.arange(2 ** x.size)[:, None] >> np.arange(x.size)) & 1)
    means = np.abs(signs @ x) / x.size
    return float(np.mean(means >= abs(float(x.mean())) - tol))


def split_weights(n_a: int, n_b: int) -> np.ndarray:
    """(S, n_a + n_b) every split of the pooled values (group ``a``'s first) into groups of
    ``n_a`` and ``n_b``, as weights ``1/n_a`` (first group) and ``-1/n_b`` (second): a split's
    difference of means is ``weights @ pooled``. Row 0 is the observed split; S =
    ``C(n_a + n_b, n_a)``.

    Raises:
        ValueError: a group under 1, or more than :data:`MAX_SPLITS` splits (naming both n).
    """
    if n_a < 1 or n_b < 1:
        raise ValueError(f"need n_a, n_b >= 1, got {n_a}, {n_b}")
    n, splits = n_a + n_b, math.comb(n_a + n_b, n_a)
    if splits > MAX_SPLITS:
        raise ValueError(f"{splits} splits of {n_a} + {n_b} values: more than {MAX_SPLITS} "
                         "to enumerate")
    idx = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), n_a)),
                      dtype=np.int64, count=splits * n_a).reshape(splits, n_a)
    w = np.full((splits, n), -1.0 / n_b)
    np.put_along_axis(w, idx, 1.0 / n_a, axis=1)
    return w
