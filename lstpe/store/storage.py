"""Files of a run on disk: atomic writes, readable-or-named loads, hashes; the errors.

Every write goes to a temporary file in the same folder, is flushed to disk and renamed into
place, so an interrupted (even SIGKILLed) run never leaves a half-written result behind;
finished files get ordinary permissions (0666 minus the umask, usually 0644). A file that is
missing, empty, truncated or does not match its manifest raises :class:`DamagedFileError`
naming it.
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

__all__ = [
    "read_json_object",
    "RunDirError",
    "NotWritableError",
    "ConfigMismatchError",
    "DamagedFileError",
    "RunLockedError",
    "StaleLockWarning",
    "DivergedWarning",
    "atomic_write",
    "save_torch",
    "save_json",
    "save_table",
    "clean_temp_files",
    "dotted_get",
    "load_torch",
    "check_torch_file",
    "sha256_file",
    "file_record",
    "read_manifest",
    "verify_files",
    "MANIFEST_HASH_KEY",
    "manifest_checksum",
    "seal_manifest",
    "WriteError",
    "RUN_FILES",
    "EXECUTION_KEYS",
    "LOCK_NAME",
    "config_diff",
]


# --------------------------------------------------------------------------- errors


class RunDirError(ValueError):
    """A run folder cannot be used as asked (the message names the folder or file)."""


class NotWritableError(RunDirError):
    """The output folder is not a folder, or cannot be created or written."""


class ConfigMismatchError(RunDirError):
    """The folder holds a run (or checkpoints) of another configuration."""


class DamagedFileError(RunDirError):
    """A file of a run is missing, empty, truncated or otherwise unreadable."""


class RunLockedError(RunDirError):
    """Another live process holds the folder's lock."""


class StaleLockWarning(UserWarning):
    """A lock left behind by a process that is no longer running was taken over."""


class DivergedWarning(UserWarning):
    """Models with a non-finite loss or logits were left out of a summary."""


# --------------------------------------------------------------------------- run folders


RUN_FILES = ("history.csv", "manifest.json", "artifacts.pt", "tables", "checkpoints")
"""What a run directory may hold (besides hidden files such as ``.lock``)."""

EXECUTION_KEYS: tuple[str, ...] = ("device", "max_models", "checkpoint_every", "compile",
                                   "step_mode")
"""Config keys that change how a run is executed, not what it computes: a finished run is
the same run whatever their values (:func:`check_run_dir`)."""

LOCK_NAME = ".lock"
def utc_now() -> str:
    """The current UTC time as ISO 8601 to the second (``2025-01-31T12:00:00+00:00``)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def dotted_get(d: Any, key: str) -> Any:
    """``d["a"]["b"]`` for the key ``"a.b"`` of :func:`config_diff` (None where a level is
    missing or not a dict)."""
    for part in key.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def config_diff(old: dict, new: dict, ignore: Sequence[str] = ()) -> list[str]:
    """The keys whose values differ between two configs (nested dicts as ``model.d_model``),
    after a JSON round trip (tuples = lists), leaving out ``ignore``."""
    a = json.loads(json.dumps(old, sort_keys=True, default=str))
    b = json.loads(json.dumps(new, sort_keys=True, default=str))
    out: list[str] = []

    def walk(x: Any, y: Any, prefix: str) -> None:
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                key = f"{prefix}{k}"
                if key in ignore:
                    continue
                walk(x.get(k), y.get(k), key + ".")
        elif x != y:
            out.append(prefix.rstrip("."))

    walk(a, b, "")
    return out


def _show(v: Any, n: int = 60) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= n else text[:n - 3] + "..."


# --------------------------------------------------------------------------- atomic writes


_UMASK_LOCK = threading.Lock()


def _file_mode() -> int:
    """0666 minus the process umask: the permissions ``open()`` gives a new file."""
    try:  # Linux: read the umask without changing it (no window for other threads)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: str | Path, write: Callable[[Path], None],
                 tmp_dir: str | Path | None = None) -> Path:
    """Call ``write(tmp_path)``, flush it to disk, then rename ``tmp_path`` onto ``path``.

    The temporary file lies in the same folder (``.<name>.<random>.tmp``), or in ``tmp_dir``
    (a folder on the same file system, e.g. an untracked work folder beside a folder git
    tracks), so the rename is atomic: ``path`` holds either its old content or the complete
    new one, even if the process is killed. The final file gets ordinary permissions (0666
    minus the umask, e.g. 0644). A process killed mid-write leaves its temporary file, which
    :class:`RunLock` removes (in ``tmp_dir``: whoever owns that folder).
    """
    path = Path(path)
    where = Path(tmp_dir) if tmp_dir is not None else path.parent
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        where.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=where)
    except OSError as e:
        raise WriteError(e.errno or errno.EIO, f"cannot write {path}: {e.strerror or e}; "
                         "nothing was written") from None
    os.close(fd)
    kept = f"{path} keeps its previous content" if path.exists() else f"{path} was not created"
    try:
        write(Path(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except OSError as e:
        raise WriteError(e.errno or errno.EIO, f"cannot write {path}: {e.strerror or e}; "
                         f"{kept}") from None
    except RuntimeError as e:  # torch.save reports a full disk as a RuntimeError
        if not _disk_error(e):
            raise
        raise WriteError(errno.ENOSPC, f"cannot write {path}: no space left on the device "
                         f"({' '.join(str(e).split())[:120]}); {kept}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


class WriteError(OSError):
    """A write failed (disk full, permissions...): the message names the file and what was
    kept; no half-written file is left under its final name."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _disk_error(e: RuntimeError) -> bool:
    text = str(e).lower()
    return any(k in text for k in ("no space", "file write failed", "inline_container",
                                   "unexpected pos", "errno 28", "disk quota"))


