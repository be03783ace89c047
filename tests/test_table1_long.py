"""Chapter 5's Table 1 past epoch 200: every Adam long model of a Table 1 PE, read at Table 1's
length, and the PEs still without one said in words."""

from __future__ import annotations

import pandas as pd
import pytest

from lstpe.chapters import facts
from lstpe.chapters.long_mechanism import table1_long
from lstpe.experiments import long_units as lu
from lstpe.experiments.registry import TABLE1_PES


def test_table1_long_facts_name_the_pes_without_a_long_run() -> None:
    row = {"seeds": 2, "epoch": 1000, "val_200": 0.79, "val_last": 0.81, "train_200": 0.96,
           "train_last": 0.998, "paper_val": 0.781, "paper_val_sd": 0.185, "paper_train": 0.999}
    t1 = pd.DataFrame([{"pe": p, **row} for p in TABLE1_PES if p != "2d-fixed"]).set_index("pe")
    assert facts.table1_long_facts(t1)["missing"] == \
        "`2d-fixed` has not been trained past epoch 200 yet"
    two = t1.drop(index="learn-0.2")
    assert facts.table1_long_facts(two)["missing"] == \
        "`2d-fixed` and `learn-0.2` have not been trained past epoch 200 yet"
    full = pd.concat([t1, pd.DataFrame([{"pe": "2d-fixed", **row}]).set_index("pe")])
    assert facts.table1_long_facts(full)["missing"] == "every one has a long run"


def test_table1_long_reads_the_mechanisms_learn_02_at_table_1s_length() -> None:
    """learn-0.2 at seed 2235 is the mechanism's long model (same recipe as Table 1's; the
    plan trains it once): it joins Table 1's long rows, read at epoch 1000 although it went
    further, its value the segment's own history."""
    unit = lu.LongUnit("table2", "learn-0.2", 2235)
    if lu.published_epoch(unit) < 1000:
        pytest.skip("the mechanism's learn-0.2 has not reached epoch 1000 in this checkout")
    t = table1_long().set_index("pe")
    assert "learn-0.2" in t.index and t.loc["learn-0.2", "epoch"] == 1000
    assert list(t.index) == [p for p in TABLE1_PES if p in t.index]  # Table 1's order
    others = [lu.LongUnit("table1", "learn-0.2", s) for s in (6312, 8880)]
    n = 1 + sum(lu.published_epoch(u) >= 1000 for u in others)
    assert t.loc["learn-0.2", "seeds"] == n
    if n == 1:
        h = pd.read_csv(unit.path() / "history.csv")
        want = h[(h["epoch"] == 1000) & (h["split"] == "val_dropout")
                 & (h["condition"].astype(str) == "all")]["accuracy"].mean()
        assert t.loc["learn-0.2", "val_last"] == pytest.approx(want)
    assert (t["epoch"] <= 1000).all()


def test_a_seed_still_on_its_way_does_not_pull_its_pe_back(monkeypatch) -> None:
    """One seed at Table 1's length and one paused at 400: the PE reads at 1000 over the one
    seed that got there (its accuracy, not a mean with the other's), never at 400."""
    def fake(unit: lu.LongUnit, results_dir=None) -> dict | None:
        if unit.pe != "rope":
            return None
        last = 1000 if unit.seed == 2235 else 400
        acc = 0.9 if unit.seed == 2235 else 0.5
        h = pd.DataFrame([{"epoch": e, "split": s, "condition": "all", "accuracy": acc}
                          for e in range(200, last + 1, 200)
                          for s in ("val_dropout", "train_running")])
        return {"epoch": last, "history": h}

    monkeypatch.setattr(lu, "load_long", fake)
    t = table1_long().set_index("pe")
    assert list(t.index) == ["rope"]
    assert t.loc["rope", "epoch"] == 1000 and t.loc["rope", "seeds"] == 1
    assert t.loc["rope", "val_last"] == pytest.approx(0.9)
    assert t.loc["rope", "val_200"] == pytest.approx(0.9)
