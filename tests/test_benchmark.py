"""benchmarks/train_throughput.py and scripts/reproduce.py: tiny runs (no timing assertions)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from lstpe import results as res
from lstpe.train import PAPER_SEEDS

REPO = Path(__file__).resolve().parents[1]


def _load(rel: str, name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / rel)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _load("benchmarks/train_throughput.py", "train_throughput")


@pytest.fixture(scope="module")
def repro():
    return _load("scripts/reproduce.py", "reproduce")


# --------------------------------------------------------------------------- benchmark


def test_sweep_models_follow_table2_order(bench):
    pes, seeds = bench.sweep_models(17)
    assert pes[:15] == ["learn-0.1"] * 15 and pes[15:] == ["learn-0.2"] * 2
    assert seeds == list(PAPER_SEEDS) + list(PAPER_SEEDS[:2])
    assert bench.SWEEP_MODEL_EPOCHS == 20 * 15 * 200


def test_benchmark_tiny_run_prints_ratio_table_and_json(bench, tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = bench.main(["--size", "preview", "--models", "1", "2", "--steps", "2", "--warmup", "0",
                     "--threads", "1", "--json", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    header = next(ln for ln in printed.splitlines() if ln.startswith("engine"))
    assert "ratio" in header.split() and "model-epochs/s" in header.split()
    table = [ln.split() for ln in printed.splitlines() if ln.split()[:1] in (["plain"],
                                                                              ["batched"])]
    assert [(r[0], r[1]) for r in table] == [("plain", "1"), ("batched", "1"), ("batched", "2")]
    assert table[0][4] == "1.00"  # the plain loop is the reference of the ratio column

    d = json.loads(out.read_text())
    assert d["torch_version"] and d["device"].startswith(("cpu", "cuda", "mps"))
    assert d["timed_steps"] == 2 and d["steps_per_epoch"] == math.ceil(d["n_train"] / 128)
    rows = d["rows"]
    plain = rows[0]["model_epochs_per_s"]
    for r in rows:
        # Closed-form relations between the columns (not timings).
        assert r["model_epochs_per_s"] == pytest.approx(
            r["models"] / (r["sec_per_step"] * d["steps_per_epoch"]))
        assert r["ratio_vs_plain"] == pytest.approx(r["model_epochs_per_s"] / plain)
        assert r["sweep_hours"] * 3600 * r["model_epochs_per_s"] == pytest.approx(60_000)
        assert r["tflops"] == pytest.approx(r["model_epochs_per_s"] * d["flops_per_model_epoch"]
                                            / 1e12)


def test_flop_count_closed_form(bench):
    """At the paper's size: 3 x (forward matmul FLOPs) per puzzle, counted by hand."""
    from lstpe.model import ModelConfig

    d, f, n = 160, 640, 16
    qkv, scores, out, mlp = 2 * d * 3 * d, 2 * 2 * n * d, 2 * d * d, 2 * 2 * d * f
    per_puzzle = 3 * n * (qkv + scores + out + mlp) + n * (qkv + scores) + out + mlp \
        + n * 2 * 5 * d + 2 * d * 4
    assert bench.flops_per_model_epoch(ModelConfig(), 8000) == 3 * per_puzzle * 8000


def test_mixed_pe_benchmark_runs(bench, capsys):
    rc = bench.main(["--size", "preview", "--models", "10", "--steps", "1", "--warmup", "0",
                     "--threads", "1", "--mix", "table1", "--no-plain"])
    assert rc == 0 and "models: table1" in capsys.readouterr().out


def test_benchmark_rejects_bad_size(bench, capsys):
    assert bench.main(["--size", "huge", "--models", "1"]) == 2
    assert "huge" in capsys.readouterr().err


# --------------------------------------------------------------------------- reproduce


def test_parts_match_the_papers_tables(repro):
    """The parts train exactly the settings of the published tables (vendored CSV)."""
    paper = pd.read_csv(REPO / "lstpe" / "data" / "paper_tables.csv")
    t = {k: g for k, g in paper.groupby("table")}
    # Table 1 plus the book's two extra PEs; Table 2 after its 2d-fixed reference.
    assert set(repro.PARTS["table1"][0].pes) == set(t[1]["pe"]) | {"alibi", "rope-2d"}
    assert repro.PARTS["table2"][0].pes == ["2d-fixed"] + [f"learn-{s:g}" for s in t[2]["sigma"]]
    for job in repro.PARTS["table4"]:
        assert job.pes == [f"learn-{s:g}" for s in t[4][t[4]["setting"] == job.optimizer]
                           ["sigma"]]
    t56 = repro.PARTS["tables56"][0].pes
    assert set(t56) == {f"learn-{s:g}" for s in t[5]["sigma"]} | set(t[6]["pe"])
    assert len(t56) == len(set(t56)) == 27


def test_paper_scale_configs(repro):
    args = repro.build_parser().parse_args([])
    cfgs = {j.name: repro.job_config(j, args) for part in repro.PARTS.values() for j in part}
    assert all(c.seeds == list(PAPER_SEEDS) for c in cfgs.values())
    assert cfgs["table1"].epochs == 200 and cfgs["long4000"].epochs == 4000
    assert (cfgs["table4/sgd"].optimizer, cfgs["table4/sgd"].lr) == ("sgd", 1e-3)
    assert (cfgs["table4/adam"].lr, cfgs["table4/adam"].weight_decay) == (1e-4, 0.0)
    assert (cfgs["tables56"].optimizer, cfgs["tables56"].weight_decay) == ("adamw", 0.1)
    assert cfgs["table1"].model.d_model == 160 and cfgs["table1"].model.n_layers == 4


def test_reproduce_dry_run_of_one_part(repro, tmp_path, capsys):
    argv = ["--scale", "preview", "--parts", "table4", "--epochs", "1", "--seeds", "2235",
            "--d-model", "16", "--n-layers", "1", "--n-train", "64", "--checkpoint-every", "1",
            "--out", str(tmp_path), "--no-progress"]
    assert repro.main(argv) == 0
    printed = capsys.readouterr().out
    assert "[table4] ok, wall time" in printed
    for opt in ("adam", "sgd"):
        run = res.load(tmp_path / "table4" / opt)
        assert run.manifest["config"]["optimizer"] == opt
        assert sorted(run.history["pe"].unique()) == [
            "learn-0.01", "learn-0.05", "learn-0.1", "learn-0.2"]
        assert run.artifacts["val_attention"].dtype.is_floating_point
        assert str(run.artifacts["val_attention"].dtype) == "torch.float16"
        assert not (tmp_path / "table4" / opt / "checkpoints").exists()
    summary = json.loads((tmp_path / "reproduce_summary.json").read_text())
    assert summary["table4"]["status"] == "ok"
    assert [j["status"] for j in summary["table4"]["jobs"]] == ["trained", "trained"]

    before = (tmp_path / "table4" / "sgd" / "history.csv").read_bytes()
    assert repro.main(argv) == 0
    assert capsys.readouterr().out.count("finished run exists, skipped") == 2
    assert (tmp_path / "table4" / "sgd" / "history.csv").read_bytes() == before


def test_reproduce_rejects_unknown_part(repro, capsys):
    assert repro.main(["--parts", "table9"]) == 2
    assert "'table9'" in capsys.readouterr().err


def test_brain_part_runs_only_when_named(repro):
    assert "brain" in repro.PARTS and "brain" not in repro.DEFAULT_PARTS
    assert repro.build_parser().parse_args([]).parts == repro.DEFAULT_PARTS
    assert repro.build_parser().parse_args(["--parts", "brain"]).parts == ["brain"]
