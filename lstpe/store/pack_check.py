"""What a pack may hold, checked before a byte of it is written: names, the index, tar members.

:func:`read_index` reads and checks a pack's index (``lstpe-pack.json``); :func:`check_members`
checks its tar stream's members against the runs it lists and each run's ``manifest.json``
(read from the stream, at most :data:`MANIFEST_MAX_BYTES`): a file its manifest does not list,
or one whose size differs from the listed size, refuses the pack before extraction, so a
member can never write more than its manifest says (no disk filled by an untrusted pack).
"""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from lstpe.store.storage import parse_json

_SHA256 = re.compile(r"[0-9a-f]{64}")

MAX_PACK_BYTES = 2**40
"""No size in a pack's index may exceed this (1 TiB; a past lease returned 64 MiB)."""

MANIFEST_MAX_BYTES = 4 * 2**20
"""A run's ``manifest.json`` in a pack is read into memory only up to this size (the package
writes manifests of a few kB)."""


class PackError(ValueError):
    """A pack or its target cannot be used as asked (the message names the file and value)."""


WORK_PARTS = ("checkpoints",)
"""Work folders: with every hidden name (``.campaign``...), never packed or unpacked."""


def work_part(parts: Sequence[str]) -> str | None:
    """The first hidden or :data:`WORK_PARTS` component of ``parts``, else None."""
    return next((p for p in parts if p.startswith(".") or p in WORK_PARTS), None)


def plain_path(name: Any, what: str, where: str | Path) -> PurePosixPath:
    """``name`` as a relative path of plain components (no absolute path, no ``.``/``..``,
    no empty component, no backslash or NUL).

    Raises:
        PackError: naming ``what``, the bad name and ``where`` it was read.
    """
    bad = ""
    if not isinstance(name, str) or not name:
        bad = "is not a non-empty string"
    elif "\\" in name or "\x00" in name:
        bad = "holds a backslash or NUL character"
    elif name.startswith("/"):
        bad = "is an absolute path"
    elif any(part in ("", ".", "..") for part in name.split("/")):
        bad = "has an empty, '.' or '..' component"
    if bad:
        raise PackError(f"{what} {name!r} in {where} {bad}: a name must be a plain relative "
                        "path inside its folder; refusing the pack, nothing was written")
    return PurePosixPath(name)


def result_path(name: Any, what: str, where: str | Path) -> PurePosixPath:
    """:func:`plain_path` with no hidden or work component (:func:`work_part`); PackError
    naming ``what``, the name and ``where`` otherwise."""
    path = plain_path(name, what, where)
    part = work_part(path.parts)
    if part is not None:
        raise PackError(f"{what} {name!r} in {where} passes through {part!r}, a hidden or work "
                        "folder (claims, staging, checkpoints): a pack carries finished results "
                        "only; refusing the pack, nothing was written")
    return path


def _piece_name(name: Any, what: str, where: Path) -> str:
    if len(plain_path(name, what, where).parts) != 1:
        raise PackError(f"{what} {name!r} in {where} is not a plain file name (it names "
                        "another folder); refusing the pack, nothing was written")
    return name



def check_runs(runs: Sequence[str], where: str) -> None:
    """No run listed twice, none inside another (``where``: what lists them, for the message).

    Raises:
        PackError: naming the run(s) and ``where``.
    """
    for a in runs:
        if list(runs).count(a) > 1:
            raise PackError(f"{where} lists {a!r} twice; list each run once")
        inner = next((b for b in runs if b.startswith(a + "/")), None)
        if inner is not None:
            raise PackError(f"{where} lists {inner!r} inside run {a!r}; list one of them")


def read_index(path: str | Path) -> dict:
    """The index at ``path``, checked: every key present with the right type, every run and
    piece name a plain relative path (:func:`plain_path`).

    Raises:
        PackError: naming the file and the bad key or value.
    """
    path = Path(path)
    index = parse_json(path.read_text(errors="replace"), path, "copy it again from the pack",
                       PackError, "index")
    if not isinstance(index, dict):
        raise PackError(f"index {path} does not hold a JSON object (got {type(index).__name__})")

    def need(obj: dict, key: str, typ: type, label: str) -> Any:
        if key not in obj:
            raise PackError(f"index {path} has no key {label!r} (damaged or not a pack index)")
        value = obj[key]
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            raise PackError(f"index {path}: key {label!r} must be a {typ.__name__}, got "
                            f"{json.dumps(value)[:60]}")
        if typ is int and not 0 <= value <= MAX_PACK_BYTES:
            what = "negative" if value < 0 else f"larger than any pack ({MAX_PACK_BYTES})"
            text = str(value) if len(str(value)) <= 20 else f"{str(value)[:17]}..."
            raise PackError(f"index {path}: key {label!r} is {what}: {text}; copy the index "
                            "again from the pack")
        if label.endswith("sha256") and not _SHA256.fullmatch(value):
            raise PackError(f"index {path}: key {label!r} is not a SHA-256 hex digest "
                            f"({value[:70]!r})")
        return value

    runs = need(index, "runs", list, "runs")
    for i, run in enumerate(runs):
        result_path(run, f"run runs[{i}]", path)
    if not runs:
        raise PackError(f"index {path}: key 'runs' lists no run")
    check_runs(runs, f"index {path}: key 'runs'")
    pieces = need(index, "pieces", list, "pieces")
    for i, piece in enumerate(pieces):
        if not isinstance(piece, dict):
            raise PackError(f"index {path}: key 'pieces[{i}]' must be an object, got "
                            f"{json.dumps(piece)[:60]}")
        _piece_name(need(piece, "file", str, f"pieces[{i}].file"), f"piece pieces[{i}].file",
                    path)
        need(piece, "bytes", int, f"pieces[{i}].bytes")
        need(piece, "sha256", str, f"pieces[{i}].sha256")
    if not pieces:
        raise PackError(f"index {path}: key 'pieces' lists no piece")
    need(index, "sha256", str, "sha256")
    need(index, "bytes", int, "bytes")
    return index


