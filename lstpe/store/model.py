"""One folder per model trained in segments: its whole history, its snapshots, one manifest.

A long model (:mod:`lstpe.experiments.long_units`) is trained and published 200 epochs at a
time, but it is stored as one model::

    <model>/history.csv          every logged row from epoch 0, segment after segment
    <model>/snapshots/e0200.pt   the PE (and attention) snapshots of epochs 0-200
    <model>/snapshots/e0400.pt   ... of epochs 201-400
    <model>/manifest.json        checksums of every file, and one record per segment

Each segment's record keeps the manifest it was published with, verbatim: its provenance
(device, CPU flags, precision, torch version, commit, wall time, every process that trained
it), the checksum of its own rows and of its snapshot file, and its own checksum, which the
next segment names (``long.previous``) and a resume checkpoint records. ``history.csv`` is the
header followed by each segment's data lines, byte for byte, so a segment's rows can be
checked against the checksum they were published with (:func:`segment_bytes`).

**Appending** (:func:`append_segment`) writes the new snapshot file, then ``history.csv``, then
the manifest, each atomically; the manifest is the commit point. A process killed between the
last two leaves a ``history.csv`` that starts with the bytes the manifest records: readers use
that prefix (:func:`history_bytes`) and the next append starts from it. A snapshot file the
manifest does not list is not published (it is overwritten by the append that publishes it).
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lstpe.store import storage as stg

KIND = "long-model"
"""``manifest.json``'s ``kind`` for a model stored in this form."""


@dataclass(frozen=True)
class Segment:
    """One published segment of a model folder (read from its manifest)."""

    folder: Path
    manifest: dict[str, Any]
    """The manifest the segment was published with (``long``: unit, from/to epoch, previous)."""
    lines: tuple[int, int]
    """Its data lines of ``history.csv``: [start, stop), counted after the header."""
    snapshot: str
    """Its snapshot file, relative to the folder (``snapshots/eNNNN.pt``)."""

    @property
    def epoch(self) -> int:
        """The epoch it ends at."""
        return int(self.manifest["long"]["to_epoch"])

    @property
    def name(self) -> str:
        """How messages name it: ``the segment to epoch N of <model folder>``."""
        return f"the segment to epoch {self.epoch} of {self.folder}"

    @property
    def checksum(self) -> str:
        return self.manifest[stg.MANIFEST_HASH_KEY]


def _hint(folder: Path) -> str:
    return (f"restore {folder} as git holds it (git checkout -- {folder}) or copy it again "
            "from the machine that wrote it; do not delete it: its resume checkpoint depends "
            "on it")


_DELETE_HINT = re.compile(r";\s*(the run in .*? is damaged;\s*)?delete .*$", re.S)


def keep_hint(err: Exception, folder: Path) -> str:
    """``err``'s message, its "delete it to retrain" hint (wrong for a model folder: its
    checkpoint is past what it holds) replaced by one that keeps the work."""
    return f"{_DELETE_HINT.sub('', str(err))}; {_hint(folder)}"


def _shape(man: dict[str, Any]) -> str | None:
    """What is missing or inconsistent in a model manifest's structure; None if nothing."""
    segs = man.get("segments")
    if not isinstance(segs, list):
        return "has no list of 'segments'"
    try:
        ends = [int(r["manifest"]["long"]["to_epoch"]) for r in segs]
        lines = sum(int(r["lines"]) for r in segs)
        snaps = [r["snapshot"] for r in segs]
        rows = man["files"]["history.csv"]["rows"] if segs else lines
    except (KeyError, TypeError, ValueError) as e:
        return f"has a segment record without {e}"
    if man.get("epoch") != (ends[-1] if ends else 0) or rows != lines or \
            any(n not in man["files"] for n in snaps) or ends != sorted(set(ends)):
        return ("does not add up (its epoch, its segments' ends, their lines against "
                "history.csv's rows, or their snapshot files against its file records)")
    return None


