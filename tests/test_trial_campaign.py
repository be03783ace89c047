"""The second adversarial trial (issue 38), the campaign's findings: no finished unit is lost
(2, 3), an edited import is refused (4), hand-damaged work files are named (11), publish
targets and paths are checked before any work (12, 13), the probe counts against the budget
(14).

Each test failed on 8e4ea56. Training uses the tiny recipe of ``tests/test_campaign.py``.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time

import pytest
import torch

from lstpe.campaign import scheduler as cr
from lstpe.campaign import status as cs
from lstpe.experiments import fragments as fr
from lstpe.experiments import units as un
from lstpe.store import results as res
from lstpe.store.rundir import _boot_id
from tests.test_campaign import TINY, _bundle, _manifest, tiny  # noqa: F401 (a fixture)

A, B, C = "table2/learn-1/6312", "table2/learn-1.5/6312", "table2/learn-2/6312"


def _quiet(msg: str) -> None:
    pass


def _no_training(monkeypatch) -> None:
    """Make any training in this test an error."""
    import lstpe.training.train as tt

    def refuse(*a, **k):
        raise AssertionError("trained")

    monkeypatch.setattr(tt, "train_many", refuse)


# --------------------------------------------------------------------------- 2: no unit lost


@pytest.mark.usefixtures("tiny")
def test_a_chunk_killed_after_publishing_one_unit_publishes_the_others(tmp_path, monkeypatch):
    """Finding 2: killed after publishing one unit of three, the next run deleted the other two
    verified staging folders and the chunk's checkpoints; they were retrained from scratch."""
    results = tmp_path / "results"
    real = fr.publish
    calls = []

    def killed_after_one(stage, unit, results_dir=None):
        if calls:
            raise KeyboardInterrupt  # the process dies here (SIGKILL in the trial)
        calls.append(unit.key)
        return real(stage, unit, results_dir)

    monkeypatch.setattr(fr, "publish", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        cr.run(5, results, device="cpu", units=[A, B, C], log=_quiet)
    monkeypatch.setattr(fr, "publish", real)
    assert calls == [A]
    staged = {k: json.loads((un.campaign_work(results) / "staging" / un.find_unit(k).slug /
                             "manifest.json").read_text())["finished_at"] for k in (B, C)}
    _no_training(monkeypatch)
    lines: list[str] = []
    done = cr.run(5, results, device="cpu", units=[A, B, C], log=lines.append)
    assert sorted(u.key for u in done) == [B, C]
    for k in (B, C):  # the very runs trained before the kill, verified
        frag = fr.load_fragment(un.find_unit(k), results)
        assert frag.manifest["finished_at"] == staged[k]
        assert frag.manifest["campaign"]["chunk"] == [A, B, C]
    assert not any((un.campaign_work(results) / "chunks").glob("*/checkpoints/*.pt"))


@pytest.mark.usefixtures("tiny")
def test_a_paused_chunk_with_a_unit_stored_meanwhile_resumes_the_others(tmp_path):
    """Finding 2: a paused chunk one of whose units was stored meanwhile (by another machine)
    was thrown away ("stored meanwhile; chunk not trained")."""
    ref, results = tmp_path / "ref", tmp_path / "results"
    cr.run(5, ref, device="cpu", units=[A], log=_quiet)
    spec = {"units": [A, B], "probe": {}, "estimate_s": 600.0, "machine": cr.machine(),
            "precision": "fp32", "precision_reason": "test"}
    units = [un.find_unit(A), un.find_unit(B)]
    assert cr._train_chunk(units, results, torch.device("cpu"), time.monotonic(), spec,
                           _quiet, {}) == []  # paused after its first epoch
    shutil.copytree(units[0].path(ref), units[0].path(results))  # stored elsewhere meanwhile
    before = (units[0].path(results) / "manifest.json").read_bytes()
    done = cr.run(5, results, device="cpu", units=[A, B], log=_quiet)
    assert [u.key for u in done] == [B]
    assert fr.load_fragment(units[1], results).manifest["resumed"]
    assert (units[0].path(results) / "manifest.json").read_bytes() == before


# --------------------------------------------------------------------------- 3, 4: import


@pytest.fixture
def sleeper():
    """A live process of this host (its pid goes into a hand-made claim)."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.mark.usefixtures("tiny")
def test_import_refuses_a_claimed_unit_naming_the_holder(tmp_path, sleeper):
    """Finding 3: an import of a unit a running chunk had claimed succeeded; the chunk then
    failed at its first publish and its other units went back to todo."""
    src = _bundle(tmp_path)
    results = tmp_path / "results"
    claim = un.campaign_work(results) / "claims" / un.find_unit("table2/learn-0.2/2235").slug
    claim.mkdir(parents=True)
    (claim / ".lock").write_text(json.dumps({
        "pid": sleeper, "host": socket.gethostname(), "boot_id": _boot_id(),
        "started_at": "2026-01-01T00:00:00+00:00", "argv": "lstpe campaign run"}))
    with pytest.raises(ValueError, match=f"pid {sleeper}"):
        fr.import_run(src.path, results)
    assert not any(u.path(results).exists() for u in un.plan())


@pytest.mark.usefixtures("tiny")
def test_import_refuses_a_unit_of_a_paused_chunk(tmp_path):
    """Finding 3: the same for a unit waiting in a paused chunk."""
    src = _bundle(tmp_path)
    results = tmp_path / "results"
    chunk = un.campaign_work(results) / "chunks" / "abc"
    (chunk / "checkpoints").mkdir(parents=True)
    (chunk / "checkpoints" / "chunk0.pt").write_bytes(b"x")
    (chunk / "chunk.json").write_text(json.dumps({"units": ["table2/2d-fixed/2235"]}))
    with pytest.raises(ValueError, match=str(chunk)):
        fr.import_run(src.path, results)
    assert not any(u.path(results).exists() for u in un.plan())


@pytest.mark.usefixtures("tiny")
def test_import_verifies_a_sealed_sources_checksum(tmp_path):
    """Finding 4: import loaded with ``sealed=False`` and so skipped the checksum of a sealed
    manifest: an edited manifest was laundered into freshly sealed fragments."""
    src = _bundle(tmp_path)
    path = src.path / "manifest.json"
    man = json.loads(path.read_text())
    man["git_commit"] = "forged"
    path.write_text(json.dumps(man))
    with pytest.raises(res.DamagedFileError, match="its own checksum"):
        fr.import_run(src.path, tmp_path / "results")
    assert not (tmp_path / "results" / "paper" / "table2").exists()


# --------------------------------------------------------------------------- 11: work files


@pytest.mark.parametrize("text", ["{}", '{"config": null}', "[]"])
def test_a_hand_damaged_fragment_manifest_is_named_not_a_traceback(tmp_path, text):
    """Finding 11: ``{}`` as a fragment manifest crashed ``campaign run`` (KeyError)."""
    path = un.find_unit(A).path(tmp_path)
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(text)
    table = cs.status(tmp_path, verify=False).set_index("unit")
    assert table.loc[A, "state"] == "damaged"
    assert str(path / "manifest.json") in table.loc[A, "error"]
    assert A not in [u.key for u in cr.free_units(tmp_path)]


@pytest.mark.parametrize("pid", [None, "abc"])
def test_a_hand_damaged_claim_is_named_not_a_traceback(tmp_path, pid):
    """Finding 11: a claim holding ``"pid": null`` or ``"abc"`` crashed ``status``."""
    claim = un.campaign_work(tmp_path) / "claims" / un.find_unit(A).slug
    claim.mkdir(parents=True)
    (claim / ".lock").write_text(json.dumps({"pid": pid, "host": socket.gethostname()}))
    table = cs.status(tmp_path).set_index("unit")
    assert str(claim / ".lock") in table.loc[A, "error"]
    assert "delete" in table.loc[A, "error"]


def _paused_chunk(results, spec: dict):
    chunk = un.campaign_work(results) / "chunks" / "abc"
    (chunk / "checkpoints").mkdir(parents=True)
    (chunk / "checkpoints" / "chunk0.pt").write_bytes(b"x")
    (chunk / "chunk.json").write_text(json.dumps(spec))
    return chunk


@pytest.mark.parametrize("spec", [{"units": [A]},  # no estimate_s
                                  {"units": ["table2/learn-9/6312"], "estimate_s": 60.0}])
def test_a_hand_damaged_chunk_spec_is_named(tmp_path, spec, monkeypatch):
    """Finding 11: a chunk.json without estimate_s crashed ``run`` (KeyError); one naming an
    unknown unit stopped every run without naming the file."""
    _no_training(monkeypatch)
    chunk = _paused_chunk(tmp_path, spec)
    with pytest.raises(ValueError, match=str(chunk / "chunk.json")):
        cr.run(5, tmp_path, device="cpu", log=_quiet)


# --------------------------------------------------------------------------- 12, 13: targets


@pytest.mark.usefixtures("tiny")
def test_a_dangling_symlink_at_a_fragment_path_is_damaged_and_never_trained(tmp_path, monkeypatch):
    """Finding 12: ``status`` showed the unit as todo; ``run`` trained the whole chunk and
    failed at publish ("Not a directory"), leaving its other unit unpublished."""
    results = tmp_path / "results"
    link = un.find_unit(A).path(results)
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "nowhere")
    row = cs.status(results).set_index("unit").loc[A]
    assert row["state"] == "damaged" and str(link) in row["error"]
    done = cr.run(5, results, device="cpu", units=[A, B], log=_quiet)
    assert [u.key for u in done] == [B]
    assert link.is_symlink()


def test_a_publish_target_is_checked_before_training(tmp_path, monkeypatch):
    """Finding 12: ``_train_chunk`` checks where each unit will be published before it trains."""
    _no_training(monkeypatch)
    link = un.find_unit(A).path(tmp_path)
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "nowhere")
    spec = {"units": [A, B], "probe": {}, "estimate_s": 60.0, "machine": {},
            "precision": "fp32", "precision_reason": "test"}
    with pytest.raises(ValueError, match=str(link)):
        cr._train_chunk([un.find_unit(A), un.find_unit(B)], tmp_path, torch.device("cpu"),
                        time.monotonic() + 60, spec, _quiet, {})


def test_campaign_paths_are_checked_before_any_work(tmp_path, monkeypatch, capsys):
    """Finding 13: ``status --results`` of a missing folder or a file, and LSTPE_RESULTS=<file>,
    printed "0/234 units done" (exit 0); ``run --results <file>`` failed only after the probe."""
    from lstpe.cli import main

    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    for bad in (tmp_path / "missing", afile):
        assert main(["campaign", "status", "--results", str(bad)]) == 2
        assert str(bad) in capsys.readouterr().err
    monkeypatch.setenv("LSTPE_RESULTS", str(afile))
    assert main(["campaign", "status"]) == 2
    assert str(afile) in capsys.readouterr().err
    monkeypatch.delenv("LSTPE_RESULTS")

    def probed(*a, **k):
        raise AssertionError("probed")

    monkeypatch.setattr(cr, "probe", probed)
    with pytest.raises(res.NotWritableError, match="notes.txt"):
        cr.run(5, afile, device="cpu", log=_quiet)


# --------------------------------------------------------------------------- 14: the probe


@pytest.mark.usefixtures("tiny")
def test_the_probe_counts_against_the_budget(tmp_path, monkeypatch):
    """Finding 14: the probe's own time was not counted: 4 minutes, 5 of them probing, then
    "4.0 min left"."""
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])

    def slow_probe(head, dev, **o):
        clock[0] += 180.0  # three minutes of probing
        return {"models": len(head), "step_s": 1.0, "eval_s": 1.0, "s_per_model_epoch": 30.0,
                "n_train": 64}

    started: list[list[str]] = []
    monkeypatch.setattr(cr, "probe", slow_probe)
    monkeypatch.setattr(cr, "floor_of", lambda *a, **k: {})
    monkeypatch.setattr(cr, "_train_chunk", lambda chunk, *a: started.append(chunk) or [])
    lines: list[str] = []
    # 4.2 min = 252 s: one tiny unit (2 epochs x 30 s + 120 s margin = 180 s) fits before the
    # probe, not after it (72 s left)
    cr.run(4.2, tmp_path, device="cpu", units=[A], log=lines.append)
    assert started == []
    assert "1.2 min left" in next(x for x in lines if x.startswith("probe:"))


@pytest.mark.usefixtures("tiny")
def test_no_probe_when_the_budget_cannot_fit_a_unit(tmp_path, monkeypatch):
    """Finding 14: the probe ran even when the rate measured before shows no unit fits."""
    _manifest(tmp_path, B, campaign={"probe": {"s_per_model_epoch": 30.0}, "unit_wall_s": 60})

    def probed(*a, **k):
        raise AssertionError("probed")

    monkeypatch.setattr(cr, "probe", probed)
    lines: list[str] = []
    # 2.5 min = 150 s < one unit at the stored rate (2 x 30 s + 120 s margin)
    assert cr.run(2.5, tmp_path, device="cpu", units=[A], log=lines.append) == []
    assert "not probing" in lines[-1]
    assert TINY["epochs"] == 2
