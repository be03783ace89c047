"""Finished runs through a narrow door: pack them into small files, unpack them safely.

A lent GPU machine (this project's past leases) returned at most 8 files of at most 16 MiB
(64 MiB in all) per command. :func:`pack`
writes the finished runs under a results folder (``manifest.json`` and the files it lists:
``history.csv``, ``artifacts.pt``, ``tables/``; never ``checkpoints/``, lock files, a run in a
hidden folder such as the campaign's ``.campaign/``, or a file the manifest does not list) into
one gzip-compressed
tar stream cut into pieces of ``piece_mib`` MiB, plus an index (``lstpe-pack.json``) with each
piece's size and SHA-256 and the runs it holds. :func:`volume_files` says which pieces one
command copies out (the index travels with every volume); :func:`copy_volume` copies them.

Safety rules:

* :func:`pack` writes every piece and the index to temporary names and renames them only when
  all are complete; a failed write (disk full) removes them all and raises
  :class:`lstpe.store.storage.WriteError` naming the file.
* :func:`unpack` is all or nothing. It reads the index (:func:`read_index`: a malformed one is
  named with the bad key), checks every piece, reassembles the stream and checks every tar
  member *before* writing anything: each name read from disk (run names, piece names, member
  names) must be a plain relative path inside its folder with no hidden component and no
  ``checkpoints/`` (nothing lands in ``.campaign/``), and members must be regular files or
  folders of a listed run (no links, devices, absolute paths or ``..``), each file one its run's
  manifest lists at the size it lists (:func:`lstpe.store.pack_check.check_members`: an
  untrusted pack never writes more than its manifests say). It then extracts into a
  staging folder inside the target, verifies every staged run against its manifest (a file it
  does not list refuses the pack), checks every
  local run it would keep (a damaged one is named and fails the unpack; a different one is never
  replaced), and only then moves the new runs into place (moving them back if a move fails).

What is dropped to fit: only checkpoints. Attention maps are not stored at all for the runs
whose chapters do not read them (``lstpe.experiments.registry.RunSpec.attention``).
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from lstpe.store.pack_check import (  # noqa: F401 (re-exported: the checks of a pack)
    MANIFEST_MAX_BYTES,
    MAX_PACK_BYTES,
    WORK_PARTS,
    PackError,
    _piece_name,
    check_members,
    check_runs,
    plain_path,
    read_index,
    result_path,
    work_part,
)
from lstpe.store.storage import RunDirError, WriteError, _file_mode, read_manifest, verify_files

INDEX = "lstpe-pack.json"
PIECE = "lstpe-pack.tar.gz.{:03d}"


def finished_runs(root: str | Path) -> list[Path]:
    """Finished runs (a manifest) under ``root``, sorted; none in a hidden or work folder."""
    root = Path(root)
    return sorted(p.parent for p in root.rglob("manifest.json")
                  if work_part(p.relative_to(root).parts[:-1]) is None)


def _run_members(run: Path) -> list[Path]:
    """What of a run travels: its manifest and the files it lists (nothing else)."""
    listed = read_manifest(run).get("files") or {}
    return [run / "manifest.json"] + [run / f for f in sorted(listed) if (run / f).is_file()]


def verify_run(run: Path) -> dict:
    """Check a run folder as :func:`lstpe.store.results.load` does (its manifest, and every file
    against the manifest's sizes and SHA-256 sums); return the manifest.

    Raises:
        lstpe.store.storage.RunDirError: naming the damaged file; FileNotFoundError: no manifest.
    """
    manifest = read_manifest(run)
    verify_files(run, manifest)
    return manifest


# --------------------------------------------------------------------------- writing


def _write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and flush it to disk."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _write_all(files: dict[str, bytes], folder: Path, kept: str, replace: bool = False) -> None:
    """Write ``files`` (name -> bytes) into ``folder`` all or nothing: each to a temporary
    name, renamed once every one is complete (onto an existing file only if ``replace``). On
    failure every temporary and renamed file is removed and
    :class:`~lstpe.store.storage.WriteError` names the file and says ``kept``."""
    temps: dict[str, Path] = {}
    done: list[Path] = []
    name = ""
    try:
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
            os.close(fd)
            temps[name] = Path(tmp)
            _write_file(temps[name], data)
            os.chmod(tmp, _file_mode())
        for name, tmp in temps.items():
            if not replace and (folder / name).exists():
                raise FileExistsError(errno.EEXIST, "File exists")
            os.rename(tmp, folder / name)
            done.append(folder / name)
    except BaseException as e:  # interrupted too: no temporary or partial pack is left
        for p in [*temps.values(), *done]:
            p.unlink(missing_ok=True)
        if not isinstance(e, OSError):
            raise
        raise WriteError(e.errno or errno.EIO, f"cannot write {folder / name}: "
                         f"{e.strerror or e}; removed the partial files, {kept}") from None


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
        lstpe.store.storage.WriteError: a write failed (disk full); no pack file is left in ``out``.
    """
    root, out = Path(root), Path(out)
    found = {str(p.relative_to(root)): p for p in finished_runs(root)}
    names = list(runs) if runs is not None else sorted(found)
    check_runs(names, f"--runs ({' '.join(names)})")  # its own unpack would refuse them
    missing = [n for n in names if n not in found]
    if missing:
        raise ValueError(f"not finished runs under {root}: {missing}; finished: {sorted(found)}")
    if not names:
        raise ValueError(f"no finished run under {root}")
    for n in names:  # a damaged run would only be refused after the download
        try:
            verify_run(found[n])
        except (RunDirError, FileNotFoundError) as e:
            raise PackError(f"run {n!r} under {root} is damaged: {e}; nothing was packed") \
                from None
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WriteError(e.errno or errno.EIO, f"cannot create {out}: {e.strerror or e}; "
                         "nothing was written") from None
    if any(out.glob("lstpe-pack.*")):
        raise ValueError(f"{out} already holds pack files; use an empty folder")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6, dereference=True) as tar:
        for n in names:
            for f in _run_members(found[n]):
                tar.add(f, arcname=str(Path(n) / f.relative_to(found[n])))
    data = buf.getvalue()
    size = int(piece_mib * 2**20)
    files: dict[str, bytes] = {}
    pieces = []
    for k, start in enumerate(range(0, len(data), size)):
        chunk = data[start:start + size]
        files[PIECE.format(k)] = chunk
        pieces.append({"file": PIECE.format(k), "bytes": len(chunk),
                       "sha256": hashlib.sha256(chunk).hexdigest()})
    manifests = {n: read_manifest(found[n]) for n in names}
    index = {"runs": names, "pieces": pieces, "sha256": hashlib.sha256(data).hexdigest(),
             "bytes": len(data),
             "commits": {n: m.get("git_commit") for n, m in manifests.items()}}
    files[INDEX] = json.dumps(index, indent=2).encode()
    _write_all(files, out, f"no pack file was kept in {out} (the runs under {root} are "
                           "unchanged)")
    return index