def read(folder: str | Path, verify: bool = True) -> dict[str, Any] | None:
    """The folder's manifest (checked against its own checksum and, with ``verify``, every
    file against its record); None when the folder holds no model.

    Raises:
        DamagedFileError: naming the file: a manifest that is damaged or not of this form, a
            file missing or different from its record (a ``history.csv`` longer than its
            record whose start matches it is an interrupted append, not damage).
    """
    folder = Path(folder)
    if not (folder / "manifest.json").is_file():
        return None
    try:
        man = stg.read_manifest(folder)
        if verify:
            stg.verify_files(folder, man, skip=("history.csv",))
    except stg.DamagedFileError as e:
        raise stg.DamagedFileError(keep_hint(e, folder)) from None
    why = f"is not a {KIND} manifest" if man.get("kind") != KIND else _shape(man)
    if why:
        raise stg._damaged(folder / "manifest.json", "manifest", why, _hint(folder))
    if verify:
        history_bytes(folder, man)
    return man


def history_bytes(folder: Path, man: dict[str, Any]) -> bytes:
    """``history.csv`` as the manifest records it (its first ``bytes`` bytes: the rest, if
    any, is an append that was interrupted before its manifest), checked.

    Raises:
        DamagedFileError: the file is missing, shorter, or its recorded bytes differ.
    """
    path, rec = folder / "history.csv", man["files"]["history.csv"]
    if not path.is_file():
        raise stg._damaged(path, "run file", "is missing (listed in manifest.json)",
                           _hint(folder))
    data = path.read_bytes()[: rec["bytes"]]
    if len(data) != rec["bytes"] or hashlib.sha256(data).hexdigest() != rec["sha256"]:
        raise stg._damaged(path, "run file", f"does not match manifest.json ({len(data)} of "
                           f"{rec['bytes']} bytes recorded; truncated or edited?)", _hint(folder))
    return data


def segments(folder: str | Path, man: dict[str, Any] | None = None) -> list[Segment]:
    """The folder's published segments in epoch order ([] when it holds no model)."""
    folder = Path(folder)
    man = read(folder, verify=False) if man is None else man
    out, at = [], 0
    for rec in (man or {}).get("segments", []):
        out.append(Segment(folder, rec["manifest"], (at, at + int(rec["lines"])),
                           rec["snapshot"]))
        at += int(rec["lines"])
    return out


def epoch(folder: str | Path) -> int:
    """The last published epoch (0: none), from the manifest alone."""
    man = read(folder, verify=False)
    return int(man["epoch"]) if man else 0


def segment_bytes(data: bytes, seg: Segment) -> bytes:
    """The ``history.csv`` bytes ``seg`` was published with, cut from the folder's ``data``."""
    lines = data.splitlines(keepends=True)
    return b"".join(lines[:1] + lines[1 + seg.lines[0]: 1 + seg.lines[1]])


def read_history(data: bytes, path: Path) -> pd.DataFrame:
    """``history.csv``'s ``data`` as a table (``condition`` read as text)."""
    try:
        return pd.read_csv(io.BytesIO(data), dtype={"condition": str})
    except Exception as e:  # noqa: BLE001 - name the file
        raise stg._damaged(path, "table", f"cannot be read ({type(e).__name__}: {e})",
                           _hint(path.parent)) from e


def segment_problems(folder: Path, man: dict[str, Any]) -> list[str]:
    """Each segment checked against the checksums it was published with (its rows' bytes and
    its snapshot file); [] when every one matches."""
    data, out = history_bytes(folder, man), []
    for seg in segments(folder, man):
        if stg.manifest_checksum(seg.manifest) != seg.checksum:
            out.append(f"{folder / 'manifest.json'}: the manifest of the segment to epoch "
                       f"{seg.epoch} does not match its own checksum (edited); {_hint(folder)}")
        files = seg.manifest.get("files") or {}
        rows = hashlib.sha256(segment_bytes(data, seg)).hexdigest()
        if rows != (files.get("history.csv") or {}).get("sha256"):
            out.append(f"{folder / 'history.csv'}: the rows of the segment to epoch "
                       f"{seg.epoch} differ from those it was published with; {_hint(folder)}")
        snap = (files.get("artifacts.pt") or {}).get("sha256")
        if snap is not None and stg.sha256_file(folder / seg.snapshot) != snap:
            out.append(f"{folder / seg.snapshot} differs from the snapshots its segment was "
                       f"published with; {_hint(folder)}")
    return out


def _history_record(data: bytes) -> dict[str, Any]:
    """The manifest's record of ``history.csv`` holding ``data`` (a header, then rows)."""
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
            "rows": data.count(b"\n") - 1}


