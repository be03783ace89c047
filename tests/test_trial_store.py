"""The second adversarial trial (issue 38), the store's findings: nothing loaded or unpacked
runs code (1), stored results keep their bytes through git (8), work folders never travel (13).

Each test failed on 8e4ea56.
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import torch

from lstpe.store import pack
from lstpe.store import results as res
from tests.test_pack import make_run, write_pack


class _Evil:
    """Unpickling this creates a folder: the stand-in for an ``os.system`` call."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return (os.mkdir, (self.marker,))


def _evil_run(path: Path, marker: Path) -> None:
    """A finished run whose artifacts.pt pickles an object that acts when loaded (its manifest
    records the file: the checksums are consistent, as a hostile packer would make them)."""
    history = pd.DataFrame({"model": [0], "accuracy": [0.5]})
    res.save_run(path, history, {"git_commit": "x"},
                 artifacts={"pe_final": torch.zeros(1, 2), "evil": _Evil(marker)})


def test_loading_artifacts_never_runs_pickled_code(tmp_path):
    """Finding 1: ``load_torch`` used ``weights_only=False``: loading a run ran its pickle."""
    marker = tmp_path / "pwned"
    _evil_run(tmp_path / "run", marker)
    with pytest.raises(res.DamagedFileError, match="artifacts.pt"):
        res.load(tmp_path / "run")
    assert not marker.exists()


def test_checkpoints_and_artifacts_load_with_weights_only(tmp_path):
    """Finding 1: what the package writes still loads (tensors, lists, dicts, bytes)."""
    arts = {"pe_final": torch.randn(2, 3), "labels": ["a", "b"], "meta": {"k": (1, 2.0, None)},
            "raw": b"\x00\x01"}
    res.save_torch(arts, tmp_path / "a.pt")
    back = res.load_torch(tmp_path / "a.pt")
    assert torch.equal(back["pe_final"], arts["pe_final"]) and back["labels"] == ["a", "b"]
    assert back["meta"] == {"k": (1, 2.0, None)} and back["raw"] == b"\x00\x01"


def _member(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _members_of(run: Path, name: str, extra: dict[str, bytes] | None = None):
    files = sorted(p for p in run.rglob("*") if p.is_file() and "checkpoints" not in p.parts)
    out = [_member(f"{name}/{p.relative_to(run).as_posix()}", p.read_bytes()) for p in files]
    return out + [_member(f"{name}/{k}", v) for k, v in (extra or {}).items()]


def test_unpack_refuses_files_the_manifest_does_not_list(tmp_path):
    """Finding 1: unpack placed files its run's manifest does not list."""
    make_run(tmp_path / "src" / "table2", "a")
    members = _members_of(tmp_path / "src" / "table2", "table2",
                          {"tables/extra.csv": b"a,b\n1,2\n"})
    write_pack(tmp_path / "p", members, ["table2"])
    with pytest.raises(pack.PackError, match="tables/extra.csv"):
        pack.unpack(tmp_path / "p", tmp_path / "results")
    assert not (tmp_path / "results" / "table2").exists()


@pytest.mark.parametrize("run", [".campaign/chunks/abc", "table2/.hidden",
                                 "table2/checkpoints", "x/.campaign/y"])
def test_unpack_refuses_hidden_and_work_folders(tmp_path, run):
    """Finding 1: a run named ``.campaign/chunks/abc`` unpacked into the campaign's work
    folder (a fake paused chunk that ``status`` then loaded)."""
    make_run(tmp_path / "src" / "r", "a")
    write_pack(tmp_path / "p", _members_of(tmp_path / "src" / "r", run), [run])
    with pytest.raises(pack.PackError, match=f"{run!r}"):
        pack.unpack(tmp_path / "p", tmp_path / "results")
    assert not any((tmp_path / "results").rglob("manifest.json"))


def test_unpack_refuses_a_checkpoint_member(tmp_path):
    """Finding 1: ``checkpoints/`` never travels, even inside a listed run."""
    make_run(tmp_path / "src" / "table2", "a")
    members = _members_of(tmp_path / "src" / "table2", "table2",
                          {"checkpoints/c.pt": b"x" * 10})
    write_pack(tmp_path / "p", members, ["table2"])
    with pytest.raises(pack.PackError, match="checkpoints"):
        pack.unpack(tmp_path / "p", tmp_path / "results")


def test_pack_never_packs_work_folders_or_unlisted_files(tmp_path):
    """Finding 13: ``pack --root results/paper`` packed ``.campaign/staging/*`` as runs, and
    the CSVs a batch wrote into a fragment's ``tables/``."""
    root = tmp_path / "paper"
    make_run(root / "table2" / "2d-fixed" / "2235", "a")
    make_run(root / ".campaign" / "staging" / "table2__x__1", "b")
    (root / "table2" / "2d-fixed" / "2235" / "tables" / "batch.csv").write_text("a\n1\n")
    index = pack.pack(root, tmp_path / "out")
    assert index["runs"] == ["table2/2d-fixed/2235"]
    pack.unpack(tmp_path / "out", tmp_path / "dest")
    got = sorted(p.relative_to(tmp_path / "dest").as_posix()
                 for p in (tmp_path / "dest").rglob("*") if p.is_file())
    run = "table2/2d-fixed/2235"
    assert got == [f"{run}/{f}" for f in ("artifacts.pt", "history.csv", "manifest.json",
                                          "tables/noise.csv")]


# --------------------------------------------------------------------------- line endings


def test_gitattributes_marks_stored_results_binary():
    """Finding 8: no .gitattributes: Git for Windows' core.autocrlf rewrote stored CSVs."""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(["git", "check-attr", "text", "--",
                          "results/paper/table2/2d-fixed/2235/history.csv"],
                         capture_output=True, text=True, cwd=root, check=True).stdout
    assert out.strip().endswith("text: unset")


def test_crlf_only_damage_is_named_and_never_advised_for_deletion(tmp_path):
    """Finding 8: a run whose only fault is CRLF line endings was called damaged with the
    advice to delete it."""
    make_run(tmp_path / "run", "a")
    hist = tmp_path / "run" / "history.csv"
    hist.write_bytes(hist.read_bytes().replace(b"\n", b"\r\n"))
    with pytest.raises(res.DamagedFileError) as e:
        res.load(tmp_path / "run")
    text = str(e.value)
    assert "line endings" in text and "history.csv" in text
    assert "delete" not in text.lower()
    # a real edit is still damage, with the advice to retrain
    hist.write_bytes(hist.read_bytes().replace(b"\r\n", b"\n").replace(b"0.5", b"0.6"))
    with pytest.raises(res.DamagedFileError, match="delete"):
        res.load(tmp_path / "run")

