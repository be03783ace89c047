"""One folder per long model (:mod:`lstpe.store.model`) and the script that folded the old
segment folders into it (``scripts/fold_long_segments.py``): every segment's rows, snapshots
and manifest are kept byte for byte, checked against the checksums they were published with."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from lstpe.experiments import long_units as lu
from lstpe.store import model as mf
from lstpe.store import results as res

REPO = Path(__file__).resolve().parents[1]
KEY = "table2/learn-0.2/2235"


def stage(dst: Path, lo: int, hi: int, previous: str | None, unit: str = KEY) -> Path:
    """A segment folder as the writer stages it (and as the old store kept it): rows of
    epochs (lo, hi] (and 0 in the first), PE snapshots at its end."""
    epochs = [e for e in range(lo, hi + 1) if e > lo or lo == 0]
    hist = pd.DataFrame({"model": 0, "pe": "learn-0.2", "epoch": epochs, "split": "val",
                         "condition": "all", "accuracy": [0.25 + e / 1000 for e in epochs]})
    arts = {"pe_epochs": [hi], "pe": torch.full((1, 1, 16, 4), float(hi)),
            "attention_epochs": []}
    man = {"config": {}, "kind": "long-segment",
           "long": {"unit": unit, "from_epoch": lo, "to_epoch": hi, "previous": previous}}
    return res.save_run(dst, hist, man, arts)


def two_segments(tmp_path: Path) -> tuple[Path, list[Path]]:
    folder, first = tmp_path / "model", stage(tmp_path / "s2", 0, 2, None)
    sha = res.read_manifest(first)[res.MANIFEST_HASH_KEY]
    second = stage(tmp_path / "s4", 2, 4, sha)
    for s in (first, second):
        mf.append_segment(folder, s, KEY)
    return folder, [first, second]


def test_segments_keep_their_bytes_and_manifests(tmp_path):
    folder, stages = two_segments(tmp_path)
    man = mf.read(folder)
    segs = mf.segments(folder, man)
    data = mf.history_bytes(folder, man)
    assert [s.epoch for s in segs] == [2, 4] and mf.epoch(folder) == 4
    for s, st in zip(segs, stages, strict=True):
        assert mf.segment_bytes(data, s) == (st / "history.csv").read_bytes()
        assert (folder / s.snapshot).read_bytes() == (st / "artifacts.pt").read_bytes()
        assert s.manifest == res.read_manifest(st)
    assert mf.segment_problems(folder, man) == []
    whole = pd.read_csv(folder / "history.csv")
    assert list(whole["epoch"]) == [0, 1, 2, 3, 4]


def test_a_segment_that_does_not_continue_the_folder_is_refused(tmp_path):
    folder, _ = two_segments(tmp_path)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    for bad in (stage(tmp_path / "gap", 6, 8, mf.segments(folder)[-1].checksum),
                stage(tmp_path / "other", 4, 6, "0" * 64),
                stage(tmp_path / "unit", 4, 6, mf.segments(folder)[-1].checksum, "table1/x/1")):
        with pytest.raises(ValueError, match="does not continue"):
            mf.append_segment(folder, bad, KEY)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_edited_rows_are_named_against_the_checksum_they_were_published_with(tmp_path):
    """A history.csv edited and its record in the folder's manifest updated to match: the
    file passes, but the segment's own checksum of its rows does not."""
    folder, _ = two_segments(tmp_path)
    path = folder / "history.csv"
    path.write_bytes(path.read_bytes().replace(b"0.251", b"0.999"))
    man = json.loads((folder / "manifest.json").read_text())
    man["files"]["history.csv"].update(sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
                                       bytes=path.stat().st_size)
    (folder / "manifest.json").write_text(json.dumps(res.seal_manifest(man)))
    problems = mf.segment_problems(folder, mf.read(folder))
    assert len(problems) == 1 and "segment to epoch 2 differ" in problems[0]


