"""``lstpe reproduce plan``'s rates: read from the stored throughput measurements (the GPU
leases' tables, checked here against the CSV rows themselves), an assumed rate labelled as an
estimate where a kind of device was never measured, and ``--table`` naming the paper's
tables."""

from __future__ import annotations

import pandas as pd
import pytest

from lstpe import cli
from lstpe.experiments import plan
from lstpe.experiments.reproduce import TABLE_PARTS
from lstpe.runtime import repo_root

H100 = "results/benchmarks/lease_NVIDIA_H100_80GB_HBM3_2026-11-27T020505Z.csv"


@pytest.mark.parametrize("name, kind", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"), ("Tesla T4", "t4"),
    ("NVIDIA A100-SXM4-40GB", "a100"), ("cpu: x86_64 (2 threads)", "cpu"), ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s")])
def test_device_kinds(name, kind):
    assert plan.device_kind(name) == kind


def test_the_rate_is_the_lease_measurement_at_the_largest_chunk_not_above():
    rows = pd.read_csv(repo_root() / H100)
    bf16 = rows[rows["precision"] == "bf16"].set_index("models")["model_epochs_per_s"]
    at, what = plan.rate_on("h100", "bf16", plan.measured_rates(repo_root()))
    assert at(48) == pytest.approx(bf16[48]) and at(315) == pytest.approx(bf16[48])
    assert at(20) == pytest.approx(bf16[12]) and at(1) == pytest.approx(bf16[3])
    assert H100 in what and "H100" in what
    assert plan.rate_on("t4", "fp32", plan.measured_rates(repo_root())) is None


def test_an_unmeasured_device_gets_an_estimate_said_to_be_one(capsys):
    assert cli.main(["reproduce", "plan", "--table", "4", "--device", "t4"]) == 0
    out = capsys.readouterr().out
    assert "an estimate" in out and "never measured on t4" in out
    assert "table4/adam + table4/sgd" in out


@pytest.mark.parametrize("action", ["plan", "run"])
@pytest.mark.parametrize("argv, words", [
    (["--table", "7"], "--table '7' is not a table"),
    (["--table", "2", "--parts", "table1"], "not both")])
def test_a_bad_table_is_named(action, argv, words, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("LSTPE_RESULTS", str(tmp_path / "results"))
    assert cli.main(["reproduce", action, *argv]) == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "results").exists()  # refused before anything is written


def test_every_table_that_trains_is_a_registry_run():
    from lstpe.experiments.registry import REGISTRY

    assert {p for parts in TABLE_PARTS.values() for p in parts} <= set(REGISTRY)
    assert TABLE_PARTS["4"] == ["table4/adam", "table4/sgd"]


def test_an_unmeasured_gpu_is_the_h100_scaled_by_the_peaks():
    rates = plan.measured_rates(repo_root())
    h100, _ = plan.rate_on("h100", "bf16", rates)
    t4, what = plan.rate_for("t4", "bf16", rates)
    assert t4(48) == pytest.approx(h100(48) * 65 / 989)
    assert "an estimate, never measured on t4" in what and "65 / 989" in what
    assert plan.rate_for("h100", "fp32", rates)[0](48) == plan.rate_on("h100", "fp32", rates)[0](48)
    assert plan.rate_for("mystery-gpu", "fp32", rates) is None  # then the assumed rate, said


def test_the_chapters_t4_hours_are_the_plans():
    """Each chapter's run-time note states its T4 hours and the command that prints them."""
    import json
    import re

    rates = plan.measured_rates(repo_root())
    at, _ = plan.rate_for("t4", "bf16", rates)
    seen = 0
    for nb in sorted((repo_root() / "book").glob("*.ipynb")):
        text = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"])
        for hours, parts in re.findall(r"in about ([0-9.]+) hours\s*\(`lstpe reproduce plan "
                                       r"--parts ([^`]+?) --device t4 --amp`\)", text):
            t = plan.plan_table(parts.split(), rate_at=at)
            assert float(hours) == pytest.approx(t["minutes_at_rate"].sum() / 60, rel=0.1), nb
            seen += 1
    assert seen >= 6