def save_torch(obj: Any, path: str | Path, tmp_dir: str | Path | None = None) -> Path:
    """``torch.save`` atomically (``tmp_dir``: see :func:`atomic_write`)."""
    return atomic_write(path, lambda p: torch.save(obj, p), tmp_dir)


def save_json(obj: Any, path: str | Path, tmp_dir: str | Path | None = None) -> Path:
    """Write JSON atomically (indented, keys sorted; ``tmp_dir``: see :func:`atomic_write`)."""
    return atomic_write(
        path, lambda p: p.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str)),
        tmp_dir)


def save_table(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a CSV table atomically."""
    return atomic_write(path, lambda p: df.to_csv(p, index=False))


def clean_temp_files(run_dir: str | Path) -> list[Path]:
    """Delete the temporary files interrupted :func:`atomic_write` calls left in ``run_dir``
    (and its ``checkpoints/`` and ``tables/``). Call it only while holding the folder's
    :class:`RunLock` (another writer's temporary file would be deleted too)."""
    run_dir = Path(run_dir)
    gone = []
    for folder in (run_dir, run_dir / "checkpoints", run_dir / "tables"):
        for p in folder.glob(".*.tmp") if folder.is_dir() else []:
            try:
                p.unlink()
                gone.append(p)
            except OSError:
                pass
    return gone


# --------------------------------------------------------------------------- reading back


def _damaged(path: Path, what: str, detail: str, hint: str = "") -> DamagedFileError:
    return DamagedFileError(f"{what} {path} {detail}" + (f"; {hint}" if hint else ""))


def _require_nonempty(path: Path, what: str, hint: str | None) -> str:
    """Raise unless ``path`` is a non-empty file; return the hint for later errors."""
    if hint is None:
        hint = (f"delete {path} to restart the run (it cannot be resumed from this checkpoint)"
                if what == "checkpoint" else "")
    if not path.is_file():
        raise _damaged(path, what, "does not exist", hint)
    if path.stat().st_size == 0:
        raise _damaged(path, what, "is empty (0 bytes; a write was cut off)", hint)
    return hint


def load_torch(path: str | Path, what: str = "file", map_location: Any = "cpu",
               hint: str | None = None) -> Any:
    """``torch.load(path)`` that names the file when it is missing, empty or damaged.

    Args:
        path: the ``.pt`` file.
        what: what the file is, for the message: ``"checkpoint"``, ``"artifacts"``, ...
        map_location: passed to :func:`torch.load`.
        hint: what the user can do; for ``what="checkpoint"`` the default says that deleting
            the checkpoint restarts the run.
    Raises:
        DamagedFileError: the file is missing, empty, truncated or not a torch file.
    """
    path = Path(path)
    hint = _require_nonempty(path, what, hint)
    try:
        # weights_only: tensors, containers and plain values only; a pickled object that
        # would run code when loaded (a hostile pack) is refused as a damaged file
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means a damaged file
        msg = " ".join(str(e).split())[:200]
        raise _damaged(path, what, f"is damaged or truncated ({type(e).__name__}: {msg})",
                       hint) from e


def check_torch_file(path: str | Path, what: str = "file", hint: str | None = None) -> Path:
    """Cheap check that ``path`` is a complete ``torch.save`` file without loading it: not
    empty, and a zip archive whose directory (written last, at the end) is readable, which a
    truncated file's is not.

    Raises:
        DamagedFileError: naming the file (for a checkpoint, saying that deleting it restarts
            the run).
    """
    import zipfile

    path = Path(path)
    hint = _require_nonempty(path, what, hint)
    try:
        with zipfile.ZipFile(path) as z:
            z.infolist()
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise _damaged(path, what, f"is damaged or truncated ({e})", hint) from None
    return path


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """SHA-256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def file_record(path: str | Path, rows: int | None = None) -> dict[str, Any]:
    """``{"sha256": ..., "bytes": ...[, "rows": rows]}`` of a written file (manifest entry)."""
    path = Path(path)
    rec: dict[str, Any] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    if rows is not None:
        rec["rows"] = int(rows)
    return rec


MANIFEST_HASH_KEY = "manifest_sha256"
"""The manifest's checksum of its own content (every other key), set by :func:`seal_manifest`."""


def manifest_checksum(manifest: dict) -> str:
    """SHA-256 of the manifest's content without :data:`MANIFEST_HASH_KEY` (canonical JSON:
    keys sorted, as written by :func:`save_json`)."""
    body = {k: v for k, v in manifest.items() if k != MANIFEST_HASH_KEY}
    text = json.dumps(json.loads(json.dumps(body, default=str)), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def seal_manifest(manifest: dict) -> dict:
    """Set the manifest's own checksum (in place; returns it). Call it last, before saving."""
    manifest[MANIFEST_HASH_KEY] = manifest_checksum(manifest)
    return manifest


def read_manifest(run_dir: str | Path, verify: bool = True) -> dict:
    """``run_dir/manifest.json`` as a dict, checked against its own checksum.

    A manifest records the SHA-256 of every file of the run (``files``) and of its own content
    (:data:`MANIFEST_HASH_KEY`); one without either cannot be verified and is not trusted.

    Args:
        verify: check ``files`` and the checksum (``False``: only parse it, e.g. to show it).
    Raises:
        FileNotFoundError: there is none (the run is unfinished or not a run).
        DamagedFileError: it is empty, not JSON, not a JSON object, has no file records or no
            checksum, or its content does not match its checksum (edited) (naming it).
    """
    path = Path(run_dir) / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"results folder {path.parent} has no manifest.json (incomplete or not a run "
            "directory)")
    manifest = parse_json(path.read_text(errors="replace"), path,
                          f"delete {path.parent} to retrain the run", DamagedFileError, "manifest")
    if not isinstance(manifest, dict):
        raise _damaged(path, "manifest", "does not hold a JSON object",
                       f"delete {path.parent} to retrain the run")
    if verify:
        hint = f"delete {path.parent} to retrain the run"
        if not isinstance(manifest.get("files"), dict) or not manifest["files"]:
            raise _damaged(path, "manifest", "records no file checksums ('files'): the run "
                           "cannot be verified and is not trusted", hint)
        if MANIFEST_HASH_KEY not in manifest:
            raise _damaged(path, "manifest", f"has no checksum of its own "
                           f"('{MANIFEST_HASH_KEY}'): it cannot be verified and is not "
                           "trusted", hint)
        if manifest_checksum(manifest) != manifest[MANIFEST_HASH_KEY]:
            raise _damaged(path, "manifest", "does not match its own checksum (edited or "
                           "damaged): none of the run's numbers is trusted", hint)
    return manifest


def verify_files(run_dir: str | Path, manifest: dict, skip: Sequence[str] = ()) -> list[str]:
    """Check every file the manifest lists (``files``) against its size and SHA-256.

    Manifests written before files were recorded have no ``files``: nothing is checked.

    Args:
        run_dir: the run directory.
        manifest: its manifest.
        skip: file names (as in the manifest) not to check, e.g. ``["artifacts.pt"]``.
    Returns:
        The names checked.
    Raises:
        DamagedFileError: naming the first file that is missing or differs (with its rows if
            the manifest records them).
    """
    run_dir = Path(run_dir)
    checked = []
    for name, rec in sorted((manifest.get("files") or {}).items()):
        if name in skip:
            continue
        path = run_dir / name
        hint = f"the run in {run_dir} is damaged; delete the folder to retrain it"
        if not path.is_file():
            raise _damaged(path, "run file", "is missing (listed in manifest.json)", hint)
        size = path.stat().st_size
        if ("bytes" in rec and size != rec["bytes"]) or sha256_file(path) != rec.get("sha256"):
            if _crlf_only(path, rec):
                raise _damaged(path, "run file", "has Windows line endings (CRLF) where it was "
                               "stored with LF; its numbers are intact (git's core.autocrlf "
                               "converted it on checkout)", f"keep {run_dir} and convert the "
                               f"file back to LF (dos2unix {path}), or clone again with this "
                               "repository's .gitattributes, which marks results/ -text")
            detail = f"does not match manifest.json ({size} bytes, manifest: {rec.get('bytes')}"
            if "rows" in rec and path.suffix == ".csv":
                detail += f"; {_count_rows(path)} rows, manifest: {rec['rows']}"
            raise _damaged(path, "run file", detail + "; truncated or edited?)", hint)
        checked.append(name)
    return checked


def _crlf_only(path: Path, rec: dict) -> bool:
    """Whether ``path`` matches its manifest record once CRLF line endings are made LF (the
    only change git's ``core.autocrlf`` makes to a text file on checkout)."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if b"\r\n" not in data:
        return False
    data = data.replace(b"\r\n", b"\n")
    return len(data) == rec.get("bytes", len(data)) and \
        hashlib.sha256(data).hexdigest() == rec.get("sha256")


def _count_rows(path: Path) -> int | str:
    try:
        return len(pd.read_csv(path))
    except Exception:  # noqa: BLE001 - only for the message
        return "unreadable"


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, dtype={"condition": str})
    except Exception as e:  # noqa: BLE001 - name the file
        raise _damaged(path, "table", f"cannot be read ({type(e).__name__}: {e})",
                       f"delete {path.parent} to retrain the run") from e




def read_json_object(path: str | Path, hint: str, error: type[Exception] = ValueError) -> dict:
    """The JSON object stored in ``path``.

    Raises:
        ``error``: naming ``path``, what is wrong (unreadable, not JSON, not an object) and
            ``hint`` (what to do).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path} cannot be read ({e}); {hint}") from None
    obj = parse_json(text, path, hint, error)
    if not isinstance(obj, dict):
        raise error(f"{path} does not hold a JSON object; {hint}")
    return obj



def parse_json(text: str, path: str | Path, hint: str, error: type[Exception] = ValueError,
               what: str = "") -> Any:
    """``json.loads(text)`` of the file ``path``, refusing with ``error`` what no file of the
    package holds: invalid JSON, nesting deep enough to exhaust the parser's recursion, an
    integer of more digits than Python converts (4300).

    Raises:
        ``error``: naming ``what`` the file is, ``path``, what is wrong and ``hint`` (what to
            do).
    """
    name = f"{what} {path}" if what else str(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{name} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); "
                    f"{hint}") from None
    except (ValueError, RecursionError) as e:  # 5000-digit integers, deep nesting
        kind = "nests JSON too deeply to read" if isinstance(e, RecursionError) else \
            f"holds a value no stored file holds ({' '.join(str(e).split())[:100]})"
        raise error(f"{name} {kind}: damaged, or not written by this package; {hint}") \
            from None
