"""Statistics on legal but degenerate inputs (issue item 10): tied values, seeds without
spread, constant per-puzzle accuracies, a witness without AdamW rows, one seed a side, and
accuracies outside [0, 1]. Each test states what the page or verdict must say instead of a
NaN, a certainty the data lack, a false reason or a crash."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lstpe.chapters import facts
from lstpe.claims import Inputs, attention, humans, noise, sigma, table1, weight_decay
from lstpe.claims._common import trend, with_equivalence
from lstpe.evidence import claim_tables as ct
from lstpe.evidence import tables as ev
from lstpe.stats import seed_stats as ss
from lstpe.stats import seed_tests as st

SIGMAS = (0.1, 0.2, 2.0)


def _final(acc: dict[str, list[float]]) -> pd.DataFrame:
    """One row per model: ``acc`` maps a PE to its seeds' accuracies (seeds 1, 2, ...)."""
    return pd.DataFrame([{"pe": pe, "seed": i + 1, "accuracy": a, "epoch": 200}
                         for pe, xs in acc.items() for i, a in enumerate(xs)])


# --------------------------------------------------------------------------- all tied


def test_all_tied_values_say_tau_is_undefined_in_words():
    """Every unit at 0.9: Kendall's tau is undefined; the row, the claim's test and the
    pages say so in words and print no nan."""
    row = ev.trend_row([0.1, 0.1, 0.5, 0.5, 2.0, 2.0], [0.9] * 6).iloc[0]
    assert "nan" not in row["why"] and "tied" in row["why"] and "undefined" in row["why"]
    assert row["verdict"] == "no trend shown" and math.isnan(row["diff_low"])
    t = trend(row, "falls", "falls over sigma", "accuracy over σ")
    assert t.outcome == "open" and "nan" not in t.text and "undefined" in t.text
    assert t.floor >= st.ALPHA  # no p at all: the test cannot reach alpha

    f = _final({"2d-fixed": [0.9, 0.91], **{f"learn-{s:g}": [0.9, 0.9] for s in SIGMAS}})
    out = facts.sigma_facts(ev.claim_table("small_sigma_generalises", f),
                            ev.contrast_table("small_sigma_generalises", f))
    assert "nan" not in out["trend"] and "tied" in out["trend"]

    losses = pd.DataFrame([{"pe": f"learn-{s:g}", "seed": k, "clean": 0.9, "noisy": 0.9,
                            "loss": 0.0}
                           for s in SIGMAS for k in (1, 2, 3)])
    losses.attrs["noise_max"] = 0.1
    cells, con = ct.noise_evidence(losses)
    v = noise.judge(Inputs(final=_final({}), noise=losses))
    assert "nan" not in v.evidence
    got = facts.noise_facts(cells, con, losses, v)
    assert "nan" not in got["tau"] and "undefined" in got["tau"]


def test_a_constant_cosine_gives_no_nan_rho_on_the_scorecard():
    t3 = pd.DataFrame([{"pe": f"learn-{s:g}", "sigma": s, "seed": k, "cosine_paper": 0.95}
                       for s in SIGMAS for k in (1, 2)])
    f = _final({f"learn-{s:g}": [0.9, 0.8] for s in SIGMAS})
    v = attention.judge(Inputs(final=f, table3=t3))
    assert "nan" not in v.evidence and "undefined" in v.evidence


# --------------------------------------------------------------------------- no spread


def test_two_groups_without_spread_get_no_t_test_certainty():
    """[0.9, 0.9] against [0.8, 0.8]: no variance in either group, so no Welch t, p or
    interval (not p = 0, t = inf and a zero-width interval); the exact permutation test,
    bounded at 1/3 for 2 + 2 seeds, keeps the verdict."""
    w = st.welch_diff([0.9, 0.9], [0.8, 0.8])
    assert math.isnan(w.t) and math.isnan(w.p) and math.isnan(w.low) and math.isnan(w.high)
    assert "no spread" in w.note
    tt = ss.ttest([0.9, 0.9], [0.8, 0.8])
    assert math.isnan(tt.pvalue) and math.isnan(tt.statistic) and "undefined" in str(tt)
    assert math.isnan(ss.ttest_from_summary(0.9, 0.0, 2, 0.8, 0.0, 2).pvalue)
    assert math.isnan(ss.ttest([0.9, 0.8], [0.8, 0.7], "paired").pvalue)  # equal changes
    c = ev.contrast_rows({"a": [0.9, 0.9], "b": [0.8, 0.8]}, [("a", "b")]).iloc[0]
    assert math.isnan(c["p_welch"]) and math.isnan(c["diff_low"]) and math.isnan(c["mdd"])
    assert "Welch p=0" not in c["why"] and "no spread" in c["why"]
    assert c["p_perm"] == pytest.approx(1 / 3) and c["verdict"] == "no difference shown"
    # a spread in one group is a t-test (the one-sample case): unchanged
    assert ss.ttest([0.9, 0.9], [0.8, 0.85]).pvalue > 0


