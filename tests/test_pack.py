"""lstpe.store.pack: finished runs packed into small pieces and unpacked without loss or
overwrite."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from lstpe.store import pack
from lstpe.store import results as res


def make_run(path, tag: str, payload: int = 0) -> None:
    """A finished run as lstpe.store.results writes it (its manifest records every file), with
    ``payload`` random (incompressible) bytes in its artefacts, and a checkpoint folder."""
    history = pd.DataFrame({"model": [0], "accuracy": [0.5], "tag": [tag]})
    res.save_run(path, history, {"git_commit": tag}, artifacts={"payload": os.urandom(payload)},
                 tables={"noise": pd.DataFrame({"noise": [0], "accuracy": [0.5]})})
    (path / "checkpoints").mkdir()
    (path / "checkpoints" / "chunk0.pt").write_bytes(b"x" * 1000)


def raises_naming(*parts: str):
    """``pytest.raises(ValueError)`` whose message holds every one of ``parts``."""
    return pytest.raises(ValueError, match="".join(f"(?=[\\s\\S]*{re.escape(p)})"
                                                   for p in parts))


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


# --------------------------------------------------------------------------- reliability


def write_pack(out, members, runs) -> None:
    """A one-piece pack in ``out`` of ``members`` (tarfile.TarInfo, bytes or None) with a
    consistent index listing ``runs`` (a hand-made, possibly hostile pack)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    data = buf.getvalue()
    out.mkdir(parents=True, exist_ok=True)
    name = pack.PIECE.format(0)
    (out / name).write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    (out / pack.INDEX).write_text(json.dumps({
        "runs": runs, "pieces": [{"file": name, "bytes": len(data), "sha256": sha}],
        "sha256": sha, "bytes": len(data), "commits": {}}))


def edit_index(out, **changes) -> None:
    index = json.loads((out / pack.INDEX).read_text())
    index.update(changes)
    (out / pack.INDEX).write_text(json.dumps(index))


def test_unpack_refuses_run_names_that_leave_the_results_folder(tmp_path):
    """Issue case 1: ``runs: ["tiny", "../../cpu/victim"]`` moved results/cpu/victim away."""
    make_run(tmp_path / "src" / "tiny", "t")
    pack.pack(tmp_path / "src", tmp_path / "u5")
    results = tmp_path / "trav" / "repo" / "results"
    make_run(results / "cpu" / "victim", "victim")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for bad in ("../../cpu/victim", "/etc/passwd", "tiny/../../x", "./tiny", "a//b", ""):
        edit_index(tmp_path / "u5", runs=["tiny", bad])
        with raises_naming(repr(bad), str(tmp_path / "u5" / pack.INDEX)):
            pack.unpack(tmp_path / "u5", results / "paper")
        assert (results / "cpu" / "victim" / "manifest.json").exists()
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    edit_index(tmp_path / "u5", runs=["tiny", "../../cpu/victim"])
    rc, err = cli(["unpack", str(tmp_path / "u5"), "--into", str(results / "paper")])
    assert rc == 2 and "'../../cpu/victim'" in err and "Traceback" not in err
    assert (results / "cpu" / "victim" / "history.csv").exists()


def test_unpack_refuses_bad_piece_names(tmp_path):
    make_run(tmp_path / "src" / "tiny", "t")
    index = pack.pack(tmp_path / "src", tmp_path / "out")
    outside = tmp_path / pack.PIECE.format(0)
    outside.write_bytes((tmp_path / "out" / index["pieces"][0]["file"]).read_bytes())
    for bad in ("../" + outside.name, str(outside), "sub/" + outside.name):
        edit_index(tmp_path / "out", pieces=[{**index["pieces"][0], "file": bad}])
        with pytest.raises(ValueError, match=re.escape(repr(bad))):
            pack.unpack(tmp_path / "out", tmp_path / "dest")
        assert not (tmp_path / "dest").exists()


def _file(name, data=b"x"):
    return tarfile.TarInfo(name), data


