"""benchmarks/train_throughput.py and lstpe reproduce: tiny runs (no timing assertions)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from lstpe import cli
from lstpe import experiments as ex
from lstpe.experiments import reproduce
from lstpe.runtime import PAPER_SEEDS
from lstpe.store import results as res

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


# --------------------------------------------------------------------------- benchmark


def test_sweep_models_follow_table2_order(bench):
    pes, seeds = bench.sweep_models(17)
    assert pes[:15] == ["learn-0.1"] * 15 and pes[15:] == ["learn-0.2"] * 2
    assert seeds == list(PAPER_SEEDS) + list(PAPER_SEEDS[:2])
    assert bench.SWEEP_MODEL_EPOCHS == 20 * 15 * 200


def test_benchmark_tiny_run_prints_ratio_floor_table_and_json(bench, tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = bench.main(["--size", "preview", "--models", "1", "2", "--steps", "2", "--warmup", "0",
                     "--threads", "1", "--floor-repeats", "1", "--json", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    header = next(ln for ln in printed.splitlines() if ln.startswith("engine "))
    assert header.split()[:7] == ["engine", "models", "ms/step", "model-epochs/s", "ratio",
                                  "floor/s", "of-floor"]
    table = [ln.split() for ln in printed.splitlines() if ln.split()[:1] in (["plain"],
                                                                              ["batched"])]
    assert [(r[0], r[1]) for r in table] == [("plain", "1"), ("batched", "1"), ("batched", "2")]
    assert table[0][4] == "1.00"  # the plain loop is the reference of the ratio column
    assert header.split()[-2:] == ["ops/step", "opt-ops"]
    assert table[0][-2:] == ["-", "-"]  # the plain loop's operators are not counted
    assert all(int(r[-1]) <= 20 < int(r[-2]) for r in table[1:])  # one step: few optimizer ops
    for key in ("CPU precision flags:", "FLOP count used:",
                "lstpe.training.cost.flops_per_model_epoch", "floor: torch.bmm in fp32",
                "engine at chosen setting:"):
        assert key in printed

    d = json.loads(out.read_text())
    assert d["torch_version"] and d["device"].startswith(("cpu", "cuda", "mps"))
    assert d["timed_steps"] == 2 and d["steps_per_epoch"] == math.ceil(d["n_train"] / 128)
    assert d["threads"] == 1 and set(d["cpu_flags"]) <= set(d["cpu_flags_checked"])
    assert d["cpu_flags_checked"] == ["avx2", "fma", "avx512f", "avx512_bf16", "amx_tile",
                                      "amx_bf16"]
    fpme = d["flops_per_model_epoch"]
    assert fpme > 0 and d["all_tokens_flops_per_model_epoch"] > fpme  # last block: one token
    assert "flops_per_model_epoch" in d["flops_count"]

    floors = {f["models"]: f for f in d["floors"]}
    assert sorted(floors) == [1, 2]
    for m, f in floors.items():
        assert f["threads"] == 1 and f["repeats"] == 1 and f["precision"] in ("fp32", "tf32")
        assert f["flops_per_model_epoch"] == fpme
        assert f["flops_per_step"] > 0 and f["seconds_per_step"] > 0
        assert f["flops_per_step"] == sum(g["flops"] for g in f["gemms"])
        assert f["flops_per_step"] == pytest.approx(fpme / d["n_train"] * d["batch_size"] * m)
        assert f["gemm_flops_per_model_epoch"] == pytest.approx(fpme)
        assert f["seconds_per_step"] == pytest.approx(
            sum(g["best_s"] * g["count"] for g in f["gemms"]))
        assert f["gflops"] == pytest.approx(f["flops_per_step"] / f["seconds_per_step"] / 1e9)
        assert f["model_epochs_per_s"] == f["gflops"] / (fpme / 1e9)

    rows = d["rows"]
    plain = rows[0]["model_epochs_per_s"]
    for r in rows:
        # Closed-form relations between the columns (not timings).
        assert r["model_epochs_per_s"] == pytest.approx(
            r["models"] / (r["sec_per_step"] * d["steps_per_epoch"]))
        assert r["ratio_vs_plain"] == r["model_epochs_per_s"] / plain
        fl = floors[r["models"]]
        assert r["floor_model_epochs_per_s"] == fl["model_epochs_per_s"]
        assert r["floor_gflops"] == fl["gflops"]
        assert r["fraction_of_floor"] == r["model_epochs_per_s"] / r["floor_model_epochs_per_s"]
        assert r["sweep_hours"] * 3600 * r["model_epochs_per_s"] == pytest.approx(60_000)
        assert r["tflops"] == pytest.approx(r["model_epochs_per_s"] * fpme / 1e12)

    c = d["chosen"]
    best = max(rows[1:], key=lambda r: r["model_epochs_per_s"])
    assert (c["engine"], c["models"]) == ("batched", best["models"])
    for k in ("model_epochs_per_s", "ratio_vs_plain", "fraction_of_floor", "floor_gflops"):
        assert c[k] == best[k]
    summary = next(ln for ln in printed.splitlines()
                   if ln.startswith("engine at chosen setting:"))
    assert summary == (
        f"engine at chosen setting: {c['model_epochs_per_s']:.3f} model-epochs/s = "
        f"{c['ratio_vs_plain']:.2f} x the plain loop = {c['fraction_of_floor']:.3f} of this "
        f"machine's fp32 floor ({c['floor_gflops']:.1f} GFLOP/s measured at the model's shapes)")


def test_floor_gemms_are_the_models_shapes_and_flop_count(bench):
    """At the paper's size (no timing): the GEMMs of one step of M models, their FLOPs equal
    lstpe.experiments.plan's count (last block: read-out token only), 3 kinds per forward GEMM."""
    from lstpe.nn.architecture import ModelConfig

    cfg, M = ModelConfig(), 3
    gemms = bench.step_gemms(cfg, 128, M)
    fwd = {g.name: (g.batch, g.m, g.k, g.n, g.count) for g in gemms if g.kind == "fwd"}
    assert fwd == {
        "embed": (M, 2048, 5, 160, 1), "qkv": (M, 2048, 160, 480, 4),
        "scores": (M * 128, 16, 160, 16, 4), "mix": (M * 128, 16, 16, 160, 4),
        "out": (M, 2048, 160, 160, 3), "fc1": (M, 2048, 160, 640, 3),
        "fc2": (M, 2048, 640, 160, 3), "out last": (M, 128, 160, 160, 1),
        "fc1 last": (M, 128, 160, 640, 1), "fc2 last": (M, 128, 640, 160, 1),
        "head": (M, 128, 160, 4, 1)}
    assert sorted(g.kind for g in gemms) == sorted(["fwd", "dgrad", "wgrad"] * len(fwd))
    per_epoch = 8000 / (128 * M)
    assert sum(g.flops for g in gemms) * per_epoch == pytest.approx(
        bench.flops_per_model_epoch(cfg, 8000), rel=1e-12)
    full = bench.step_gemms(cfg, 128, M, last_token_only=False)
    assert "fc1 last" not in {g.name for g in full}
    assert sum(g.flops for g in full) * per_epoch == pytest.approx(9.6e11, rel=0.01)
    assert bench.flops_per_model_epoch(cfg, 8000) == pytest.approx(7.9e11, rel=0.01)


