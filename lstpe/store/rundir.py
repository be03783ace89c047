"""Run folders: check one before training into it, and lock it while training.

:func:`check_run_dir` refuses a folder that holds a finished run of another configuration
(naming the differing keys), a damaged finished run (naming the file), a folder that is not a
writable folder, and a non-empty folder that holds no run. :class:`RunLock` makes a second
process training into the same folder fail with a message naming the holder; a lock left by a
dead process is reported and taken over.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lstpe.store.storage import (
    EXECUTION_KEYS,
    LOCK_NAME,
    RUN_FILES,
    ConfigMismatchError,
    NotWritableError,
    RunDirError,
    RunLockedError,
    StaleLockWarning,
    _damaged,
    _show,
    check_torch_file,
    clean_temp_files,
    config_diff,
    dotted_get,
    read_manifest,
    utc_now,
    verify_files,
)

# --------------------------------------------------------------------------- run folders


def ensure_writable_dir(path: str | Path) -> Path:
    """Create ``path`` if needed and check that a file can be written in it.

    Raises:
        NotWritableError: ``path`` (or a parent) is a file, or the folder cannot be created or
            written (naming it and the reason).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise NotWritableError(f"output folder {path} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotWritableError(
            f"cannot create output folder {path}: a part of that path is a file") from None
    except OSError as e:
        raise NotWritableError(
            f"cannot create output folder {path}: {e.strerror or e}") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".lstpe-write-test.", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise NotWritableError(
            f"output folder {path} is not writable: {e.strerror or e}") from None
    return path


