"""The fourth trial's lease findings (issue 66, findings 1-6): no GPU lease strands or repeats
work. Tiny long units (d=16, one block, 6 epochs in segments of 2) in a plan of three chunks
set up here: ``s`` (paused, the lease's source), and ``ga`` and ``gb`` (the lease's new
groups), so that what is checked does not depend on the campaign's plan."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch

from lstpe import cli
from lstpe.experiments import lease as ls
from lstpe.experiments import long_train as lt
from lstpe.experiments import long_units as lu
from lstpe.experiments import packed as pk
from lstpe.nn.model import ModelConfig

TINY = dict(model=ModelConfig(d_model=16, n_layers=1), n_train=384, eval_train_max=64,
            eval_test_max=64)
S = lu.LongChunk("s", (lu.LongUnit("table2", "learn-0.2", 2235),
                       lu.LongUnit("tables56", "learn-2", 2235)), 6, 4, "test")
GA = lu.LongChunk("ga", (lu.LongUnit("table2", "learn-0.5", 2235),
                         lu.LongUnit("table2", "learn-1", 2235)), 6, 8, "test",
                  snapshots="sparse")
GB = lu.LongChunk("gb", (lu.LongUnit("table2", "learn-1.5", 2235),), 6, 8, "test",
                  snapshots="sparse")
FIT = {"a": 0.002, "b": 0.0007, "e": 0.006, "capture": 0.2}
COLS = ["epoch", "split", "condition", "accuracy", "loss", "diverged"]


@pytest.fixture
def plan(monkeypatch):
    """The plan (s, ga, gb), all to 6 epochs, with segments of 2, in tiny models."""
    original = lu.LongUnit.config

    def config(self, device="cpu", **ov):
        return original(self, device, **{**TINY, **ov})

    monkeypatch.setattr(lu.LongUnit, "config", config)
    monkeypatch.setattr(lu, "LONG_EPOCHS", 6)
    monkeypatch.setattr(lu, "SEGMENT", 2)
    monkeypatch.setattr(lu, "LONG_PLAN", (S, GA, GB))
    monkeypatch.setattr(ls, "LEASE_ORDER", ("ga", "gb"))
    monkeypatch.setattr(ls, "TARGET", 6)


def alone(chunk: lu.LongChunk, results: Path, target: int) -> bool:
    return lt.train_chunk(dataclasses.replace(chunk, target=target), time.monotonic() + 600,
                          results, log=lambda m: None)


def run_lease(results: Path, out: Path, log: list[str] | None = None, **kw) -> dict:
    return ls.lease(5, out, results, device="cpu", epochs=6, skip_table=True,
                    log=(log.append if log is not None else lambda m: None), **kw)


def members(out: Path) -> list[str]:
    """The archive's members (none without a piece)."""
    if not list(out.glob("results.tgz.*")):
        return []
    return subprocess.run(f"cat {out}/results.tgz.* | tar tzf -", shell=True,
                          capture_output=True, text=True, check=True).stdout.split()