def test_truncate_copies_the_folder_aside_first(tmp_path):
    folder, stages = two_segments(tmp_path)
    whole = {p.name: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    mf.truncate(folder, 2, tmp_path / "aside")
    assert [s.epoch for s in mf.segments(folder)] == [2]
    assert mf.segment_problems(folder, mf.read(folder)) == []
    assert (folder / "history.csv").read_bytes() == (stages[0] / "history.csv").read_bytes()
    assert not (folder / "snapshots" / "e0004.pt").exists()
    assert {p.name: p.read_bytes() for p in (tmp_path / "aside").rglob("*") if p.is_file()} \
        == whole
    with pytest.raises(ValueError, match="no segment .* ends at epoch 3"):
        mf.truncate(folder, 3, tmp_path / "aside2")


def _fold_script():
    spec = importlib.util.spec_from_file_location("fold", REPO / "scripts/fold_long_segments.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_fold_proves_every_model_identical_and_appends_later_segments(tmp_path):
    """Old segment folders e0002, e0004 fold into the model folder (the proof holds, the old
    folders go); a segment folder published after it by older code is appended later."""
    fold = _fold_script()
    unit = lu.LongUnit(*KEY.rsplit("/", 2)[:2], 2235)
    folder = unit.path(tmp_path)
    first = stage(folder / "e0002", 0, 2, None)
    stage(folder / "e0004", 2, 4, res.read_manifest(first)[res.MANIFEST_HASH_KEY])
    old = {p.name: (p / "history.csv").read_bytes() for p in fold.old_segments(folder)}
    line, n = fold.fold(folder, KEY, dry_run=False)
    assert n == 2 and "identical" in line and fold.old_segments(folder) == []
    data = mf.history_bytes(folder, mf.read(folder))
    assert [mf.segment_bytes(data, s) for s in mf.segments(folder)] == list(old.values())
    got = lu.load_long(unit, tmp_path)
    assert got["epoch"] == 4 and got["pe_epochs"] == [2, 4]
    stage(folder / "e0006", 4, 6, mf.segments(folder)[-1].checksum)
    kept = folder.parent / "kept"
    shutil.copytree(folder / "e0006", kept)
    line, n = fold.fold(folder, KEY, dry_run=False)
    assert n == 1 and lu.load_long(unit, tmp_path)["epoch"] == 6
    shutil.copytree(kept, folder / "e0006")  # as a run killed before it deleted it leaves it
    assert fold.fold(folder, KEY, dry_run=False)[1] == 0
    assert fold.old_segments(folder) == [] and lu.load_long(unit, tmp_path)["epoch"] == 6


def test_the_fold_refuses_a_broken_chain_and_changes_nothing(tmp_path):
    """An old segment that names another segment before it is not folded: the script names
    it, and every old folder stays as it was (no model folder is written)."""
    fold = _fold_script()
    folder = lu.LongUnit("table2", "learn-0.2", 2235).path(tmp_path)
    stage(folder / "e0002", 0, 2, None)
    stage(folder / "e0004", 2, 4, "0" * 64)
    before = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
              if p.is_file()}
    with pytest.raises(ValueError, match="e0004 does not follow"):
        fold.fold(folder, KEY, dry_run=False)
    after = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
             if p.is_file()}
    assert after == before and not (folder / "manifest.json").exists()


def test_an_edited_segment_manifest_resealed_outside_is_named_and_refused(tmp_path):
    """A segment's own manifest edited (its device) and the folder's manifest sealed again:
    the segment no longer matches its own checksum, which the next segment and a checkpoint
    name; ``segment_problems`` says so and the reader refuses the folder."""
    folder, _ = two_segments(tmp_path)
    man = json.loads((folder / "manifest.json").read_text())
    man["segments"][0]["manifest"]["device"] = "cuda: elsewhere"
    (folder / "manifest.json").write_text(json.dumps(res.seal_manifest(man)))
    problems = mf.segment_problems(folder, mf.read(folder))
    assert len(problems) == 1 and "segment to epoch 2 does not match its own checksum" in \
        problems[0]
    with pytest.raises(res.DamagedFileError, match="does not match its own checksum"):
        lu.load_model(folder, KEY)


def test_a_manifest_that_does_not_add_up_is_named_with_a_hint_that_keeps_the_work(tmp_path):
    folder, _ = two_segments(tmp_path)
    man = json.loads((folder / "manifest.json").read_text())
    man["epoch"] = 6
    (folder / "manifest.json").write_text(json.dumps(res.seal_manifest(man)))
    with pytest.raises(res.DamagedFileError, match="does not add up") as e:
        mf.read(folder)
    assert "do not delete it" in str(e.value) and "delete the folder" not in str(e.value)
