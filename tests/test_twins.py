"""Chapter 11's pairs of one model trained twice: each pair read against the two history files
themselves, only same-recipe models paired, and the sentence's numbers from a table built by
hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lstpe.chapters.twins import TWIN_COLUMNS, machine_twins, twin_facts, twin_table
from lstpe.runtime import repo_root

RESULTS = repo_root() / "results"


def _acc(path, split: str) -> pd.Series:
    h = pd.read_csv(path)
    h = h[(h["split"] == split) & (h["condition"].astype(str) == "all")]
    return h.groupby("epoch")["accuracy"].mean()


@pytest.fixture(scope="module")
def twins() -> pd.DataFrame:
    return machine_twins()


def test_a_pair_is_read_from_its_two_history_files(twins):
    """The mechanism's learn-2 at seed 2235 retrains Table 2's stored model (on an H100): the
    first epoch whose running training accuracy differs, and both validation accuracies at
    200, as the two CSV files hold them."""
    row = twins.set_index("model").loc["table2/learn-2/2235"]
    stored = RESULTS / "paper" / "table2" / "learn-2" / "2235" / "history.csv"
    again = RESULTS / "long" / "table2" / "learn-2" / "2235" / "history.csv"  # to 2800
    a, b = _acc(stored, "train_running"), _acc(again, "train_running")
    both = a.index.intersection(b.index)
    assert row["first_apart"] == min(e for e in both if a[e] != b[e])
    assert row["val_stored"] == pytest.approx(_acc(stored, "val_dropout")[200])
    assert row["val_again"] == pytest.approx(_acc(again, "val_dropout")[200])
    assert row["again_on"].startswith("NVIDIA H100") and row["stored_on"].startswith("CPU")


def test_only_models_of_one_recipe_are_paired(twins):
    """Tables 5-6 train with weight decay (AdamW): their long runs share a seed with Table 2's
    stored models but not the recipe, so none is a twin; every pair starts from epoch 0."""
    assert list(twins.columns) == list(TWIN_COLUMNS) and len(twins)
    assert not twins["model"].str.startswith("tables56/").any()
    assert twins["model"].is_unique


def test_the_sentence_reads_the_table():
    """Gaps in validation puzzles (of 108), ties named, and each pair against the SD of its
    own PE's stored seeds (computed here by hand)."""
    t = pd.DataFrame([
        {"model": "table1/rope/1", "first_apart": 8, "gap": 1 / 108},
        {"model": "table1/nope/2", "first_apart": math.nan, "gap": 0.0},
        {"model": "table1/rope/2", "first_apart": 30, "gap": 6 / 108},
        {"model": "table1/nope/1", "first_apart": 2, "gap": 6 / 108}]).assign(
            precisions="fp32/fp32")
    final = pd.DataFrame({"pe": ["rope"] * 3 + ["nope"] * 2, "seed": [1, 2, 3, 1, 2],
                          "accuracy": [0.5, 0.6, 0.7, 0.30, 0.40]})
    f = twin_facts(t, final)
    assert f["n"] == "4" and f["same"] == "1" and f["apart"] == "between epoch 2 and 30"
    assert f["median"] == "3.5 puzzles of 108 (0.032)"  # the mean of 1/108 and 6/108
    assert f["largest"] == "6 puzzles of 108 (0.056), `rope` at seed 2 and `nope` at seed 1"
    # rope's seeds: SD 0.1 (0.5, 0.6, 0.7); nope's: SD sqrt(0.005) = 0.0707 (0.3, 0.4)
    assert f["n_over"] == "0" and f["over"] == "none"
    f = twin_facts(t, final.assign(accuracy=[0.5, 0.51, 0.52, 0.30, 0.40]))  # rope SD 0.01
    assert f["n_over"] == "1" and f["over"] == "`rope` at seed 2: 0.056 against 0.010"
    assert twin_facts(t)["over"] == "–" and twin_facts(t.iloc[:0]) is None
    assert f["precision"] == "both in fp32"
    mixed = twin_facts(t.assign(precisions=["fp32/fp32", "fp32/bf16", "fp32/fp32", "?/fp32"]))
    assert mixed["precision"] == "in ?, bf16, fp32 (the table says which)"


def test_the_table_names_each_pairs_machines(twins):
    md = twin_table(twins)
    assert md.count("\n") == len(twins) + 2
    assert "| `learn-2`, 2235 | CPU → H100 |" in md