def unpack(out: Path, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    if not list(out.glob("results.tgz.*")):
        return
    subprocess.run(f"cat {out}/results.tgz.* | tar xzf - -C {home}", shell=True, check=True)


def same(unit: lu.LongUnit, a: Path, b: Path) -> None:
    x, y = lu.load_long(unit, a), lu.load_long(unit, b)
    assert x["epoch"] == y["epoch"] and x["pe_epochs"] == y["pe_epochs"]
    assert torch.equal(x["pe"], y["pe"])
    h = [d["history"][COLS].sort_values(COLS[:3]).reset_index(drop=True) for d in (x, y)]
    assert h[0].equals(h[1])


# ------------------------------------------------------------------------------ finding 1


def test_a_chunk_whose_checkpoint_cannot_come_back_is_cpu_only_not_retrained(plan, tmp_path,
                                                                             monkeypatch):
    """Finding 1: ga paused at epoch 1 (no segment yet) with a checkpoint too large to bring
    back. The lease used to train it again from epoch 0 beside gb; now it trains gb alone,
    ga's checkpoint is untouched and no segment of ga is published, and both the lease and
    its plan name ga as CPU only, with the reason."""
    results = tmp_path / "results"
    assert alone(GA, results, 1)
    monkeypatch.setattr(ls, "RESUME_BACK_BYTES", 1)
    assert [g.name for g in ls.open_groups(results)] == ["gb"]
    state, why = ls.held(results)["ga"]
    assert state == "CPU only" and "MiB" in why and "chunk0.pt" in why
    plan_rows = ls.lease_plan(9, results, record={"fit": FIT, "path": "x.json"})
    row = plan_rows.set_index("chunk").loc["ga"]
    assert row["state"] == "CPU only" and not row["fits"]
    s = run_lease(results, tmp_path / "out")
    assert s["groups"] == ["gb"] and s["held"]["ga"]["state"] == "CPU only"
    assert all(lu.published_epoch(u, results) == 0 for u in GA.units)
    assert lu.resume_epoch(GA, results) == 1 and lu.chunk_problems(GA, results) == []
    with pytest.raises(lu.LongChunkError, match="ga/chunk0.pt exist"):  # packing refuses it
        pk.train_packed(pk.packed_chunk("x", [], [GA]), time.monotonic() + 60, results,
                        log=lambda m: None)


def test_segments_another_trajectory_published_past_a_checkpoint_are_reported(plan,
                                                                             tmp_path):
    """Finding 1: the state the old lease left (ga's checkpoint at epoch 1, and segments to
    epoch 6 that ga trained from epoch 0 elsewhere) is a problem ``chunk_problems`` names;
    one segment at the end of the checkpoint's open segment (a process killed between its
    publish and its next checkpoint) is not."""
    here, there = tmp_path / "here", tmp_path / "there"
    assert alone(GA, here, 1)
    assert alone(GA, there, 6)
    unit = GA.units[0]
    shutil.copytree(unit.path(there) / "e0002", unit.path(here) / "e0002")
    assert lu.chunk_problems(GA, here) == []  # the open segment's end: compared on resume
    for u in GA.units:
        for p in lu.segments(u, there):
            if not (u.path(here) / p.name).exists():
                shutil.copytree(p, u.path(here) / p.name)
    problems = lu.chunk_problems(GA, here)
    assert len(problems) == 2  # one per unit
    assert all("past the resume checkpoint" in p and "epoch 1" in p for p in problems)
    assert str(unit.path(here) / "e0004") in problems[0]


def test_a_tree_trimmed_for_a_lease_still_shows_a_chunk_begun_elsewhere(tmp_path, monkeypatch,
                                                                       lease_checkout):
    """Finding 1, through ``scripts/lease_tree.py``: ga began on a CPU (its ``chunk.json`` and
    checkpoint committed, no segment yet). Trimmed for the mechanism, the tree used to lose
    every trace of ga, so the lease trained it from epoch 0; now its ``chunk.json`` travels
    and the lease holds ga as begun."""
    import importlib.util

    from lstpe.runtime import repo_root

    spec_json = json.dumps({"units": [u.key for u in GA.units], "precision": "fp32",
                            "amp": False})
    repo = lease_checkout(tmp_path, {"results/long/_resume/ga/chunk.json": spec_json,
                                     "results/long/_resume/ga/chunk0.pt": "state"})
    spec = importlib.util.spec_from_file_location("lease_tree",
                                                  repo_root() / "scripts" / "lease_tree.py")
    tree = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tree)
    monkeypatch.setattr(lu, "LONG_PLAN", (*lu.LONG_PLAN, GA))
    monkeypatch.setattr(ls, "LEASE_ORDER", ("ga",))
    monkeypatch.setattr(ls, "TARGET", 6)
    tree.trim(repo, "mechanism")
    results = repo / "results"
    assert (results / "long/_resume/ga/chunk.json").exists()
    assert not (results / "long/_resume/ga/chunk0.pt").exists()  # too large to travel
    state, why = ls.held(results)["ga"]
    assert state == "begun" and "chunk.json" in why
    assert tree.restore(repo) > 0 and (results / "long/_resume/ga/chunk0.pt").exists()


# ------------------------------------------------------------------------------ finding 2


