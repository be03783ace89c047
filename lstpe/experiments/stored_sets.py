"""Which stored set of a paper-scale run a page shows, and how the page says what it shows.

A named run of the registry may be stored at paper scale in three forms (under
``<results_dir>``):

``fragments``
    the campaign's 200-epoch one-model folders, ``paper/<run>/<pe>/<seed>/``
    (:mod:`lstpe.experiments.fragments`);
``whole``
    a whole run of ``E`` epochs, ``paper-e<E>/<run>/`` (``lstpe reproduce run``, an unpacked
    pack);
``models``
    a reader's one-model folders of ``E`` epochs, ``paper-e<E>/<run>/<pe>/<seed>/``: what
    ``lstpe reproduce run --task-index I --task-count N`` (a Slurm array task) writes.

:func:`paper_sets` lists the sets stored for what was asked, from their manifests alone (no
file is verified, no artefact loaded, no model run), **most models first**; a tie keeps the
order above (the campaign's fragments, then a whole run, then a reader's models), which is
what :func:`lstpe.experiments.runs.get_run` preferred before sets were counted. So a reader's
15-seed Table 2 is what chapter 6 shows, and the stored fragments still are where nothing
holds more.

:func:`shown` and :func:`shown_line` say what a run returned by ``get_run`` holds: how many
seeds each PE has, the epochs, the form and folder it was read from, and the device(s) it was
trained on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lstpe.store import results as res

FORMS: tuple[str, ...] = ("fragments", "whole", "models")
"""The paper-scale forms of a stored run, in the order a tie between them keeps."""

FRAGMENT_ASKED: tuple[str, ...] = ("pes", "seeds", "sigmas", "epochs")
"""What a caller may ask of the campaign's fragments (anything else passes them over)."""

NO_FRAGMENTS: tuple[str, ...] = ("long4000",)
"""Runs the campaign's 200-epoch units never stand in for: ``long4000`` exists to measure
what 4000 epochs change."""


@dataclass(frozen=True)
class StoredSet:
    """One stored set of a run's models, as its manifests describe it.

    Attributes:
        form: one of :data:`FORMS`.
        path: the folder it lives in (for fragments, ``paper/<run>``; a PE may be borrowed
            from another run's folder with the same recipe).
        seeds_per_pe: the seeds stored for each PE asked for (PEs without any left out).
        epochs: the epochs its manifests say (None: not read, or not all the same).
    """

    form: str
    path: Path
    seeds_per_pe: dict[str, list[int]] = field(default_factory=dict)
    epochs: int | None = None

    @property
    def n_models(self) -> int:
        """The models of what was asked that the set holds."""
        return sum(len(s) for s in self.seeds_per_pe.values())


def paper_home(name: str, epochs: int, results_dir: str | Path | None = None) -> Path:
    """``<results>/paper-e<epochs>/<name>``: where a whole paper-scale run of ``name`` of
    ``epochs`` epochs lives, and the reader's one-model folders of it
    (:func:`model_dir`)."""
    return res.results_root(results_dir) / f"paper-e{int(epochs)}" / name


def model_dir(name: str, epochs: int, pe: str, seed: int,
              results_dir: str | Path | None = None) -> Path:
    """``<results>/paper-e<epochs>/<name>/<pe>/<seed>``: one model a reader trained."""
    return paper_home(name, epochs, results_dir) / pe / str(int(seed))


def model_dirs(name: str, epochs: int, results_dir: str | Path | None = None
               ) -> dict[tuple[str, int], Path]:
    """The reader's one-model folders of ``name`` at ``epochs`` that hold a manifest, by
    (PE, seed). A folder whose name is not a seed is not one (``tables/``, ``checkpoints/``
    of a whole run)."""
    home = paper_home(name, epochs, results_dir)
    out: dict[tuple[str, int], Path] = {}
    for m in sorted(home.glob("*/*/manifest.json")) if home.is_dir() else []:
        seed = m.parent.name
        if seed.isdigit():
            out[(m.parent.parent.name, int(seed))] = m.parent
    return out


