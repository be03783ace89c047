"""Helpers shared by the book's chapters: the chapter's settings, plot style, result tables.

Every chapter starts with the same cells: an install cell (Colab), a papermill ``parameters``
cell (``scale``, ``device``, ``results_dir``, ``results_out`` and only the parameters the
chapter uses), then :func:`setup`, whose :meth:`Setup.get_run` fetches the chapter's runs
(:func:`lstpe.experiments.runs.get_run`: stored, else cached, else trained).

Where the stored runs are (:func:`lstpe.runtime.find_results`), first found wins:
``$LSTPE_RESULTS``; the ``results/`` of the repository above the current folder; that of the
repository the installed ``lstpe`` lives in (an editable install from a clone); that of a
clone made by the install cell (``/content/lstpe`` on Colab, ``~/lstpe``); else ``./results``,
where nothing is stored, and :func:`setup` says loudly that the chapter will train.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    import pandas as pd

from lstpe.experiments.runs import get_run, used_runs
from lstpe.runtime import (
    pick_device,
    repo_root,
    stored_counts,
)
from lstpe.store.results import Run, results_source
from lstpe.training.config import SCALES

__all__ = ["Setup", "run_time", "save_tables", "setup"]


@dataclass
class Setup:
    """What a chapter needs after its parameters cell."""

    scale: str
    device: torch.device
    results_dir: Path
    started: float = field(default_factory=time.perf_counter)  # when setup ran (its clock)

    def get_run(self, name: str, **asked: Any) -> Run:
        """The run ``name`` for this chapter: :func:`lstpe.experiments.runs.get_run` at the
        chapter's
        scale, results folder and device (``asked``: seeds, sigmas, epochs... None = the
        registry's)."""
        asked.setdefault("progress", self.scale != "preview")  # long runs show their progress
        return get_run(name, self.scale, results_dir=self.results_dir, device=str(self.device),
                       **asked)

    def __str__(self) -> str:
        """The setup line chapters print (:func:`lstpe.chapters.text.describe_setup`)."""
        from lstpe.chapters.text import describe_setup

        return describe_setup(self)


def setup(scale: str = "preview", device: str = "auto", results_dir: str | None = None,
          verbose: bool = True) -> Setup:
    """Validate the chapter parameters, pick the device, set the plot style, find the stored
    runs (:func:`lstpe.runtime.find_results`, the search order of the module docstring) and,
    with ``verbose``, print what was found (:func:`stored_message`). TF32 and every other
    global torch flag but the thread count are left as they are.

    Raises:
        ValueError: unknown scale or device.
        FileNotFoundError, NotADirectoryError: a ``results_dir`` given that does not exist or
            is a file (a typo would otherwise train the chapter instead of showing the stored
            runs; an existing empty folder is fine).
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; valid scales: {', '.join(SCALES)}")
    if results_dir:
        given = Path(results_dir)
        if not given.exists():
            raise FileNotFoundError(f"results_dir {str(results_dir)!r} does not exist (from "
                                    f"{Path.cwd().name}/): give a folder of stored runs, or "
                                    "None for the repository's results/")
        if not given.is_dir():
            raise NotADirectoryError(f"results_dir {str(results_dir)!r} is a file, not a "
                                     "folder of stored runs")
    dev = pick_device(device)
    torch.set_num_threads(max(1, min(torch.get_num_threads(), os.cpu_count() or 1)))
    style()
    rd, how = results_source(results_dir)
    if verbose:
        print(stored_message(rd, how, scale), flush=True)
    return Setup(scale, dev, rd)


def run_time(S: Setup) -> str:
    """The page's measured run time, for its last cell: seconds from :func:`setup` to now in
    the build that executed it, on which machine (its cores, and the CPU flags that decide the
    matmul kernels, :func:`lstpe.runtime.cpu_flags`; none off Linux). A page states no run time
    it did not measure (issue 65). Whole seconds: a page's decimals are its findings."""
    from lstpe.runtime import cpu_flags

    took = time.perf_counter() - S.started
    flags = " ".join(cpu_flags(("avx2", "avx512f", "avx512_bf16", "amx_bf16")))
    where = f"{platform.machine()}, {os.cpu_count()} cores" + (f", {flags}" if flags else "")
    dev = "" if S.device.type == "cpu" else f", on {S.device.type}"
    return (f"**Run time.** This page took {took:.0f} s to run, from its setup cell to here, "
            f"when this copy was built ({where}{dev}).")


def _shown(results_dir: Path) -> str:
    """The results folder as a page may show it: relative to the repository or the home
    folder, never the build machine's absolute path."""

    p = Path(results_dir).resolve()
    for base, label in ((repo_root(), "<repository>"), (Path.home(), "~")):
        if base is not None:
            try:
                return f"{label}/{p.relative_to(base.resolve()).as_posix()}"
            except ValueError:
                pass
    return f"a folder named {p.name!r}"


def stored_message(results_dir: Path, how: str, scale: str) -> str:
    """What the chapter will show: the stored runs found (fragments of the paper campaign,
    CPU runs) and where, or a WARNING that none was found and the chapter trains at
    ``scale``."""
    n = stored_counts(results_dir)
    where = {"LSTPE_RESULTS": "$LSTPE_RESULTS", "repository": "the repository",
             "package": "the installed package's repository", "clone": "the clone",
             "results_dir": "results_dir"}.get(how, "the current folder")
    shown = _shown(results_dir)
    if n["paper"] or n["cpu"]:
        return (f"stored runs: {n['paper']} fragment(s) of the paper campaign under paper/, "
                f"{n['cpu']} run(s) under cpu/ (results folder from {where}: {shown})")
    return (f"WARNING: no stored runs found (results folder from {where}: {shown}); "
            f"this chapter will TRAIN its runs at {scale!r} scale instead of showing the "
            "stored reproduction. On Colab run the install cell (it clones the repository "
            "with its results/), or set LSTPE_RESULTS to a results folder.")


def style() -> None:
    """The book's matplotlib style (:mod:`lstpe.rendering.style`: figures sized to the page's
    column, text at least 9 pt there, no top/right spines), and every figure shown with a
    phone's rendering beside the laptop's (:func:`lstpe.rendering.responsive.install`)."""
    from lstpe.rendering import responsive
    from lstpe.rendering import style as figure_style

    figure_style.apply()
    responsive.install()


PROVENANCE_COLUMNS = ("source", "run", "run_preset", "run_epochs", "run_seeds",
                      "run_optimizer", "run_commit")
"""Columns :func:`save_tables` adds to every table: where its numbers come from."""


def provenance(experiments: Sequence[Run]) -> dict[str, Any]:
    """The provenance columns of tables computed from ``experiments`` (runs).

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


def save_tables(results_out: str | Path | None, /, *experiments: Run,
                **tables: pd.DataFrame) -> list[Path]:
    """Write a chapter's result tables as ``<results_out>/<name>.csv`` (atomic writes).

    ``lstpe batch`` passes ``results_out`` to every notebook it runs and collects these CSVs;
    with ``results_out=None`` (reading the book) nothing is written. Every table gets the
    :func:`provenance` columns of ``experiments`` (default: every run this kernel got from
    :func:`lstpe.experiments.runs.get_run`), so a collected row says whether it comes from a stored,
    cached or live run and with which seeds and epochs. A column a table already has is
    kept; the provenance one is then written as ``run_<name>``.
    """
    if results_out is None:
        return []
    from lstpe.store.results import save_table

    prov = provenance(list(experiments) or used_runs())
    out = []
    for name, t in tables.items():
        t = t.copy()
        for col, value in prov.items():
            target = col if col not in t.columns else f"run_{col}"
            if target not in t.columns:
                t[target] = value
        out.append(save_table(t, Path(results_out) / f"{name}.csv"))
    return out