def test_new_units_paused_by_a_lease_come_back_with_a_checkpoint_that_resumes(plan, tmp_path,
                                                                              monkeypatch):
    """Finding 2: a lease that pauses inside ga and gb (after epoch 3) used to bring back
    their segments and no checkpoint. Now each group's resume checkpoint comes back in the
    pieces; unpacked at home, ``train_chunk`` resumes each from epoch 3 and publishes the
    segments of the group trained alone, bit for bit; no log line names the packed chunk's
    own checkpoint, which is deleted."""
    ref, device, home = tmp_path / "ref", tmp_path / "device", tmp_path / "home"
    assert alone(GA, ref, 6) and alone(GB, ref, 6)
    monkeypatch.setattr(pk, "train_packed", functools.partial(pk.train_packed, stop_at=3))
    log: list[str] = []
    s = run_lease(device, tmp_path / "out", log)
    assert s["groups"] == ["ga", "gb"] and s["finished"] is False
    names = members(tmp_path / "out")
    assert {"long/_resume/ga/chunk0.pt", "long/_resume/gb/chunk0.pt",
            "long/_resume/ga/chunk.json"} <= set(names)
    assert s["paused_groups"]["ga"]["epoch"] == 3 and s["paused_groups"]["ga"]["back"]
    assert not any(".work" in m for m in log) and not any(".work" in n for n in names)
    unpack(tmp_path / "out", home)
    assert [c.name for c in ls.paused_sources(home, 6)] == ["ga", "gb"]
    for g in (GA, GB):
        assert lu.resume_epoch(g, home) == 3 and lu.chunk_problems(g, home) == []
        assert alone(g, home, 6)
        for u in g.units:
            same(u, ref, home)


def test_new_units_whose_checkpoint_cannot_come_back_are_not_sent_back_at_all(plan, tmp_path,
                                                                              monkeypatch):
    """Finding 2: where a paused group's checkpoint is too large to bring back, neither it
    nor the group's segments come back: at home the group is still open, to be trained from
    epoch 0, never stranded with segments that nothing continues. The message of a chunk
    with segments and no checkpoint no longer promises a checkpoint git never held."""
    device, home = tmp_path / "device", tmp_path / "home"
    monkeypatch.setattr(pk, "train_packed", functools.partial(pk.train_packed, stop_at=3))
    monkeypatch.setattr(ls, "RESUME_BACK_BYTES", 1)
    (device / "benchmarks").mkdir(parents=True)
    (device / "benchmarks" / "x.csv").write_text("written by the lease")  # a piece to unpack
    s = run_lease(device, tmp_path / "out")
    names = members(tmp_path / "out")
    assert names == ["benchmarks/x.csv"]  # neither ga's nor gb's segments nor checkpoints
    assert s["paused_groups"]["ga"]["back"] is False
    unpack(tmp_path / "out", home)
    assert [g.name for g in ls.open_groups(home)] == ["ga", "gb"]
    assert lu.resume_epoch(GA, device) == 3  # on the device it still goes on from there
    shutil.copytree(device / "long" / "table2" / "learn-0.5", home / "long" / "table2" /
                    "learn-0.5")  # the old lease's state: segments without a checkpoint
    with pytest.raises(FileNotFoundError, match="none was ever written") as e:
        alone(GA, home, 6)
    assert "git checkout -- results/long)" not in str(e.value)


# ------------------------------------------------------------------------------ finding 3


def test_a_damaged_paused_checkpoint_is_named_and_passed_over(plan, tmp_path, capsys):
    """Finding 3: the source s paused at epoch 3 with its checkpoint cut short. It used to
    abort the lease and ``campaign plan --device cuda``; now both name it and go on with ga
    and gb."""
    results = tmp_path / "results"
    assert alone(S, results, 3)
    ckpt = lu.resume_checkpoint(S, results)
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    assert ls.paused_sources(results, 6) == []
    state, why = ls.held(results)["s"]
    assert state == "damaged" and str(ckpt) in why
    bench = results / "benchmarks"
    bench.mkdir()
    (bench / "lease_X.json").write_text(json.dumps({"fit": FIT, "started": "2026", "gpu": "X"}))
    assert cli.main(["campaign", "plan", "--device", "cuda", "--minutes", "9",
                     "--results", str(results)]) == 0
    text = capsys.readouterr().out
    assert "s: damaged" in text and str(ckpt) in text and "ga: trains" in text
    s = run_lease(results, tmp_path / "out")
    assert s["groups"] == ["ga", "gb"] and s["finished"] and s["held"]["s"]["state"] == "damaged"
    assert all(lu.published_epoch(u, results) == 6 for u in GA.units + GB.units)


