"""Helpers shared by the book's chapters: device choice, plot style, scales and result lookup.

Every chapter starts with the same two cells: an install cell (Colab) and a papermill
``parameters`` cell (``scale``, ``seeds``, ``sigmas``, ``epochs``, ``device``, ``results_dir``),
then calls :func:`setup`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    import pandas as pd

from lstpe.runtime import default_results_dir, pick_device, repo_root

__all__ = ["SCALES", "Experiment", "Setup", "default_results_dir", "experiment", "pick_device",
           "repo_root", "save_tables", "setup", "stored_experiment"]

SCALES = ("preview", "paper")


@dataclass
class Setup:
    """What a chapter needs after its parameters cell."""

    scale: str
    device: torch.device
    results_dir: Path

    def __str__(self) -> str:
        return (f"scale={self.scale}  device={self.device}  torch={torch.__version__}  "
                f"python={platform.python_version()}  results={self.results_label}")

    @property
    def results_label(self) -> str:
        """The results folder as a reader should see it: relative to the repository (no
        machine-specific absolute path on a rendered page)."""
        root = repo_root()
        try:
            if root is not None:
                return self.results_dir.resolve().relative_to(root).as_posix()
        except ValueError:
            pass
        return self.results_dir.name or str(self.results_dir)


def setup(scale: str = "preview", device: str = "auto", results_dir: str | None = None) -> Setup:
    """Validate the chapter parameters, pick the device, set the plot style.

    Raises:
        ValueError: unknown scale or device.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; valid scales: {', '.join(SCALES)}")
    dev = pick_device(device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.set_num_threads(max(1, min(torch.get_num_threads(), os.cpu_count() or 1)))
    style()
    rd = Path(results_dir) if results_dir else default_results_dir()
    return Setup(scale, dev, rd)


def style() -> None:
    """The book's matplotlib style (consistent sizes, no top/right spines)."""
    import matplotlib as mpl

    mpl.rcParams.update({
        "figure.figsize": (6.4, 4.0),
        "figure.dpi": 110,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.titlesize": 11,
        "axes.labelsize": 10,
        "legend.frameon": False,
        "image.cmap": "viridis",
    })


# --------------------------------------------------------------------------- experiments


@dataclass
class Experiment:
    """The result a chapter shows: a stored paper-scale run, or one trained in the notebook.

    Attributes:
        name: the run's name (folder ``<results_dir>/paper/<name>`` when stored).
        history: tidy table (:data:`lstpe.results.HISTORY_COLUMNS`).
        artifacts: tensors for the analyses (see :func:`lstpe.train.train`).
        manifest: provenance (git commit, device, torch version, config, wall time).
        source: ``"stored"`` (read from ``results/``), ``"live"`` (trained in this kernel) or
            ``"cached"`` (a run of the same configuration and code, see
            :func:`preview_cache_dir`).
        tables: extra tables of the run (``noise``: accuracy under embedding noise).
        path: the run directory (stored or cached runs, live runs saved at ``paper`` scale).
    """

    name: str
    history: pd.DataFrame
    artifacts: dict
    manifest: dict
    source: str
    tables: dict = field(default_factory=dict)
    path: Path | None = None

    @property
    def config(self) -> dict:
        """The configuration the run was actually trained with (from its manifest)."""
        return self.manifest.get("config", {})

    def diverged(self) -> pd.DataFrame:
        """Models whose loss or logits became non-finite (:func:`lstpe.results.diverged_models`)."""
        from lstpe.results import diverged_models

        return diverged_models(self.history)

    def describe(self) -> str:
        """One line saying where the numbers come from (shown under every table), with a
        warning when models diverged."""
        from lstpe.results import describe_diverged

        cfg = self.config
        what = {"stored": "stored run", "live": "trained in this notebook",
                "cached": "run reused from the cache"}[self.source]
        scale = cfg.get("preset", "custom")
        resumed = ", resumed" if self.manifest.get("resumed") else ""
        line = (f"[{self.name}: {what}, {scale} scale; device {self.manifest.get('device')}, "
                f"{cfg.get('epochs')} epochs, {len(cfg.get('seeds', []))} seeds, "
                f"torch {self.manifest.get('torch_version')}, "
                f"commit {str(self.manifest.get('git_commit'))[:12]}, "
                f"finished {self.manifest.get('finished_at')}, "
                f"wall time {self.manifest.get('wall_time_s')} s{resumed}]")
        div = self.diverged()
        if not div.empty:
            line += (f"\nWARNING: {len(div)} model(s) diverged (non-finite loss or logits) and "
                     f"are left out of the summaries: {describe_diverged(div)}")
        return line

    def final(self, split: str = "val", condition: str = "all",
              include_diverged: bool = False) -> pd.DataFrame:
        """One row per model at its last evaluated epoch (diverged models left out unless
        ``include_diverged``, see :func:`lstpe.results.final_table`)."""
        from lstpe.results import final_table

        return final_table(self.history, split, condition, include_diverged)


def preview_cache_dir() -> Path:
    """Where preview runs are cached: ``$LSTPE_CACHE`` or ``~/.cache/lstpe``.

    A preview run is keyed by its full configuration *and* a hash of the code and data that
    training depends on (:data:`TRAINING_SOURCES`), so a cached run is exactly what training
    would produce now (training on the CPU is
    deterministic). Chapters that need the same run (e.g. Table 1 in chapters 5, 7, 9, 11) and
    a second execution of the book (nbmake, then the book build) train it once.
    """
    return Path(os.environ.get("LSTPE_CACHE") or Path.home() / ".cache" / "lstpe")


TRAINING_SOURCES = ("lst.py", "puzzles.py", "lst_data.py", "lst_generate.py", "encodings.py",
                    "architecture.py", "attention.py", "dropout.py",
                    "model.py", "optim.py", "engine.py", "lst_task.py", "train.py",
                    "results.py", "noise.py",
                    "data/lst/*.csv")
"""The files that determine what a training run produces (the preview cache key hashes them)."""


@lru_cache(maxsize=1)
def _source_hash() -> str:
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for pattern in TRAINING_SOURCES:
        for p in sorted(root.glob(pattern)):
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _cache_key(cfg_dict: dict) -> str:
    blob = json.dumps(cfg_dict, sort_keys=True, default=str) + _source_hash()
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


_USED: dict[str, Experiment] = {}
"""The experiments this kernel's chapter used, by name (the latest of each): their source and
config go into the tables :func:`save_tables` writes."""

EXECUTION_OVERRIDES = ("device", "max_models", "checkpoint_every", "compile")
"""Overrides that change how a run is executed, not what it computes (never a conflict)."""


def _use(exp: Experiment) -> Experiment:
    _USED[exp.name] = exp
    return exp


def used_experiments() -> list[Experiment]:
    """The experiments this kernel used so far (:func:`experiment`, :func:`stored_experiment`)."""
    return list(_USED.values())


def stored_experiment(name: str, S: Setup) -> Experiment | None:
    """The stored paper-scale run ``<results_dir>/paper/<name>``, or None if there is none.

    Raises:
        lstpe.results.DamagedFileError: the stored run is damaged (naming the file).
    """
    exp = _stored(name, S)
    return None if exp is None else _use(exp)


def _stored(name: str, S: Setup) -> Experiment | None:
    from lstpe import results as res

    run = res.find(f"paper/{name}", S.results_dir)
    return None if run is None else _from_run(name, run, "stored")


def _from_run(name: str, run, source: str) -> Experiment:
    """An :class:`Experiment` of a run read from disk (:class:`lstpe.results.Run`)."""
    return Experiment(name, run.history, run.artifacts, run.manifest, source, run.tables,
                      run.path)


def _plain(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def stored_conflicts(config: dict, pes: Sequence[str] | None = None,
                     seeds: Sequence[int] | None = None, epochs: int | None = None,
                     **overrides: Any) -> list[str]:
    """How a stored run's ``config`` differs from what a chapter asks for; empty = usable.

    Only what the chapter sets is compared (None = not set, the stored run decides):

    * ``pes``: every PE asked for must be in the stored run (it may hold more; the chapter
      shows them all), compared by their canonical labels;
    * ``seeds``: the same seeds (in any order);
    * ``epochs`` and every other override (``optimizer``, ``lr``, ``n_train``, ``model``...):
      equal values (a dict such as ``model={"d_model": 16}`` is compared key by key);
      :data:`EXECUTION_OVERRIDES` (device, ...) are never a conflict.

    Returns:
        One phrase per difference, e.g. ``"seeds: stored [2235, 6312], asked [29]"``.
    """
    from lstpe.encodings import parse_pe

    out: list[str] = []
    if pes is not None:
        have = set(config.get("pes", []))
        want = [parse_pe(p, variant=config.get("variant", "paper")).label for p in pes]
        missing = [p for p in want if p not in have]
        if missing:
            out.append(f"pes: {', '.join(missing)} not in the stored run")
    if seeds is not None:
        stored = sorted(int(s) for s in config.get("seeds", []))
        if stored != sorted(int(s) for s in seeds):
            out.append(f"seeds: stored {_short(stored)}, asked {_short(sorted(seeds))}")
    asked: dict[str, Any] = {k: v for k, v in overrides.items()
                             if v is not None and k not in EXECUTION_OVERRIDES}
    if epochs is not None:
        asked["epochs"] = epochs
    for key, value in asked.items():
        want_v, have_v = _plain(value), _plain(config.get(key))
        if isinstance(want_v, dict) and isinstance(have_v, dict):
            bad = [k for k in want_v if want_v[k] != have_v.get(k)]
            out += [f"{key}.{k}: stored {_short(have_v.get(k))}, asked {_short(want_v[k])}"
                    for k in bad]
        elif want_v != have_v and not _close(want_v, have_v):
            out.append(f"{key}: stored {_short(have_v)}, asked {_short(want_v)}")
    return out


def _close(a: Any, b: Any) -> bool:
    return (isinstance(a, (int, float)) and isinstance(b, (int, float))
            and not isinstance(a, bool) and not isinstance(b, bool)
            and math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0))


def _short(v: Any, n: int = 60) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= n else text[:n - 4] + "...]"


def experiment(name: str, S: Setup, pes: list[str], seeds: list[int] | None = None,
               epochs: int | None = None, use_stored: bool = True, cache: bool = True,
               progress: bool = False, require_stored: bool = False,
               **overrides: Any) -> Experiment:
    """Load the stored paper-scale run ``name`` if it fits the chapter's parameters, else
    train it at the chapter's scale.

    * If ``use_stored`` and ``<results_dir>/paper/<name>`` holds a complete run whose config
      fits what the chapter asks for (:func:`stored_conflicts`: the PEs are in it, and the
      seeds, epochs and overrides the chapter sets are its own), it is returned as is,
      whatever the scale: chapters show the stored paper numbers. A stored run that does not
      fit is named with its differences and the run is trained here instead (or, with
      ``require_stored``, a ``ValueError`` is raised).
    * Otherwise the run is trained now: the registry's configuration of ``name`` at
      ``S.scale`` (:func:`lstpe.experiments.run_config`: its optimizer and epochs), or
      :func:`lstpe.train.preset` for other names (``seeds`` / ``epochs`` / ``overrides``
      replace the defaults), and returned as
      ``"live"``; a run of the same configuration and code trained before is reused from
      :func:`preview_cache_dir` as ``"cached"`` (``cache=False`` retrains). At ``paper`` scale
      the run trains (resumably, from checkpoints) into ``<results_dir>/paper/<name>`` when
      that folder holds no finished run and the chapter sets neither seeds nor epochs; else
      into the cache folder, so a stored run is never overwritten.

    Every experiment returned is remembered for :func:`save_tables` (source and config).

    Args:
        name: run name, e.g. ``"table1"``.
        S: the chapter's :class:`Setup`.
        pes: PE names to train (the stored run may hold more).
        seeds, epochs: None = the stored run's / the scale's default.
        use_stored: look for a stored run at all.
        cache: reuse (and save to) the cache of trained runs.
        progress: show progress bars while training.
        require_stored: raise instead of training when no stored run fits.
        **overrides: more :class:`lstpe.train.TrainConfig` fields (``optimizer``, ...).
    Raises:
        ValueError: ``require_stored`` and the stored run does not fit (naming the
            differences); FileNotFoundError: ``require_stored`` and there is none.
    """
    from lstpe import experiments as ex
    from lstpe import results as res
    from lstpe import train as tr

    stored_dir = S.results_dir / "paper" / name
    if use_stored or require_stored:
        stored = _stored(name, S)
        if stored is not None:
            conflicts = stored_conflicts(stored.config, pes=pes, seeds=seeds, epochs=epochs,
                                         **overrides)
            if not conflicts:
                return _use(stored)
            msg = (f"the stored run {stored.path} does not fit this chapter's parameters ("
                   f"{'; '.join(conflicts)})")
            if require_stored:
                raise ValueError(msg + "; pass matching parameters or require_stored=False")
            print(msg + f"; training {name} here at {S.scale} scale instead", flush=True)
        elif require_stored:
            raise FileNotFoundError(f"no stored run at {stored_dir} (require_stored=True)")
    kw = dict(pes=list(pes), seeds=None if seeds is None else list(seeds), epochs=epochs,
              device=str(S.device), **overrides)
    if name in ex.REGISTRY:  # the registry's optimizer and epochs for this run and scale
        cfg = ex.run_config(name, S.scale, **kw)
    else:
        cfg = tr.preset(S.scale, **kw)
    cached = preview_cache_dir() / S.scale / f"{name}-{_cache_key(cfg.to_dict())}"
    if cache and (cached / "manifest.json").exists():
        return _use(_from_run(name, res.load(cached), "cached"))
    run_dir = None
    if S.scale == "paper":
        default_run = seeds is None and epochs is None
        run_dir = stored_dir if default_run and not (stored_dir / "manifest.json").exists() \
            else cached
    r = tr.train(cfg, run_dir=run_dir, progress=progress)
    if run_dir is None and cache:
        _save_cached(cached, r)
    return _use(Experiment(name, r.history, r.artifacts, r.manifest, "live", r.tables,
                           run_dir))


def _save_cached(cached: Path, r: Any) -> None:
    """Save a trained run to the cache unless another process is saving it right now."""
    from lstpe import results as res

    try:
        with res.RunLock(cached):
            if not (cached / "manifest.json").exists():
                res.save_run(cached, r.history, r.manifest, r.artifacts, r.tables)
    except res.RunLockedError:
        pass  # another kernel is caching the same run


PROVENANCE_COLUMNS = ("source", "run", "run_preset", "run_epochs", "run_seeds",
                      "run_optimizer", "run_commit")
"""Columns :func:`save_tables` adds to every table: where its numbers come from."""


def provenance(experiments: Sequence[Experiment]) -> dict[str, Any]:
    """The provenance columns of tables computed from ``experiments``.

    ``source`` (stored / cached / live), ``run`` (the run's name), and the actual config:
    ``run_preset``, ``run_epochs``, ``run_seeds`` (JSON), ``run_optimizer``, ``run_commit``.
    With several experiments each value is ``"name=value; name=value"``.
    """
    if not experiments:
        return {}
    one = len(experiments) == 1

    def col(get) -> Any:
        vals = [get(e) for e in experiments]
        return vals[0] if one else "; ".join(f"{e.name}={v}"
                                             for e, v in zip(experiments, vals, strict=True))

    return {
        "source": col(lambda e: e.source),
        "run": "; ".join(e.name for e in experiments),
        "run_preset": col(lambda e: e.config.get("preset")),
        "run_epochs": col(lambda e: e.config.get("epochs", e.config.get("steps"))),
        "run_seeds": col(lambda e: json.dumps(e.config.get("seeds"))),
        "run_optimizer": col(lambda e: e.config.get("optimizer")),
        "run_commit": col(lambda e: str(e.manifest.get("git_commit"))[:12]),
    }


def save_tables(results_out: str | Path | None, /, *experiments: Experiment,
                **tables: pd.DataFrame) -> list[Path]:
    """Write a chapter's result tables as ``<results_out>/<name>.csv`` (atomic writes).

    ``lstpe batch`` passes ``results_out`` to every notebook it runs and collects these CSVs;
    with ``results_out=None`` (reading the book) nothing is written. Every table gets the
    :func:`provenance` columns of ``experiments`` (default: every experiment this kernel
    used), so a collected row says whether it comes from a stored, cached or live run and
    with which seeds and epochs. A column a table already has is kept; the provenance one is
    then written as ``run_<name>``.
    """
    if results_out is None:
        return []
    from lstpe.results import save_table

    prov = provenance(list(experiments) or used_experiments())
    out = []
    for name, t in tables.items():
        t = t.copy()
        for col, value in prov.items():
            target = col if col not in t.columns else f"run_{col}"
            if target not in t.columns:
                t[target] = value
        out.append(save_table(t, Path(results_out) / f"{name}.csv"))
    return out
