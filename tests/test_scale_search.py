"""The CPU-scale search's criteria, on accuracies whose gaps are known by construction."""

from __future__ import annotations

import pandas as pd
import pytest

from lstpe.experiments import scale_search as ss


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


def fake_run(accs: dict[str, float], seeds=(1, 2, 3)):
    from lstpe.store.results import HISTORY_COLUMNS, Run

    rows = [{"model": i * len(seeds) + j, "pe": pe, "pe_name": pe.split("-")[0], "sigma": 0.0,
             "seed": s, "optimizer": "adam", "epoch": 12, "split": "val", "condition": "all",
             "accuracy": a, "loss": 1.0, "diverged": False}
            for i, (pe, a) in enumerate(accs.items()) for j, s in enumerate(seeds)]
    cfg = {"model": {"d_model": 160, "n_layers": 4}, "epochs": 12, "lr": 1e-4, "amp": True,
           "seeds": list(seeds), "n_train": None}
    return Run(pd.DataFrame(rows, columns=HISTORY_COLUMNS),
               {"config": cfg, "n_train": 8100, "wall_time_s": 60.0})


def test_run_row_joins_runs_and_counts_a_shared_pe_once():
    t1 = fake_run({"learn-0.2": 0.74, "2d-fixed": 0.75, "nope": 0.30, "c-nope": 0.25})
    t2 = fake_run({"2d-fixed": 0.10, "learn-0.1": 0.70, "learn-2": 0.40})  # dropped
    row = ss.run_row([t1, t2], "cpu")
    assert row["gap_a"] == pytest.approx(0.34) and row["gap_b"] == pytest.approx(0.45)
    assert row["all"] and row["n_train"] == 8100 and row["seeds"] == 3 and row["d_model"] == 160


def test_run_row_without_the_nope_pes_reports_only_criterion_a():
    t2 = fake_run({"2d-fixed": 0.6, "learn-0.1": 0.70, "learn-0.5": 0.5, "learn-2": 0.40})
    row = ss.run_row([t2], "cpu")
    assert row["gap_a"] == pytest.approx(0.30) and row["a"] is True
    assert row["gap_b"] is None and row["b"] is None and row["all"] is None


def test_stored_cpu_accuracy_reads_results_cpu(tmp_path):
    from lstpe.store.results import make_manifest, save_run

    assert ss.stored_cpu_accuracy(tmp_path) is None
    run = fake_run({"learn-0.5": 0.6, "learn-2": 0.25})
    h = run.history
    save_run(tmp_path / "cpu" / "table2", pd.concat([h, h.assign(split="train",
                                                                 accuracy=h["accuracy"] + 0.3)]),
             make_manifest(run.config, "cpu", 1.0))
    got = ss.stored_cpu_accuracy(tmp_path)
    assert got.loc["learn-0.5", "val"] == pytest.approx(0.6)
    assert got.loc["learn-0.5", "train"] == pytest.approx(0.9) and got.index[0] == "learn-0.5"
