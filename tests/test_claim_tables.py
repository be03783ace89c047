"""lstpe.evidence.claim_tables: the evidence tables of chapters 8-10 on small synthetic data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lstpe.chapters import findings as fd
from lstpe.evidence import claim_tables as ct


def _noise() -> pd.DataFrame:
    rows = []
    acc = {"learn-0.1": (0.9, 0.7), "learn-2": (0.5, 0.49), "2d-fixed": (1.0, 1.0)}
    for pe, (clean, noisy) in acc.items():
        for i, seed in enumerate((1, 2, 3, 4)):
            for x, a in ((0.0, clean), (0.05, (clean + noisy) / 2), (0.1, noisy)):
                rows.append({"noise": x, "pe": pe, "seed": seed, "condition": "all",
                             "accuracy": a + 0.01 * i * (x > 0)})
                rows.append({"noise": x, "pe": pe, "seed": seed, "condition": "1",
                             "accuracy": 0.0})
    return pd.DataFrame(rows)


def test_noise_loss_is_clean_minus_largest_noise_per_model() -> None:
    loss = ct.noise_loss_per_model(_noise())
    assert loss.attrs["noise_max"] == 0.1
    assert list(loss["pe"].unique()) == ["learn-0.1", "learn-2", "2d-fixed"]
    r = loss[(loss["pe"] == "learn-0.1") & (loss["seed"] == 3)].iloc[0]
    assert r["loss"] == pytest.approx(0.9 - (0.7 + 0.02))
    with pytest.raises(ValueError):
        ct.noise_loss_per_model(_noise().query("noise == 0"))


def test_noise_evidence_tests_loss_against_none_and_contrasts_the_paper() -> None:
    cells, con = ct.noise_evidence(ct.noise_loss_per_model(_noise()), margin=0.05)
    c = cells.set_index("cell")
    assert c.loc["learn-0.1", "verdict"] == "differs"  # loses about 0.2
    assert c.loc["2d-fixed", "verdict"] == "equivalent"  # loses nothing
    assert c.loc["learn-0.1", "ref"] == "no loss" and c.loc["learn-0.1", "authors_mean"] == 0
    assert c.loc["learn-0.1", "mdd"] > 0
    pairs = set(zip(con["a"], con["b"], strict=True))
    assert ("learn-0.1", "learn-2") in pairs and ("learn-0.1", "2d-fixed") in pairs
    assert ("learn-0.2", "learn-2") not in pairs  # not in the data: left out
    k = con[(con["a"] == "learn-0.1") & (con["b"] == "learn-2")].iloc[0]
    assert k["verdict"] == "higher" and k["p_floor"] == pytest.approx(2 / 70)
    assert con.iloc[-1]["b"] == "" and con.iloc[-1]["verdict"] == "falls"


def test_one_model_against_an_exact_reference_says_n1() -> None:
    loss = ct.noise_loss_per_model(_noise().query("seed == 1"))
    cells, _ = ct.noise_evidence(loss)
    assert set(cells["verdict"]) == {"n=1"}


def _agreement() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    people = pd.DataFrame({"id": range(40), "accuracy": np.linspace(0.5, 1.0, 40)})
    rows = []
    for pe, kind in (("2d-fixed", "all"), ("learn-0.2", "hard"), ("rope", "random")):
        for seed in (1, 2, 3):
            if kind == "all":
                c = np.ones(40)
            elif kind == "hard":  # wrong on the puzzles people find hardest
                c = (np.arange(40) >= 6 + seed).astype(float)
            else:
                c = (rng.random(40) > 0.2).astype(float)
            rows += [{"pe": pe, "seed": seed, "id": i, "correct": v} for i, v in enumerate(c)]
    return pd.DataFrame(rows), people


def test_model_human_agreement_cosine_and_correlation() -> None:
    correct, people = _agreement()
    ag = ct.model_human_agreement(correct, people)
    h = people["accuracy"].to_numpy()
    floor = h.sum() / (math.sqrt(len(h)) * np.linalg.norm(h))
    assert ag.attrs["constant_cosine"] == pytest.approx(floor)
    full = ag[ag["pe"] == "2d-fixed"]
    assert np.allclose(full["cosine"], floor) and full["r"].isna().all()
    assert (ag.loc[ag["pe"] == "learn-0.2", "r"] > 0.3).all()
    assert np.allclose(ag["cosine_random"], floor * np.sqrt(ag["accuracy"]))


def test_human_evidence_marks_the_ceiling_and_pools_every_model() -> None:
    cells, con = ct.human_evidence(ct.model_human_agreement(*_agreement()))
    c = cells.set_index("cell")
    assert c.loc["2d-fixed", "verdict"] == "ceiling" and c.loc["2d-fixed", "n"] == 0
    assert c.loc["learn-0.2", "verdict"] == "differs"
    assert c.loc[ct.POOLED, "n"] == 6 and list(cells["cell"])[-1] == ct.POOLED
    assert list(con["b"]) == ["rope"]  # learn-0.2 against every PE with an r
    view = fd.claim_view(cells, con)
    assert "learn-0.2 − rope" in view.index and view.loc["2d-fixed", "verdict"] == "ceiling"


def test_network_evidence_tests_z_against_the_null() -> None:
    rows = []
    for pe, zf, zi in (("learn-0.1", 6.0, 0.2), ("learn-2", 0.5, 0.1), ("random", 0.3, 0.3),
                       ("rope", math.nan, math.nan)):
        for stage, z in (("final", zf), ("init", zi)):
            rows.append({"pe": pe, "seed": 1, "stage": stage, "modularity_z": z})
    cells, con = ct.network_evidence(pd.DataFrame(rows))
    c = cells.set_index("cell")
    assert list(cells["cell"]) == ["learn-0.1", "learn-2", "random", "learn-0.1 (init)",
                                   "learn-2 (init)"]
    assert c.loc["learn-0.1", "verdict"] == "differs" and c.loc["learn-2", "verdict"] == "n=1"
    assert (con["p_floor"] == 1).all()  # one model per PE: no contrast can be tested
    with pytest.raises(ValueError):
        ct.network_evidence(pd.DataFrame(rows), measure="clustering")
