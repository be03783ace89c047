"""lstpe.pack: finished runs packed into small pieces and unpacked without loss or overwrite."""

from __future__ import annotations

import json
import os

import pytest

from lstpe import pack


def make_run(path, tag: str, payload: int = 0) -> None:
    (path / "tables").mkdir(parents=True)
    (path / "history.csv").write_text(f"model,accuracy\n0,0.5\n# {tag}\n")
    (path / "manifest.json").write_text(json.dumps({"git_commit": tag}))
    (path / "artifacts.pt").write_bytes(os.urandom(payload))
    (path / "tables" / "noise.csv").write_text("noise,accuracy\n0,0.5\n")
    (path / "checkpoints").mkdir()
    (path / "checkpoints" / "chunk0.pt").write_bytes(b"x" * 1000)


def test_pack_unpack_round_trip_in_pieces(tmp_path):
    root = tmp_path / "paper"
    make_run(root / "table1", "a", payload=300_000)  # random bytes do not compress
    make_run(root / "table4" / "sgd", "b")
    (root / "unfinished").mkdir(parents=True)
    index = pack.pack(root, tmp_path / "out", piece_mib=0.1)
    assert index["runs"] == ["table1", "table4/sgd"]
    assert len(index["pieces"]) >= 3 and all(p["bytes"] <= 0.1 * 2**20 for p in index["pieces"])
    files = pack.volume_files(index, 0, per_volume=2)
    assert files == [index["pieces"][0]["file"], index["pieces"][1]["file"], pack.INDEX]
    with pytest.raises(ValueError, match="volume 9 does not exist"):
        pack.volume_files(index, 9)
    dest = tmp_path / "results"
    assert pack.unpack(tmp_path / "out", dest) == ["table1", "table4/sgd"]
    for run in ("table1", "table4/sgd"):
        for f in ("history.csv", "manifest.json", "artifacts.pt", "tables/noise.csv"):
            assert (dest / run / f).read_bytes() == (root / run / f).read_bytes()
        assert not (dest / run / "checkpoints").exists()  # checkpoints never travel
    assert pack.unpack(tmp_path / "out", dest) == []  # the same runs again: nothing to do


def test_unpack_refuses_damage_and_overwrite(tmp_path):
    root = tmp_path / "paper"
    make_run(root / "table2", "a", payload=50_000)
    index = pack.pack(root, tmp_path / "out", piece_mib=0.02)
    piece = tmp_path / "out" / index["pieces"][1]["file"]
    good = piece.read_bytes()
    piece.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(ValueError, match=f"piece .*{piece.name} is damaged"):
        pack.unpack(tmp_path / "out", tmp_path / "dest")
    piece.unlink()
    with pytest.raises(ValueError, match=f"piece {piece.name} is missing"):
        pack.unpack(tmp_path / "out", tmp_path / "dest")
    piece.write_bytes(good)
    other = tmp_path / "dest"
    make_run(other / "table2", "different")
    with pytest.raises(ValueError, match="already holds a different finished run"):
        pack.unpack(tmp_path / "out", other)
    assert json.loads((other / "table2" / "manifest.json").read_text())["git_commit"] == \
        "different"
    with pytest.raises(ValueError, match="already holds pack files"):
        pack.pack(root, tmp_path / "out")
    with pytest.raises(ValueError, match="not finished runs"):
        pack.pack(root, tmp_path / "out2", runs=["table9"])
