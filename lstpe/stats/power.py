r"""The smallest difference a test can resolve at its n: minimum detectable differences (MDD,
power 0.8 at level 0.05 unless asked) of the tests that decide the book's verdicts.

An MDD belongs to a test: quoting one test's MDD beside another test's verdict misstates what
the seeds could have shown. Three tests decide verdicts here, each with its own:

* :func:`mdd`: a t-test with a common SD, closed form (Student's two-sample test; the
  one-sample test against an exact value; at n_a = 1 the single-case test).
* :func:`mdd_vs_reference`: a row against a reference's seeds
  (:func:`lstpe.stats.seed_tests.vs_reference`): Student's pooled test and Welch's, each p
  the larger. With our SD estimated from 1-4 degrees of freedom, Welch's test is far weaker
  than the pooled one, so this MDD is larger than :func:`mdd`: against 15 seeds, 8.7 SDs at 2
  seeds (not 2.3), 2.9 at 3 (not 1.9), 1.8 at 5 (not 1.5). Two seeds resolve less than one (3.1
  SDs): a single model gets the single-case test, which can only assume our spread is the
  reference's; from two seeds the rule refuses that assumption. Its power is computed by
  quadrature, exactly up to the grid: given the two sample SDs the difference of means is
  normal and independent of them (common SD :math:`\sigma`), so :math:`P(\text{reject}) =
  E_{s_a, s_b}[\Phi((\delta - h)/\tau) + \Phi((-\delta - h)/\tau)]`, :math:`\tau =
  \sigma\sqrt{1/n_a + 1/n_b}`, :math:`h` the larger of the two tests' thresholds
  :math:`t_{1-\alpha/2,\nu}\,se`, the expectation over the scaled :math:`\chi^2` quantiles of
  both SDs (a probability-midpoint grid).
* :func:`mdd_permutation`: the exact permutation test of two of our groups
  (:func:`lstpe.stats.seed_tests.permutation_test`), whose p cannot go below
  :func:`~lstpe.stats.seed_tests.permutation_floor`: where that floor is at or above alpha
  no difference can be shown (MDD infinite; 3 seeds against 3), and near it the test is weaker
  than the t-test (4 against 4: power 0.64 at the t-test's MDD). Its power is estimated from
  :data:`POWER_DRAWS` normal draws with a fixed seed, every split enumerated (deterministic;
  Monte Carlo error about 0.007 in power), the t-test's MDD beyond :data:`POWER_MAX_SPLITS`
  splits, where the two tests agree (7 against 7: within 0.4%).

All of them take the SD as the common one of both groups: the MDD says what the seeds could
resolve if the spread is what it is estimated to be.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import optimize, stats

from lstpe.stats.formulas import pooled_sd, split_weights, welch_df
from lstpe.stats.seed_tests import permutation_floor

__all__ = ["mdd", "mdd_vs_reference", "power_vs_reference", "mdd_permutation",
           "permutation_power", "MDD_RULES", "POWER_DRAWS", "POWER_MAX_SPLITS", "GRID"]

MDD_RULES = ("pooled", "welch", "both")
"""How a row is tested against a reference's seeds (``both``: the larger p of the two)."""

GRID = 400
"""Probability-midpoint quantiles per sample SD in :func:`power_vs_reference`'s quadrature."""

POWER_DRAWS = 4000
"""Normal draws behind :func:`permutation_power` (Monte Carlo SE of a power of 0.8: 0.006)."""

POWER_MAX_SPLITS = 3432
"""Above C(14, 7) splits :func:`mdd_permutation` gives the t-test's MDD."""


def _check(sd: float, alpha: float, power: float) -> None:
    if not (sd >= 0 and math.isfinite(sd) and 0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"need a finite sd >= 0, alpha and power in (0, 1); got sd={sd}, "
                         f"alpha={alpha}, power={power}")


