"""Runs on disk: a tidy history table, a manifest, and analysis artefacts, written atomically.

A run directory holds::

    history.csv       tidy table: one row per (model, epoch, split, condition)
    manifest.json     git commit, device, torch version, config, wall time, and the row count
                      and SHA-256 of every file of the run (checked when the run is loaded)
    artifacts.pt      tensors for the analyses (PEs at init/end, validation attention, logits)
    tables/<name>.csv extra tidy tables computed at the end of training (e.g. ``noise``)
    checkpoints/      training state while the run is unfinished
    .lock             while a process trains into the folder (:class:`RunLock`)

Every write goes to a temporary file in the same folder, is flushed to disk and renamed into
place, so an interrupted (even SIGKILLed) run never leaves a half-written result behind;
finished files get ordinary permissions (0666 minus the umask, usually 0644).

Safety rules every entry point (``lstpe train``, ``scripts/reproduce.py``,
:func:`lstpe.train.train`, the chapters) follows:

* a process trains into a folder only while it holds the folder's :class:`RunLock`;
* :func:`check_run_dir` runs before any training: it refuses a folder that holds a finished
  run of another configuration (naming the differing keys), a damaged finished run (naming the
  file), a folder that is not a writable folder, and a non-empty folder that holds no run;
* :func:`load` verifies every file against the manifest and names the one that fails;
* models whose loss or logits became non-finite (``diverged``) are left out of
  :func:`final_table` unless asked for.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

HISTORY_COLUMNS = [
    "model", "pe", "pe_name", "sigma", "seed", "optimizer", "epoch", "split", "condition",
    "accuracy", "loss", "diverged",
]
"""Columns of the tidy history table. ``condition`` is ``"all"``, ``"1"``, ``"2"`` or ``"3"``
(relational complexity); ``sigma`` is NaN for PEs without one; ``diverged`` is True from the
first evaluation at which the model's loss or logits were non-finite (older runs may lack the
column, or hold it empty: :func:`diverged_models` then reads a non-finite loss as divergence)."""

RUN_FILES = ("history.csv", "manifest.json", "artifacts.pt", "tables", "checkpoints")
"""What a run directory may hold (besides hidden files such as ``.lock``)."""

EXECUTION_KEYS: tuple[str, ...] = ("device", "max_models", "checkpoint_every", "compile",
                                   "step_mode")
"""Config keys that change how a run is executed, not what it computes: a finished run is
the same run whatever their values (:func:`check_run_dir`)."""

LOCK_NAME = ".lock"


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


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)``, flush it to disk, then rename ``tmp_path`` onto ``path``.

    The temporary file lies in the same folder (``.<name>.<random>.tmp``), so the rename is
    atomic: ``path`` holds either its old content or the complete new one, even if the process
    is killed. The final file gets ordinary permissions (0666 minus the umask, e.g. 0644).
    A process killed mid-write leaves its temporary file, which :class:`RunLock` removes.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def save_torch(obj: Any, path: str | Path) -> Path:
    """``torch.save`` atomically."""
    return atomic_write(path, lambda p: torch.save(obj, p))


def save_json(obj: Any, path: str | Path) -> Path:
    """Write JSON atomically (indented, keys sorted)."""
    return atomic_write(
        path, lambda p: p.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
    )


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
    if hint is None:
        hint = (f"delete {path} to restart the run (it cannot be resumed from this checkpoint)"
                if what == "checkpoint" else "")
    if not path.is_file():
        raise _damaged(path, what, "does not exist", hint)
    if path.stat().st_size == 0:
        raise _damaged(path, what, "is empty (0 bytes; a write was cut off)", hint)
    try:
        return torch.load(path, map_location=map_location, weights_only=False)
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
    if hint is None:
        hint = (f"delete {path} to restart the run (it cannot be resumed from this checkpoint)"
                if what == "checkpoint" else "")
    if not path.is_file():
        raise _damaged(path, what, "does not exist", hint)
    if path.stat().st_size == 0:
        raise _damaged(path, what, "is empty (0 bytes; a write was cut off)", hint)
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


def read_manifest(run_dir: str | Path) -> dict:
    """``run_dir/manifest.json`` as a dict.

    Raises:
        FileNotFoundError: there is none (the run is unfinished or not a run).
        DamagedFileError: it is empty, not JSON, or not a JSON object (naming it).
    """
    path = Path(run_dir) / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"results folder {path.parent} has no manifest.json (incomplete or not a run "
            "directory)")
    text = path.read_text(errors="replace")
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as e:
        raise _damaged(path, "manifest", f"is not valid JSON ({e.msg} at line {e.lineno})",
                       f"delete {path.parent} to retrain the run") from None
    if not isinstance(manifest, dict):
        raise _damaged(path, "manifest", "does not hold a JSON object",
                       f"delete {path.parent} to retrain the run")
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
            detail = f"does not match manifest.json ({size} bytes, manifest: {rec.get('bytes')}"
            if "rows" in rec and path.suffix == ".csv":
                detail += f"; {_count_rows(path)} rows, manifest: {rec['rows']}"
            raise _damaged(path, "run file", detail + "; truncated or edited?)", hint)
        checked.append(name)
    return checked


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


# --------------------------------------------------------------------------- provenance


def git_commit() -> str:
    """The current git commit of the package's repository (``"unknown"`` outside git)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
            cwd=Path(__file__).resolve().parent,
        )
        commit = out.stdout.strip()
        if out.returncode != 0 or not commit:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
            text=True, timeout=10, cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: torch.device | str) -> str:
    """Human-readable device: ``"cuda: NVIDIA H100 80GB HBM3"``, ``"cpu: x86_64 (2 threads)"``."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return f"{device.type}: {platform.machine()} ({torch.get_num_threads()} threads)"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def make_manifest(config: dict, device: torch.device | str, wall_time_s: float,
                  previous_segments: Sequence[dict] | None = None,
                  resumed: bool | None = None, **extra: Any) -> dict:
    """The manifest of a run: provenance of every number it produced.

    Args:
        config: the run's configuration (``TrainConfig.to_dict()``).
        device: the device it trained on.
        wall_time_s: wall time of *this* process (segment).
        previous_segments: the segments of earlier processes that trained the run before it
            was resumed (``{"wall_s": ..., ...}`` each, see :class:`WallClock`).
        resumed: the run was resumed from a checkpoint (default: there are previous segments).
        **extra: more fields (``n_models``, ``kind``, ...).
    Returns:
        A dict with ``wall_time_s`` = the total over all segments, ``segments`` (one entry per
        process: ``wall_s``, ``finished_at`` or ``checkpointed_at``, ``device``, ``git_commit``,
        ``host``), ``resumed``, and the git commit, device, torch and python versions, platform,
        config and finish time. :func:`save_run` adds ``files``.
    """
    commit, dev = git_commit(), device_name(device)
    previous = [dict(seg) for seg in (previous_segments or [])]
    finished = _now()
    this = {"wall_s": round(float(wall_time_s), 3), "finished_at": finished, "device": dev,
            "git_commit": commit, "host": socket.gethostname()}
    segments = [*previous, this]
    total = sum(float(seg.get("wall_s", 0.0)) for seg in segments)
    return {
        "git_commit": commit,
        "device": dev,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "config": config,
        "wall_time_s": round(total, 3),
        "segments": segments,
        "resumed": bool(previous) if resumed is None else bool(resumed),
        "finished_at": finished,
        **extra,
    }


class WallClock:
    """Wall time of a run over the processes (segments) that trained it.

    A run killed and resumed is trained by several processes; each checkpoint stores
    :meth:`segments` (the earlier segments plus this process's time so far) and the resuming
    process reads them back with :meth:`resume_from`, so the manifest's ``wall_time_s`` is the
    total over all segments (the time a killed process spent after its last checkpoint is
    lost with the work it did). Use::

        clock = WallClock()                       # at the start of training
        clock.resume_from(state.get("segments"))  # for every checkpoint loaded
        save_torch({..., "segments": clock.segments()}, ckpt)
        make_manifest(cfg, device, **clock.manifest_kwargs(), n_models=...)
    """

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.previous: list[dict] = []
        self.resumed = False

    def elapsed(self) -> float:
        """Seconds since this process started the run."""
        return time.perf_counter() - self.t0

    def resume_from(self, segments: Sequence[dict] | None) -> None:
        """Record that a checkpoint was loaded; keep its segments if they cover more time than
        those already known (checkpoints of one run hold prefixes of the same history; the
        latest covers the most). ``None`` (a checkpoint without segments) only marks the run
        as resumed."""
        self.resumed = True
        segs = [dict(s) for s in (segments or [])]
        if _total(segs) > _total(self.previous):
            self.previous = segs

    def segments(self) -> list[dict]:
        """The earlier segments and this process's so far (store it in every checkpoint)."""
        return [*self.previous, {"wall_s": round(self.elapsed(), 3),
                                 "checkpointed_at": _now(), "host": socket.gethostname()}]

    def manifest_kwargs(self) -> dict[str, Any]:
        """``wall_time_s``, ``previous_segments`` and ``resumed`` for :func:`make_manifest`."""
        return {"wall_time_s": self.elapsed(), "previous_segments": self.previous,
                "resumed": self.resumed}


def _total(segments: Iterable[dict]) -> float:
    return sum(float(s.get("wall_s", 0.0)) for s in segments)


# --------------------------------------------------------------------------- divergence


def nonfinite_models(*tensors: torch.Tensor | None) -> torch.Tensor:
    """Which of M stacked models has a non-finite value in any of ``tensors``.

    Each tensor has the models on its first axis: logits ``(M, N, 4)``, per-model losses
    ``(M,)``, ...; None entries are skipped. Returns a bool tensor ``(M,)`` (on the CPU).
    A training loop keeps a sticky flag per model: ``diverged |= nonfinite_models(logits,
    loss)`` at every evaluation, and writes it into the ``diverged`` column.
    """
    flags: torch.Tensor | None = None
    for t in tensors:
        if t is None:
            continue
        bad = ~torch.isfinite(t.detach().reshape(t.shape[0], -1)).all(1)
        flags = bad if flags is None else flags | bad.to(flags.device)
    if flags is None:
        raise ValueError("nonfinite_models needs at least one tensor")
    return flags.cpu()


def _diverged_rows(history: pd.DataFrame) -> pd.Series:
    """Rows at which the model had diverged: the ``diverged`` column (if any) or a
    non-finite loss."""
    flag = pd.Series(False, index=history.index)
    if "diverged" in history.columns:
        col = history["diverged"]
        if col.dtype == bool:
            flag |= col
        else:
            flag |= col.astype("string").str.strip().str.lower().isin(["true", "1", "1.0"])
    if "loss" in history.columns:
        loss = pd.to_numeric(history["loss"], errors="coerce").to_numpy(dtype=float)
        flag |= ~np.isfinite(loss)
    return flag


def diverged_models(history: pd.DataFrame) -> pd.DataFrame:
    """The models of ``history`` that diverged, one row each: ``model, pe, seed, epoch`` (the
    first evaluation at which the loss or logits were non-finite). Empty if none did."""
    cols = [c for c in ("model", "pe", "seed") if c in history.columns]
    bad = history[_diverged_rows(history)]
    if bad.empty:
        return pd.DataFrame(columns=[*cols, "epoch"])
    step = "epoch" if "epoch" in bad.columns else "step"
    first = bad.sort_values(step).groupby("model", sort=True).head(1)
    return first[[*cols, step]].rename(columns={step: "epoch"}).sort_values("model") \
        .reset_index(drop=True)


def describe_diverged(diverged: pd.DataFrame) -> str:
    """``"model 3 (learn-0.2, seed 29, from epoch 1), ..."`` for messages."""
    parts = []
    for r in diverged.itertuples(index=False):
        what = ", ".join(str(x) for x in (getattr(r, "pe", None),
                                           f"seed {getattr(r, 'seed', '?')}") if x is not None)
        parts.append(f"model {r.model} ({what}, from epoch {r.epoch})")
    return ", ".join(parts)


def final_table(history: pd.DataFrame, split: str = "val", condition: str = "all",
                include_diverged: bool = False) -> pd.DataFrame:
    """Rows of ``history`` at each model's last epoch for one split and condition.

    Models that diverged (:func:`diverged_models`: non-finite loss or logits at any
    evaluation) are left out with a :class:`DivergedWarning` naming them, unless
    ``include_diverged``. The table has a bool ``diverged`` column.

    Raises:
        ValueError: an empty history, no rows for ``split``/``condition``, or every model
            diverged (and ``include_diverged`` is False).
    """
    if history.empty:
        raise ValueError("the history table is empty")
    h = history[(history["split"] == split) & (history["condition"].astype(str) == condition)]
    if h.empty:
        raise ValueError(f"no rows for split={split!r}, condition={condition!r}")
    last = h.groupby("model")["epoch"].transform("max")
    fin = h[h["epoch"] == last].reset_index(drop=True)
    div = diverged_models(history)
    fin["diverged"] = fin["model"].isin(div["model"])
    if include_diverged or div.empty:
        return fin
    if fin["diverged"].all():
        raise ValueError(f"every model diverged (non-finite loss or logits): "
                         f"{describe_diverged(div)}; pass include_diverged=True to see them")
    warnings.warn(f"{len(div)} diverged model(s) left out (non-finite loss or logits): "
                  f"{describe_diverged(div)}; pass include_diverged=True to keep them",
                  DivergedWarning, stacklevel=2)
    return fin[~fin["diverged"]].reset_index(drop=True)


# --------------------------------------------------------------------------- runs


@dataclass
class Run:
    """A finished run read back from disk."""

    path: Path
    history: pd.DataFrame
    manifest: dict
    artifacts: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def final(self, split: str = "val", condition: str = "all",
              include_diverged: bool = False) -> pd.DataFrame:
        """One row per model at its last evaluated epoch, for ``split`` and ``condition``
        (diverged models left out unless ``include_diverged``, see :func:`final_table`)."""
        return final_table(self.history, split, condition, include_diverged)

    def diverged(self) -> pd.DataFrame:
        """The models that diverged (:func:`diverged_models`)."""
        return diverged_models(self.history)

    def describe(self) -> str:
        """One line for chapters: device, date, epochs (or steps), seeds, commit."""
        cfg = self.manifest.get("config", {})
        length = f"epochs {cfg['epochs']}" if "epochs" in cfg else f"steps {cfg.get('steps')}"
        resumed = ", resumed" if self.manifest.get("resumed") else ""
        return (
            f"{self.path.name}: device {self.manifest.get('device')}, "
            f"finished {self.manifest.get('finished_at')}, {length}, "
            f"seeds {len(cfg.get('seeds', []))}, torch {self.manifest.get('torch_version')}, "
            f"commit {str(self.manifest.get('git_commit'))[:10]}, "
            f"wall time {self.manifest.get('wall_time_s')} s{resumed}"
        )


def save_run(path: str | Path, history: pd.DataFrame, manifest: dict,
             artifacts: dict[str, Any] | None = None,
             tables: dict[str, pd.DataFrame] | None = None) -> Path:
    """Write a run directory (manifest last: a manifest marks a complete run).

    ``manifest["files"]`` is set (in place) to the SHA-256, size and row count of every file
    written, which :func:`load` checks.
    """
    path = Path(path)
    files: dict[str, dict[str, Any]] = {}
    save_table(history, path / "history.csv")
    files["history.csv"] = file_record(path / "history.csv", len(history))
    if artifacts is not None:
        save_torch(artifacts, path / "artifacts.pt")
        files["artifacts.pt"] = file_record(path / "artifacts.pt")
    for name, table in (tables or {}).items():
        rel = f"tables/{name}.csv"
        save_table(table, path / rel)
        files[rel] = file_record(path / rel, len(table))
    manifest["files"] = files
    save_json(manifest, path / "manifest.json")
    return path


def load(path: str | Path, artifacts: bool = True, verify: bool = True) -> Run:
    """Read a run directory written by :func:`save_run`.

    Args:
        path: the run directory.
        artifacts: read ``artifacts.pt`` (and check it).
        verify: check every file against the sizes and SHA-256 sums in the manifest.
    Raises:
        FileNotFoundError: naming the missing folder or file (a run without a manifest is
            incomplete and is not read).
        DamagedFileError: naming the file that is damaged (invalid manifest, a file that
            differs from the manifest, an unreadable table or artefact file).
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"no results folder at {path}")
    for name in ("manifest.json", "history.csv"):
        if not (path / name).exists():
            raise FileNotFoundError(
                f"results folder {path} has no {name} (incomplete or not a run directory)"
            )
    manifest = read_manifest(path)
    if verify:
        verify_files(path, manifest, skip=() if artifacts else ("artifacts.pt",))
    history = _read_csv(path / "history.csv")
    if verify and not manifest.get("files"):  # an older run: check what can be checked
        _check_history_covers_config(path, manifest, history)
    arts: dict[str, Any] = {}
    if artifacts and (path / "artifacts.pt").exists():
        arts = load_torch(path / "artifacts.pt", "artifacts",
                          hint=f"delete {path} to retrain the run")
    tables = {p.stem: _read_csv(p) for p in sorted((path / "tables").glob("*.csv"))}
    return Run(path, history, manifest, arts, tables)


def find(name: str, results_dir: str | Path | None = None) -> Run | None:
    """Load ``<results_dir>/<name>`` if it is a complete run, else None (chapters fall back).

    Raises:
        DamagedFileError: the run is there but damaged (naming the file).
    """
    from lstpe.runtime import default_results_dir

    base = Path(results_dir) if results_dir else default_results_dir()
    p = base / name
    if (p / "manifest.json").exists() and (p / "history.csv").exists():
        return load(p)
    return None


def _check_history_covers_config(run_dir: Path, manifest: dict, history: pd.DataFrame) -> None:
    """For manifests without ``files`` (older runs): every PE and seed of the config must
    have rows in the history (a truncated history.csv loses the last models)."""
    cfg = manifest.get("config") or {}
    hint = f"delete {run_dir} to retrain the run"
    for key, col in (("pes", "pe"), ("seeds", "seed")):
        if not isinstance(cfg.get(key), list) or col not in history.columns:
            continue
        have = {str(v) for v in history[col].unique()}
        missing = [v for v in cfg[key] if str(v) not in have]
        if missing:
            raise _damaged(run_dir / "history.csv", "run file",
                           f"has no rows for {col} {', '.join(map(str, missing))} of the "
                           "manifest's config (truncated?)", hint)


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
        if not manifest.get("files"):  # an older run: check what can be checked
            history = _read_csv(run_dir / "history.csv")
            _check_history_covers_config(run_dir, manifest, history)
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
    foreign = sorted(p.name for p in run_dir.iterdir()
                     if p.name not in RUN_FILES and not p.name.startswith("."))
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise RunDirError(f"output folder {run_dir} is not empty and holds no run (found: "
                          f"{shown}); use a new or empty folder")
    return "new"


def _diff_text(old: dict, new: dict, keys: Sequence[str]) -> str:
    def get(d: Any, key: str) -> Any:
        for part in key.split("."):
            d = d.get(part) if isinstance(d, dict) else None
        return d

    a = json.loads(json.dumps(old, default=str))
    b = json.loads(json.dumps(new, default=str))
    return "; ".join(f"{k}: {_show(get(a, k))} there, {_show(get(b, k))} now" for k in keys)


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
    :func:`lstpe.train.train` locks it again); another thread of the same process is refused.
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
                "started_at": _now(), "argv": " ".join(sys.argv)[:300], "token": self.token}

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
        except json.JSONDecodeError:
            return {}

    def _stale_reason(self, info: dict[str, Any]) -> str | None:
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
        pid = int(info.get("pid", -1))
        if pid == os.getpid():  # not held by us (checked before): an earlier process's pid
            return f"pid {pid} is this process, which did not take it"
        if not pid_alive(pid):
            return f"pid {pid} is no longer running"
        return None

    def _describe(self, info: dict[str, Any]) -> str:
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
        warnings.warn(f"taking over the stale lock {self.path} of {self._describe(info)}: "
                      f"{reason}", StaleLockWarning, stacklevel=3)

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
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                info = self.read()
                if info is None:
                    continue  # released meanwhile
                reason = self._stale_reason(info)
                if reason is None:
                    raise RunLockedError(
                        f"run folder {self.run_dir} is in use: locked by {self._describe(info)}"
                        f". Wait for that process to finish; if it is gone, delete {self.path}"
                    ) from None
                self._take_over(info, reason)
                continue
            except OSError as e:
                raise NotWritableError(
                    f"cannot create the lock file {self.path}: {e.strerror or e}") from None
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
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