def _epochs_of(folder: Path) -> int | None:
    """The epochs a run folder's manifest says, without verifying it (None: unreadable)."""
    try:
        value = json.loads((folder / "manifest.json").read_text()).get("config", {})["epochs"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return int(value) if isinstance(value, int) else None


def _pick(pairs: dict[tuple[str, int], Any], pes: Sequence[str],
          seeds: Sequence[int] | None) -> dict[str, list[int]]:
    """Seeds per PE (in ``pes``' order, seeds sorted) of the pairs asked for."""
    out: dict[str, list[int]] = {}
    for pe in pes:
        got = sorted(s for p, s in pairs if p == pe and (seeds is None or s in seeds))
        if got:
            out[pe] = got
    return out


def fragment_set(name: str, pes: Sequence[str], results_dir: str | Path | None = None,
                 seeds: Sequence[int] | None = None, epochs: int | None = None
                 ) -> StoredSet | None:
    """The campaign's fragments of ``name`` for ``pes`` (and ``seeds``, ``epochs``), as
    :func:`lstpe.experiments.fragments.fragments_of` selects them: the run's own units, and
    another run's units of the same recipe for a PE; None if none is stored. A fragment
    folder without a manifest counts (loading it names it)."""
    from lstpe.experiments import units as un

    base = res.results_root(results_dir)
    if name in NO_FRAGMENTS or not (base / "paper").is_dir():
        return None
    found: dict[tuple[str, int], Path] = {}
    for u in un.plan():
        if u.pe not in pes or (seeds is not None and u.seed not in seeds) \
                or (u.pe, u.seed) in found:
            continue
        path = u.path(base)
        if not (path.exists() or path.is_symlink()):
            continue
        if u.run != name:
            try:
                mine = un.Unit(name, u.pe, u.seed).config().to_dict()
                if res.config_diff(u.config().to_dict(), mine, ignore=un.IGNORED_KEYS):
                    continue
            except ValueError:
                continue
        found[(u.pe, u.seed)] = path
    if epochs is not None:
        found = {k: p for k, p in found.items()
                 if not (p / "manifest.json").exists() or _epochs_of(p) == epochs}
    if not found:
        return None
    lengths = {_epochs_of(p) for p in found.values()}
    return StoredSet("fragments", base / "paper" / name, _pick(found, pes, seeds),
                     lengths.pop() if len(lengths) == 1 else None)


def whole_set(name: str, epochs: int, pes: Sequence[str],
              results_dir: str | Path | None = None,
              seeds: Sequence[int] | None = None) -> StoredSet | None:
    """The whole run ``paper-e<epochs>/<name>`` if its manifest is there (its PEs and seeds
    as the manifest says; an unreadable one counts no model, and loading it names it)."""
    home = paper_home(name, epochs, results_dir)
    if not (home / "manifest.json").exists():
        return None
    try:
        cfg = json.loads((home / "manifest.json").read_text()).get("config") or {}
        pairs = {(p, int(s)): home for p in cfg.get("pes") or [] for s in cfg.get("seeds") or []}
    except (OSError, ValueError, TypeError, AttributeError):
        pairs = {}
    return StoredSet("whole", home, _pick(pairs, pes, seeds), _epochs_of(home))


def models_set(name: str, epochs: int, pes: Sequence[str],
               results_dir: str | Path | None = None,
               seeds: Sequence[int] | None = None) -> StoredSet | None:
    """The reader's one-model folders of ``name`` at ``epochs`` for what was asked, or None."""
    per_pe = _pick(model_dirs(name, epochs, results_dir), pes, seeds)
    if not per_pe:
        return None
    return StoredSet("models", paper_home(name, epochs, results_dir), per_pe, epochs)


def paper_sets(name: str, pes: Sequence[str], epochs: int,
               results_dir: str | Path | None = None, seeds: Sequence[int] | None = None,
               fragment_epochs: int | None = None, fragments: bool = True
               ) -> list[StoredSet]:
    """Every paper-scale set of ``name`` stored for what was asked, most models first (a tie
    keeps :data:`FORMS`' order). Nothing is verified or loaded but manifests.

    Args:
        pes: the PEs asked for (the registry's, or the caller's).
        epochs: the length of a whole run or of a reader's models (the caller's, else the
            registry's paper epochs).
        seeds: the seeds asked for (None: whatever is stored).
        fragment_epochs: keep only fragments of this length (None: the fragments' own).
        fragments: whether the campaign's fragments may stand in (not when the caller asked
            for something they were not trained with: an optimizer, a learning rate...).
    """
    sets = [fragment_set(name, pes, results_dir, seeds, fragment_epochs) if fragments else None,
            whole_set(name, epochs, pes, results_dir, seeds),
            models_set(name, epochs, pes, results_dir, seeds)]
    found = [s for s in sets if s is not None]
    return sorted(found, key=lambda s: -s.n_models)  # stable: a tie keeps FORMS' order


def _form(run: res.Run) -> str:
    """How a run returned by ``get_run`` was stored (or ``cached`` / ``live``)."""
    man = run.manifest
    if run.source != "stored":
        return run.source
    if man.get("kind") == "campaign-merge":
        return str(man.get("store_form", "fragments"))
    return "whole" if run.scale == "paper" else run.scale


def shown(run: res.Run) -> dict[str, Any]:
    """What a run returned by :func:`lstpe.experiments.runs.get_run` holds, for a page to
    say: ``run``, ``form`` (a :data:`FORMS` entry, a stored run's scale such as ``cpu``, or
    ``cached`` / ``live``), ``seeds_per_pe`` (n per PE), ``n_models``, ``epochs`` (or
    ``steps``), ``trained_on`` (the device(s) of its manifest) and ``path``."""
    man, cfg = run.manifest, run.config
    per = man.get("seeds_per_pe") or {p: list(cfg.get("seeds") or []) for p in cfg.get("pes")
                                      or []}
    folder = man.get("store_path") or (str(run.path) if run.path is not None else None)
    out: dict[str, Any] = {"run": run.name, "form": _form(run),
                           "seeds_per_pe": {p: len(s) for p, s in per.items()},
                           "n_models": sum(len(s) for s in per.values()),
                           "trained_on": man.get("device"), "path": folder}
    out["epochs" if "epochs" in cfg else "steps"] = cfg.get("epochs", cfg.get("steps"))
    return out


FORM_WORDS: dict[str, str] = {
    "fragments": "the campaign's fragments", "whole": "a whole run",
    "models": "a reader's one-model folders", "cpu": "a CPU-scale run",
    "cached": "a run from the cache", "live": "trained now"}


def shown_line(run: res.Run) -> str:
    """:func:`shown` in one line: ``table2: 98 models (21 PEs, 4-5 seeds each), 200 epochs,
    the campaign's fragments in results/paper/table2, trained on cpu: x86_64 (2 threads)``."""
    s = shown(run)
    counts = sorted(set(s["seeds_per_pe"].values())) or [0]
    seeds = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    length = f"{s['epochs']} epochs" if "epochs" in s else f"{s['steps']} steps"
    where = f" in {s['path']}" if s["path"] else ""
    return (f"{s['run']}: {s['n_models']} models ({len(s['seeds_per_pe'])} PEs, {seeds} seeds "
            f"each), {length}, {FORM_WORDS.get(s['form'], s['form'])}{where}, trained on "
            f"{s['trained_on']}")