def mdd(sd: float, n_a: int, n_b: int | None = None, alpha: float = 0.05,
        power: float = 0.8) -> float:
    r"""The smallest true difference of means a two-sided two-sample t-test at level ``alpha``
    detects with probability ``power``, for a common SD ``sd`` and ``n_a``, ``n_b`` seeds:
    :math:`(t_{1-\alpha/2,\nu} + t_{\text{power},\nu})\,\sigma\sqrt{1/n_a + 1/n_b}`,
    :math:`\nu = n_a + n_b - 2` (a t test rejects when :math:`|\hat\delta| > t_{1-\alpha/2}
    \,se`; a true :math:`\delta` puts :math:`\hat\delta/se` about :math:`\delta/se` away from
    0, so it exceeds the critical value with probability ``power`` when
    :math:`\delta/se = t_{1-\alpha/2} + t_\text{power}`). ``n_b=None``: the one-sample test
    against an exact reference (:math:`\nu = n_a - 1`, :math:`se = \sigma/\sqrt{n_a}`).

    Raises:
        ValueError: ``sd < 0``, too few seeds (``n_a + n_b < 3``; one-sample ``n_a < 2``),
            alpha or power outside (0, 1).
    """
    one = n_b is None
    nb = 0 if one else n_b
    if not (sd >= 0 and n_a >= 1 and (one or nb >= 1) and n_a + nb >= (2 if one else 3)
            and 0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"need sd >= 0, n_a + n_b >= 3 (one sample: n_a >= 2), alpha and "
                         f"power in (0, 1); got sd={sd}, n=({n_a}, {n_b}), alpha={alpha}, "
                         f"power={power}")
    nu = n_a - 1 if one else n_a + nb - 2
    scale = math.sqrt(1 / n_a) if one else math.sqrt(1 / n_a + 1 / nb)
    return float((stats.t.ppf(1 - alpha / 2, nu) + stats.t.ppf(power, nu)) * sd * scale)


def _sd_quantiles(n: int) -> np.ndarray:
    """(GRID,) sample SDs of ``n`` standard normal draws at probability midpoints."""
    u = (np.arange(GRID) + 0.5) / GRID
    return np.sqrt(stats.chi2.ppf(u, n - 1) / (n - 1))


@lru_cache(maxsize=256)
def _thresholds(n_a: int, n_b: int, alpha: float, rule: str) -> np.ndarray:
    """(GRID**2,) or (GRID,) (n_a = 1): the |difference of means| above which ``rule``
    rejects, for SD 1, at each grid point of the two sample SDs (equal weights)."""
    sb = _sd_quantiles(n_b)[None, :]                          # (1, G)
    if n_a == 1:  # the single-case test: the pooled test with only the reference's SD
        return (stats.t.ppf(1 - alpha / 2, n_b - 1) * sb[0] * math.sqrt(1 + 1 / n_b))
    sa = _sd_quantiles(n_a)[:, None]                          # (G, 1)
    sp = pooled_sd(sa, n_a, sb, n_b)                           # (G, G)
    pooled = stats.t.ppf(1 - alpha / 2, n_a + n_b - 2) * sp * math.sqrt(1 / n_a + 1 / n_b)
    va, vb = sa**2 / n_a, sb**2 / n_b
    welch = stats.t.ppf(1 - alpha / 2, welch_df(va, vb, n_a, n_b)) * np.sqrt(va + vb)
    h = {"pooled": pooled, "welch": welch, "both": np.maximum(pooled, welch)}[rule]
    return np.ascontiguousarray(h).ravel()


def power_vs_reference(delta: float, sd: float, n_a: int, n_b: int, alpha: float = 0.05,
                       rule: str = "both") -> float:
    """The probability that a row of ``n_a`` seeds whose true mean is ``delta`` off a reference
    of ``n_b`` seeds (common SD ``sd``) is called different by ``rule`` (:data:`MDD_RULES`) at
    level ``alpha`` (module docstring: the quadrature). ``n_a = 1``: the single-case test.

    Raises:
        ValueError: ``sd <= 0``, ``n_a < 1``, ``n_b < 2``, an unknown rule, alpha outside (0, 1).
    """
    if rule not in MDD_RULES:
        raise ValueError(f"rule must be one of {MDD_RULES}, got {rule!r}")
    if not (sd > 0 and math.isfinite(sd) and n_a >= 1 and n_b >= 2 and 0 < alpha < 1
            and math.isfinite(delta)):
        raise ValueError(f"need sd > 0, n_a >= 1, n_b >= 2, alpha in (0, 1), a finite delta; "
                         f"got delta={delta}, sd={sd}, n=({n_a}, {n_b}), alpha={alpha}")
    h = _thresholds(int(n_a), int(n_b), float(alpha), rule)
    tau = math.sqrt(1 / n_a + 1 / n_b)
    k = abs(delta) / sd
    return float(np.mean(stats.norm.cdf((k - h) / tau) + stats.norm.cdf((-k - h) / tau)))


def _solve(power_at, power: float) -> float:
    """The k >= 0 at which the increasing ``power_at(k)`` reaches ``power``."""
    hi = 1.0
    while power_at(hi) < power:
        hi *= 2
        if hi > 1e6:
            return math.inf
    return float(optimize.brentq(lambda k: power_at(k) - power, 0.0, hi, xtol=1e-6))