# ------------------------------------------------------------------------------ finding 4


def test_an_earlier_leases_pieces_are_not_returned_with_the_new_ones(plan, tmp_path):
    """Finding 4: ``out`` holds three pieces of an earlier lease; the new archive is one
    piece. The stale ``.ab`` and ``.ac`` used to stay and break ``cat results.tgz.* | tar
    xzf -``; now they are removed first. A ``results.tgz.*`` no lease made is refused,
    named, before anything is trained."""
    results, out = tmp_path / "results", tmp_path / "out"
    (results / "benchmarks").mkdir(parents=True)
    (results / "benchmarks" / "lease_new.csv").write_text("models\n3\n")
    out.mkdir()
    for suffix in ("aa", "ab", "ac"):
        (out / f"results.tgz.{suffix}").write_bytes(b"an earlier lease's piece " * 100)
    assert [p.name for p in ls.pack_results(results, out)] == ["results.tgz.aa"]
    assert members(out) == ["benchmarks/lease_new.csv"]
    (out / "results.tgz.old").write_text("someone's copy")
    with pytest.raises(FileExistsError, match="results.tgz.old"):
        ls.lease(5, out, results, device="cpu", skip_table=True, log=lambda m: None)
    assert (out / "results.tgz.aa").exists()  # refused before touching anything


# ------------------------------------------------------------------------------ finding 5


@pytest.mark.parametrize("minutes", ["-1", "0", "nan", "inf"])
def test_lease_refuses_minutes_that_are_not_a_positive_number(plan, minutes, tmp_path,
                                                               capsys):
    """Finding 5: ``campaign lease --minutes`` -1, 0, nan or inf used to be accepted (nan
    trains without a deadline); now it is refused, the value named, nothing written."""
    out = tmp_path / "out"
    assert cli.main(["campaign", "lease", "--minutes", minutes, "--out", str(out),
                     "--device", "cpu", "--no-table", "--results", str(tmp_path / "r")]) == 2
    assert repr(minutes) in capsys.readouterr().err and not out.exists()
    with pytest.raises(ValueError, match="positive, finite"):
        ls.lease(float(minutes), out, tmp_path / "r", device="cpu", log=lambda m: None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_lease_on_cuda_without_a_gpu_is_one_line(plan, tmp_path, capsys):
    """Finding 5: ``campaign lease --device cuda`` on a machine without CUDA ended in a
    RuntimeError traceback; now one line names the problem (exit 2)."""
    assert cli.main(["campaign", "lease", "--minutes", "5", "--out", str(tmp_path / "out"),
                     "--no-table", "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "CUDA is not available" in err and "'cuda'" in err


# ------------------------------------------------------------------------------ finding 6


@pytest.mark.parametrize("text, why", [("{not json", "cannot be read"),
                                       (json.dumps({"fit": {"a": 0.1, "b": 0.1},
                                                    "started": "2030"}), "e=null"),
                                       (json.dumps({"fit": {**FIT, "b": math.nan},
                                                    "started": "2030"}), "b=NaN")])
def test_a_damaged_lease_record_is_named_and_passed_over(tmp_path, capsys, text, why):
    """Finding 6: a lease record that is not JSON, or whose fit lacks a number or holds a
    NaN, used to stop ``campaign plan --device cuda`` naming no file (or with KeyError 'e');
    now it is named and passed over: with an older whole record the plan uses that one,
    without one it says there is no usable record, naming the damaged one."""
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    bad = bench / "lease_B_new.json"
    bad.write_text(text)
    args = ["campaign", "plan", "--device", "cuda", "--minutes", "9", "--results",
            str(tmp_path)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and why in err and "no lease record" in err
    good = bench / "lease_A_old.json"
    good.write_text(json.dumps({"fit": FIT, "started": "2026", "gpu": "A"}))
    assert ls.last_record(tmp_path, log=lambda m: None)["path"] == str(good)
    assert cli.main(args) == 0
    out = capsys.readouterr()
    assert str(bad) in out.err and str(good) in out.out
