"""Finished runs through a narrow door: pack them into small files, unpack them safely.

A GPU lease returns at most 8 files of at most 16 MiB (64 MiB in all) per command. :func:`pack`
writes the finished runs under a results folder (``history.csv``, ``manifest.json``,
``artifacts.pt``, ``tables/``; never ``checkpoints/`` or lock files) into one gzip-compressed
tar stream cut into pieces of ``piece_mib`` MiB, plus an index (``lstpe-pack.json``) with each
piece's size and SHA-256 and the runs it holds. :func:`volume_files` says which pieces one
command copies out (the index travels with every volume). :func:`unpack` checks every piece,
reassembles the stream, extracts it into a temporary folder beside the target, and moves each
run into place; it refuses to replace an existing run whose manifest differs.

What is dropped to fit: only checkpoints. Attention maps are not stored at all for the runs
whose chapters do not read them (``lstpe.experiments.RunSpec.attention``).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

INDEX = "lstpe-pack.json"
PIECE = "lstpe-pack.tar.gz.{:03d}"
RUN_FILES = ("history.csv", "manifest.json", "artifacts.pt")


def finished_runs(root: str | Path) -> list[Path]:
    """Run folders under ``root`` that hold a manifest (finished runs), sorted."""
    root = Path(root)
    return sorted(p.parent for p in root.rglob("manifest.json")
                  if "checkpoints" not in p.parts)


def _run_members(run: Path) -> list[Path]:
    files = [run / f for f in RUN_FILES if (run / f).exists()]
    tables = run / "tables"
    if tables.is_dir():
        files += sorted(tables.glob("*.csv"))
    return files


def pack(root: str | Path, out: str | Path, runs: Sequence[str] | None = None,
         piece_mib: float = 15.5) -> dict:
    """Pack finished runs under ``root`` into pieces in ``out``; return the index.

    Args:
        root: a results folder, e.g. ``results/paper``.
        out: folder for the pieces and the index (created; must be empty of old pieces).
        runs: run folders relative to ``root`` (default: every finished run).
        piece_mib: size of each piece.
    Raises:
        ValueError: no finished run, an unfinished run named, or old pieces in ``out``.
    """
    root, out = Path(root), Path(out)
    found = {str(p.relative_to(root)): p for p in finished_runs(root)}
    names = list(runs) if runs is not None else sorted(found)
    missing = [n for n in names if n not in found]
    if missing:
        raise ValueError(f"not finished runs under {root}: {missing}; finished: {sorted(found)}")
    if not names:
        raise ValueError(f"no finished run under {root}")
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("lstpe-pack.*")):
        raise ValueError(f"{out} already holds pack files; use an empty folder")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for n in names:
            for f in _run_members(found[n]):
                tar.add(f, arcname=str(Path(n) / f.relative_to(found[n])))
    data = buf.getvalue()
    size = int(piece_mib * 2**20)
    pieces = []
    for k, start in enumerate(range(0, len(data), size)):
        chunk = data[start:start + size]
        (out / PIECE.format(k)).write_bytes(chunk)
        pieces.append({"file": PIECE.format(k), "bytes": len(chunk),
                       "sha256": hashlib.sha256(chunk).hexdigest()})
    manifests = {n: json.loads((found[n] / "manifest.json").read_text()) for n in names}
    index = {"runs": names, "pieces": pieces, "sha256": hashlib.sha256(data).hexdigest(),
             "bytes": len(data),
             "commits": {n: m.get("git_commit") for n, m in manifests.items()}}
    (out / INDEX).write_text(json.dumps(index, indent=2))
    return index


def volume_files(index: dict, volume: int, per_volume: int = 7) -> list[str]:
    """The files one command copies out: ``per_volume`` pieces of volume ``volume`` and the
    index (8 files with the default, the device's limit)."""
    pieces = [p["file"] for p in index["pieces"]]
    n_vol = max(1, -(-len(pieces) // per_volume))
    if not 0 <= volume < n_vol:
        raise ValueError(f"volume {volume} does not exist; this pack has volumes 0..{n_vol - 1}")
    return pieces[volume * per_volume:(volume + 1) * per_volume] + [INDEX]


def _same_run(a: Path, b: Path) -> bool:
    ma = json.loads((a / "manifest.json").read_text())
    mb = json.loads((b / "manifest.json").read_text())
    return ma == mb


def unpack(src: str | Sequence[str | Path], root: str | Path) -> list[str]:
    """Check and unpack pieces (one folder, or several holding the volumes) into ``root``.

    Returns the runs written (a run already present with the same manifest is skipped).

    Raises:
        ValueError: a missing or damaged piece (named), or an existing run whose manifest
            differs from the packed one (nothing is replaced).
    """
    dirs = [Path(src)] if isinstance(src, str | Path) else [Path(s) for s in src]
    index_path = next((d / INDEX for d in dirs if (d / INDEX).exists()), None)
    if index_path is None:
        raise ValueError(f"no {INDEX} in {[str(d) for d in dirs]}")
    index = json.loads(index_path.read_text())
    data = bytearray()
    for p in index["pieces"]:
        path = next((d / p["file"] for d in dirs if (d / p["file"]).exists()), None)
        if path is None:
            raise ValueError(f"piece {p['file']} is missing (looked in {[str(d) for d in dirs]})")
        chunk = path.read_bytes()
        if len(chunk) != p["bytes"] or hashlib.sha256(chunk).hexdigest() != p["sha256"]:
            raise ValueError(f"piece {path} is damaged (size or SHA-256 differs from the index)")
        data += chunk
    if hashlib.sha256(bytes(data)).hexdigest() != index["sha256"]:
        raise ValueError("the reassembled pack does not match its SHA-256")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(dir=root, prefix=".unpack-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(bytes(data)), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        for name in index["runs"]:
            new, dst = Path(tmp) / name, root / name
            if (dst / "manifest.json").exists():
                if _same_run(new, dst):
                    continue
                raise ValueError(f"{dst} already holds a different finished run; move it away "
                                 "or unpack elsewhere (nothing was replaced)")
            if dst.exists():
                raise ValueError(f"{dst} exists and holds no finished run (a run in progress?); "
                                 "nothing was replaced")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(new), str(dst))
            written.append(name)
    return written
