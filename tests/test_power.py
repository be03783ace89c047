"""The smallest difference each verdict's test resolves (lstpe.stats.power), checked against
the noncentral t distribution (closed form), scipy's own t-tests and the exact permutation test
run on fresh draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from lstpe.evidence import tables as ev
from lstpe.stats import power as pw
from lstpe.stats import seed_tests as st


@pytest.mark.parametrize("n_a,n_b", [(2, 15), (3, 15), (5, 15), (3, 3)])
def test_the_pooled_quadrature_is_the_noncentral_t(n_a: int, n_b: int) -> None:
    """Student's test's power is exact from the noncentral t; the quadrature must agree."""
    nu = n_a + n_b - 2
    crit = stats.t.ppf(0.975, nu)
    for delta in (0.5, 1.0, 2.0):
        nc = delta / math.sqrt(1 / n_a + 1 / n_b)
        exact = stats.nct.sf(crit, nu, nc) + stats.nct.cdf(-crit, nu, nc)
        assert pw.power_vs_reference(delta, 1.0, n_a, n_b, rule="pooled") == pytest.approx(
            exact, abs=1e-3)
    k = pw.mdd_vs_reference(1.0, n_a, n_b, rule="pooled")
    nc = k / math.sqrt(1 / n_a + 1 / n_b)  # the exact power there is 0.8 (closed-form mdd's
    assert stats.nct.sf(crit, nu, nc) + stats.nct.cdf(-crit, nu, nc) == pytest.approx(
        0.8, abs=1e-3)  # normal-approximation formula is 1% short of it at 3 against 3)


@pytest.mark.parametrize("n_a", [2, 3, 5])
def test_the_rows_mdd_gives_the_larger_p_rule_power_08(n_a: int) -> None:
    """Draw seeds a true MDD apart (common SD) and run scipy's Student and Welch tests: the
    larger p rejects 80% of the time, while at the pooled test's MDD it rejects far less."""
    rng = np.random.default_rng(11 + n_a)
    r = 20_000

    def rejects(delta: float) -> float:
        a, b = rng.normal(delta, 1.0, (r, n_a)), rng.normal(0.0, 1.0, (r, 15))
        p = np.maximum(stats.ttest_ind(a, b, axis=1).pvalue,
                       stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue)
        return float(np.mean(p < 0.05))

    assert rejects(pw.mdd_vs_reference(1.0, n_a, 15)) == pytest.approx(0.8, abs=0.015)
    assert rejects(pw.mdd(1.0, n_a, 15)) < {2: 0.45, 3: 0.55, 5: 0.72}[n_a]


def test_the_rules_order_and_one_seed_is_the_single_case_test() -> None:
    for n in (2, 3, 5):
        pooled, welch, both = (pw.mdd_vs_reference(0.04, n, 15, rule=r) for r in pw.MDD_RULES)
        assert pooled < welch <= both
    assert pw.mdd_vs_reference(0.04, 2, 15) > 3.5 * pw.mdd(0.04, 2, 15)  # 1 df on our SD
    for rule in pw.MDD_RULES:
        assert pw.mdd_vs_reference(0.04, 1, 15, rule=rule) == pytest.approx(
            pw.mdd(0.04, 1, 15), rel=2e-3)
    assert pw.mdd_vs_reference(0.0, 3, 15) == 0.0


def test_permutation_power_matches_the_test_run_on_fresh_draws() -> None:
    rng = np.random.default_rng(3)
    delta, hits = 2.5, 0
    for _ in range(1500):
        hits += st.permutation_test(rng.normal(delta, 1, 4), rng.normal(0, 1, 5)).p < 0.05
    assert pw.permutation_power(delta, 1.0, 4, 5) == pytest.approx(hits / 1500, abs=0.035)


def test_permutation_mdd_at_its_floor_and_beyond_the_enumerated_splits() -> None:
    assert st.permutation_floor(3, 3) == pytest.approx(0.1)
    assert math.isinf(pw.mdd_permutation(0.05, 3, 3))  # p can never go under 0.05
    assert pw.permutation_power(10.0, 1.0, 3, 3) == 0.0
    # 4 against 4 (floor 2/70): the t-test's MDD buys the permutation test power near 0.6
    t_mdd = pw.mdd(1.0, 4, 4)
    assert pw.permutation_power(t_mdd, 1.0, 4, 4) < 0.7 < 0.8
    assert pw.mdd_permutation(1.0, 4, 4) > 1.1 * t_mdd
    assert pw.permutation_power(pw.mdd_permutation(1.0, 5, 5), 1.0, 5, 5) == pytest.approx(
        0.8, abs=0.01)
    assert pw.mdd_permutation(0.1, 8, 8) == pw.mdd(0.1, 8, 8)  # 12,870 splits: the t-test's


def test_evidence_rows_and_contrasts_carry_their_tests_mdd() -> None:
    ref = {c: ev.Reference(0.95, 0.04, 15, "authors@200") for c in ("a", "b")}
    rows = ev.evidence_rows({"a": [0.93, 0.97], "b": [0.91, 0.95, 0.96, 0.94, 0.92]},
                            ref).set_index("cell")
    assert rows.loc["a", "mdd"] == pytest.approx(pw.mdd_vs_reference(0.04, 2, 15))
    assert rows.loc["b", "mdd"] == pytest.approx(pw.mdd_vs_reference(0.04, 5, 15))
    null = ev.evidence_rows({"a": [0.5, 0.6, 0.55]},
                            {"a": ev.Reference(0.3, 0.1, 200, "shuffled", seeds=False)})
    assert null["mdd"].iloc[0] == pytest.approx(pw.mdd_vs_reference(0.1, 3, 200, rule="welch"))
    con = ev.contrast_rows({"x": [0.9, 0.92, 0.95], "y": [0.8, 0.85, 0.83]}, [("x", "y")])
    assert math.isinf(con["mdd"].iloc[0]) and con["verdict"].iloc[0] == "no difference shown"


@pytest.mark.parametrize("call", [
    lambda: pw.mdd_vs_reference(-0.1, 3, 15),
    lambda: pw.mdd_vs_reference(0.1, 3, 1),
    lambda: pw.mdd_vs_reference(0.1, 3, 15, rule="holm"),
    lambda: pw.mdd_permutation(0.1, 0, 5),
    lambda: pw.mdd_permutation(0.1, 3, 5, power=1.0),
    lambda: pw.permutation_power(1.0, 1.0, 8, 8),
])
def test_bad_arguments_are_named(call) -> None:
    with pytest.raises(ValueError, match=r"-0\.1|n=\(3, 1\)|holm|0, 5|power=1\.0|splits"):
        call()
