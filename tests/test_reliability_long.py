"""Long units under faults (the adversarial trial of long chunks driven through ``campaign
run`` and ``status``): a run always ends, a damaged or incomplete store is named and never
trained over, trajectories are never spliced, and every process that trained a segment is
recorded.

Each test failed before its fix (finding numbers of the trial in the docstrings). Long units
are tiny: 6 epochs in segments of 2 (the ``short`` fixture), a model of d=16 and one block.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
import torch

from lstpe.campaign import items as cp
from lstpe.campaign import long_progress as lp
from lstpe.campaign import long_train as lt
from lstpe.campaign import resume as rs
from lstpe.campaign import scheduler as cr
from lstpe.experiments import long_units as lu
from lstpe.experiments import units as un
from lstpe.nn.model import ModelConfig
from lstpe.store import model as mf
from lstpe.store import results as res
from lstpe.store.rundir import _boot_id

REPO = Path(__file__).resolve().parents[1]
TINY = dict(model=ModelConfig(d_model=16, n_layers=1), n_train=64, eval_train_max=64,
            eval_test_max=64)
UNITS = (lu.LongUnit("table2", "learn-0.2", 2235), lu.LongUnit("tables56", "learn-2", 2235))
SETUP = """
    import sys, time, torch
    from lstpe.campaign import scheduler as cr
    from lstpe.campaign import long_train as lt
    from lstpe.experiments import long_units as lu
    from lstpe.nn.model import ModelConfig
    lu.LONG_EPOCHS, lu.SEGMENT = 6, 2
    TINY = dict(model=ModelConfig(d_model=16, n_layers=1), n_train=64, eval_train_max=64,
                eval_test_max=64)
    UNITS = (lu.LongUnit("table2", "learn-0.2", 2235), lu.LongUnit("tables56", "learn-2", 2235))
    CHUNK = lu.LongChunk("t", UNITS, 6, 4, "test")
    lu.LONG_PLAN = (CHUNK,)
"""


@pytest.fixture
def short(monkeypatch):
    """A long unit of 6 epochs in segments of 2; the plan: the chunk ``t`` of :data:`UNITS`."""
    monkeypatch.setattr(lu, "LONG_EPOCHS", 6)
    monkeypatch.setattr(lu, "SEGMENT", 2)
    monkeypatch.setattr(lu, "LONG_PLAN", (chunk(6),))


def chunk(target: int) -> lu.LongChunk:
    return lu.LongChunk("t", UNITS, target, 4, "test")


def train(target: int, results: Path) -> bool:
    return lt.train_chunk(chunk(target), time.monotonic() + 600, results, log=lambda m: None,
                          **TINY)


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> tuple[Path, Path]:
    """(``part``: trained to epoch 3, segment e0002 and a checkpoint at 3; ``whole``: trained
    to epoch 6, segments e0002-e0006 and a checkpoint at 6)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(lu, "LONG_EPOCHS", 6)
        m.setattr(lu, "SEGMENT", 2)
        part, whole = tmp_path_factory.mktemp("part"), tmp_path_factory.mktemp("whole")
        assert train(3, part) and train(6, whole)
    return part, whole


def copy(base: Path, dst: Path) -> Path:
    """What git holds of ``base`` (segments and the resume folder; no work folder)."""
    shutil.copytree(base / "long", dst / "long", ignore=shutil.ignore_patterns(".work"))
    return dst


def seg(unit: lu.LongUnit, epoch: int, results: Path) -> str:
    """How messages name the unit's segment to ``epoch``."""
    return f"the segment to epoch {epoch} of {unit.path(results)}"


def segment_at(unit: lu.LongUnit, epoch: int, results: Path) -> mf.Segment:
    return next(s for s in mf.segments(unit.path(results)) if s.epoch == epoch)


def published(unit: lu.LongUnit, results: Path) -> list[int]:
    return [s.epoch for s in mf.segments(unit.path(results))]