@lru_cache(maxsize=256)
def _k_reference(n_a: int, n_b: int, alpha: float, power: float, rule: str) -> float:
    return _solve(lambda k: power_vs_reference(k, 1.0, n_a, n_b, alpha, rule), power)


def mdd_vs_reference(sd: float, n_a: int, n_b: int, alpha: float = 0.05, power: float = 0.8,
                     rule: str = "both") -> float:
    """The smallest true difference a row of ``n_a`` seeds against a reference of ``n_b``
    seeds (common SD ``sd``) is called different with probability ``power`` by ``rule``
    (:data:`MDD_RULES`; ``both`` is :func:`~lstpe.stats.seed_tests.vs_reference`'s rule, and
    at ``n_a = 1`` every rule is the single-case test, :func:`mdd`'s).

    Raises:
        ValueError: as :func:`power_vs_reference`, or power outside (0, 1).
    """
    _check(sd, alpha, power)
    power_vs_reference(0.0, 1.0, n_a, n_b, alpha, rule)  # checks the other arguments
    if sd == 0:
        return 0.0
    return sd * _k_reference(int(n_a), int(n_b), float(alpha), float(power), rule)


@lru_cache(maxsize=8)  # up to (4000, 3432) float64 each: 110 MB
def _permutation_draws(n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    """(R, S) the split statistics of :data:`POWER_DRAWS` standard normal samples (the
    observed split first) and (S,) each split's change per unit shift of group a."""
    w = split_weights(n_a, n_b)                             # (S, n), row 0 the observed split
    z = np.random.default_rng(0).standard_normal((POWER_DRAWS, n_a + n_b))
    return z @ w.T, w[:, :n_a].sum(axis=1)


def permutation_power(delta: float, sd: float, n_a: int, n_b: int,
                      alpha: float = 0.05) -> float:
    """The probability that the exact two-sided permutation test of ``n_a`` against ``n_b``
    normal values (common SD ``sd``, true difference ``delta``) gives p < ``alpha``,
    estimated from :data:`POWER_DRAWS` fixed draws (0 where the floor is at or above alpha).

    Raises:
        ValueError: ``sd <= 0``, a group under 1, alpha outside (0, 1), more than
            :data:`POWER_MAX_SPLITS` splits.
    """
    if not (sd > 0 and n_a >= 1 and n_b >= 1 and 0 < alpha < 1 and math.isfinite(delta)):
        raise ValueError(f"need sd > 0, n_a, n_b >= 1, alpha in (0, 1), a finite delta; got "
                         f"delta={delta}, sd={sd}, n=({n_a}, {n_b}), alpha={alpha}")
    if math.comb(n_a + n_b, n_a) > POWER_MAX_SPLITS:
        raise ValueError(f"{n_a} + {n_b} values: more than {POWER_MAX_SPLITS} splits")
    if permutation_floor(n_a, n_b) >= alpha:
        return 0.0
    d0, c = _permutation_draws(int(n_a), int(n_b))
    d = np.abs(d0 + (delta / sd) * c)                       # (R, S)
    p = np.mean(d >= d[:, :1] - 1e-12, axis=1)
    return float(np.mean(p < alpha))


@lru_cache(maxsize=256)
def _k_permutation(n_a: int, n_b: int, alpha: float, power: float) -> float:
    if permutation_floor(n_a, n_b) >= alpha:
        return math.inf
    return _solve(lambda k: permutation_power(k, 1.0, n_a, n_b, alpha), power)


def mdd_permutation(sd: float, n_a: int, n_b: int, alpha: float = 0.05,
                    power: float = 0.8) -> float:
    """The smallest true difference the exact permutation test of ``n_a`` against ``n_b``
    seeds (common SD ``sd``) detects with probability ``power``: infinite where its floor is
    at or above ``alpha``, :func:`mdd` (the t-test's) beyond :data:`POWER_MAX_SPLITS`.

    Raises:
        ValueError: a negative or non-finite ``sd``, a group under 1, alpha or power outside
            (0, 1).
    """
    _check(sd, alpha, power)
    if n_a < 1 or n_b < 1:
        raise ValueError(f"need n_a, n_b >= 1, got {n_a}, {n_b}")
    if math.comb(n_a + n_b, n_a) > POWER_MAX_SPLITS:
        return mdd(sd, n_a, n_b, alpha, power)
    k = _k_permutation(int(n_a), int(n_b), float(alpha), float(power))
    return math.inf if math.isinf(k) else sd * k
