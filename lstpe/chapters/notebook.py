"""Helpers shared by the book's chapters: the chapter's settings, plot style, result tables.

Every chapter starts with the same cells: an install cell (Colab), a papermill ``parameters``
cell (``scale``, ``device``, ``results_dir``, ``results_out`` and only the parameters the
chapter uses), then :func:`setup`, whose :meth:`Setup.get_run` fetches the chapter's runs
(:func:`lstpe.experiments.runs.get_run`: stored, else cached, else trained). :func:`setup`
checks every parameter it is given, each by name (:data:`PARAMETERS`), before anything trains:
a value a reader sets wrong stops the chapter in its first code cell, naming the parameter,
the value and what it accepts.

Where the stored runs are (:func:`lstpe.runtime.find_results`), first found wins:
``$LSTPE_RESULTS``; the ``results/`` of the repository above the current folder; that of the
repository the installed ``lstpe`` lives in (an editable install from a clone); that of a
clone made by the install cell (``/content/lstpe`` on Colab, ``~/lstpe``); else ``./results``,
where nothing is stored, and :func:`setup` says loudly that the chapter will train.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    import pandas as pd

from lstpe.brain.config import MAX_STEPS
from lstpe.experiments.runs import get_run, used_runs
from lstpe.runtime import (
    home,
    pick_device,
    repo_root,
    stored_counts,
)
from lstpe.store.results import Run, results_source
from lstpe.training.config import (
    MAX_EPOCHS,
    SCALES,
    as_int,
    as_int_list,
    as_real,
    as_real_list,
    as_str_list,
)

__all__ = ["PARAMETERS", "Setup", "check_parameters", "run_time", "save_tables", "setup"]


# --------------------------------------------------------------------------- parameters

MAX_SEED = 2**32 - 1
"""The largest seed a chapter accepts: the 32-bit range of most tools' seeds (the paper's are
4-digit numbers); the model adds its own offset to a seed for the PE's stream."""
SIGMA_MAX = 1e3
"""The largest learnable-PE sigma a chapter accepts: 500 times the paper's largest (2.0), far
past the lazy regime the chapters study. The PE is sigma times a standard normal draw in
float32, so an absurd sigma (``1e39``) makes it inf before the first step."""
MAX_PERM = 1_000_000
"""The most shuffled partitions of chapter 10's null (2000 times its 500)."""


def _seeds(value: Any, name: str) -> list[int] | None:
    if value is None:
        return None
    seeds = as_int_list(value, name)
    if not seeds:
        raise ValueError("an empty list trains nothing")
    for sd in seeds:
        if not 0 <= sd <= MAX_SEED:
            raise ValueError(f"seed {sd} is outside 0..{MAX_SEED}")
    if len(set(seeds)) != len(seeds):
        raise ValueError("a seed is given twice")
    return seeds


def _count(high: int, optional: bool) -> Callable[[Any, str], int | None]:
    def check(value: Any, name: str) -> int | None:
        if value is None and optional:
            return None
        return as_int(value, name, 1, high)
    return check


def _sigmas(value: Any, name: str) -> list[float] | None:
    if value is None:
        return None
    sigmas = as_real_list(value, name)
    if not sigmas:
        raise ValueError("an empty list trains nothing")
    for sg in sigmas:
        if not (math.isfinite(sg) and 0 < sg <= SIGMA_MAX):
            raise ValueError(f"sigma {sg!r} is not a finite number in (0, {SIGMA_MAX:g}]")
    from lstpe.experiments.registry import learn_pes

    learn_pes(sigmas)  # a sigma given twice (as its PE's label)
    return sigmas


def _pes(value: Any, name: str) -> list[str] | None:
    if value is None:
        return None
    from lstpe.nn.encodings import parse_pe

    pes = as_str_list(value, name)
    if not pes:
        raise ValueError("an empty list trains nothing")
    labels = [parse_pe(p).label for p in pes]  # an unknown name: parse_pe says which exist
    if len(set(labels)) != len(labels):
        raise ValueError("a PE is given twice")
    return pes


def _fraction(value: Any, name: str) -> float:
    r = as_real(value, name)
    if not 0 < r < 1:
        raise ValueError(f"{r!r} is not strictly between 0 and 1")
    return r


def _folder(value: Any, name: str, must_exist: bool) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or isinstance(value, bytes) \
            or not os.fspath(value):
        raise ValueError("not a folder path: an empty string names no folder" if
                         isinstance(value, str) else "not a folder path")
    given = Path(value)
    if given.exists() and not given.is_dir():
        raise NotADirectoryError(f"{str(value)!r} is a file, not a folder")
    if must_exist and not given.exists():
        raise FileNotFoundError(f"{str(value)!r} does not exist (from {Path.cwd().name}/): "
                                "a typo would otherwise train the chapter instead of showing "
                                "the stored runs (an existing empty folder is fine)")
    return given


@dataclass(frozen=True)
class Parameter:
    """A chapter parameter's check: what it accepts (in words) and the function that returns
    the value as the chapter uses it or raises ValueError saying why not."""

    accepts: str
    check: Callable[[Any, str], Any]