def forged(s: mf.Segment, dst: Path, previous: str | None = "keep") -> Path:
    """Another trajectory's segment ``s``, as a valid sealed segment folder ``dst`` whose first
    accuracy differs (``previous``: the checksum it names as the segment before it)."""
    hist = lu.segment_run(s).history.copy()
    hist.loc[0, "accuracy"] = float(hist.loc[0, "accuracy"]) + 0.001
    man = {k: v for k, v in s.manifest.items() if k not in ("files", res.MANIFEST_HASH_KEY)}
    if previous != "keep":
        man["long"] = {**man["long"], "previous": previous}
    res.save_run(dst, hist, man, res.load_torch(s.folder / s.snapshot))
    return dst


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def store_200_epoch_units(results: Path) -> None:
    """Every 200-epoch unit a CPU trains counts as stored (a CPU trains long units only then)."""
    for u in un.plan():
        if u.item not in cp.NOT_TRAINED:
            u.path(results).mkdir(parents=True)
            (u.path(results) / "manifest.json").write_text(json.dumps({"config": {}}))


def env() -> dict[str, str]:
    e = dict(os.environ, OMP_NUM_THREADS="1")
    e["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [e.get("PYTHONPATH")])])
    return e


def spawn(code: str, *args: str) -> subprocess.Popen:
    """A Python subprocess running :data:`SETUP`, then ``code`` (output piped)."""
    source = textwrap.dedent(SETUP) + textwrap.dedent(code)
    return subprocess.Popen([sys.executable, "-u", "-c", source, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=REPO, env=env())


def checkpoint_bytes(results: Path) -> bytes:
    return rs.resume_checkpoint(chunk(6), results).read_bytes()


# --------------------------------------------------------------------------- 1: always ends


def test_a_deadline_ends_a_run_whatever_the_long_chunk_does(tmp_path, monkeypatch):
    """Finding 1: the loop of ``campaign run`` never checked the deadline: a long chunk that
    returns at once without progress was picked again forever."""
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(lu, "LONG_PLAN", (chunk(6),))
    store_200_epoch_units(tmp_path)
    calls: list[int] = []

    def no_progress(*a, **k) -> bool:
        calls.append(1)
        clock[0] += 1.0
        if len(calls) > 150:
            raise AssertionError("the chunk was picked 150 times past the deadline")
        return True

    monkeypatch.setattr(lt, "train_chunk", no_progress)
    monkeypatch.setattr(rs, "next_chunk", lambda *a, **k: chunk(6))
    monkeypatch.setattr(cr, "leg_seconds", lambda *a, **k: 0.0)  # predicted to fit
    cr.run(1, tmp_path, device="cpu", log=lambda m: None)
    assert 1 <= len(calls) <= 61


def test_a_chunk_at_its_target_with_a_last_segment_missing_is_named_not_picked_forever(
        bases, tmp_path):
    """Finding 1: the resume checkpoint at the target, one unit's last segment gone: ``campaign
    run`` never returned. Now it names the unit and the segment and ends at once."""
    results = copy(bases[1], tmp_path)
    store_200_epoch_units(results)
    mf.truncate(UNITS[1].path(results), 4, tmp_path / "aside")
    proc = spawn("cr.run(1.0, sys.argv[1], device='cpu', log=print, **TINY)\nprint('RETURNED')",
                 str(results))
    try:
        out, _ = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"campaign run did not return within 150 s:\n{out[-2000:]}")
    assert proc.returncode == 0 and "RETURNED" in out, out
    assert "long: training" not in out
    assert UNITS[1].key in out and "segment to epoch 6" in out, out


# --------------------------------------------------------------------------- 2: damaged ckpt


def test_a_long_checkpoint_that_fails_its_digest_is_refused_not_retrained(bases, tmp_path):
    """Finding 2: moved aside as ``chunk0.pt.damaged-*`` in the tracked folder, and the chunk
    trained again from epoch 0 on top of its published segments."""
    results = copy(bases[0], tmp_path)
    ckpt = rs.resume_checkpoint(chunk(6), results)
    state = torch.load(ckpt, weights_only=False)
    t = state["model"][sorted(state["model"])[0]].view(-1)
    raw = t[:16].clone().view(torch.uint8)
    raw[::4] ^= 0xFF
    t[:16] = raw.view(t.dtype)
    torch.save(state, ckpt)  # its digest kept: it now describes other numbers
    before = ckpt.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(res.DamagedFileError, match=re.escape(str(ckpt))):
            train(6, results)
    assert ckpt.read_bytes() == before
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["chunk.json", "chunk0.pt",
                                                            "config.json"]
    assert published(UNITS[0], results) == [2]


# --------------------------------------------------------------------------- 4: incomplete


def test_a_model_folder_without_its_manifest_is_not_published(short, bases, tmp_path):
    """Finding 4: a folder without its manifest (a copy cut short) counted as published: the
    chunk read as done; a later publish crashed. Now nothing in it counts, it is named, and
    nothing is trained over it."""
    results = copy(bases[0], tmp_path)
    folder = UNITS[0].path(results)
    (folder / "manifest.json").unlink()
    assert lu.published_epoch(UNITS[0], results) == 0 and lu.chunk_epoch(chunk(6), results) == 0
    row = lp.long_status(results).iloc[0]
    assert row["state"] == "damaged" and f"{folder} has files but no manifest" in row["problem"]
    before, kept = checkpoint_bytes(results), folder_bytes(folder)
    with pytest.raises(res.RunDirError, match=re.escape(str(folder))):
        train(6, results)
    assert checkpoint_bytes(results) == before and folder_bytes(folder) == kept


def test_an_append_cut_short_is_not_damage_and_the_next_publish_replaces_it(short, bases,
                                                                             tmp_path):
    """A process killed between writing a model's longer history.csv and its manifest: the
    manifest's bytes are a prefix of the file. Readers see the recorded segments; the resumed
    run publishes over the cut rows, and the whole equals an uninterrupted run."""
    results = copy(bases[0], tmp_path)
    hist = UNITS[0].path(results) / "history.csv"
    hist.write_bytes(hist.read_bytes() + b"0,learn-0.2,learn,0.2,2235,adam,3,trai")
    assert rs.chunk_problems(chunk(6), results) == []
    assert lu.load_long(UNITS[0], results)["epoch"] == 2
    assert train(6, results)
    for u in UNITS:
        a, b = lu.load_long(u, bases[1]), lu.load_long(u, results)
        assert a["history"].equals(b["history"]) and torch.equal(a["pe"], b["pe"])


def test_a_first_publish_killed_before_its_manifest_is_written_over(short, tmp_path):
    """Killed in its first publish after history.csv and a snapshot were written but before
    the manifest (the checkpoint before the segment's end): nothing is published, the folder
    is no incomplete copy, and the resumed run publishes over it as an uninterrupted one."""
    whole = tmp_path / "whole"
    assert train(6, whole) and train(1, tmp_path)
    folder = UNITS[0].path(tmp_path)
    (folder / "snapshots").mkdir(parents=True)
    (folder / "snapshots" / "e0002.pt").write_bytes(b"cut")
    (folder / "history.csv").write_text("model,epoch\n0,0\n")
    (folder / ".history.csv.x.tmp").write_text("cut")
    assert rs.chunk_problems(chunk(6), tmp_path) == []
    assert train(6, tmp_path)
    for u in UNITS:
        a, b = lu.load_long(u, whole), lu.load_long(u, tmp_path)
        assert a["history"].equals(b["history"]) and torch.equal(a["pe"], b["pe"])


def test_a_unit_whose_last_segment_is_gone_is_named_before_training(short, bases, tmp_path):
    """Finding 4: a unit whose last segment is gone trained a whole segment before failing,
    every retry."""
    results = copy(bases[0], tmp_path)
    shutil.rmtree(UNITS[1].path(results))
    before = checkpoint_bytes(results)
    with pytest.raises(res.RunDirError, match=f"{re.escape(UNITS[1].key)}.*epoch 2"):
        train(6, results)
    assert checkpoint_bytes(results) == before
    assert published(UNITS[0], results) == [2]


def test_a_deleted_snapshot_is_named_by_status_and_run(short, bases, tmp_path):
    """Finding 4: a deleted middle segment passed ``campaign run`` and ``campaign status``
    (exit 0); only a chapter's load found it. Its snapshot file deleted, now the same."""
    results = copy(bases[1], tmp_path)
    (UNITS[0].path(results) / "snapshots" / "e0004.pt").unlink()
    row = lp.long_status(results).iloc[0]
    assert row["state"] == "damaged" and "e0004" in row["problem"]
    assert "damaged" in lp.long_status_text(lp.long_status(results)).lower()
    store_200_epoch_units(results)
    lines: list[str] = []
    cr.run(1, results, device="cpu", log=lines.append, **TINY)
    assert any(UNITS[0].key in x and "e0004" in x for x in lines), lines


# --------------------------------------------------------------------------- 6: no splicing


def test_a_foreign_segment_reached_by_a_resumed_run_is_compared_and_refused(short, bases,
                                                                           tmp_path):
    """Finding 6: a segment already present when a resumed run reached its epoch was kept
    without comparison (a foreign segment unpacked here), and the next one chained to it."""
    results = copy(bases[0], tmp_path)
    folder = UNITS[0].path(results)
    stage = forged(segment_at(UNITS[0], 4, bases[1]), tmp_path / "alien",
                   previous=segment_at(UNITS[0], 2, results).checksum)
    mf.append_segment(folder, stage, UNITS[0].key)
    kept = folder_bytes(folder)
    with pytest.raises(res.RunDirError, match=re.escape(str(seg(UNITS[0], 4, results)))):
        train(6, results)
    assert folder_bytes(folder) == kept
    assert published(UNITS[1], results) == [2]


def test_a_segment_published_before_a_kill_is_kept_when_equal(short, bases, tmp_path,
                                                                monkeypatch):
    """Finding 6 (the other side): killed between two units' publishes, the resumed run on this
    machine recomputes the first unit's segment, finds it equal, keeps it and goes on; the
    whole equals an uninterrupted run."""
    results = copy(bases[0], tmp_path)
    real = lt.SegmentWriter._publish

    def killed_after_one(self, i, unit, epoch, history):
        if i == 1 and epoch == 4:
            raise KeyboardInterrupt  # SIGKILL in the trial
        return real(self, i, unit, epoch, history)

    monkeypatch.setattr(lt.SegmentWriter, "_publish", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        train(6, results)
    monkeypatch.setattr(lt.SegmentWriter, "_publish", real)
    first = segment_at(UNITS[0], 4, results).manifest
    assert train(6, results)
    assert segment_at(UNITS[0], 4, results).manifest == first
    for u in UNITS:
        a, b = lu.load_long(u, bases[1]), lu.load_long(u, results)
        assert torch.equal(a["pe"], b["pe"])
        cols = ["epoch", "split", "condition", "accuracy", "loss"]
        assert a["history"][cols].equals(b["history"][cols])


def test_a_segment_replaced_under_a_checkpoint_is_refused(short, bases, tmp_path):
    """Finding 6: a lease's tarball extracted over a chunk that trained here meanwhile replaced
    a published segment; the resumed run chained its next segment to the replacement."""
    results = copy(bases[0], tmp_path)
    folder = UNITS[0].path(results)
    stage = forged(segment_at(UNITS[0], 2, results), tmp_path / "replaced")
    shutil.rmtree(folder)
    mf.append_segment(folder, stage, UNITS[0].key)
    with pytest.raises(res.RunDirError, match=re.escape(str(seg(UNITS[0], 2, results)))):
        train(6, results)
    assert published(UNITS[0], results) == [2]


# --------------------------------------------------------------------------- 7: provenance


def test_a_segment_names_every_process_that_trained_it(short, tmp_path, monkeypatch):
    """Finding 7: a segment trained by two processes named only the last (an H100 process
    trained part of it, the CPU process that finished it was all its manifest said)."""
    real = res.process_record
    gpu = {"device": "cuda: NVIDIA H100 80GB HBM3", "git_commit": "36cfab6" + "0" * 33,
           "host": "gpu-lease"}
    monkeypatch.setattr(res, "process_record", lambda device: dict(gpu))
    assert train(3, tmp_path)  # the GPU trains epochs 0-3 (segment e0002, epoch 3 of e0004)
    monkeypatch.setattr(res, "process_record", real)
    assert train(6, tmp_path)  # this CPU trains epochs 4-6
    man = segment_at(UNITS[0], 4, tmp_path).manifest
    procs = man["long"]["processes"]
    assert [(p["device"], p["from_epoch"], p["to_epoch"]) for p in procs] == \
        [(gpu["device"], 2, 3), (real(torch.device("cpu"))["device"], 3, 4)]
    assert res.run_commits(man)[0].startswith("36cfab6")
    assert len(res.run_commits(man)) == 2
    only_cpu = segment_at(UNITS[0], 6, tmp_path).manifest["long"]["processes"]
    assert [(p["from_epoch"], p["to_epoch"]) for p in only_cpu] == [(4, 6)]
    # a segment manifest from before processes were recorded still loads and prices
    man = dict(segment_at(UNITS[1], 2, tmp_path).manifest)
    man["long"] = {k: v for k, v in man["long"].items() if k != "processes"}
    assert res.run_commits(man) == [man["git_commit"]]


# --------------------------------------------------------------------------- 9: the rest


def test_a_truncated_long_checkpoint_gets_a_hint_that_keeps_the_work(short, bases, tmp_path):
    """Finding 9: the hint "delete it to restart" made the chunk unresumable (its published
    segments stay, so it can never train again from epoch 0)."""
    results = copy(bases[0], tmp_path)
    ckpt = rs.resume_checkpoint(chunk(6), results)
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    with pytest.raises(res.DamagedFileError) as e:
        train(6, results)
    assert str(ckpt) in str(e.value) and "to restart" not in str(e.value)
    assert f"git checkout -- {ckpt}" in str(e.value) and "do not delete it" in str(e.value)


def test_status_marks_a_damaged_long_checkpoint_without_aborting(short, bases, tmp_path,
                                                                 capsys):
    """Finding 9: ``campaign status`` exited 2 on one damaged long checkpoint."""
    from lstpe.cli import main

    results = copy(bases[0], tmp_path)
    ckpt = rs.resume_checkpoint(chunk(6), results)
    ckpt.write_bytes(b"")
    rc = main(["campaign", "status", "--results", str(results)])
    out, err = capsys.readouterr()
    assert rc == 1, err  # marked, not aborted: exit 1 says something is damaged
    assert "damaged" in out.lower() and str(ckpt) in out


def test_a_claimed_long_chunk_is_passed_over_and_free_units_train(short, tmp_path,
                                                                    monkeypatch):
    """Finding 9: a second worker exited 2 when the long chunk was claimed, instead of
    training the free units."""
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        claim = lu.long_root(tmp_path) / ".work" / "claims" / UNITS[0].key.replace("/", "__")
        claim.mkdir(parents=True)
        (claim / ".lock").write_text(json.dumps({
            "pid": sleeper.pid, "host": socket.gethostname(), "boot_id": _boot_id(),
            "started_at": "2026-01-01T00:00:00+00:00", "argv": "lstpe campaign run"}))
        monkeypatch.setattr(cr, "pick_device", lambda d: torch.device("cuda"))
        monkeypatch.setattr(res, "device_name", lambda d: "cuda: test")
        monkeypatch.setattr(cr, "probe", lambda head, dev, **o: {
            "models": len(head), "step_s": 0.01, "eval_s": 0.01, "s_per_model_epoch": 0.01,
            "n_train": 64})
        monkeypatch.setattr(cr, "floor_of", lambda *a, **k: {})
        started: list[list[str]] = []
        monkeypatch.setattr(cr, "_train_chunk",
                            lambda ch, *a: started.append([u.key for u in ch]) or [])
        lines: list[str] = []
        cr.run(5, tmp_path, device="cuda", log=lines.append)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert started, lines
    assert any("claimed" in x and "t" in x and str(sleeper.pid) in x for x in lines), lines


@pytest.mark.parametrize("text", [
    "{not json",
    json.dumps({"precision": "fp32", "amp": False}),
    json.dumps({"units": [u.key for u in UNITS], "precision": "bf16", "amp": False}),
    json.dumps({"units": [u.key for u in UNITS], "precision": "fp32", "amp": "no"}),
    json.dumps([1, 2])])
def test_a_bad_chunk_json_is_named_before_training(short, bases, tmp_path, text):
    """Finding 9: ``chunk.json`` of bad JSON or without "units" was not named; a precision
    that contradicts ``amp`` was not checked."""
    results = copy(bases[0], tmp_path)
    spec = rs.resume_dir(chunk(6), results) / "chunk.json"
    spec.write_text(text)
    before = checkpoint_bytes(results)
    with pytest.raises(ValueError, match=re.escape(str(spec))):
        train(6, results)
    assert checkpoint_bytes(results) == before and spec.read_text() == text


def test_a_kill_during_a_checkpoint_write_leaves_nothing_in_the_tracked_folder(short, bases,
                                                                              tmp_path):
    """Finding 9: kill -9 during a checkpoint write left a temporary file in the tracked
    ``_resume/`` folder; a temporary file left there by an older version is cleaned too."""
    results = copy(bases[0], tmp_path)
    rdir = rs.resume_dir(chunk(6), results)
    proc = spawn("""
        real = torch.save
        def save(obj, f, *a, **k):
            real(obj, f, *a, **k)
            if ".chunk0.pt." in str(f):  # the checkpoint's temporary file, half written
                data = open(f, "rb").read()
                open(f, "wb").write(data[: len(data) // 2])
                print("writing", flush=True)
                time.sleep(600)
        torch.save = save
        lt.train_chunk(CHUNK, time.monotonic() + 600, sys.argv[1], log=print, **TINY)
    """, str(results))
    deadline = time.monotonic() + 150
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "writing" in line or (not line and proc.poll() is not None):
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdout.close()
    assert "writing" in lines[-1], "".join(lines)
    assert sorted(p.name for p in rdir.iterdir()) == ["chunk.json", "chunk0.pt",
                                                      "config.json"]
    assert rs.resume_epoch(chunk(6), results) == 3  # the previous checkpoint, whole
    (rdir / ".chunk0.pt.old.tmp").write_bytes(b"x")  # left by an older version
    with pytest.warns(res.StaleLockWarning, match=f"pid {proc.pid}"):  # the killed claims
        assert train(6, results)
    assert not [p for p in lu.long_root(results).rglob(".*.tmp")]
    assert lu.chunk_epoch(chunk(6), results) == 6


@pytest.mark.parametrize("text", ['{"n_models": 2, "models_per_chunk": 0}',
                                  '{"n_models": 2, "models_per_chunk": -1}',
                                  '{"n_models": 2, "models_per_chunk": true}',
                                  '{"n_models": 2, "models_per_chunk": 1.5}',
                                  "not json", "[]"])
def test_a_bad_chunk_layout_is_refused_naming_the_file(tmp_path, text):
    """Finding 9: ``chunk_layout.json`` was trusted (0 or -1 models per chunk)."""
    from lstpe.training.train import _layout

    path = tmp_path / "chunk_layout.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        _layout(tmp_path, 2, 2)
    assert path.read_text() == text
