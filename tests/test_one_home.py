"""One home per formula: Welch's degrees of freedom and the pooled SD are written once, in
:mod:`lstpe.stats.formulas`, and every other module calls them; the formulas themselves
checked against scipy and hand values."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

import lstpe
from lstpe.stats import formulas as fm

ROOT = Path(lstpe.__file__).parent
HOME = "stats/formulas.py"

WELCH_DF = re.compile(r"\*\*\s*2\s*/\s*\(\s*[\w.]+\s*\*\*\s*2\s*/\s*\(\s*[\w.]+\s*-\s*1\s*\)")
"""``(va + vb) ** 2 / (va**2 / (n_a - 1) + ...``: the Welch-Satterthwaite df."""

POOLED_SD = re.compile(r"\(\s*[\w.]+\s*-\s*1\s*\)\s*\*\s*[\w.]+\s*\*\*\s*2"
                       r"|var\(ddof=1\)\s*\*\s*\(\s*[\w.]+\s*-\s*1\s*\)")
"""``(n_a - 1) * sd_a**2`` or ``x.var(ddof=1) * (x.size - 1)``: a pooled sum of squares."""

OLD_SPELLINGS = {
    WELCH_DF: ["df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))",
               "(va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1)) if se > 0"],
    POOLED_SD: ["sp2 = ((n_a - 1) * sd_a**2 + (n_b - 1) * sd_b**2) / (n_a + n_b - 2)",
                "sp = np.sqrt(((n_a - 1) * sa**2 + (n_b - 1) * sb**2) / nu)",
                "ss = (x.var(ddof=1) * (x.size - 1) if x.size > 1 else 0.0) + \\"],
}
"""How the package spelled each formula in the four (Welch) and three (pooled SD) places it
was written before :mod:`lstpe.stats.formulas`: the patterns must find every one of them."""


def homes(pattern: re.Pattern, root: Path = ROOT) -> set[str]:
    """The modules under ``root`` (paths relative to it) whose source matches ``pattern``."""
    return {p.relative_to(root).as_posix() for p in sorted(root.rglob("*.py"))
            if pattern.search(p.read_text())}


@pytest.mark.parametrize("pattern", [WELCH_DF, POOLED_SD], ids=["welch_df", "pooled_sd"])
def test_the_patterns_find_each_old_spelling(pattern: re.Pattern) -> None:
    assert all(pattern.search(s) for s in OLD_SPELLINGS[pattern])
    assert not pattern.search("se = math.sqrt(va + vb)")  # a plain standard error is no df


@pytest.mark.parametrize("pattern", [WELCH_DF, POOLED_SD], ids=["welch_df", "pooled_sd"])
def test_each_formula_is_written_in_one_module(pattern: re.Pattern) -> None:
    assert homes(pattern) == {HOME}


def test_welch_df_is_scipys() -> None:
    a, b = np.array([0.91, 0.95, 0.88, 0.97]), np.array([0.80, 0.99, 0.85])
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    want = sps.ttest_ind(a, b, equal_var=False).df
    assert fm.welch_df(va, vb, a.size, b.size) == pytest.approx(want, rel=1e-12)
    grid = fm.welch_df(np.array([va, 0.0]), np.array([vb, 0.0]), a.size, b.size)
    assert grid[0] == pytest.approx(want, rel=1e-12) and math.isnan(grid[1])
    assert math.isnan(fm.welch_df(0.0, 0.0, 3, 3))  # no spread: no df
    assert fm.welch_df(0.01, 0.0, 5, 15) == pytest.approx(4)  # an exact reference: n_a - 1


def test_pooled_sd_is_the_sd_about_each_groups_mean() -> None:
    a, b = np.array([1.0, 2.0, 4.0]), np.array([3.0, 7.0])
    dev = np.concatenate([a - a.mean(), b - b.mean()])
    want = math.sqrt((dev**2).sum() / (a.size + b.size - 2))
    assert fm.pooled_sd(a.std(ddof=1), 3, b.std(ddof=1), 2) == pytest.approx(want, rel=1e-12)
    assert fm.pooled_sd(0.0, 1, b.std(ddof=1), 2) == pytest.approx(b.std(ddof=1))  # n = 1


def test_tost_p_against_the_one_sided_t_tests() -> None:
    lo, up = fm.tost_p(0.01, 0.02, 6.0, 0.05)
    assert lo == pytest.approx(sps.t.sf(3.0, 6)) and up == pytest.approx(sps.t.cdf(-2.0, 6))
    assert fm.tost_p(0.01, 0.0, math.nan, 0.05) == (0.0, 0.0)  # exact and inside the margin
    assert fm.tost_p(0.07, 0.0, math.nan, 0.05) == (0.0, 1.0)


def test_sign_flip_p_hand_values() -> None:
    assert fm.sign_flip_p([0.3] * 5) == pytest.approx(2 / 32)  # only all + and all -
    assert fm.sign_flip_p([1.0, -1.0]) == 1.0
    assert fm.sign_flip_p([3.0, 1.0, 1.0]) == pytest.approx(2 / 8)  # |sum| >= 5: +-(3+1+1)
    assert fm.sign_flip_p([1.0, 1.0, 1.0, -1.0]) == pytest.approx(10 / 16)  # |sum| >= 2
    with pytest.raises(ValueError, match="n = 21"):
        fm.sign_flip_p(np.ones(21))


def test_split_weights_enumerate_every_split_once() -> None:
    w = fm.split_weights(2, 3)
    assert w.shape == (math.comb(5, 2), 5)
    np.testing.assert_allclose(w.sum(axis=1), 0.0, atol=1e-15)  # a shift of all values: 0
    np.testing.assert_allclose(w[0], [0.5, 0.5, -1 / 3, -1 / 3, -1 / 3])  # the observed
    assert len({tuple(r) for r in w}) == w.shape[0]
    with pytest.raises(ValueError, match="11 \\+ 11"):
        fm.split_weights(11, 11)