def _special(name, kind, target=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


@pytest.mark.parametrize("member, what", [
    (_file("../evil.csv"), "'../evil.csv'"),
    (_file("/tmp/evil.csv"), "'/tmp/evil.csv'"),
    (_file("tiny/../../evil.csv"), "'tiny/../../evil.csv'"),
    (_special("tiny/artifacts.pt", tarfile.SYMTYPE, "/etc/passwd"), "symbolic link"),
    (_special("tiny/artifacts.pt", tarfile.LNKTYPE, "tiny/history.csv"), "hard link"),
    (_special("tiny/artifacts.pt", tarfile.CHRTYPE), "device"),
    (_special("tiny/fifo", tarfile.FIFOTYPE), "device"),
    (_file("other/history.csv"), "outside the runs"),
])
def test_unpack_refuses_unsafe_tar_members(tmp_path, member, what):
    members = [_file("tiny/manifest.json", b'{"git_commit": "t"}'),
               _file("tiny/history.csv", b"a\n1\n"), member]
    write_pack(tmp_path / "out", members, ["tiny"])
    with pytest.raises(ValueError, match=re.escape(what)):
        pack.unpack(tmp_path / "out", tmp_path / "dest")
    assert not (tmp_path / "dest").exists() and not (tmp_path / "evil.csv").exists()
    assert not list(tmp_path.glob("tmp*"))


@pytest.mark.parametrize("text, key", [
    ("not json {", "not valid JSON"),
    ("", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"runs": ["tiny"], "sha256": "00", "bytes": 1}', "'pieces'"),
    ('{"pieces": [], "sha256": "00", "bytes": 1}', "'runs'"),
    ('{"runs": "tiny", "pieces": [], "sha256": "00", "bytes": 1}', "'runs'"),
    ('{"runs": [3], "pieces": [], "sha256": "00", "bytes": 1}', "runs[0]"),
    ('{"runs": ["tiny"], "pieces": {"a": 1}, "sha256": "00", "bytes": 1}', "'pieces'"),
    ('{"runs": ["tiny"], "pieces": [{"file": "p", "sha256": "00"}], "sha256": "00", '
     '"bytes": 1}', "pieces[0].bytes"),
    ('{"runs": ["tiny"], "pieces": [{"file": "p", "bytes": "9", "sha256": "00"}], '
     '"sha256": "00", "bytes": 1}', "pieces[0].bytes"),
    ('{"runs": ["tiny"], "pieces": ["p"], "sha256": "00", "bytes": 1}', "pieces[0]"),
])
def test_unpack_names_the_index_file_and_key_of_a_malformed_index(tmp_path, text, key):
    """Issue cases 9 and 11: KeyError / a bare 'Expecting value' without the file."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / pack.INDEX).write_text(text)
    with raises_naming(str(tmp_path / "out" / pack.INDEX), key):
        pack.unpack(tmp_path / "out", tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_unpack_is_all_or_nothing_when_a_listed_run_is_absent(tmp_path):
    """Issue case 9: a run listed but not in the tar raised FileNotFoundError after the
    earlier runs were placed."""
    make_run(tmp_path / "src" / "a", "a")
    make_run(tmp_path / "src" / "b", "b")
    pack.pack(tmp_path / "src", tmp_path / "out")
    edit_index(tmp_path / "out", runs=["a", "b", "c"])
    dest = tmp_path / "results" / "paper"
    with raises_naming("'c'", "not in the pack", str(tmp_path / "out" / pack.INDEX)):
        pack.unpack(tmp_path / "out", dest)
    assert not (tmp_path / "results").exists()  # nothing placed, no folder left behind
    dest.mkdir(parents=True)
    with pytest.raises(ValueError, match="'c'"):
        pack.unpack(tmp_path / "out", dest)
    assert list(dest.iterdir()) == []  # no staging folder left either


def test_unpack_rolls_back_when_placing_a_run_fails(tmp_path, monkeypatch):
    make_run(tmp_path / "src" / "a", "a")
    make_run(tmp_path / "src" / "b" / "c", "b")
    pack.pack(tmp_path / "src", tmp_path / "out")
    dest = tmp_path / "dest"
    dest.mkdir()
    real = os.rename

    def rename(src, dst):
        if str(dst).endswith(os.sep + "c"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(pack.os, "rename", rename)
    with pytest.raises(OSError, match="nothing was placed"):
        pack.unpack(tmp_path / "out", dest)
    assert list(dest.iterdir()) == []
    monkeypatch.setattr(pack.os, "rename", real)
    assert pack.unpack(tmp_path / "out", dest) == ["a", "b/c"]


def test_unpack_names_a_damaged_local_run_and_fails(tmp_path):
    """Issue case 9: a local run with the packed manifest but a damaged history.csv was
    skipped silently and the command reported success."""
    for name in ("a", "b"):
        make_run(tmp_path / "src" / name, name)
    pack.pack(tmp_path / "src", tmp_path / "out")
    dest = tmp_path / "dest"
    assert pack.unpack(tmp_path / "out", dest) == ["a", "b"]
    shutil.rmtree(dest / "a")
    history = dest / "b" / "history.csv"
    history.write_text(history.read_text()[:-3])
    with raises_naming("damaged", str(history)):
        pack.unpack(tmp_path / "out", dest)
    assert not (dest / "a").exists()  # all or nothing
    rc, err = cli(["unpack", str(tmp_path / "out"), "--into", str(dest)])
    assert rc == 2 and "damaged" in err and str(history) in err and "Traceback" not in err
    shutil.rmtree(dest / "b")
    assert pack.unpack(tmp_path / "out", dest) == ["a", "b"]


def test_pack_refuses_a_damaged_run(tmp_path):
    make_run(tmp_path / "src" / "a", "a")
    (tmp_path / "src" / "a" / "tables" / "noise.csv").write_text("edited\n")
    with raises_naming("damaged", str(tmp_path / "src" / "a" / "tables" / "noise.csv")):
        pack.pack(tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_pack_disk_full_leaves_no_piece_and_reports_one_line(tmp_path, monkeypatch):
    """Issue case 10: ENOSPC left a cut-off lstpe-pack.tar.gz.000 under its final name."""
    root = tmp_path / "paper"
    make_run(root / "table1", "a", payload=60_000)
    out = tmp_path / "out"
    real = pack._write_file
    fail = [pack.PIECE.format(1)]

    def full(path, data):
        if Path(path).name.startswith(f".{fail[0]}."):  # half written, then the disk is full
            with open(path, "wb") as f:
                f.write(data[:len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(pack, "_write_file", full)
    with pytest.raises(OSError, match=re.escape(str(out / pack.PIECE.format(1)))) as e:
        pack.pack(root, out, piece_mib=0.02)
    assert e.value.errno == errno.ENOSPC
    assert list(out.iterdir()) == []  # no piece, no index, no temporary
    fail[0] = pack.PIECE.format(0)  # the command writes one piece of 15.5 MiB
    rc, err = cli(["pack", "--root", str(root), "--out", str(out), "--runs", "table1"])
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(out / pack.PIECE.format(0)) in err and "no space" in err.lower()
    assert "no pack file was kept" in err
    assert list(out.iterdir()) == []
    monkeypatch.setattr(pack, "_write_file", real)
    index = pack.pack(root, out, piece_mib=0.02)  # the folder is usable again
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [p["file"] for p in index["pieces"]] + [pack.INDEX])


def test_pack_volume_copy_disk_full_keeps_the_pack(tmp_path, monkeypatch):
    root = tmp_path / "paper"
    make_run(root / "table1", "a", payload=60_000)
    real = pack._write_file

    def full(path, data):
        if Path(path).parent.name == "to":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(pack, "_write_file", full)
    rc, err = cli(["pack", "--root", str(root), "--out", str(tmp_path / "out"),
                        "--to", str(tmp_path / "to")])
    assert rc == 2 and "Traceback" not in err and str(tmp_path / "out") in err
    assert list((tmp_path / "to").iterdir()) == []
    assert (tmp_path / "out" / pack.INDEX).exists()


def cli(argv):
    """Run ``lstpe reproduce ARGV``; return (exit status, stderr)."""
    from lstpe.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(["reproduce", *argv])
        except BaseException:  # noqa: BLE001 - a traceback is the failure asserted against
            import traceback

            traceback.print_exc(file=err)
            rc = -1
    return rc, err.getvalue()