def test_cpu_precision_flags(bench, tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f amx_tile\n"
                    "processor\t: 1\nflags\t\t: fpu avx512_bf16\n")
    assert bench.cpu_flags(cpuinfo=info) == ["avx2", "avx512f", "amx_tile"]  # first CPU's
    assert bench.cpu_flags(cpuinfo=tmp_path / "absent") == []  # off Linux


def test_flop_count_closed_form(bench):
    """At the paper's size: 3 x (forward matmul FLOPs) per puzzle, counted by hand."""
    from lstpe.nn.architecture import ModelConfig

    d, f, n = 160, 640, 16
    qkv, scores, out, mlp = 2 * d * 3 * d, 2 * 2 * n * d, 2 * d * d, 2 * 2 * d * f
    per_puzzle = 3 * n * (qkv + scores + out + mlp) + n * (qkv + scores) + out + mlp \
        + n * 2 * 5 * d + 2 * d * 4
    assert bench.flops_per_model_epoch(ModelConfig(), 8000) == 3 * per_puzzle * 8000


def test_mixed_pe_benchmark_runs(bench, capsys):
    rc = bench.main(["--size", "preview", "--models", "10", "--steps", "1", "--warmup", "0",
                     "--threads", "1", "--mix", "table1", "--no-plain", "--floor-repeats", "1"])
    printed = capsys.readouterr().out
    assert rc == 0 and "models: table1" in printed
    assert "- x the plain loop (not run)" in printed


def test_benchmark_rejects_bad_size(bench, capsys):
    assert bench.main(["--size", "huge", "--models", "1"]) == 2
    assert "huge" in capsys.readouterr().err
    assert bench.main(["--size", "preview", "--models", "1", "--floor-repeats", "0"]) == 2
    assert "floor repeats" in capsys.readouterr().err


# --------------------------------------------------------------------------- reproduce


