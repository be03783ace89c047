"""The chapters' two lines about their runs, and wrapped printing.

* :func:`describe_page`: what a results page shows, said under its finding: the stored units
  it read (recipe, epochs, seeds, how many) and, only when something was trained, what and at
  which scale;
* :func:`describe_setup`: the chapter's setup line (scale, device, versions; no local paths);
* :func:`run_facts`, :func:`show_runs`: the page's provenance, each fact said once for all of
  its runs (where they come from, preview scale, fewer epochs than the paper);
* :func:`say`: print wrapped to the width of a chapter's output box (:data:`PRINT_WIDTH`).

What the runs show is each page's evidence table (:mod:`lstpe.evidence.tables`) and its
hand-written finding; nothing here writes a sentence about a result.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lstpe.store.results import Run

__all__ = ["PAPER_EPOCHS", "N_PAPER_SEEDS", "PRINT_WIDTH", "say", "describe_page",
           "describe_setup", "run_facts", "show_runs"]


PAPER_EPOCHS = 4000
"""Epochs the authors trained every model."""

N_PAPER_SEEDS = 15


# --------------------------------------------------------------------------- noise and scale


def _cfg(exp: Run) -> dict:
    return getattr(exp, "config", None) or {}


PRINT_WIDTH = 76
"""Characters per printed line: a chapter's output box shows about this many without
scrolling."""


def say(text: str, width: int = PRINT_WIDTH, prefix: str = "") -> None:
    """Print ``text`` wrapped to ``width`` characters (continuation lines indented), so that
    the book's output boxes show all of it without scrolling; existing line breaks are kept."""
    import textwrap

    for para in str(text).split("\n"):
        print(textwrap.fill(prefix + para, width=width, subsequent_indent="  ",
                            break_on_hyphens=False))


def _seed_counts(run: Run) -> tuple[list[int], bool]:
    """(sorted distinct seed counts, whether they are per PE): a campaign run's
    ``seeds_per_pe``, else the config's seeds."""
    per_pe = (getattr(run, "manifest", None) or {}).get("seeds_per_pe")
    if per_pe:
        return sorted({len(v) for v in per_pe.values()}), True
    return [len(_cfg(run).get("seeds") or [])], False


def _epochs_reason(run: Run, epochs: int) -> str:
    """Why a run of the registry trained ``epochs`` epochs: the registry's reason when that is
    its paper-scale number; for the campaign's units (fewer), that they stop at the authors'
    first logged epoch, then the registry's number and reason; ``""`` outside the registry."""
    from lstpe.experiments.registry import REGISTRY

    spec = REGISTRY.get(getattr(run, "name", ""))
    if spec is None:
        return ""
    if epochs == spec.paper_epochs:
        return spec.why
    reg = f"the registry's {spec.paper_epochs} at paper scale: {spec.why}"
    if _seed_counts(run)[1]:
        return (f"our stored models stop at {epochs}, an epoch the authors logged, and are "
                f"compared with their logs there first; {reg}")
    return reg


def _grouped(pairs: Iterable[tuple[str, str]]) -> str:
    """``(name, value)`` pairs as ``a, b (v1); c (v2)``: names sharing a value named once."""
    groups: dict[str, list[str]] = {}
    for name, value in pairs:
        groups.setdefault(value, []).append(name)
    return "; ".join(f"{', '.join(names)} ({value})" for value, names in groups.items())


def run_facts(runs: Iterable[Run]) -> list[str]:
    """A page's provenance: where its runs come from, each fact said once for all of them.

    Args:
        runs: :class:`lstpe.store.results.Run` objects (LST runs have ``epochs`` in their
            config; others, such as the brain's, get their describe line only).
    Returns:
        Lines: each run's :meth:`~lstpe.store.results.Run.describe`; then, only where they
        apply, one line for the preview runs (their model size) and one for the runs shorter
        than the paper's 4000 epochs, with the registry's paper-scale epochs and its reason.
        What the runs show is the page's evidence table; what they can show, its box.
    """
    runs = list(runs)
    lines = [r.describe() for r in runs]
    lst = [r for r in runs if "epochs" in _cfg(r)]
    prev = [(r.name, f"d_model={(_cfg(r).get('model') or {}).get('d_model')}, "
                     f"{(_cfg(r).get('model') or {}).get('n_layers')} blocks, "
                     f"{_cfg(r).get('n_train') or 'all'} training puzzles, "
                     f"{_cfg(r).get('epochs')} epochs")
            for r in lst if _cfg(r).get("preset") == "preview"]
    if prev:
        lines.append(f"Preview scale (the paper: d_model=160, 4 blocks, {PAPER_EPOCHS} "
                     f"epochs): {_grouped(prev)}.")
    short = [(r.name, f"{_cfg(r)['epochs']} epochs; {why}")
             for r in lst if _cfg(r).get("preset") != "preview"
             and _cfg(r)["epochs"] < PAPER_EPOCHS and (why := _epochs_reason(r, _cfg(r)["epochs"]))]
    if short:
        lines.append(f"Shorter than the paper's {PAPER_EPOCHS} epochs: {_grouped(short)}.")
    return lines


