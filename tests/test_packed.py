"""Packed chunks (:mod:`lstpe.campaign.packed`, issue 47): a chunk paused at epoch 3 and a
new unit train as one batch, each at its own epoch, and everything published equals the same
units trained alone, bit for bit on one thread; a packed chunk paused before a target writes
the paused chunk's resume checkpoint back, and that chunk finishes alone as if never packed.
Tiny models: long units of 6 epochs in segments of 2 (``tests/test_long_units.py``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from lstpe.campaign import long_train as lt
from lstpe.campaign import packed as pk
from lstpe.campaign import resume as rs
from lstpe.experiments import long_units as lu
from tests.test_long_units import TINY, UNITS

SOURCE = (lu.LongChunk("s", UNITS, 3, 2, "test"), lu.LongChunk("s", UNITS, 6, 2, "test"))
NEW = lu.LongChunk("f", (lu.LongUnit("table2", "learn-1", 2235),), 4, 2, "test",
                   snapshots="sparse")
COLS = ["epoch", "split", "condition", "accuracy", "loss", "diverged"]


@pytest.fixture
def short(monkeypatch):
    monkeypatch.setattr(lu, "LONG_EPOCHS", 6)
    monkeypatch.setattr(lu, "SEGMENT", 2)


def alone(chunk: lu.LongChunk, results: Path) -> bool:
    return lt.train_chunk(chunk, time.monotonic() + 600, results, log=lambda m: None, **TINY)


def same(unit: lu.LongUnit, a: Path, b: Path) -> None:
    x, y = lu.load_long(unit, a), lu.load_long(unit, b)
    assert x["epoch"] == y["epoch"] and x["pe_epochs"] == y["pe_epochs"]
    assert torch.equal(x["pe"], y["pe"])
    assert x["attention_epochs"] == y["attention_epochs"]
    assert torch.equal(x["val_attention"], y["val_attention"])
    h = [d["history"][COLS].sort_values(COLS[:3]).reset_index(drop=True) for d in (x, y)]
    assert h[0].equals(h[1])


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """The source chunk trained alone to 6, and the new unit alone to 4."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lu, "LONG_EPOCHS", 6)
        mp.setattr(lu, "SEGMENT", 2)
        root = tmp_path_factory.mktemp("alone")
        assert alone(SOURCE[1], root) and alone(NEW, root)
    return root


def test_a_paused_chunk_and_a_new_unit_train_as_one_and_as_each_alone(short, references,
                                                                      tmp_path):
    assert alone(SOURCE[0], tmp_path)  # the source pauses at epoch 3, mid-segment
    packed = pk.packed_chunk("lease", [SOURCE[1]], [NEW])
    assert [(s.unit.key, s.target, s.snapshots) for s in packed.slots] == [
        (UNITS[0].key, 6, "dense"), (UNITS[1].key, 6, "dense"), (NEW.units[0].key, 4, "sparse")]
    log: list[str] = []
    assert pk.train_packed(packed, time.monotonic() + 600, tmp_path, log=log.append, **TINY)
    assert any("table2/learn-0.2/2235 3->6" in m for m in log)
    for u in (*UNITS, *NEW.units):
        same(u, references, tmp_path)
    # the source owns its resume state again: at its target, as if it had trained alone
    assert rs.resume_epoch(SOURCE[1], tmp_path) == 6
    assert rs.chunk_problems(SOURCE[1], tmp_path) == []
    assert not pk.packed_dir(packed, tmp_path).exists()
    man = lu.load_long(UNITS[0], tmp_path)["manifests"][-1]["long"]
    assert man["chunk"] == "lease" and man["from_epoch"] == 4


def test_a_packed_chunk_paused_early_hands_its_source_back(short, references, tmp_path):
    """Paused after loop epoch 2 (the source at epoch 5, mid-segment; the new unit at 2):
    the source's checkpoint is written at 5 and it finishes alone, equal to the reference;
    the new unit keeps its published segment."""
    assert alone(SOURCE[0], tmp_path)
    packed = pk.packed_chunk("lease", [SOURCE[1]], [NEW])
    assert not pk.train_packed(packed, time.monotonic() + 600, tmp_path, log=lambda m: None,
                               stop_at=2, **TINY)
    assert rs.resume_epoch(SOURCE[1], tmp_path) == 5
    assert rs.chunk_problems(SOURCE[1], tmp_path) == []
    assert lu.published_epoch(NEW.units[0], tmp_path) == 2
    assert not pk.packed_dir(packed, tmp_path).exists()
    assert alone(SOURCE[1], tmp_path)
    for u in UNITS:
        same(u, references, tmp_path)


def test_packing_refuses_a_begun_unit_and_a_unit_twice(short, references, tmp_path):
    assert alone(SOURCE[0], tmp_path)
    with pytest.raises(ValueError, match="packed twice"):
        pk.packed_chunk("x", [SOURCE[1]], [SOURCE[1]])
    with pytest.raises(rs.LongChunkError, match="published segments already"):
        pk.train_packed(pk.packed_chunk("x", [], [SOURCE[1]]), time.monotonic() + 60, tmp_path,
                        log=lambda m: None, **TINY)
    with pytest.raises(FileNotFoundError, match="f/chunk0.pt is missing"):
        pk.train_packed(pk.packed_chunk("x", [NEW], []), time.monotonic() + 60, tmp_path,
                        log=lambda m: None, **TINY)