def check_run_dir(run_dir: str | Path, config: dict,
                  ignore: Sequence[str] = EXECUTION_KEYS) -> str:
    """What training ``config`` into ``run_dir`` would do; call it before any training.

    Returns:
        ``"finished"``: the folder holds a finished run of this config, and its files match
        its manifest (do not retrain; read it with :func:`load`); ``"resume"``: it holds
        checkpoints (of this config, if ``checkpoints/config.json`` says which); ``"new"``:
        it is empty or new (it is created).
    Args:
        run_dir: the run folder.
        config: the config to train (``TrainConfig.to_dict()``).
        ignore: config keys that may differ (:data:`EXECUTION_KEYS`: device, max_models, ...).
    Raises:
        NotWritableError: ``run_dir`` is not (and cannot be created as) a writable folder.
        DamagedFileError: a checkpoint is empty or truncated (:func:`check_torch_file`).
        ConfigMismatchError: it holds a finished run, or checkpoints, of another config (the
            message names the differing keys and values).
        DamagedFileError: it holds a finished run whose manifest or files are damaged.
        RunDirError: it is not empty but holds no run (so nothing is written into, say, a
            mistyped home folder).
    """
    run_dir = ensure_writable_dir(run_dir)
    if (run_dir / "manifest.json").exists():
        manifest = read_manifest(run_dir)
        old = manifest.get("config", {})
        diff = config_diff(old, config, ignore)
        if diff:
            raise ConfigMismatchError(
                f"{run_dir} already holds a finished run with a different configuration "
                f"(differs in: {_diff_text(old, config, diff)}); use another output folder or "
                "delete that one")
        verify_files(run_dir, manifest)
        if not (run_dir / "history.csv").is_file():
            raise _damaged(run_dir / "history.csv", "run file", "is missing",
                           f"delete {run_dir} to retrain the run")
        return "finished"
    ckpt_dir = run_dir / "checkpoints"
    if ckpt_dir.is_dir() and any(ckpt_dir.glob("*.pt")):
        if (ckpt_dir / "config.json").is_file():
            try:
                old = json.loads((ckpt_dir / "config.json").read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise _damaged(ckpt_dir / "config.json", "checkpoint config", "is not valid "
                               "JSON", f"delete {ckpt_dir} to restart the run") from None
            diff = config_diff(old, config, ("device", "compile", "checkpoint_every"))
            if diff:
                raise ConfigMismatchError(
                    f"{run_dir} holds checkpoints of a different configuration (differs in: "
                    f"{_diff_text(old, config, diff)}); use another output folder, or delete "
                    f"{ckpt_dir} to start this configuration there")
        for ckpt in sorted(ckpt_dir.glob("*.pt")):
            check_torch_file(ckpt, "checkpoint")
        return "resume"
    stored = [f for f in ("history.csv", "artifacts.pt", "tables") if (run_dir / f).exists()]
    if stored:
        raise _damaged(run_dir / "manifest.json", "run file", "is missing while "
                       f"{', '.join(stored)} are there (a finished run whose manifest was "
                       "deleted?): nothing is trained over them",
                       f"restore it, or delete {run_dir} to retrain")
    foreign = sorted(p.name for p in run_dir.iterdir()
                     if p.name not in RUN_FILES and not p.name.startswith("."))
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise RunDirError(f"output folder {run_dir} is not empty and holds no run (found: "
                          f"{shown}); use a new or empty folder")
    return "new"


def _diff_text(old: dict, new: dict, keys: Sequence[str]) -> str:
    a = json.loads(json.dumps(old, default=str))
    b = json.loads(json.dumps(new, default=str))
    return "; ".join(f"{k}: {_show(dotted_get(a, k))} there, {_show(dotted_get(b, k))} now"
                     for k in keys)


# --------------------------------------------------------------------------- locking


_HELD: dict[str, list] = {}
"""Locks this process holds: resolved folder -> [thread id, depth, token]."""
_HELD_LOCK = threading.Lock()


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` is running on this host (a zombie counts as dead)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class RunLock:
    """Exclusive use of a run folder by one process, as a context manager.

    ``with RunLock(run_dir): ...`` creates ``run_dir/.lock`` atomically (``O_CREAT|O_EXCL``)
    holding the pid, host, boot id, start time and command line, and deletes it on exit (also
    on exceptions and Ctrl-C). Another process that tries to lock the folder gets a
    :class:`RunLockedError` naming the folder, pid, host and start time. A lock left by a
    process that is no longer running on this host (killed, or from before a reboot) is
    *stale*: it is taken over with a :class:`StaleLockWarning` naming it. A lock from another
    host is never taken over (delete it by hand if that host's process is gone).

    The lock is re-entrant within one thread (``lstpe train`` locks the folder, then
    :func:`lstpe.training.train.train` locks it again); another thread of the same process is
    refused.
    After taking the lock, temporary files of interrupted writes are removed
    (:func:`clean_temp_files`).

    Raises (on enter):
        RunLockedError: a live process holds the lock.
        NotWritableError: the folder cannot be created or written.
    """

    def __init__(self, run_dir: str | Path, stale_after_s: float = 30.0) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self.stale_after_s = stale_after_s
        self.token = uuid.uuid4().hex
        self._key = ""

    # -- helpers
    def _info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "host": socket.gethostname(), "boot_id": _boot_id(),
                "started_at": utc_now(), "argv": " ".join(sys.argv)[:300], "token": self.token}

    def read(self) -> dict[str, Any] | None:
        """The lock file's content (None if there is none; ``{}`` if it is unreadable)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        except OSError:
            return {}
        try:
            info = json.loads(text)
            return info if isinstance(info, dict) else {}
        except (ValueError, RecursionError):  # not JSON, 5000-digit integers, deep nesting
            return {}

    def stale_reason(self, info: dict[str, Any]) -> str | None:
        """Why the lock whose content is ``info`` (:meth:`read`) is stale and may be taken
        over (its process is gone, the machine rebooted, an empty lock older than
        ``stale_after_s``), or None while it may still be held."""
        if not info:  # empty or garbled: a writer killed between create and write
            try:
                age = time.time() - self.path.stat().st_mtime
            except OSError:
                return None
            return "it is empty or unreadable" if age > self.stale_after_s else None
        if info.get("host") != socket.gethostname():
            return None
        boot = _boot_id()
        if boot and info.get("boot_id") and info["boot_id"] != boot:
            return "it was taken before this machine rebooted"
        pid = info.get("pid", -1)
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise RunLockedError(f"the lock file {self.path} holds pid {pid!r}, not a process "
                                 f"id (edited by hand?): if no process uses {self.run_dir}, "
                                 f"delete {self.path}")
        if pid == os.getpid():  # not held by us (checked before): an earlier process's pid
            return f"pid {pid} is this process, which did not take it"
        if not pid_alive(pid):
            return f"pid {pid} is no longer running"
        return None

    def describe_holder(self, info: dict[str, Any]) -> str:
        """Who holds the lock whose content is ``info``, in words (pid, host, since, command)."""
        if not info:
            return "an unknown process (the lock file is being written or is unreadable)"
        return (f"pid {info.get('pid')} on host {info.get('host')} since "
                f"{info.get('started_at')} ({info.get('argv') or 'unknown command'})")

    def _take_over(self, info: dict[str, Any], reason: str) -> None:
        """Move the stale lock aside; if it turned out to be another (fresh) lock, put it back."""
        aside = self.path.with_name(f"{LOCK_NAME}.stale-{self.token}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return  # someone else removed it: retry the create
        try:
            moved = json.loads(aside.read_text() or "{}")
        except (OSError, json.JSONDecodeError):
            moved = {}
        if moved != info:  # we moved a lock taken after our read: give it back
            try:
                os.link(aside, self.path)
            except OSError:
                pass
            aside.unlink(missing_ok=True)
            return
        aside.unlink(missing_ok=True)
        warnings.warn(f"taking over the stale lock {self.path} of {self.describe_holder(info)}: "
                      f"{reason}", StaleLockWarning, stacklevel=3)

    def _create(self, data: bytes) -> None:
        """Create the lock file with its content in one step: written and flushed under a
        temporary name, then hard-linked to the lock's name (fails if it exists). A full disk
        leaves no empty lock file behind."""
        fd, tmp = tempfile.mkstemp(prefix=f"{LOCK_NAME}.", suffix=".new", dir=self.run_dir)
        try:
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(tmp, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    # -- context manager
    def acquire(self) -> RunLock:
        """Take the lock (see the class docstring)."""
        ensure_writable_dir(self.run_dir)
        self._key = str(self.run_dir.resolve())
        me = threading.get_ident()
        with _HELD_LOCK:
            held = _HELD.get(self._key)
            if held is not None:
                if held[0] != me:
                    raise RunLockedError(f"run folder {self.run_dir} is locked by another "
                                         f"thread of this process (pid {os.getpid()})")
                held[1] += 1
                self.token = held[2]
                return self
        data = json.dumps(self._info(), sort_keys=True).encode()
        for _ in range(5):
            try:
                self._create(data)
            except FileExistsError:
                info = self.read()
                if info is None:
                    continue  # released meanwhile
                reason = self.stale_reason(info)
                if reason is None:
                    raise RunLockedError(
                        f"run folder {self.run_dir} is in use: locked by "
                        f"{self.describe_holder(info)}. Wait for that process to finish; if "
                        f"it is gone, delete {self.path}"
                    ) from None
                self._take_over(info, reason)
                continue
            except OSError as e:
                raise NotWritableError(
                    f"cannot create the lock file {self.path}: {e.strerror or e}; no lock "
                    "was left behind") from None
            with _HELD_LOCK:
                _HELD[self._key] = [me, 1, self.token]
            clean_temp_files(self.run_dir)
            return self
        raise RunLockedError(f"could not lock {self.run_dir}: its lock file {self.path} keeps "
                             "changing (another process is taking it)")

    def release(self) -> None:
        """Give the lock back (delete the lock file if it is still ours)."""
        with _HELD_LOCK:
            held = _HELD.get(self._key)
            if held is None:
                return
            held[1] -= 1
            if held[1] > 0:
                return
            del _HELD[self._key]
        info = self.read()
        if info and info.get("token") == self.token:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