PARAMETERS: dict[str, Parameter] = {
    "seeds": Parameter(f"None (the scale's seeds) or a list of distinct integer seeds in "
                       f"0..{MAX_SEED}, e.g. [2235, 6312]", _seeds),
    "epochs": Parameter(f"None (the run's epochs) or a whole number of epochs in "
                        f"1..{MAX_EPOCHS}, e.g. 200", _count(MAX_EPOCHS, True)),
    "steps": Parameter(f"None (the scale's steps) or a whole number of optimizer steps in "
                       f"1..{MAX_STEPS}", _count(MAX_STEPS, True)),
    "sigmas": Parameter(f"None (the scale's sigmas) or a list of distinct finite sigmas in "
                        f"(0, {SIGMA_MAX:g}], e.g. [0.1, 0.2, 2]", _sigmas),
    "pes": Parameter("None (the run's PEs) or a list of distinct PE names this package "
                     "knows (lstpe.nn.encodings.PE_NAMES; 'learn-<sigma>'), e.g. "
                     "['2d-fixed', 'learn-0.2']", _pes),
    "n_perm": Parameter(f"a whole number of shuffled partitions in 1..{MAX_PERM}, e.g. 500",
                        _count(MAX_PERM, False)),
    "train_mask": Parameter("a mask ratio strictly between 0 and 1, e.g. 0.5", _fraction),
    "results_out": Parameter("None (write no tables) or a folder path for the chapter's "
                             "result tables", lambda v, n: _folder(v, n, must_exist=False)),
}
"""Every parameter a chapter's ``parameters`` cell may set besides ``scale``, ``device`` and
``results_dir`` (which :func:`setup` takes by position), with its check."""


def check_parameters(**params: Any) -> dict[str, Any]:
    """Check chapter parameters by name (:data:`PARAMETERS`).

    Returns:
        The values as the chapter uses them (lists for sequences, ints for counts).
    Raises:
        TypeError: a name no chapter parameter has (naming it and the known ones).
        ValueError: a value the parameter does not accept: ``"<name> = <value> is refused
            (<why>); <name> accepts <what>"``.
    """
    out = {}
    for name, value in params.items():
        if name not in PARAMETERS:
            raise TypeError(f"setup() got an unknown chapter parameter {name!r}; the known "
                            f"ones: {', '.join(PARAMETERS)} (and scale, device, results_dir)")
        p = PARAMETERS[name]
        try:
            out[name] = p.check(value, name)
        except (ValueError, TypeError, OSError) as e:
            raise ValueError(f"{name} = {_shown_value(value)} is refused ({e}); {name} "
                             f"accepts {p.accepts}") from None
    return out


def _shown_value(value: Any) -> str:
    text = repr(value)
    return (text if len(text) <= 80 else text[:77] + "...") + f" ({type(value).__name__})"


@dataclass
class Setup:
    """What a chapter needs after its parameters cell."""

    scale: str
    device: torch.device
    results_dir: Path
    started: float = field(default_factory=time.perf_counter)  # when setup ran (its clock)
    params: dict[str, Any] = field(default_factory=dict)
    """The chapter parameters :func:`setup` was given, checked (:func:`check_parameters`)."""

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


def setup(scale: str = "preview", device: str = "auto", results_dir: str | Path | None = None,
          verbose: bool = True, **params: Any) -> Setup:
    """Validate the chapter parameters, pick the device, set the plot style, find the stored
    runs (:func:`lstpe.runtime.find_results`, the search order of the module docstring) and,
    with ``verbose``, print what was found (:func:`stored_message`). TF32 and every other
    global torch flag but the thread count are left as they are.

    Every check comes before anything else is done, so a chapter stops in its first code cell.

    Args:
        scale, device, results_dir: the chapter's first three parameters (``results_dir``:
            None for the search order, or a folder of stored runs).
        params: the chapter's other parameters by name (``seeds=seeds, epochs=epochs, ...``;
            :data:`PARAMETERS`), checked and kept in :attr:`Setup.params`.
    Raises:
        TypeError: a parameter no chapter has (naming it).
        ValueError: unknown scale or device, a ``results_dir`` that is not None or a folder
            path, or a parameter's value it does not accept (naming the parameter, the value
            and what it accepts).
        FileNotFoundError, NotADirectoryError: a ``results_dir`` given that does not exist or
            is a file (a typo would otherwise train the chapter instead of showing the stored
            runs; an existing empty folder is fine).
    """
    if not isinstance(scale, str) or scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; scale accepts {', '.join(map(repr, SCALES))}")
    if not isinstance(device, str):
        raise ValueError(f"device = {_shown_value(device)} is refused; device accepts 'auto', "
                         "'cpu', 'cuda', 'cuda:N' or 'mps'")
    checked = check_parameters(**params)
    try:
        given = _folder(results_dir, "results_dir", must_exist=True)
    except ValueError as e:
        raise ValueError(f"results_dir = {_shown_value(results_dir)} is refused ({e}); "
                         "results_dir accepts None or a folder path of stored runs (None: the "
                         "repository's results/, in the search order of "
                         "lstpe.runtime.find_results)") from None
    except FileNotFoundError as e:
        raise FileNotFoundError(f"results_dir {e}: give a folder of stored runs, or None for "
                                "the repository's results/") from None
    except NotADirectoryError as e:
        raise NotADirectoryError(f"results_dir {e} of stored runs") from None
    dev = pick_device(device)
    torch.set_num_threads(max(1, min(torch.get_num_threads(), os.cpu_count() or 1)))
    style()
    rd, how = results_source(given)
    if verbose:
        print(stored_message(rd, how, scale), flush=True)
    return Setup(scale, dev, rd, params=checked)


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
    for base, label in ((repo_root(), "<repository>"), (home(), "~")):
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