def show_runs(*runs: Run) -> None:
    """Print :func:`run_facts` of the page's runs, wrapped (one call per page)."""
    for line in run_facts(runs):
        say(line)


# --------------------------------------------------------------------------- setup


class SetupLike(Protocol):
    """What :func:`describe_setup` reads (a :class:`lstpe.chapters.notebook.Setup`, which
    imports this module, so it is named by its shape here)."""

    scale: str
    device: object
    results_dir: str | Path


def describe_setup(S: SetupLike) -> str:
    """The chapter's setup line: scale, device, torch, python; the results folder relative to
    the repository (a relative path as given; an absolute one outside the repository, or with
    no repository at all as on Colab, is called a custom folder), never a local absolute path."""
    import torch

    where = _where(S.results_dir, custom="custom folder (results_dir)")
    return (f"scale={S.scale}  device={S.device}  torch={torch.__version__}  "
            f"python={platform.python_version()}  stored runs from: {where}")


def _where(results_dir: str | Path, custom: str = "a custom folder (results_dir)") -> str:
    """The results folder as a page may name it: a relative path as given, an absolute one
    inside the repository relative to it, else ``custom`` (never a local absolute path)."""
    from lstpe.runtime import repo_root

    rd, root = Path(results_dir), repo_root()
    if not rd.is_absolute():
        return rd.as_posix()
    if root is not None and rd.resolve().is_relative_to(root.resolve()):
        return rd.resolve().relative_to(root.resolve()).as_posix()
    return custom


def _seeds_text(counts: list[int]) -> str:
    lo, hi = counts[0], counts[-1]
    return f"{lo} seed{'s' if lo != 1 else ''}" if lo == hi else f"{lo}-{hi} seeds"


def _stored_part(run: Run) -> str:
    """One stored run as a page names it: ``table1: 40 models of the authors' recipe (8 PEs,
    5 seeds each, 200 epochs, fp32)``, or a stored run of another scale."""
    cfg, man = _cfg(run), getattr(run, "manifest", None) or {}
    length = f"{cfg['epochs']} epochs" if "epochs" in cfg else f"{cfg.get('steps')} steps"
    prec = "bf16" if cfg.get("amp") else "fp32"
    if man.get("kind") == "campaign-merge":
        per_pe = man.get("seeds_per_pe") or {}
        n = len(man.get("fragments") or []) or sum(len(v) for v in per_pe.values())
        counts, _ = _seed_counts(run)
        return (f"`{run.name}`: {n} model{'s' if n != 1 else ''} of the authors' recipe "
                f"({len(per_pe)} PEs, {_seeds_text(counts)} each, {length}, {prec})")
    n = len(cfg.get("seeds") or [])
    return (f"`{run.name}`: a stored run at the `{run.scale}` scale ({length}, "
            f"{_seeds_text([n])}, {prec})")


def describe_page(S: SetupLike, runs: Iterable[Run] | None = None) -> str:
    """What a results page shows, in the words of its setup line (issue 51).

    Args:
        S: the chapter's setup (its scale, device and results folder).
        runs: the page's runs; default every run this kernel got from ``S.get_run``
            (:func:`lstpe.experiments.runs.used_runs`).
    Returns:
        ``Shown: <each stored run: models, recipe, PEs, seeds, epochs, precision> (from
        <folder>).`` and then, only when a run was trained here or reused from the cache,
        ``Trained here at the <scale> scale on <device> (not the authors' recipe unless the
        scale is paper): <run, epochs, seeds>``; else ``Nothing was trained here.`` Versions
        close the line. No scale or device is named when nothing was trained.
    """
    import torch

    if runs is None:
        from lstpe.experiments.runs import used_runs

        runs = used_runs()
    runs = list(runs)
    stored = [r for r in runs if r.source == "stored"]
    trained = [r for r in runs if r.source != "stored"]
    parts = []
    if stored:
        parts.append("Shown: " + "; ".join(_stored_part(r) for r in stored)
                     + f" (read from `{_where(S.results_dir)}/`).")
    if trained:
        recipe = "the authors' recipe" if S.scale == "paper" else "not the authors' recipe"
        what = "; ".join(
            f"`{r.name}` ({_cfg(r).get('epochs', _cfg(r).get('steps'))} "
            f"{'epochs' if 'epochs' in _cfg(r) else 'steps'}, "
            f"{_seeds_text([len(_cfg(r).get('seeds') or [])])}, "
            f"{'trained now' if r.source == 'live' else 'reused from the cache'})"
            for r in trained)
        parts.append(f"Trained here at the `{S.scale}` scale ({recipe}) on {S.device}: {what}.")
        if not stored:
            parts.insert(0, f"No stored run of this page was found in `{_where(S.results_dir)}/` "
                            "(on Colab, run the install cell: it clones the repository with its "
                            "results/; or set LSTPE_RESULTS).")
    elif stored:
        parts.append("Nothing was trained here.")
    else:
        parts.append("No run was read or trained yet.")
    parts.append(f"(torch {torch.__version__}, python {platform.python_version()})")
    return " ".join(parts)