def test_runs_match_the_papers_tables():
    """The registry trains exactly the settings of the published tables (vendored CSV)."""
    paper = pd.read_csv(REPO / "lstpe" / "data" / "paper_tables.csv")
    t = {k: g for k, g in paper.groupby("table")}
    cfg = {n: ex.run_config(n) for n in ex.REGISTRY}
    # Table 1 plus the book's two extra PEs; Table 2 after its 2d-fixed reference.
    assert set(cfg["table1"].pes) == set(t[1]["pe"]) | {"alibi", "rope-2d"}
    assert cfg["table2"].pes == ["2d-fixed"] + [f"learn-{s:g}" for s in t[2]["sigma"]]
    for opt in ("adam", "sgd"):
        assert cfg[f"table4/{opt}"].pes == [f"learn-{s:g}" for s in
                                            t[4][t[4]["setting"] == opt]["sigma"]]
    t56 = cfg["tables56"].pes
    assert set(t56) == {f"learn-{s:g}" for s in t[5]["sigma"]} | set(t[6]["pe"])
    assert len(t56) == len(set(t56)) == 27
    # the optimizer settings as the tables name them
    assert {cfg[n].setting for n in ("table1", "table2", "table4/adam")} == {"adam"}
    assert cfg["table4/sgd"].setting == "sgd" and cfg["tables56"].setting == "adamw-wd0.1"
    assert set(t[5]["setting"]) == {"adamw-wd0.1"}


def test_paper_scale_configs_and_bundles():
    cfgs = {n: ex.run_config(n) for n in ex.REGISTRY}
    assert all(c.seeds == list(PAPER_SEEDS) for c in cfgs.values())
    assert {n: c.epochs for n, c in cfgs.items()} == {
        "table1": 1000, "table2": 200, "table4/adam": 1000, "table4/sgd": 1000,
        "tables56": 1000, "long4000": 4000}
    assert (cfgs["table4/sgd"].optimizer, cfgs["table4/sgd"].lr) == ("sgd", 1e-3)
    assert (cfgs["table4/adam"].lr, cfgs["table4/adam"].weight_decay) == (1e-4, 0.0)
    assert (cfgs["tables56"].optimizer, cfgs["tables56"].weight_decay) == ("adamw", 0.1)
    assert cfgs["table1"].model.d_model == 160 and cfgs["table1"].model.n_layers == 4
    assert [n for n, c in cfgs.items() if c.save_attention] == ["table1", "table2"]
    assert ex.bundles(list(ex.REGISTRY)) == [["table1", "table4/adam", "table4/sgd",
                                              "tables56"], ["table2"], ["long4000"]]
    with pytest.raises(ValueError, match="'table9'; valid runs: table1"):
        ex.run_config("table9")


def test_reproduce_dry_run_of_a_bundle(tmp_path, capsys):
    argv = ["run", "--scale", "preview", "--parts", "table4/adam", "table4/sgd", "--epochs", "1",
            "--seeds", "2235", "--d-model", "16", "--n-layers", "1", "--n-train", "64",
            "--checkpoint-every", "1", "--out", str(tmp_path), "--no-progress"]
    assert cli.main(["reproduce", *argv]) == 0
    printed = capsys.readouterr().out
    assert "[table4/adam+table4/sgd] ok, wall time" in printed  # one batch of 8 models
    for opt in ("adam", "sgd"):
        run = res.load(tmp_path / "table4" / opt)
        assert run.manifest["config"]["optimizer"] == opt
        assert sorted(run.history["pe"].unique()) == [
            "learn-0.01", "learn-0.05", "learn-0.1", "learn-0.2"]
        assert "val_attention" not in run.artifacts  # no chapter reads Table 4's maps
        assert run.manifest["bundle_models"] == 8
    assert not (tmp_path / "_work").exists() or not any((tmp_path / "_work").iterdir())
    summary = json.loads((tmp_path / "reproduce_summary.json").read_text())
    entry = summary["table4/adam+table4/sgd"]
    assert entry["status"] == "ok" and entry["models"] == 8 and entry["epochs"] == 1

    before = (tmp_path / "table4" / "sgd" / "history.csv").read_bytes()
    assert cli.main(["reproduce", *argv]) == 0
    assert "finished run of this configuration exists, skipped" in capsys.readouterr().out
    assert (tmp_path / "table4" / "sgd" / "history.csv").read_bytes() == before


def test_reproduce_plan_and_errors(capsys):
    assert cli.main(["reproduce", "plan", "--parts", "table2", "table1"]) == 0
    out = capsys.readouterr().out
    assert "table2" in out and "minutes_at_rate" in out and "of 213,000 model-epochs" in out
    assert cli.main(["reproduce", "run", "--parts", "table9"]) == 2
    assert "'table9'" in capsys.readouterr().err
    assert "brain" not in reproduce.DEFAULT_PARTS
