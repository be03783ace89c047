"""A lease's tuning minute and its precision (issue 63, items 2 and 3), on the CPU.

The tuning (:func:`lstpe.experiments.lease_tune.tune`) with a faked clock and injected
measurements: it trains the fastest variant that passed, never one that raised or mismatched
the eager step, falls back to today's step when none passed, and skips what the 90 s leave
no time for. The precisions a card may train in (:func:`lstpe.experiments.lease_tune.
gpu_precisions`) from crafted pairs of stored fp32 and candidate runs: a candidate inside the
seed spread is cleared for its own tag (card and candidate) only; one outside is refused with
its numbers. The lease (tiny, on the CPU) records the variant table and trains fp32 with TF32
off while nothing is cleared.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from lstpe.experiments import lease as ls
from lstpe.experiments import lease_tune as lt
from lstpe.experiments import precision as pr
from tests.test_lease import tiny  # noqa: F401 (the fixture)

EAGER, COMPILED = lt.Variant("eager"), lt.Variant("compiled")
GRAPH, GRAPH_TF32, COMPILED_TF32 = lt.Variant("graph"), lt.Variant("graph", "tf32"), \
    lt.Variant("compiled", "tf32")


class Clock:
    """A clock that moves only when told (each measurement advances it)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _measure(table: dict[str, object], clock: Clock, cost_s: float = 20.0):
    """A measurement per variant name: a dict of numbers, or an exception to raise; each call
    costs ``cost_s`` seconds of the fake clock."""
    def fn(v: lt.Variant) -> dict[str, float]:
        clock.t += cost_s
        got = table[v.name]
        if isinstance(got, Exception):
            raise got
        return got  # type: ignore[return-value]
    return fn


def row(ms: float, diff: float = 0.0, compile_s: float = 5.0) -> dict[str, float]:
    return {"ms_per_step": ms, "model_epochs_per_s": 100 / ms, "max_diff": diff,
            "compile_s": compile_s}


def test_the_fastest_variant_that_passes_is_chosen():
    clock = Clock()
    fn = _measure({"graph/fp32": row(4.0), "compiled/fp32": row(1.5, 2e-6),
                   "graph/tf32": row(3.0, 1e-3), "compiled/tf32": row(1.0, 9e-3)}, clock)
    chosen, rows = lt.tune([GRAPH, lt.Variant("compiled"), GRAPH_TF32, COMPILED_TF32], fn,
                           GRAPH, clock=clock, log=lambda m: None)
    # compiled/tf32 is fastest but mismatches TF32's tolerance: compiled/fp32 wins
    assert chosen == lt.Variant("compiled")
    states = {r["variant"]: r["state"] for r in rows}
    assert states == {"graph/fp32": "passed", "compiled/fp32": "chosen",
                      "graph/tf32": "passed", "compiled/tf32": "mismatch"}
    bad = next(r for r in rows if r["variant"] == "compiled/tf32")
    assert "0.009" in bad["why"] and bad["max_diff"] == 9e-3 and bad["ms_per_step"] == 1.0
    assert all(set(lt.VARIANT_COLUMNS) <= set(r) for r in rows)


def test_a_failure_or_a_mismatch_falls_back_to_todays_step():
    clock = Clock()
    fn = _measure({"graph/fp32": RuntimeError("capture failed"),
                   "compiled/fp32": row(1.0, 0.5)}, clock)
    chosen, rows = lt.tune([GRAPH, lt.Variant("compiled")], fn, GRAPH, clock=clock,
                           log=lambda m: None)
    assert chosen == GRAPH  # nothing passed: today's step, not the fast mismatching one
    assert [r["state"] for r in rows] == ["failed", "mismatch"]
    assert "capture failed" in rows[0]["why"]
    fn = _measure({"graph/fp32": row(4.0), "compiled/fp32": RuntimeError("inductor")}, clock)
    chosen, rows = lt.tune([GRAPH, lt.Variant("compiled")], fn, GRAPH, clock=clock,
                           log=lambda m: None)
    assert chosen == GRAPH and [r["state"] for r in rows] == ["chosen", "failed"]


