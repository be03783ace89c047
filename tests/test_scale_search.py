"""The CPU-scale search's criteria, on accuracies whose gaps are known by construction."""

from __future__ import annotations

import pandas as pd
import pytest

from lstpe import scale_search as ss


def accs(over: dict[str, float] | None = None) -> pd.Series:
    base = {"learn-0.1": 0.70, "learn-0.2": 0.80, "learn-2": 0.40, "2d-fixed": 0.75,
            "1d-fixed": 0.50, "random": 0.45, "relative": 0.60, "rope": 0.30, "nope": 0.30,
            "c-nope": 0.25}
    return pd.Series({**base, **(over or {})})


def test_gaps_are_the_differences_the_criteria_name():
    got = ss.criteria(accs())
    assert got["gap_a"] == pytest.approx(0.80 - 0.40)  # best small sigma minus sigma 2
    assert got["gap_b"] == pytest.approx(0.75 - 0.30)  # 2d-fixed minus the better NoPE
    assert got["a"] and got["b"]
    assert not got["c"] and not got["all"]  # learn-0.2 (0.80) above 2d-fixed (0.75) + 0.02


def test_every_criterion_can_fail_alone():
    ok = {"learn-0.2": 0.74}
    assert ss.criteria(accs(ok))["all"] is True
    a = ss.criteria(accs({**ok, "learn-2": 0.60}))  # 0.74 - 0.60 < 0.15
    assert not a["a"] and a["b"] and a["c"]
    b = ss.criteria(accs({"2d-fixed": 0.58, "learn-0.1": 0.56, "learn-0.2": 0.57,
                          "learn-2": 0.35, "relative": 0.5}))  # 0.58 - 0.30 < 0.3
    assert not b["b"] and b["a"] and b["c"]
    c = ss.criteria(accs({**ok, "rope": 0.25}))  # below nope - 0.02
    assert not c["c"] and c["a"] and c["b"]


def test_missing_pe_is_named():
    with pytest.raises(KeyError, match="c-nope"):
        ss.criteria(accs().drop("c-nope"))


def test_config_keys_are_unique_and_labels_canonical():
    keys = [c.key for c in ss.CONFIGS]
    assert len(set(keys)) == len(keys)
    assert "learn-2" in ss.PES and "learn-2.0" not in ss.PES