def test_seeds_without_spread_against_an_exact_reference_fall_back_to_the_exact_test():
    """Two seeds of 0.9 against an exact 0.8: the sign-flip test, whose p cannot go below
    2/2**2 = 0.5, not Welch p = 0 'differs'; our mean gets no zero-width interval."""
    r = ev.evidence_rows({"a": [0.9, 0.9]}, {"a": ev.Reference(0.8, 0.0, 2, "exact")}).iloc[0]
    assert r["verdict"] == "inconclusive" and r["p_diff"] == pytest.approx(0.5)
    assert math.isnan(r["diff_low"]) and math.isnan(r["ci_low"]) and math.isnan(r["mdd"])
    assert "no spread" in r["why"] and "0.5" in r["why"]
    # six seeds can show it (2/64 < 0.05), still without a zero-width interval
    six = ev.evidence_rows({"a": [0.9] * 6}, {"a": ev.Reference(0.8, 0.0, 2, "x")}).iloc[0]
    assert six["verdict"] == "differs" and six["p_diff"] == pytest.approx(2 / 64)
    assert math.isnan(six["diff_low"])
    # against a reference with a spread the t-tests are defined; our mean still has no
    # interval. Two tied seeds do not show equivalence within 0.05 of a spread of 0.05 (the
    # pooled TOST: se = 0.0364 on 15 df, p = 0.095; Welch's alone, leaning on the reference's
    # SD, said "equivalent"); five do (se = 0.0228 on 18 df, p = 0.021)
    ref = ev.evidence_rows({"a": [0.9, 0.9]}, {"a": ev.Reference(0.9, 0.05, 15, "x")},
                           margin=0.05).iloc[0]
    assert ref["verdict"] == "inconclusive" and math.isnan(ref["ci_low"])
    assert ref["p_equiv"] == pytest.approx(0.095, abs=0.001)
    assert "all 2 values equal" in ref["why"]
    five = ev.evidence_rows({"a": [0.9] * 5}, {"a": ev.Reference(0.9, 0.05, 15, "x")},
                            margin=0.05).iloc[0]
    assert five["verdict"] == "equivalent" and five["p_equiv"] == pytest.approx(0.021, abs=0.001)


def test_equivalence_without_spread_is_the_exact_tost():
    """Two constant groups 0.01 apart: no Welch TOST (it would give p = 0 from two seeds);
    the permutation TOST cannot go below 1/6 at 2 + 2 seeds, and reaches 1/252 at 5 + 5."""
    rows = pd.DataFrame([{"a": "x", "b": "y"}])
    two = with_equivalence(rows, {"x": np.array([0.9, 0.9]), "y": np.array([0.91, 0.91])})
    assert two["p_equiv"].iloc[0] == pytest.approx(1 / 6)
    five = with_equivalence(rows, {"x": np.full(5, 0.9), "y": np.full(5, 0.91)})
    assert five["p_equiv"].iloc[0] == pytest.approx(1 / 252)


# --------------------------------------------------------------------------- humans


def test_a_constant_per_puzzle_accuracy_names_the_true_reason():
    """learn-0.2's models solve every puzzle: their r with people is undefined (no error to
    place), and the verdict says so, not that no learn-0.2 model is stored; without any
    agreement measured it says that."""
    agree = pd.DataFrame({"pe": ["learn-0.2"] * 3 + ["learn-1"] * 3, "seed": [1, 2, 3] * 2,
                          "r": [math.nan] * 3 + [0.1, 0.2, 0.15], "cosine": [0.99] * 6})
    v = humans.judge(Inputs(final=_final({}), agreement=agree))
    assert "no stored" not in v.evidence and "every puzzle" in v.evidence
    assert v.verdict == "not testable yet"
    v = humans.judge(Inputs(final=_final({})))
    assert "no stored" not in v.evidence and "agreement with people" in v.evidence


