"""Get a named run: stored, else cached, else trained and saved.

:func:`get_run` is the one door to a run for the chapters, ``lstpe`` and the GPU driver::

    run = get_run("table2")                      # a chapter at preview scale
    run = get_run("table1", "cpu", seeds=[29])   # another seed: trained, not the stored run

What a name means at each scale is :func:`lstpe.experiments.registry.run_config` (the
registry). Where the numbers come from, best first (under ``<results_dir>``: ``paper/<name>/
<pe>/<seed>/`` holds only the campaign's 200-epoch fragments; ``long/`` only the campaign's
long units, read by :mod:`lstpe.experiments.long_units`; ``paper-e<E>/<name>/`` a whole
paper-scale run of ``E`` epochs, :func:`full_run_dir`, from ``lstpe reproduce run`` or an
unpacked pack, or a reader's one-model folders ``paper-e<E>/<name>/<pe>/<seed>/`` from
``lstpe reproduce run --task-index I --task-count N``; ``cpu/<name>/`` a run of the paper's
model trained on a CPU):

1. at paper scale, the stored set with the **most models** of what was asked
   (:func:`lstpe.experiments.stored_sets.paper_sets`, counted from manifests alone; a tie
   keeps this order): the campaign's **fragments** (:func:`fragments_run`: 200-epoch units of
   the paper's recipe, merged, each PE with the seeds stored so far; not when other epochs or
   another recipe are asked for), a **whole run** ``paper-e<E>/<name>``, a reader's
   **models** (:func:`models_run`). ``E``: the epochs asked for, else the registry's paper
   epochs. The sets passed over are named, so is a whole run of another length (``epochs=E``
   shows it). Seeds or PEs asked for and not stored are named (and refused under
   ``require_stored``). A whole run at ``paper/<name>/`` itself, where the fragments live, is
   refused, naming where it belongs. :func:`lstpe.experiments.stored_sets.shown_line` says
   what the run returned holds (seeds per PE, epochs, where it was read and trained);
2. else a stored whole run ``cpu/<name>``. A whole run or a reader's model is used when it
   *fits*: its config is the registry's config at its scale, with whatever the caller set
   (``seeds``, ``sigmas``, ``epochs``, ...) equal to the caller's values (the PEs asked for
   may be a subset of the stored ones). If it differs only in what the caller set, it is
   passed over with a message (the caller asked for another run). If it differs in anything
   else, it is refused with a :class:`StoredRunMismatch` naming the keys: the registry changed
   since it was trained, and its numbers would be shown as something they are not.
3. a **cached** run of exactly this config and code (:func:`lstpe.runtime.cache_dir`): keyed by
   its full configuration *and* a hash of the code and data training depends on
   (:data:`TRAINING_SOURCES`), so a cached run is what training would produce now (training
   on the CPU is deterministic); chapters that need the same run, and a second execution of
   the book (nbmake, then the book build), train it once.
4. otherwise the run is **trained** now (``live``) and saved: at ``paper`` or ``cpu`` scale,
   into :func:`full_run_dir` (``cpu/<name>``, ``paper-e<E>/<name>``) when the caller set
   nothing and no run is there (resumable from checkpoints), else into the cache. The folder
   it will be saved in is checked before training (a file or read-only ``$LSTPE_CACHE`` is
   refused then, not after the training).

Every run returned is remembered (:func:`used_runs`) so a chapter's tables can say where their
numbers come from.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from lstpe.experiments import init_maps, stored_sets
from lstpe.experiments.limits import check_sigmas
from lstpe.experiments.registry import BRAIN_RUN, REGISTRY, run_config
from lstpe.experiments.stored_sets import FRAGMENT_ASKED, NO_FRAGMENTS
from lstpe.runtime import cache_dir
from lstpe.store import results as res
from lstpe.store.storage import dotted_get
from lstpe.training.config import SCALES

STORED_SCALES: tuple[str, ...] = ("paper", "cpu")
"""Scales whose runs are stored under ``results/<scale>/``, best first."""

FIT_IGNORE: tuple[str, ...] = (*res.EXECUTION_KEYS, "amp", "progress")
"""Config keys that never make a stored run unfit: how it was executed, including bf16
autocast (a stored run's ``describe()`` says when it used it)."""


SUBSET_KEYS: tuple[str, ...] = ("pes", "train_masks")
"""List-valued keys for which a stored run fits when it holds at least what is wanted (a
chapter shows the PEs it asks for out of a run that has more)."""


class StoredRunMismatch(ValueError):
    """A stored run whose config is not the registry's: refused, naming the keys."""


TRAINING_SOURCES = ("runtime.py", "lst/*.py", "nn/*.py", "store/*.py", "training/*.py",
                    "brain/*.py", "data/lst/*.csv", "data/brain/*.csv")
"""What determines what a training run produces (the cache key hashes them): every module of
the subpackages below the experiments, and the vendored data. Each pattern must match a file:
a pattern that matches none (a folder moved or renamed) is an error, never a key that
silently stops covering the code."""


@lru_cache(maxsize=4)
def source_hash(root: Path | None = None) -> str:
    """A hash of every file of :data:`TRAINING_SOURCES` (paths and bytes) under ``root``
    (default: this package's folder).

    Raises:
        FileNotFoundError: a pattern matches no file (naming it).
    """
    root = Path(root) if root is not None else Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for pattern in TRAINING_SOURCES:
        files = sorted(root.glob(pattern))
        if not files:
            raise FileNotFoundError(f"lstpe.experiments.runs.TRAINING_SOURCES: {pattern!r} "
                                    f"matches no file under {root}; update the list")
        for p in files:
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def cache_key(config: dict) -> str:
    """The cache key of a config dict (with :func:`source_hash`)."""
    blob = json.dumps(config, sort_keys=True, default=str) + source_hash()
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


_USED: dict[str, res.Run] = {}


def used_runs() -> list[res.Run]:
    """The runs :func:`get_run` returned in this process, the latest of each name."""
    return list(_USED.values())


def _use(run: res.Run) -> res.Run:
    _USED[run.name] = run
    return run


def conflicts(stored: dict, wanted: dict, asked: Iterable[str]) -> tuple[list[str], list[str]]:
    """How a stored run's config differs from the one wanted.

    Returns:
        (differences in keys the caller set, other differences), each as
        ``"key: stored X, wanted Y"``. A :data:`SUBSET_KEYS` key differs only if a wanted
        entry is not stored.
    """
    asked = set(asked)
    stored, wanted = _sorted_seeds(stored), _sorted_seeds(wanted)
    diff = res.config_diff(stored, wanted, ignore=FIT_IGNORE)
    mine: list[str] = []
    other: list[str] = []
    for key in diff:
        top = key.split(".")[0]
        if top in SUBSET_KEYS and isinstance(stored.get(top), list) \
                and set(wanted.get(top) or []) <= set(stored[top]):
            continue
        line = f"{key}: stored {_get(stored, key)}, wanted {_get(wanted, key)}"
        (mine if top in asked or (top == "pes" and "sigmas" in asked) else other).append(line)
    return mine, other


def _sorted_seeds(config: dict) -> dict:
    """The seeds in order: a run's models are the same whatever order its seeds were listed."""
    seeds = config.get("seeds")
    return {**config, "seeds": sorted(seeds)} if isinstance(seeds, list) else config


def _get(d: Any, key: str) -> str:
    text = json.dumps(dotted_get(d, key), default=str)
    return text if len(text) <= 60 else text[:56] + "...]"


def full_run_dir(name: str, scale: str, epochs: int,
                 results_dir: str | Path | None = None) -> Path:
    """Where a whole run of ``name`` lives: ``<results>/paper-e<epochs>/<name>`` at paper scale
    (``results/paper/`` holds the campaign's fragments, ``results/long/`` its long units), else
    ``<results>/<scale>/<name>``."""
    if scale == "paper":
        return stored_sets.paper_home(name, epochs, results_dir)
    return res.results_root(results_dir) / scale / name


def _other_lengths(name: str, base: Path, shown: int | None) -> list[Path]:
    """Whole paper-scale runs of ``name`` stored under ``paper-e*/`` of another length than
    ``shown``."""
    found = sorted(p.parent for p in base.glob(f"paper-e*/{name}/manifest.json"))
    return [p for p in found if p.parent.name != f"paper-e{shown}"]


def stored_run(name: str, scale: str = "preview", results_dir: str | Path | None = None,
               verbose: bool = True, require: bool = False, rebuild_init_maps: bool = True,
               **asked: Any) -> res.Run | None:
    """The best stored run of ``name`` that fits (see the module docstring), or None
    (``rebuild_init_maps``: as :func:`get_run`).

    Raises:
        StoredRunMismatch: a stored run differs from the registry in keys the caller did not
            set (naming the run and the keys), or a whole run lies where the fragments live.
        lstpe.store.results.DamagedFileError: a stored run is damaged (naming the file).
        FileNotFoundError: ``require`` and seeds or PEs asked for are not stored (naming them).
    """
    base = res.results_root(results_dir)
    asked = {k: v for k, v in asked.items() if v is not None and k not in FIT_IGNORE}
    for src in [s for s in STORED_SCALES if SCALES.index(s) >= SCALES.index(scale)]:
        if src == "paper" and name in REGISTRY:
            run = _paper_run(name, base, verbose, require, asked, rebuild_init_maps)
        else:
            run = _whole_run(name, src, f"{src}/{name}", base, verbose, asked)
        if run is not None:
            return run
    return None


def _paper_run(name: str, base: Path, verbose: bool, require: bool,
               asked: dict[str, Any], rebuild_init_maps: bool = True) -> res.Run | None:
    """The paper-scale set of ``name`` with the most models of what was asked that fits
    (:func:`lstpe.experiments.stored_sets.paper_sets`), or None; the sets passed over are
    named."""
    epochs = int(asked.get("epochs") or REGISTRY[name].paper_epochs)
    misplaced = base / "paper" / name
    if (misplaced / "manifest.json").exists():
        raise StoredRunMismatch(
            f"{misplaced} holds a whole run where only the campaign's fragments live "
            f"(paper/<run>/<pe>/<seed>/); move it to {base}/paper-e<E>/{name} (E: its "
            "epochs), where get_run reads whole runs")
    other = [k for k in asked if k not in FRAGMENT_ASKED]
    if other and name not in NO_FRAGMENTS:
        fragments_run(name, base, verbose, **asked)  # says why the fragments are passed over
    pes = asked.get("pes") or run_config(name, "paper", sigmas=asked.get("sigmas")).pes
    sets = stored_sets.paper_sets(name, pes, epochs, base, seeds=asked.get("seeds"),
                                  fragment_epochs=asked.get("epochs"), fragments=not other)
    for i, found in enumerate(sets):
        if found.form == "fragments":
            run = fragments_run(name, base, verbose, require=require,
                                rebuild_init_maps=rebuild_init_maps, **asked)
        elif found.form == "whole":
            run = _whole_run(name, "paper", f"paper-e{epochs}/{name}", base, verbose, asked,
                             rebuild_init_maps)
        else:
            run = models_run(name, base, verbose, require=require,
                             rebuild_init_maps=rebuild_init_maps, **asked)
        if run is None:
            continue
        if found.form != "whole":
            run.manifest.update(store_form=found.form, store_path=str(found.path))
        rest = [s for j, s in enumerate(sets) if j != i]
        if rest and verbose:
            print(f"{name!r}: shown: {found.path} ({found.n_models} models); also stored: "
                  + ", ".join(f"{s.path} ({s.n_models} models)" for s in rest), flush=True)
        if found.form == "fragments":
            others = _other_lengths(name, base, run.config.get("epochs"))
            if others and verbose:
                print(f"also stored: {', '.join(map(str, others))} (whole runs of "
                      f"{name!r} of another length; get_run(..., epochs=E) shows "
                      "one)", flush=True)
        return run
    return None


def _whole_run(name: str, src: str, folder: str, base: Path, verbose: bool,
               asked: dict[str, Any], rebuild_init_maps: bool = True) -> res.Run | None:
    """The whole run ``<base>/<folder>`` if it is stored and fits what was asked, else None
    (passed over with a message when it differs in what the caller set;
    ``rebuild_init_maps``: as :func:`get_run`)."""
    run = res.find(folder, base)
    if run is None:
        return None
    wrong = res.history_problems(run.history, run.config["epochs"]) \
        if "epochs" in run.config else []
    if wrong:  # never read as the epochs its config says
        raise res.DamagedFileError(f"the stored run {run.path} is not what its manifest "
                                   f"says: {wrong[0]}; restore it, or move it out of {base}")
    mine, other = conflicts(run.config, run_config(name, src, **asked).to_dict(), asked)
    if other:
        raise StoredRunMismatch(
            f"the stored run {run.path} was not trained with the registry's {name!r} at "
            f"{src} scale ({'; '.join(other)}); retrain it (lstpe reproduce run "
            f"--scale {src} --parts {name}) or move it out of {base}")
    if mine:
        if verbose:
            print(f"the stored run {run.path} does not fit what was asked "
                  f"({'; '.join(mine)}); not used", flush=True)
        return None
    if rebuild_init_maps:
        init_maps.restore([run])  # its attention maps at initialisation, if it dropped them
    run.name = name
    return run


def models_run(name: str, results_dir: str | Path | None = None, verbose: bool = True,
               require: bool = False, rebuild_init_maps: bool = True, **asked: Any
               ) -> res.Run | None:
    """A reader's one-model folders of ``name`` (``paper-e<E>/<name>/<pe>/<seed>/``, what
    ``lstpe reproduce run --task-index I --task-count N`` writes) merged into one run, or
    None if none is stored for what was asked, or they differ from it in what the caller set.

    Each folder is verified on load and must hold its one model of the registry's config at
    paper scale with what the caller set. Seeds and PEs asked for and not stored are named,
    as :func:`fragments_run` names them.

    Raises:
        StoredRunMismatch: a folder holds another model than its name says, or a config
            that is not the registry's in keys the caller did not set (naming both).
        lstpe.store.results.DamagedFileError: a folder fails verification (naming the file).
        FileNotFoundError: ``require`` and an asked seed or PE has no folder (naming them).
    """
    from lstpe.experiments import fragments as fr

    base = res.results_root(results_dir)
    epochs = int(asked.get("epochs") or REGISTRY[name].paper_epochs)
    pes = asked.get("pes") or run_config(name, "paper", sigmas=asked.get("sigmas")).pes
    seeds = asked.get("seeds")
    dirs = stored_sets.model_dirs(name, epochs, base)
    pick = [(p, s) for p in pes for s in sorted(t for q, t in dirs if q == p)
            if seeds is None or s in seeds]
    if not pick:
        return None
    rest = {k: v for k, v in asked.items() if k not in ("pes", "seeds", "sigmas", "epochs")}
    models = []
    for pe, seed in pick:
        run = res.load(dirs[(pe, seed)])
        if run.config.get("pes") != [pe] or run.config.get("seeds") != [seed]:
            raise StoredRunMismatch(f"{run.path} holds PEs {run.config.get('pes')} and seeds "
                                    f"{run.config.get('seeds')}, not {pe} seed {seed} (moved "
                                    "by hand?); move it to its own folder")
        wrong = res.history_problems(run.history, epochs)
        if wrong:
            raise res.DamagedFileError(f"the stored model {run.path} is not what its "
                                       f"manifest says: {wrong[0]}; retrain it, or delete it")
        want = run_config(name, "paper", pes=[pe], seeds=[seed], epochs=epochs, **rest)
        mine, other = conflicts(run.config, want.to_dict(), rest)
        if other:
            raise StoredRunMismatch(
                f"the stored model {run.path} was not trained with the registry's {name!r} "
                f"at paper scale ({'; '.join(other)}); retrain it (lstpe reproduce run "
                f"--parts {name}) or move it out of {base}")
        if mine:
            if verbose:
                print(f"the stored models under {run.path.parent.parent} do not fit what was "
                      f"asked ({'; '.join(mine)}); not used", flush=True)
            return None
        models.append(run)
    missing = _missing(models, asked, pes)
    if missing and require:
        raise FileNotFoundError(f"the stored models of {name!r} under "
                                f"{stored_sets.paper_home(name, epochs, base)} lack what was "
                                f"asked: {', '.join(missing)}")
    if rebuild_init_maps:
        init_maps.restore(models)
    merged = fr.merge(models, name)
    if missing:
        merged.manifest["missing"] = missing
        print(f"WARNING: {name!r}: asked for, not stored, left out: {', '.join(missing)}",
              flush=True)
    return merged


def fragments_run(name: str, results_dir: str | Path | None = None, verbose: bool = True,
                  require: bool = False, rebuild_init_maps: bool = True, **asked: Any
                  ) -> res.Run | None:
    """The campaign's fragments of ``name`` (:mod:`lstpe.experiments.units`) merged into one
    run, or
    None if none is stored that fits what was asked.

    Each fragment is verified on load and must have its unit's recipe (else
    :class:`lstpe.experiments.units.RecipeMismatch` names the fragment and the keys). The PEs
    and seeds
    asked for select fragments; ``epochs`` keeps the fragments of that many epochs. Anything
    else asked (an optimizer, a learning rate...) is not what the campaign trained: the
    fragments are passed over with a message. The run's ``manifest["seeds_per_pe"]`` says
    which seeds each PE has; PEs without a fragment are absent. Seeds and PEs asked for that
    have no fragment are named in a warning and in ``manifest["missing"]`` (which
    :meth:`~lstpe.store.results.Run.describe` shows); with ``require`` they are refused.

    Raises:
        FileNotFoundError: ``require`` and an asked seed or PE has no fragment (naming them).
        lstpe.store.results.DamagedFileError: a fragment folder of the run has no manifest
            (naming it), or a fragment fails verification.
    """
    from lstpe.experiments import fragments as fr

    other = sorted(k for k in asked if k not in FRAGMENT_ASKED)
    base = res.results_root(results_dir)
    if not (base / "paper").is_dir():
        return None
    if other:
        if verbose:
            print(f"the campaign's fragments of {name!r} were trained with the registry's "
                  f"{', '.join(other)}; asked for others: not used", flush=True)
        return None
    pes = asked.get("pes") or run_config(name, "paper", sigmas=asked.get("sigmas")).pes
    frags = fr.fragments_of(name, pes, base, seeds=asked.get("seeds"), restore=rebuild_init_maps)
    if asked.get("epochs") is not None:
        frags = [f for f in frags if f.config.get("epochs") == asked["epochs"]]
    if not frags:
        return None
    missing = _missing(frags, asked, pes)
    if missing and require:
        raise FileNotFoundError(f"the campaign's fragments of {name!r} under {base / 'paper'} "
                                f"lack what was asked: {', '.join(missing)} (lstpe campaign "
                                "status says what is stored)")
    merged = fr.merge(frags, name)
    if missing:
        merged.manifest["missing"] = missing
        print(f"WARNING: {name!r}: asked for, not stored, left out: {', '.join(missing)}",
              flush=True)
    return merged


def _missing(frags: list[res.Run], asked: dict, pes: list[str]) -> list[str]:
    """The PEs asked for (``pes`` or ``sigmas``) without a fragment, and the seeds asked for
    missing for a PE that has fragments: ``"learn-1.7"``, ``"learn-0.2 seed 8880"``."""
    have = {(f.config["pes"][0], f.config["seeds"][0]) for f in frags}
    present = [p for p in pes if any(q == p for q, _ in have)]  # in the run's order
    named = bool(asked.get("pes") or asked.get("sigmas"))
    out = [p for p in pes if p not in present] if named else []
    for p in (pes if named else present):
        if p in present:
            out += [f"{p} seed {s}" for s in asked.get("seeds") or [] if (p, s) not in have]
    return out


def get_run(name: str, scale: str = "preview", *, results_dir: str | Path | None = None,
            device: str = "auto", stored: bool = True, cache: bool = True,
            require_stored: bool = False, progress: bool = False, rebuild_init_maps: bool = True,
            **asked: Any) -> res.Run:
    """The run ``name`` at ``scale``: stored, else cached, else trained (module docstring).

    Args:
        name: a registry name (``table1``, ``table2``, ``table4/adam``, ``table4/sgd``,
            ``tables56``, ``long4000``) or ``brain``.
        scale: ``preview``, ``cpu`` or ``paper``: what to train if nothing fits.
        results_dir: the results folder (default: the repository's ``results/``).
        device: where to train (``auto``: cuda > mps > cpu).
        stored: look for stored runs at all.
        cache: reuse (and fill) the cache of trained runs.
        require_stored: raise instead of training when no stored run fits.
        progress: progress bars while training.
        rebuild_init_maps: rebuild the stored models' attention maps at initialisation (a
            fragment keeps only a witness of them: :mod:`lstpe.experiments.init_maps`). False,
            for a page that reads none of them: the run's artefacts lack
            ``val_attention_init`` and loading runs no model.
        **asked: values that replace the registry's (``seeds``, ``epochs``, ``sigmas``,
            ``pes``, ``optimizer``...; brain: ``steps``, ``train_masks``...); None = the
            registry's.
    Raises:
        ValueError: an unknown name or scale, or an invalid value (naming it; a sigma whose
            float32 initialisation overflows: :func:`lstpe.experiments.limits.check_sigmas`).
        StoredRunMismatch: a stored run was trained with another config than the registry's.
        FileNotFoundError: ``require_stored`` and no stored run fits.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; valid scales: {', '.join(SCALES)}")
    if name not in REGISTRY and name != BRAIN_RUN:
        raise ValueError(f"unknown run {name!r}; valid runs: {', '.join(REGISTRY)}, {BRAIN_RUN}")
    asked = {k: v for k, v in asked.items() if v is not None}
    check_sigmas(asked.get("sigmas"), asked.get("pes"))  # 1e39 is inf in float32
    cfg = run_config(name, scale, **asked, device=device)  # validates every value
    base = res.results_root(results_dir)
    if stored or require_stored:
        found = stored_run(name, scale, base, require=require_stored,
                           rebuild_init_maps=rebuild_init_maps, **asked)
        if found is not None:
            return _use(found)
        if require_stored:
            raise FileNotFoundError(f"no stored run of {name!r} fits under {base} "
                                    f"({', '.join(s for s in STORED_SCALES)} scales)")
    cached = cache_dir() / scale / f"{name.replace('/', '_')}-{cache_key(cfg.to_dict())}"
    if cache and (cached / "manifest.json").exists():
        run = res.load(cached)
        run.name, run.source = name, "cached"
        return _use(run)
    run_dir = None
    if scale in STORED_SCALES:
        home = full_run_dir(name, scale, cfg.epochs, base)
        run_dir = home if not asked and not (home / "manifest.json").exists() else cached
    target = run_dir if run_dir is not None else cached if cache else None
    if target is not None:  # a file or read-only folder: refused before, not after, training
        try:
            res.ensure_writable_dir(target.parent)
        except res.RunDirError as e:
            hint = " ($LSTPE_CACHE: set it to a writable folder, or pass cache=False)" \
                if target == cached else ""
            raise res.NotWritableError(f"{e}{hint}; nothing was trained") from None
    run = _train(name, cfg, run_dir, progress)
    if run_dir is None and cache:
        _save_cached(cached, run)
    run.name = name
    return _use(run)


def _train(name: str, cfg: Any, run_dir: Path | None, progress: bool) -> res.Run:
    if name == BRAIN_RUN:
        from lstpe.brain.train import train_brain

        return train_brain(cfg, run_dir=run_dir, progress=progress)
    from lstpe.training.train import train

    return train(cfg, run_dir=run_dir, progress=progress)


def _save_cached(cached: Path, run: res.Run) -> None:
    """Save a trained run to the cache unless another process is saving it right now."""
    from lstpe.store.rundir import RunLock, RunLockedError

    try:
        with RunLock(cached):
            if not (cached / "manifest.json").exists():
                res.save_run(cached, run.history, run.manifest, run.artifacts, run.tables)
                run.path = cached
    except RunLockedError:
        pass  # another process is caching the same run