def volume_files(index: dict, volume: int, per_volume: int = 7) -> list[str]:
    """The files one command copies out: ``per_volume`` pieces of volume ``volume`` and the
    index (8 files with the default, the device's limit)."""
    pieces = [p["file"] for p in index["pieces"]]
    n_vol = max(1, -(-len(pieces) // per_volume))
    if not 0 <= volume < n_vol:
        raise ValueError(f"volume {volume} does not exist; this pack has volumes 0..{n_vol - 1}")
    return pieces[volume * per_volume:(volume + 1) * per_volume] + [INDEX]


def copy_volume(index: dict, out: str | Path, volume: int, dest: str | Path) -> list[str]:
    """Copy volume ``volume`` of the pack in ``out`` into ``dest`` (all or nothing: a failed
    copy leaves none of its files in ``dest``; the pack in ``out`` is kept)."""
    out, dest = Path(out), Path(dest)
    names = volume_files(index, volume)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WriteError(e.errno or errno.EIO, f"cannot create {dest}: {e.strerror or e}; "
                         f"the pack in {out} is kept") from None
    _write_all({n: (out / n).read_bytes() for n in names}, dest,
               f"nothing was copied to {dest}; the pack in {out} is kept", replace=True)
    return names



def _find_index(dirs: list[Path]) -> tuple[Path, dict]:
    found = [d / INDEX for d in dirs if (d / INDEX).is_file()]
    if not found:
        raise PackError(f"no {INDEX} in {[str(d) for d in dirs]}")
    index = read_index(found[0])
    for other in found[1:]:
        if read_index(other) != index:
            raise PackError(f"index {other} differs from {found[0]}: the folders hold volumes "
                            "of different packs")
    return found[0], index


def _read_pieces(index: dict, index_path: Path, dirs: list[Path]) -> bytes:
    data = bytearray()
    for p in index["pieces"]:
        path = next((d / p["file"] for d in dirs if (d / p["file"]).is_file()), None)
        if path is None:
            raise PackError(f"piece {p['file']} is missing (looked in {[str(d) for d in dirs]}; "
                            f"listed in {index_path})")
        chunk = path.read_bytes()
        if len(chunk) != p["bytes"] or hashlib.sha256(chunk).hexdigest() != p["sha256"]:
            raise PackError(f"piece {path} is damaged (size or SHA-256 differs from the index "
                            f"{index_path})")
        data += chunk
    if len(data) != index["bytes"] or hashlib.sha256(bytes(data)).hexdigest() != index["sha256"]:
        raise PackError(f"the reassembled pack does not match the size and SHA-256 in "
                        f"{index_path}")
    return bytes(data)



def _extract(tar: tarfile.TarFile, stage: Path) -> None:
    """Extract the (checked) members into ``stage``, regular files and folders only."""
    for m in tar.getmembers():
        target = stage / m.name
        if m.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        src = tar.extractfile(m)
        assert src is not None  # a regular file
        with src, open(target, "xb") as f:
            shutil.copyfileobj(src, f)
        os.utime(target, (m.mtime, m.mtime))


def _make_dirs(path: Path) -> list[Path]:
    """``mkdir -p path``; return the folders created, outermost first."""
    new = [p for p in (path, *path.parents) if not p.exists()][::-1]
    path.mkdir(parents=True, exist_ok=True)
    return new


def _packed_files(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file())


def _check_local(name: str, new: Path, dst: Path, root: Path, index_path: Path) -> bool:
    """True if ``dst`` already holds this run intact (skip it), False if it is free; raises
    :class:`PackError` if it holds a damaged run, another run or something else."""
    try:
        dst.resolve().relative_to(root.resolve())
    except ValueError:
        raise PackError(f"run {name!r} of {index_path} would land at {dst.resolve()}, outside "
                        f"{root} (a symbolic link in the way?); nothing was placed") from None
    if not (dst / "manifest.json").exists():
        if dst.exists() or dst.is_symlink():
            raise PackError(f"{dst} exists and holds no finished run (a run in progress?); "
                            "nothing was placed")
        return False
    hint = f"move {dst} away (or delete it) and unpack again; nothing was placed"
    try:
        local = verify_run(dst)
    except (RunDirError, FileNotFoundError) as e:
        raise PackError(f"local run {dst} is damaged: {e}; {hint}") from None
    if local != read_manifest(new):
        raise PackError(f"{dst} already holds a different finished run; move it away or "
                        "unpack elsewhere (nothing was placed)")
    for f in _packed_files(new):
        mine = dst / f.relative_to(new)
        if not mine.is_file() or mine.read_bytes() != f.read_bytes():
            raise PackError(f"local run {dst} is damaged: {mine} is missing or differs from "
                            f"the packed copy (its manifest is the packed one's); {hint}")
    return True


def unpack(src: str | Path | Sequence[str | Path], root: str | Path,
           check: Callable[[str, dict], None] | None = None) -> list[str]:
    """Check and unpack pieces (one folder, or several holding the volumes) into ``root``,
    all or nothing (see the module's safety rules).

    Returns the runs written (a run already present, intact and with the same manifest, is
    skipped). ``check(name, manifest)`` is called for every verified packed run before
    anything is placed; it raises :class:`PackError` to refuse the pack (the caller's rule of
    where such a run belongs).

    Raises:
        PackError: a malformed index (naming the file and key), a missing or damaged piece, an
            unsafe name or tar member, a listed run absent from the pack, a damaged packed or
            local run, or a local run that differs (nothing is placed or replaced).
        lstpe.store.storage.WriteError: a write failed (disk full); nothing is placed.
    """
    dirs = [Path(src)] if isinstance(src, str | Path) else [Path(s) for s in src]
    index_path, index = _find_index(dirs)
    data = _read_pieces(index, index_path, dirs)
    runs: list[str] = index["runs"]
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
        check_members(tar, runs, index_path)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        raise PackError(f"the tar stream of {index_path} is unreadable ({e})") from None
    root = Path(root)
    created: list[Path] = []
    placed: list[str] = []
    stage: Path | None = None
    step = f"staging the pack in {root}"
    try:
        created = _make_dirs(root)
        stage = Path(tempfile.mkdtemp(dir=root, prefix=".unpack-"))
        with tar:
            _extract(tar, stage)
        step = "checking the runs"
        for name in runs:
            try:
                manifest = verify_run(stage / name)
            except (RunDirError, FileNotFoundError) as e:
                raise PackError(f"packed run {name!r} of {index_path} is damaged: {e}; "
                                "nothing was placed") from None
            extra = {p.relative_to(stage / name).as_posix() for p in _packed_files(stage / name)}
            extra -= {"manifest.json", *(manifest.get("files") or {})}
            if extra:
                raise PackError(f"packed run {name!r} of {index_path} holds {min(extra)!r}, "
                                "which its manifest does not list; nothing was placed")
            if check is not None:
                check(name, manifest)
        new = [n for n in runs if not _check_local(n, stage / n, root / n, root, index_path)]
        for name in new:
            step = f"placing run {name!r} at {root / name}"
            created += _make_dirs((root / name).parent)
            os.rename(stage / name, root / name)
            placed.append(name)
        return new
    except BaseException as e:
        stuck = []
        for name in reversed(placed):  # all or nothing: move the placed runs back
            try:
                os.rename(root / name, stage / name)  # type: ignore[operator]
            except OSError:
                stuck.append(name)
        kept = (f"nothing was placed in {root}" if not stuck else
                f"could not move back the runs placed in {root}: {', '.join(stuck)}")
        if isinstance(e, OSError) and not isinstance(e, WriteError):
            where = f" ({e.filename})" if getattr(e, "filename", None) else ""
            raise WriteError(e.errno or errno.EIO, f"unpack failed while {step}: "
                             f"{e.strerror or e}{where}; {kept}") from None
        if stuck:
            raise PackError(f"unpack failed while {step} ({e}); {kept}") from e
        raise
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        for d in reversed(created):
            try:
                d.rmdir()  # only the folders this call created, and only if empty
            except OSError:
                pass