def test_human_similarity_says_why_a_correlation_is_undefined():
    import torch

    from lstpe.analysis import humans as hu
    from lstpe.lst import validation_split

    y = validation_split().y
    right = torch.nn.functional.one_hot(y, 4).float() * 5
    wrong = torch.nn.functional.one_hot(torch.zeros_like(y), 4).float() * 5
    arts = {"labels": ["learn-0.2", "learn-0.2", "learn-1"], "seeds": [1, 2, 1],
            "val_logits": torch.stack([right, right, wrong])}
    s = hu.human_similarity(arts).set_index("pe")
    assert math.isnan(s.loc["learn-0.2", "spearman"])
    assert "every puzzle" in s.loc["learn-0.2", "spearman_note"]
    assert s.loc["learn-1", "spearman_note"] == ""


# --------------------------------------------------------------------------- witness


def test_a_witness_without_adamw_rows_is_not_testable_and_says_why():
    w = pd.DataFrame([{"pe": "learn-2", "sigma": 2.0, "optimizer": "adam", "epoch": e,
                       "norm_ratio": 1.0, "accuracy": 0.3} for e in (0, 400)])
    v = weight_decay.judge(Inputs(final=_final({}), witness=w))
    assert v.verdict == "not testable yet" and "no AdamW" in v.evidence
    # AdamW at its last epoch but no Adam twin there: said, not a KeyError
    w2 = pd.concat([w, w.assign(optimizer="adamw", epoch=[0, 600])], ignore_index=True)
    v2 = weight_decay.judge(Inputs(final=_final({}), witness=w2))
    assert v2.verdict == "not testable yet" and "no Adam twin" in v2.evidence


# --------------------------------------------------------------------------- n = 1 + 1


def test_one_seed_a_side_is_not_testable_at_this_n_not_not_shown():
    """One seed per PE: the exact two-sided test of 1 + 1 values can give no p below 1, so
    no claim can be shown or refuted at this n; the verdict says that and the floor."""
    f = _final({"learn-0.2": [0.99], "2d-fixed": [0.98], "relative": [0.3],
                "random": [0.3]})
    v = table1.judge(Inputs(final=f))
    assert v.verdict == "not testable yet"
    assert "not testable at this n" in v.label and "p = 1.000" in v.label
    s = sigma.judge(Inputs(final=_final({"learn-0.2": [0.95], "learn-2": [0.3]})))
    assert s.verdict == "not testable yet" and "not testable at this n" in s.label
    # with enough seeds the same contrasts are testable: the usual verdicts
    many = _final({"learn-0.2": [0.95, 0.951, 0.952], "learn-2": [0.3, 0.31, 0.32],
                   "learn-1": [0.3, 0.31, 0.32], "learn-0.1": [0.5, 0.51, 0.52]})
    assert sigma.judge(Inputs(final=many)).verdict != "not testable yet"


# --------------------------------------------------------------------------- range


@pytest.mark.parametrize("bad", [1.3, -0.1])
def test_an_accuracy_outside_zero_one_is_an_error_naming_it(bad):
    f = _final({"learn-0.2": [0.9, bad, 0.92], "learn-2": [0.3, 0.3, 0.4]})
    with pytest.raises(ValueError, match=rf"{bad}.*learn-0\.2.*seed 2"):
        Inputs(final=f)
    with pytest.raises(ValueError, match=rf"{bad}.*learn-0\.2.*seed 2"):
        ev.claim_table("small_sigma_generalises", f)
    with pytest.raises(ValueError, match=rf"{bad}.*cell 'a'"):
        ev.evidence_rows({"a": [0.9, bad]}, {"a": ev.Reference(0.9, 0.05, 15, "x")})
    x = Inputs(final=_final({}))
    with pytest.raises(ValueError, match=rf"Inputs.adam4.*{bad}"):
        x.adam4 = f  # a field set after construction is checked too
    people = pd.DataFrame({"id": [0, 1], "accuracy": [0.5, bad]})
    correct = pd.DataFrame({"pe": "a", "seed": 1, "id": [0, 1], "correct": [1.0, 0.0]})
    with pytest.raises(ValueError, match=rf"people.*{bad}"):
        ct.model_human_agreement(correct, people)
