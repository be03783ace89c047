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

Safety rules every entry point (``lstpe train``, ``lstpe reproduce``,
:func:`lstpe.training.train.train`, the chapters) follows:

* a process trains into a folder only while it holds the folder's :class:`RunLock`;
* :func:`check_run_dir` runs before any training: it refuses a folder that holds a finished
  run of another configuration (naming the differing keys), a damaged finished run (naming the
  file), a folder that is not a writable folder, and a non-empty folder that holds no run;
* :func:`load` verifies every file against the manifest and names the one that fails;
* models whose loss or logits became non-finite (``diverged``) are left out of
  :func:`final_table` unless asked for.
"""

from __future__ import annotations

import platform
import socket
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from lstpe.store.history import (  # noqa: F401  (re-exported: the history table)
    HISTORY_COLUMNS,
    describe_diverged,
    diverged_models,
    final_table,
    history_problems,
    nonfinite_models,
)
from lstpe.store.storage import (  # noqa: F401  (re-exported: the file layer)  # noqa: F401
    EXECUTION_KEYS,
    LOCK_NAME,
    MANIFEST_HASH_KEY,
    RUN_FILES,
    ConfigMismatchError,
    DamagedFileError,
    DivergedWarning,
    NotWritableError,
    RunDirError,
    RunLockedError,
    StaleLockWarning,
    WriteError,
    _count_rows,
    _damaged,
    _read_csv,
    atomic_write,
    check_torch_file,
    clean_temp_files,
    config_diff,
    file_record,
    load_torch,
    manifest_checksum,
    read_manifest,
    save_json,
    save_table,
    save_torch,
    seal_manifest,
    sha256_file,
    utc_now,
    verify_files,
)

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


def process_record(device: torch.device | str) -> dict[str, str]:
    """Who trains a segment of a run: ``device``, ``git_commit`` and ``host`` of this process.
    Checkpoints store it beside their ``wall_s``, so a run resumed under other code names every
    commit that trained it (the manifest's ``segments``), not only the last."""
    return {"device": device_name(device), "git_commit": git_commit(),
            "host": socket.gethostname()}


def checkpoint_record(process: dict[str, str]) -> dict[str, str]:
    """:func:`process_record` stamped with the time a checkpoint is written."""
    return {**process, "checkpointed_at": utc_now()}


def earlier_segments(segments: Iterable[dict]) -> list[dict] | None:
    """``previous_segments`` for :func:`make_manifest` from what the chunks of a run returned
    (:func:`lstpe.training.engine.run_chunk`): every earlier process's record, ``wall_s``
    rounded to ms; ``None`` if no chunk was resumed."""
    segs = [{**seg, "wall_s": round(float(seg.get("wall_s", 0.0)), 3)} for seg in segments]
    return segs or None


def run_commits(manifest: dict) -> list[str]:
    """The git commits that trained a run, oldest first, each once: a long segment's
    ``long.processes`` (every process that trained epochs of it), else its segments' (a run
    paused and resumed under newer code has several; ``"?"`` for a segment whose checkpoint
    was written before segments recorded their commit), else its ``git_commit``."""
    long = manifest.get("long")
    procs = long.get("processes") if isinstance(long, dict) else None
    recs = procs if isinstance(procs, list) and procs else manifest.get("segments") or []
    seen = [str(seg.get("git_commit") or "?") for seg in recs if isinstance(seg, dict)]
    return list(dict.fromkeys(seen)) or [str(manifest.get("git_commit"))]


def make_manifest(config: dict, device: torch.device | str, wall_time_s: float,
                  previous_segments: Sequence[dict] | None = None,
                  resumed: bool | None = None, **extra: Any) -> dict:
    """The manifest of a run: provenance of every number it produced.

    Args:
        config: the run's configuration (``TrainConfig.to_dict()``).
        device: the device it trained on.
        wall_time_s: wall time of *this* process (segment).
        previous_segments: the segments of earlier processes that trained the run before it
            was resumed (``{"wall_s": ..., ...}`` each, see :func:`earlier_segments`).
        resumed: the run was resumed from a checkpoint (default: there are previous segments).
        **extra: more fields (``n_models``, ``kind``, ...).
    Returns:
        A dict with ``wall_time_s`` = the total over all segments, ``segments`` (one entry per
        process: ``wall_s``, ``finished_at`` or ``checkpointed_at``, ``device``, ``git_commit``,
        ``host``), ``resumed``, and the git commit, device, torch and python versions, platform,
        config and finish time. :func:`save_run` adds ``files``.
    """
    proc = process_record(device)
    commit, dev = proc["git_commit"], proc["device"]
    previous = [dict(seg) for seg in (previous_segments or [])]
    finished = utc_now()
    this = {"wall_s": round(float(wall_time_s), 3), "finished_at": finished, **proc}
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


# --------------------------------------------------------------------------- runs


RUN_SOURCES = ("stored", "cached", "live")
"""Where a :class:`Run`'s numbers come from: a run stored under ``results/<scale>/``, a run of
the same configuration and code reused from the cache, or one trained in this process."""


@dataclass
class Run:
    """A training run: the one result type of the package.

    :func:`lstpe.training.train.train`, :func:`lstpe.brain.train.train_brain`, :func:`load` and
    :func:`lstpe.experiments.runs.get_run` all return it.

    Attributes:
        history: tidy table (:data:`HISTORY_COLUMNS`; the brain's has ``step`` and
            ``mask_ratio``), one row per (model, evaluation, split, condition).
        manifest: provenance (git commit, device, torch version, ``config`` as a dict, wall
            time, file checksums once saved).
        artifacts: tensors for the analyses (PEs at init and end, validation attention, ...).
        tables: extra tidy tables (``noise``: accuracy under embedding noise).
        path: the run folder (None for a run that was not saved).
        name: the run's name (``table1``, ``brain``, ...; default: the folder's name).
        source: one of :data:`RUN_SOURCES`.
        models: the trained batched models (runs trained in this process only).
        cfg: the configuration object it was trained with (runs trained in this process;
            a stored run has only :attr:`config`, its dict).
        data: the brain run's data (:class:`lstpe.brain.data.BrainData`), when trained here.
    """

    history: pd.DataFrame
    manifest: dict
    artifacts: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    path: Path | None = None
    name: str = ""
    source: str = "live"
    models: list = field(default_factory=list)
    cfg: Any = None
    data: Any = None

    def __post_init__(self) -> None:
        if self.source not in RUN_SOURCES:
            raise ValueError(f"unknown run source {self.source!r}; valid: "
                             f"{', '.join(RUN_SOURCES)}")
        if self.path is not None:
            self.path = Path(self.path)
        if not self.name and self.path is not None:
            self.name = self.path.name

    @property
    def config(self) -> dict:
        """The configuration the run was trained with, as stored in its manifest."""
        return self.manifest.get("config", {})

    @property
    def scale(self) -> str:
        """The preset the run was made from (``paper``, ``cpu``, ``preview`` or ``custom``)."""
        return str(self.config.get("preset", "custom"))

    def final(self, split: str = "val", condition: str = "all",
              include_diverged: bool = False) -> pd.DataFrame:
        """One row per model at its last evaluated epoch, for ``split`` and ``condition``
        (diverged models left out unless ``include_diverged``, see :func:`final_table`)."""
        return final_table(self.history, split, condition, include_diverged)

    def diverged(self) -> pd.DataFrame:
        """The models that diverged (:func:`diverged_models`)."""
        return diverged_models(self.history)

    def describe(self) -> str:
        """One line saying where the numbers come from (shown under every table), with a
        warning when models diverged."""
        cfg = self.config
        if self.manifest.get("kind") == "campaign-merge":
            per = self.manifest.get("seeds_per_pe", {})
            seeds = ", ".join(f"{pe} {len(s)}" for pe, s in per.items())
            line = (f"[{self.name}: {len(self.manifest.get('fragments', []))} trained models "
                    f"(the paper's recipe, {cfg.get('epochs')} epochs, "
                    f"{self._precisions()}); seeds per PE: {seeds}; device "
                    f"{self.manifest.get('device')}, torch {self.manifest.get('torch_version')},"
                    f" commit {self.manifest.get('git_commit')}, "
                    f"{self.manifest.get('wall_time_s', 0) / 3600:.1f} hours of training in all]")
            missing = self.manifest.get("missing")
            if missing:
                line += f"\nWARNING: asked for, not stored, left out: {', '.join(missing)}"
            return line + self._diverged_line()
        what = {"stored": "stored run", "live": "trained in this process",
                "cached": "run reused from the cache"}[self.source]
        length = f"{cfg['epochs']} epochs" if "epochs" in cfg else f"{cfg.get('steps')} steps"
        amp = ", bf16 autocast" if cfg.get("amp") else ""
        resumed = ", resumed" if self.manifest.get("resumed") else ""
        n = len(cfg.get("seeds", []))
        line = (f"[{self.name}: {what}, {self.scale} scale; device "
                f"{self.manifest.get('device')}{amp}, {length}, "
                f"{n} seed{'s' if n != 1 else ''}, torch {self.manifest.get('torch_version')}, "
                f"commit {str(self.manifest.get('git_commit'))[:12]}, "
                f"finished {self.manifest.get('finished_at')}, "
                f"wall time {self.manifest.get('wall_time_s')} s{resumed}]")
        return line + self._diverged_line()

    def _precisions(self) -> str:
        """A merged run's precision of every fragment: ``"fp32 (12), bf16 (1)"``, most first
        (the config's ``amp`` where the manifest does not count them)."""
        count = self.manifest.get("precisions")
        if not isinstance(count, dict) or not count:
            return "bf16" if self.config.get("amp") else "fp32"
        if len(count) == 1:
            return str(next(iter(count)))
        return ", ".join(f"{p} ({n})" for p, n in sorted(count.items(), key=lambda x: -x[1]))

    def _diverged_line(self) -> str:
        div = self.diverged()
        if div.empty:
            return ""
        return (f"\nWARNING: {len(div)} model(s) diverged (non-finite loss or logits) and are "
                f"left out of the summaries: {describe_diverged(div)}")


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
    save_json(seal_manifest(manifest), path / "manifest.json")
    return path


def seal(path: str | Path) -> dict:
    """Give an existing run's manifest its own checksum, after checking every file it lists
    (for runs saved before manifests carried one); returns the manifest.

    Raises:
        DamagedFileError: the manifest lists no files, or a file does not match it.
    """
    path = Path(path)
    manifest = read_manifest(path, verify=False)
    if not manifest.get("files"):
        raise _damaged(path / "manifest.json", "manifest", "records no file checksums: it "
                       "cannot be sealed", f"delete {path} to retrain the run")
    verify_files(path, manifest)
    save_json(seal_manifest(manifest), path / "manifest.json")
    return manifest


def update_manifest(path: str | Path, **updates: Any) -> dict:
    """Add or replace top-level manifest entries of a saved run (its files verified first) and
    seal it again; returns the new manifest."""
    path = Path(path)
    manifest = read_manifest(path)
    verify_files(path, manifest)
    manifest.update(updates)
    save_json(seal_manifest(manifest), path / "manifest.json")
    return manifest


def load(path: str | Path, artifacts: bool = True, verify: bool = True,
         sealed: bool = True) -> Run:
    """Read a run directory written by :func:`save_run`.

    Args:
        path: the run directory.
        artifacts: read ``artifacts.pt`` (and check it).
        verify: check every file against the sizes and SHA-256 sums in the manifest, and the
            manifest against its own checksum.
        sealed: with ``False``, a manifest without its own checksum (a run saved by an older
            version of this code) is accepted; its file records are still required and checked.
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
    manifest = read_manifest(path, verify=verify and sealed)
    if verify and not manifest.get("files"):
        raise _damaged(path / "manifest.json", "manifest", "records no file checksums: the "
                       "run cannot be verified", f"delete {path} to retrain the run")
    if verify:
        verify_files(path, manifest, skip=() if artifacts else ("artifacts.pt",))
    history = _read_csv(path / "history.csv")
    if verify and "history.csv" not in manifest["files"]:
        raise _damaged(path / "manifest.json", "manifest", "records no checksum of "
                       "history.csv: the run cannot be verified", f"delete {path} to retrain")
    arts: dict[str, Any] = {}
    if artifacts and (path / "artifacts.pt").exists():
        arts = load_torch(path / "artifacts.pt", "artifacts",
                          hint=f"delete {path} to retrain the run")
    listed = manifest.get("files") or {}
    tables = {p.stem: _read_csv(p) for p in sorted((path / "tables").glob("*.csv"))
              if not verify or f"tables/{p.name}" in listed}  # only what the manifest vouches for
    return Run(history, manifest, arts, tables, path=path, source="stored")


def results_source(results_dir: str | Path | None = None) -> tuple[Path, str]:
    """The results folder a caller means, and where it came from: ``results_dir`` itself
    (``"results_dir"``) when given, else :func:`lstpe.runtime.find_results`'s folder and its
    source (``$LSTPE_RESULTS``, the repository's ``results/``, ...). None and ``""`` both mean
    "not given". The one place the package turns an optional ``results_dir`` into a folder
    (:func:`results_root`); it does not check that the folder exists."""
    if results_dir is None or str(results_dir) == "":
        from lstpe.runtime import find_results

        return find_results()
    return Path(results_dir), "results_dir"


def results_root(results_dir: str | Path | None = None) -> Path:
    """The results folder of :func:`results_source`: ``Path(results_dir)`` when given, else
    the default (:func:`lstpe.runtime.default_results_dir`). Every function of the package
    that takes an optional ``results_dir`` resolves it here."""
    return results_source(results_dir)[0]


def find(name: str, results_dir: str | Path | None = None) -> Run | None:
    """Load ``<results_dir>/<name>`` if it is a complete run, else None (chapters fall back).

    Raises:
        DamagedFileError: the run is there but damaged (naming the file).
    """
    p = results_root(results_dir) / name
    if (p / "manifest.json").exists():
        return load(p)
    if any((p / f).exists() for f in ("history.csv", "artifacts.pt", "tables")):
        raise _damaged(p / "manifest.json", "run file", "is missing while the run's other "
                       "files are there (deleted?): the run cannot be verified and is not "
                       "used", f"restore it, or delete {p} to retrain the run")
    return None



_RUNDIR_NAMES = ("RunLock", "check_run_dir", "ensure_writable_dir", "pid_alive")


def __getattr__(name: str) -> Any:
    """``lstpe.store.results.RunLock`` etc. live in :mod:`lstpe.store.rundir` (imported on first
    use: it
    imports this module)."""
    if name in _RUNDIR_NAMES:
        from lstpe.store import rundir

        return getattr(rundir, name)
    raise AttributeError(f"module 'lstpe.store.results' has no attribute {name!r}")