def test_the_tuning_stops_at_its_budget():
    clock = Clock()
    fn = _measure({"graph/fp32": row(4.0), "compiled/fp32": row(1.0),
                   "graph/tf32": row(0.5)}, clock, cost_s=50.0)
    chosen, rows = lt.tune([GRAPH, lt.Variant("compiled"), GRAPH_TF32], fn, GRAPH,
                           budget_s=90, clock=clock, log=lambda m: None)
    # 0 s: graph; 50 s: compiled; 100 s > 90: graph/tf32 is never measured
    assert [r["state"] for r in rows] == ["passed", "chosen", "skipped"]
    assert chosen == lt.Variant("compiled") and rows[2]["ms_per_step"] is None


def test_variants_are_todays_and_the_compiled_step_in_each_cleared_precision():
    import torch

    precs = [{"precision": "fp32", "cleared": True}, {"precision": "bf16", "cleared": False},
             {"precision": "tf32", "cleared": True}]
    assert [v.name for v in lt.variants(torch.device("cuda"), precs)] == [
        "graph/fp32", "compiled/fp32", "graph/tf32", "compiled/tf32"]
    assert [v.name for v in lt.variants(torch.device("cpu"), precs[:2])] == [
        "eager/fp32", "compiled/fp32"]


# --------------------------------------------------------------------------- the pair


def _runs(name: str, shift: float, tf32: bool | None = None) -> list[SimpleNamespace]:
    """Crafted stored runs of the pair in precision ``name``: every (PE, seed), validation
    accuracy 0.5 + 0.02 x seed index (a seed spread of 0.02) plus ``shift``."""
    out = []
    for _, pe in pr.PAIR_PES:
        for i, seed in enumerate(pr.PAIR_SEEDS):
            epochs = list(range(pr.PAIR_EPOCHS + 1))
            hist = pd.DataFrame({"split": "val_dropout", "condition": "all", "pe": pe,
                                 "seed": seed, "epoch": epochs, "loss": 1.0,
                                 "accuracy": [0.5 + 0.02 * i + shift] * len(epochs),
                                 "diverged": False})
            cfg = {"amp": name == "bf16", "epochs": pr.PAIR_EPOCHS, "pes": [pe],
                   "seeds": [seed], "lr": 1e-3}
            man = {"config": cfg, "precision": "fp32" if name == "tf32" else name,
                   "tf32": name == "tf32" if tf32 is None else tf32}
            out.append(SimpleNamespace(history=hist, manifest=man,
                                       path=Path("pair") / name / f"{pe}__{seed}", name=pe))
    return out


@pytest.fixture()
def stored(monkeypatch):
    """Crafted pairs by tag, read by :func:`pr.load_pair`."""
    pairs: dict[str, dict] = {}
    monkeypatch.setattr(pr, "load_pair", lambda results_dir=None, tag=None: pairs.get(tag))
    return pairs


def test_a_candidate_inside_the_margin_is_cleared_for_its_card_and_kind_only(stored):
    h200_bf16 = pr.candidate_tag("NVIDIA H200", "bf16")
    h200_tf32 = pr.candidate_tag("NVIDIA H200", "tf32")
    assert h200_tf32 == "gpu-NVIDIA-H200-tf32on-fp32" != h200_bf16
    assert pr.tag_candidate(h200_tf32) == "tf32" and pr.tag_candidate(h200_bf16) == "bf16"
    stored[h200_tf32] = {"fp32": _runs("fp32", 0.0), "tf32": _runs("tf32", 0.005)}
    rows = {r["precision"]: r for r in lt.gpu_precisions("NVIDIA H200")}
    assert rows["fp32"]["cleared"] and rows["tf32"]["cleared"]
    assert not rows["bf16"]["cleared"] and "no precision pair" in rows["bf16"]["why"]
    assert "0.005 vs seed spread 0.020" in rows["tf32"]["why"]
    other = {r["precision"]: r["cleared"] for r in lt.gpu_precisions("NVIDIA H100")}
    assert other == {"fp32": True, "bf16": False, "tf32": False}  # another card: nothing


def test_a_candidate_outside_the_margin_is_refused_with_its_numbers(stored):
    tag = pr.candidate_tag("NVIDIA H200", "bf16")
    stored[tag] = {"fp32": _runs("fp32", 0.0), "bf16": _runs("bf16", -0.05)}
    rows = {r["precision"]: r for r in lt.gpu_precisions("NVIDIA H200")}
    assert not rows["bf16"]["cleared"]
    assert "by 0.050, more than its seed spread 0.020" in rows["bf16"]["why"]