def append_segment(folder: str | Path, stage: str | Path, unit: str,
                   tmp_dir: str | Path | None = None) -> Segment:
    """Publish the verified segment folder ``stage`` (``history.csv``, ``artifacts.pt``,
    ``manifest.json`` of kind ``long-segment``) as the folder's next segment; ``stage`` is
    left as it was. Returns the new segment. ``tmp_dir``: where the temporary files of the
    writes go (a folder on the same file system that git does not track; default beside each
    file).

    Raises:
        ValueError: the stage does not start where the folder ends, is not of ``unit``, or
            names another segment before it (``long.previous``), naming both.
    """
    folder, stage = Path(folder), Path(stage)
    smn = stg.read_manifest(stage)
    stg.verify_files(stage, smn)
    info = smn.get("long") or {}
    man = read(folder) or {"kind": KIND, "unit": unit, "epoch": 0, "segments": [],
                           "files": {}}
    segs = segments(folder, man)
    prev = segs[-1].checksum if segs else None
    if info.get("unit") != unit or man["unit"] != unit or info.get("from_epoch") != \
            man["epoch"] or info.get("previous") != prev:
        raise ValueError(f"the segment {stage} ({info.get('unit')}, from epoch "
                         f"{info.get('from_epoch')}) does not continue {folder} ({man['unit']} "
                         f"to epoch {man['epoch']}, last segment {prev})")
    raw = (stage / "history.csv").read_bytes()
    head, *lines = raw.splitlines(keepends=True)
    old = history_bytes(folder, man) if segs else head
    if not raw.endswith(b"\n") or b"\r" in raw:
        raise ValueError(f"{stage / 'history.csv'} does not end each line with a bare LF")
    if not old.startswith(head):
        raise ValueError(f"{stage / 'history.csv'} has other columns than {folder}")
    data = old + b"".join(lines)
    snap = f"snapshots/e{int(info['to_epoch']):04d}.pt"
    stg.atomic_write(folder / snap, lambda p: shutil.copyfile(stage / "artifacts.pt", p),
                     tmp_dir)
    stg.atomic_write(folder / "history.csv", lambda p: p.write_bytes(data), tmp_dir)
    files = {**man["files"], snap: stg.file_record(folder / snap),
             "history.csv": _history_record(data)}
    out = {**man, "epoch": int(info["to_epoch"]), "files": files,
           "segments": [*man["segments"], {"lines": len(lines), "snapshot": snap,
                                           "manifest": smn}]}
    out.pop(stg.MANIFEST_HASH_KEY, None)
    stg.save_json(stg.seal_manifest(out), folder / "manifest.json", tmp_dir)
    return segments(folder, out)[-1]


def truncate(folder: str | Path, epoch: int, aside: str | Path) -> None:
    """Keep the folder's segments up to ``epoch`` only, after copying the whole folder to
    ``aside`` (nothing is lost): the repair when another trajectory's segments lie past a
    resume checkpoint that is to continue.

    Raises:
        FileExistsError: ``aside`` exists.
        ValueError: no segment ends at ``epoch`` (and it is not 0).
    """
    folder, aside = Path(folder), Path(aside)
    man = read(folder)
    segs = segments(folder, man)
    keep = [s for s in segs if s.epoch <= epoch]
    if epoch and (not keep or keep[-1].epoch != epoch):
        raise ValueError(f"no segment of {folder} ends at epoch {epoch} "
                         f"(they end at {[s.epoch for s in segs]})")
    shutil.copytree(folder, aside)  # raises FileExistsError
    lines = history_bytes(folder, man).splitlines(keepends=True)
    data = b"".join(lines[: 1 + (keep[-1].lines[1] if keep else 0)])
    files = {k: v for k, v in man["files"].items()
             if not k.startswith("snapshots/") or k in {s.snapshot for s in keep}}
    files["history.csv"] = _history_record(data)
    out = {**man, "epoch": epoch, "files": files, "segments": man["segments"][: len(keep)]}
    out.pop(stg.MANIFEST_HASH_KEY, None)
    # the manifest first: killed before history.csv is cut, the file starts with the bytes
    # the new manifest records (an interrupted append, to readers); then the cut, then the
    # snapshots it no longer lists
    stg.save_json(stg.seal_manifest(out), folder / "manifest.json")
    stg.atomic_write(folder / "history.csv", lambda p: p.write_bytes(data))
    for s in segs[len(keep):]:
        (folder / s.snapshot).unlink()