def _listed_sizes(tar: tarfile.TarFile, member: tarfile.TarInfo, run: str, where: str
                  ) -> dict[str, int]:
    """The files ``run``'s manifest (the tar ``member``) lists, name -> bytes.

    Raises:
        PackError: the manifest is larger than :data:`MANIFEST_MAX_BYTES`, unreadable, or
            lists no file sizes.
    """
    label = f"{run}/manifest.json in {where}"
    if not member.isfile():
        raise PackError(f"{label} is a folder, not a manifest; refusing the pack before "
                        "extracting anything")
    if member.size > MANIFEST_MAX_BYTES:
        raise PackError(f"{label} holds {member.size} bytes, more than a manifest may "
                        f"({MANIFEST_MAX_BYTES}); refusing the pack before extracting anything")
    src = tar.extractfile(member)
    assert src is not None  # a regular file (checked)
    with src:
        manifest = parse_json(src.read().decode(errors="replace"), label,
                              "refusing the pack before extracting anything", PackError)
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not all(
            isinstance(r, dict) and isinstance(r.get("bytes"), int) and
            not isinstance(r.get("bytes"), bool) for r in files.values()):
        raise PackError(f"{label} lists no file sizes ('files': {{name: {{\"bytes\": ...}}}}); "
                        "the run cannot be checked; refusing the pack before extracting "
                        "anything")
    return {str(k): int(r["bytes"]) for k, r in files.items()}


def check_members(tar: tarfile.TarFile, runs: list[str], index_path: Path) -> None:
    """Every member a regular file or folder with a plain name inside a listed run; every
    run present (with its manifest); every file one its run's manifest lists, of the size it
    lists (read from the tar headers: nothing is extracted before this passes).

    Raises:
        PackError: naming the member and what is wrong.
    """
    where = f"the tar stream of {index_path}"
    seen: dict[str, tuple[tarfile.TarInfo, str]] = {}
    for m in tar.getmembers():
        name = result_path(m.name, "tar member", where)
        if not (m.isfile() or m.isdir()):
            kind = ("a symbolic link" if m.issym() else "a hard link" if m.islnk() else
                    "a device or special file")
            raise PackError(f"tar member {m.name!r} in {where} is {kind}; a pack holds only "
                            "regular files and folders; refusing the pack, nothing was written")
        owner = next((r for r in runs if name.parts[:len(PurePosixPath(r).parts)] ==
                      PurePosixPath(r).parts), None)
        if owner is None or (m.isfile() and str(name) == owner):
            raise PackError(f"tar member {m.name!r} in {where} lies outside the runs the index "
                            f"lists ({runs}); refusing the pack, nothing was written")
        if str(name) in seen:
            raise PackError(f"tar member {m.name!r} appears twice in {where}")
        seen[str(name)] = (m, owner)
    absent = [r for r in runs if f"{r}/manifest.json" not in seen]
    if absent:
        raise PackError(f"run {absent[0]!r} listed in {index_path} is not in the pack (no "
                        f"{absent[0]}/manifest.json in its tar stream); nothing was written")
    sizes = {r: _listed_sizes(tar, seen[f"{r}/manifest.json"][0], r, where) for r in runs}
    for name, (m, owner) in seen.items():
        rel = name[len(owner) + 1:]
        if m.isdir() or rel == "manifest.json":
            continue
        if rel not in sizes[owner]:
            raise PackError(f"tar member {name!r} in {where} is a file that "
                            f"{owner}/manifest.json does not list; refusing the pack before "
                            "extracting anything")
        if m.size != sizes[owner][rel]:
            raise PackError(f"tar member {name!r} in {where} holds {m.size} bytes where "
                            f"{owner}/manifest.json lists {sizes[owner][rel]}; refusing the "
                            "pack before extracting anything")