def test_a_tf32_pair_trained_without_tf32_clears_nothing(stored):
    tag = pr.candidate_tag("NVIDIA H200", "tf32")
    stored[tag] = {"fp32": _runs("fp32", 0.0), "tf32": _runs("tf32", 0.0, tf32=False)}
    rows = {r["precision"]: r for r in lt.gpu_precisions("NVIDIA H200")}
    assert not rows["tf32"]["cleared"] and "not with TF32 matmuls" in rows["tf32"]["why"]


# --------------------------------------------------------------------------- the lease


def test_the_lease_records_its_variants_and_trains_fp32_without_tf32(tiny, tmp_path,  # noqa: F811
                                                                      monkeypatch):
    """The compiled variant fails (injected): the lease falls back to the eager fp32 step,
    records the table, and trains inside TF32 off."""
    flags: list[bool] = []
    real = ls.tf32_mode

    def spy(device, enabled=False):
        flags.append(bool(enabled))
        return real(device, enabled)

    monkeypatch.setattr(ls, "tf32_mode", spy)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    results = tmp_path / "results"
    groups = [g for g in ls.open_groups(results) if g.name == "table1-2235"]
    clock = Clock()
    fn = _measure({"eager/fp32": row(5.0), "compiled/fp32": RuntimeError("no compiler")},
                  clock)
    s = ls.lease(20, tmp_path / "out", results, device="cpu", groups=groups, epochs=2,
                 skip_table=True, log=lambda m: None, tune=True, measure_fn=fn, clock=clock)
    assert s["variant"] == "eager/fp32" and s["finished"]
    assert [(r["variant"], r["state"]) for r in s["variants"]] == [
        ("eager/fp32", "chosen"), ("compiled/fp32", "failed")]
    assert [p["precision"] for p in s["precisions"] if p["cleared"]] == ["fp32"]
    assert flags and not any(flags)  # every block of the lease ran with TF32 off
    assert "bytes_before" in s["inductor_cache"]


# --------------------------------------------------------------------------- the pre-flight


def test_the_preflight_runs_the_compiled_step_end_to_end_and_plans_every_variant(tmp_path,
                                                                                 stored):
    """Tiny, on the CPU: the tuning measures both steps, the compiled step resumes bit for
    bit, the pack fits, and every variant of a card with TF32 cleared gets a plan; the
    variants never measured on that card are labelled estimates."""
    from lstpe.experiments import preflight as pf

    stored[pr.candidate_tag("NVIDIA H200", "tf32")] = {"fp32": _runs("fp32", 0.0),
                                                       "tf32": _runs("tf32", 0.0)}
    results = tmp_path / "results"
    (results / "benchmarks").mkdir(parents=True)
    fit = {"a": 0.00224, "b": 0.0007, "e": 0.006, "capture": 2.0}
    (results / "benchmarks" / "lease_NVIDIA_H200_x.json").write_text(json.dumps(
        {"started": "2026-01-01T00:00:00Z", "gpu": "NVIDIA H200", "fit": fit}))
    lines: list[str] = []
    out = pf.lease_preflight(9, results, work=tmp_path / "work", log=lines.append)
    assert out["ok"], lines
    assert out["resume"]["bit_equal"]
    assert {r["variant"] for r in out["variants"]} == {"eager/fp32", "compiled/fp32"}
    assert all(r["state"] in ("chosen", "passed") for r in out["variants"])
    plans = {p["variant"]: p for p in out["plans"]}
    assert set(plans) == {"graph/fp32", "compiled/fp32", "graph/tf32", "compiled/tf32"}
    assert plans["graph/fp32"]["basis"].startswith("measured on NVIDIA H200")
    assert all(plans[v]["basis"] == "estimate" for v in plans if v != "graph/fp32")
    assert plans["graph/fp32"]["model_epochs"] > 0 and plans["graph/fp32"]["trains"]
    text = "\n".join(lines)
    for v in plans:
        assert f"lease in {v} (" in text
    assert "an estimate, not a promised rate" in text
