"""Printing and caveats of the chapters: when a run's numbers can (not) test the paper.

* :data:`CHANCE`, :data:`N_VAL_PUZZLES`, :data:`PAPER_EPOCHS`, :data:`N_PAPER_SEEDS`: the
  numbers the caveats compare a run with;
* :func:`chance_test`: is each group's accuracy above chance (0.25), beyond what guessing gives;
  :func:`chance_pes`: the groups that are not;
* :func:`caveats`, :func:`warn`: why a run cannot (fully) test the paper -- ``preview`` scale,
  fewer seeds than an interval needs, fewer epochs than the paper, accuracies within noise of
  chance -- as sentences, or printed;
* :func:`say`: print wrapped to the width of a chapter's output box (:data:`PRINT_WIDTH`);
* :func:`source_note`, :func:`show_run`: where a run's numbers come from and what that source
  can show;
* :func:`run_facts`, :func:`show_runs`: the facts about a page's runs, each said once for all
  of them (chapters 5-11, whose single admonition says what the runs can and cannot show);
* :func:`describe_setup`: the chapter's setup line without local paths.

The private helpers ``_cfg`` (a run's config, ``{}`` without one) and ``_names`` (a short list
of labels) are shared with :mod:`lstpe.chapters.tables` and :mod:`lstpe.chapters.report`.
Part of :mod:`lstpe.chapters` (the chapters call these as ``ch.<name>``); imports nothing from
the other chapter modules.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

__all__ = [
    "CHANCE", "N_VAL_PUZZLES", "PAPER_EPOCHS", "N_PAPER_SEEDS", "PRINT_WIDTH", "chance_test",
    "chance_pes", "caveats", "say", "source_note", "show_run", "warn", "describe_setup",
    "run_facts", "show_runs",
]

CHANCE = 0.25
"""Accuracy of guessing one of the four shapes."""

N_VAL_PUZZLES = 108
"""Validation puzzles (the ones people solved)."""

PAPER_EPOCHS = 4000
"""Epochs the authors trained every model."""

N_PAPER_SEEDS = 15


# --------------------------------------------------------------------------- noise and scale


def chance_test(final: pd.DataFrame, chance: float = CHANCE, n_items: int = N_VAL_PUZZLES,
                by: str = "pe", value: str = "accuracy", alpha: float = 0.05) -> pd.DataFrame:
    """Is each group's accuracy above chance, beyond what guessing gives?

    Pools the group's seeds: ``k`` correct answers out of ``n_items * seeds`` (each seed's
    accuracy times ``n_items``, rounded) and a one-sided binomial test of ``k`` against
    ``chance``. A group is ``at_chance`` when that test does not reject at ``alpha``: its
    accuracy is within noise of guessing, and any ranking or correlation built on it is noise.

    Args:
        final: one row per model (e.g. ``Run.final("val")``).
        n_items: puzzles behind each accuracy (108 validation puzzles).
    Returns:
        ``by, seeds, mean, k, trials, p_above_chance, at_chance`` in first-seen order.
    Raises:
        ValueError: empty table, missing columns, accuracies outside [0, 1], ``n_items < 1``.
    """
    if final.empty:
        raise ValueError("the table is empty")
    missing = [c for c in (by, value) if c not in final]
    if missing:
        raise ValueError(f"table lacks columns {missing}; has {', '.join(final.columns)}")
    if n_items < 1:
        raise ValueError(f"n_items must be >= 1, got {n_items}")
    acc = final[value].to_numpy(float)
    if not np.all((acc >= 0) & (acc <= 1)):
        raise ValueError(f"{value} must lie in [0, 1]")
    rows = []
    for key, g in final.groupby(by, sort=False):
        correct = np.rint(g[value].to_numpy(float) * n_items).astype(int)
        k, n = int(correct.sum()), n_items * len(g)
        p = _p_above_chance(k, n, chance)
        rows.append({by: key, "seeds": len(g), "mean": float(g[value].mean()), "k": k,
                     "trials": n, "p_above_chance": p, "at_chance": p >= alpha})
    return pd.DataFrame(rows)


def chance_pes(final: pd.DataFrame | None, **kw: Any) -> set[str]:
    """The groups of ``final`` (PE names, as text) within noise of chance by
    :func:`chance_test` (``kw`` passed on); empty for None or an empty table: the one reading
    of "at chance" that every sentence leaving rows out of a comparison uses."""
    if final is None or final.empty:
        return set()
    ct = chance_test(final, **kw)
    return set(ct.loc[ct["at_chance"], kw.get("by", "pe")].astype(str))


def _p_above_chance(k: int, trials: int, chance: float = CHANCE) -> float:
    """p of the one-sided binomial test of ``k`` correct out of ``trials`` against ``chance``
    (shared with :mod:`lstpe.chapters.report`, which tests a mean over seeds)."""
    return float(sps.binomtest(k, trials, chance, alternative="greater").pvalue)


def _cfg(exp: Any) -> dict:
    return getattr(exp, "config", None) or {}


def _names(labels: Iterable[Any], limit: int = 12) -> str:
    labels = [str(x) for x in labels]
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more


def caveats(exp: Any, final: pd.DataFrame | None = None, by: str = "pe",
            min_seeds: int = 5) -> list[str]:
    """Why the numbers of a run cannot (fully) test the paper, one sentence each.

    * ``preview`` scale: the run is a pipeline check (its size named);
    * fewer seeds than ``min_seeds``: no confidence interval and no verdict;
    * fewer epochs than the paper's 4000 (at paper scale): the epochs and why (the run's
      :data:`lstpe.experiments.registry.REGISTRY` entry);
    * with ``final`` (one validation row per model): the groups whose accuracy is within noise
      of chance (:func:`chance_test`), or that every group is.

    Args:
        exp: an :class:`lstpe.store.results.Run` (anything with ``config`` and ``name``).
    Returns:
        The sentences; empty when the run is a full-scale run above chance.
    """
    cfg = _cfg(exp)
    name = getattr(exp, "name", "this run")
    seeds = cfg.get("seeds") or []
    per_pe = (getattr(exp, "manifest", None) or {}).get("seeds_per_pe")
    if per_pe:  # the campaign's fragments: the PE with the fewest seeds decides
        seeds = min(per_pe.values(), key=len)
    epochs = cfg.get("epochs")
    out = []
    if cfg.get("preset") == "preview":
        model = cfg.get("model") or {}
        out.append(
            f"{name} is a PREVIEW-scale run ({len(seeds)} seed(s), {epochs} epochs, "
            f"d_model={model.get('d_model')}, {model.get('n_layers')} blocks, "
            f"{cfg.get('n_train') or 'all'} training puzzles): it checks that the pipeline "
            f"runs end to end; its numbers cannot test the paper ({N_PAPER_SEEDS} seeds, "
            f"d_model=160, 4 blocks, {PAPER_EPOCHS} epochs).")
    if 0 < len(seeds) < min_seeds:
        some = ((" for some PEs" if len(_seed_counts(exp)[0]) > 1 else " per PE") if per_pe
                else "")
        out.append(f"{name} has {len(seeds)} seed(s){some}: no confidence interval and no "
                   f"verdict (those need {min_seeds}).")
    if cfg.get("preset") == "paper" and epochs is not None and epochs < PAPER_EPOCHS:
        why = _epochs_reason(exp, epochs)
        why = f" ({why})" if why else ""
        out.append(f"{name} trained {epochs} epochs, not the paper's {PAPER_EPOCHS}{why}.")
    if final is not None and not final.empty:
        ct = chance_test(final, by=by)
        low = ct[ct["at_chance"]]
        what = "PE" if by == "pe" else by
        if len(low) == len(ct):
            out.append(f"every {what} of {name} is within noise of chance ({CHANCE}; one-sided "
                       f"binomial test over seeds x puzzles, p >= 0.05): these models guess, "
                       f"and any ranking, difference or correlation computed from their "
                       f"answers reflects guessing (noise and answer biases), not the task.")
        elif len(low):
            out.append(f"{len(low)} of {len(ct)} ({_names(low[by])}) of {name} are within "
                       f"noise of chance ({CHANCE}): their rankings and correlations reflect "
                       f"guessing, not the task.")
    return out


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


def source_note(run: Any) -> str:
    """What a run's source can and cannot show, in plain sentences (the chapters print it
    under every run: paper > cpu > preview, see :func:`lstpe.experiments.runs.get_run`)."""
    cfg = _cfg(run)
    scale, seeds = cfg.get("preset"), len(cfg.get("seeds") or [])
    length = f"{cfg['epochs']} epochs" if "epochs" in cfg else f"{cfg.get('steps')} steps"
    stored = getattr(run, "source", "") == "stored"
    where = "stored under results/" if stored else "trained in this kernel"
    counts, per_pe = _seed_counts(run)
    if per_pe:
        n = _span(counts[0], counts[-1])
        from lstpe.analysis.seed_stats import MIN_SEEDS_FOR_CI as k

        if counts[-1] < k:
            can = (f"It shows where single models of the recipe land; with fewer than {k} "
                   "seeds it cannot give a mean with an interval or a test")
        elif counts[0] >= k:
            can = (f"With {k} or more seeds per PE it gives each PE a mean with an interval "
                   f"and a test against the paper's tables, of models trained for {length}")
        else:
            can = (f"PEs with {k} or more seeds get a mean with an interval and a test; the "
                   "others place a few models each, with no interval and no test")
        return (f"Source: the campaign's units under results/paper/ (the authors' recipe on "
                f"2 CPU cores, fp32, {length}, {n} seed(s) per PE so far). Each unit is "
                "compared first with the authors' own logs at the same epoch (like for like), "
                f"then with the paper's 4000-epoch tables. {can}; PEs not yet trained are "
                "absent.")
    if scale == "paper":
        return (f"Source: the paper-scale run ({where}; {seeds} seeds, {length}, the authors' "
                "model and data). Its numbers can be set against the paper's tables; the "
                "report (chapter 11) does so row by row.")
    if scale == "cpu":
        return (f"Source: the paper's model, data and learning rate trained on a CPU "
                f"({where}; {seeds} seeds, {length}, bf16 autocast) - not the paper's 4000 "
                "epochs on a GPU. It shows which encodings learn the task early and in which "
                "order; it cannot show the converged accuracies of the paper's tables, and a "
                "slow starter such as 2d-fixed is still rising when it stops.")
    if scale == "preview":
        return (f"Source: a preview {where} (a small model on part of the data, {seeds} "
                f"seed(s), {length}). It shows that the pipeline runs end to end; where it sits "
                "at chance its rankings are noise and prove nothing about the paper. A run "
                "stored under results/paper (GPU) or results/cpu replaces it when there is one.")
    return f"Source: a custom configuration ({where}; {seeds} seeds, {length})."


def show_run(run: Any, final: pd.DataFrame | None = None, by: str = "pe") -> None:
    """Print where a run's numbers come from (:meth:`lstpe.store.results.Run.describe`), what that
    source can show (:func:`source_note`) and its caveats (:func:`warn`; ``final``: the
    validation table, default ``run.final("val")``)."""
    say(run.describe())
    say(source_note(run))
    if "epochs" in _cfg(run):  # an LST run (the brain's has steps and no accuracy)
        warn(run, run.final("val") if final is None else final, by=by)


def why_no_correlation(final: pd.DataFrame, n_points: int, what: str = "σ",
                       min_points: int = 3) -> str | None:
    """Why a rank correlation across ``n_points`` values (of ``what``) must not be computed
    from these models, or None when it may: fewer than ``min_points`` values, or some group
    of ``final`` (one validation row per model) within noise of chance."""
    if n_points < min_points:
        return (f"No rank correlation: {n_points} value(s) of {what} stored, and a rank "
                f"correlation needs {min_points} or more.")
    if final is not None and not final.empty:
        ct = chance_test(final)
        if ct["at_chance"].any():
            low = ", ".join(ct.loc[ct["at_chance"], "pe"].astype(str))
            return (f"No rank correlation: {low} within noise of chance, and a correlation "
                    "that includes guessing models correlates noise.")
    return None


def comparable(*runs: Any) -> str | None:
    """Why these runs' accuracies must not be set side by side, or None when they may: they
    differ in scale (preset), epochs or model size (a preview beside the paper's recipe)."""
    keys = ("preset", "epochs")
    seen = {(r.name, tuple(str(_cfg(r).get(k)) for k in keys),
             str((_cfg(r).get("model") or {}).get("d_model"))) for r in runs}
    if len({s[1:] for s in seen}) <= 1:
        return None
    what = "; ".join(f"{n}: {v[0]} scale, {v[1]} epochs, d_model={d}"
                     for n, v, d in sorted(seen))
    return (f"Not set side by side: the runs differ in scale or length ({what}), so a "
            "difference between them would say more about the runs than about the optimiser.")


_WARNED: set[str] = set()
"""Caveats already printed in this kernel: a page says each one once."""


def warn(exp: Any, final: pd.DataFrame | None = None, by: str = "pe") -> None:
    """Print :func:`caveats`, wrapped, each at most once per kernel (nothing when there are
    none, or when they were all said above)."""
    for line in caveats(exp, final, by=by):
        if line not in _WARNED:
            _WARNED.add(line)
            say(line, prefix="WARNING: ")


def _seed_counts(run: Any) -> tuple[list[int], bool]:
    """(sorted distinct seed counts, whether they are per PE): a campaign run's
    ``seeds_per_pe``, else the config's seeds."""
    per_pe = (getattr(run, "manifest", None) or {}).get("seeds_per_pe")
    if per_pe:
        return sorted({len(v) for v in per_pe.values()}), True
    return [len(_cfg(run).get("seeds") or [])], False


def _epochs_reason(run: Any, epochs: int) -> str:
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
        return (f"the campaign's units stop at {epochs}, an epoch the authors logged, and are "
                f"compared with their logs there first; {reg}")
    return reg


def _span(lo: int, hi: int) -> str:
    """A count that may vary as a short label: ``3`` (``lo == hi``) or ``3-5``."""
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def _seed_label(run: Any) -> str:
    """A run's seeds as a short label: ``2`` or ``1 per PE`` / ``1-3 per PE`` (campaign)."""
    counts, per_pe = _seed_counts(run)
    n = _span(counts[0], counts[-1])
    return f"{n} per PE" if per_pe else n


def _fewest_seeds(run: Any) -> int:
    return _seed_counts(run)[0][0]


def _grouped(pairs: Iterable[tuple[str, str]]) -> str:
    """``(name, value)`` pairs as ``a, b (v1); c (v2)``: names sharing a value named once."""
    groups: dict[str, list[str]] = {}
    for name, value in pairs:
        groups.setdefault(value, []).append(name)
    return "; ".join(f"{', '.join(names)} ({value})" for value, names in groups.items())


def run_facts(runs: Iterable[Any]) -> list[str]:
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


def show_runs(*runs: Any) -> None:
    """Print :func:`run_facts` of the page's runs, wrapped (one call per page)."""
    for line in run_facts(runs):
        say(line)


# --------------------------------------------------------------------------- setup


def describe_setup(S: Any) -> str:
    """The chapter's setup line: scale, device, torch, python; the results folder relative to
    the repository (a relative path as given; an absolute one outside the repository, or with
    no repository at all as on Colab, is called a custom folder), never a local absolute path."""
    import torch

    from lstpe.runtime import repo_root

    rd = Path(S.results_dir)
    root = repo_root()
    if not rd.is_absolute():
        where = rd.as_posix()
    elif root is not None and rd.resolve().is_relative_to(root.resolve()):
        where = rd.resolve().relative_to(root.resolve()).as_posix()
    else:
        where = "custom folder (results_dir)"
    return (f"scale={S.scale}  device={S.device}  torch={torch.__version__}  "
            f"python={platform.python_version()}  stored runs from: {where}")
