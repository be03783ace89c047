"""The campaign's fragments: load, verify, merge, import and publish one unit's stored run.

A **fragment** is an ordinary run folder (:func:`lstpe.store.results.load` verifies every file
against the SHA-256 in its manifest) of a one-model configuration, with a ``campaign`` entry in
its manifest: the unit, the chunk it trained in (units, wall time, the estimate made before),
the precision and why, the CPU's flags. No weights are stored: about 0.4 MB a fragment
(history 0.1 MB; the PEs at start and end and the attention maps after training, 0.3 MB; the
maps at initialisation are recomputed on load, :mod:`lstpe.experiments.init_maps`)::

    results/paper/<run>/<pe>/<seed>/   history.csv, manifest.json, artifacts.pt, tables/noise.csv

:func:`load_fragment` verifies one against its unit's recipe (:mod:`lstpe.experiments.units`,
the plan), :func:`stored_units` lists the stored ones, :func:`fragments_of` and :func:`merge`
make a registry run of them for :func:`lstpe.experiments.runs.get_run`, :func:`import_run`
splits a finished run of the same recipe into fragments, and :func:`publish` renames a
verified staging folder into place: it must not exist, so an interrupted chunk leaves no
fragment and a stored fragment is never overwritten.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from lstpe.experiments import init_maps
from lstpe.experiments.units import IGNORED_KEYS, RecipeMismatch, Unit, campaign_work, plan
from lstpe.store import results as res
from lstpe.store.history import history_problems, nonfinite_problems
from lstpe.store.rundir import RunLock
from lstpe.store.storage import dotted_get


def recipe_diff(config: dict, unit: Unit, **overrides: Any) -> list[str]:
    """How a one-model config differs from ``unit``'s recipe (keys), ignoring
    :data:`IGNORED_KEYS`."""
    want = unit.config(device=str(config.get("device", "cpu")), **overrides).to_dict()
    return res.config_diff(config, want, ignore=IGNORED_KEYS)


def load_fragment(unit: Unit, results_dir: str | Path | None = None, artifacts: bool = True,
                  restore: bool = True, **overrides: Any) -> res.Run:
    """Load and verify ``unit``'s fragment (with ``restore``, its attention maps at
    initialisation recomputed if it dropped them: :mod:`lstpe.experiments.init_maps`).

    Raises:
        FileNotFoundError: no fragment (naming the folder).
        lstpe.store.results.DamagedFileError: a file differs from the manifest (naming it),
            or, with ``restore``, the fragment dropped its maps at initialisation without the
            witnesses they are checked against (``pe_init``, ``val_attention_init_head``:
            :func:`lstpe.experiments.init_maps.dropped`, naming the folder and what is missing).
        RecipeMismatch: the fragment was trained with another recipe (naming the keys), or it
            holds another unit (a folder moved by hand).
        lstpe.experiments.init_maps.InitMismatch: this code no longer initialises the
            fragment's model as the code that trained it did (its dropped maps cannot be
            recomputed), whether or not they are cached.
    """
    path = unit.path(results_dir)
    run = res.load(path, artifacts=artifacts)
    cfg = run.config
    if cfg.get("pes") != [unit.pe] or cfg.get("seeds") != [unit.seed]:
        raise RecipeMismatch(f"the fragment {path} holds PEs {cfg.get('pes')} and seeds "
                             f"{cfg.get('seeds')}, not the unit {unit.key}")
    diff = recipe_diff(cfg, unit, **overrides)
    if diff:
        raise RecipeMismatch(f"the fragment {path} was not trained with the recipe of "
                             f"{unit.key} (differs in: {_diff_text(cfg, unit, diff)})")
    if not (run.manifest.get("files") or {}).get("history.csv"):
        raise res.DamagedFileError(f"the fragment {path} has a manifest without file "
                                   "checksums: it cannot be verified; delete it to retrain")
    camp = run.manifest.get("campaign") or {}
    if camp.get("unit") != unit.key:
        raise RecipeMismatch(f"the fragment {path} says it is unit {camp.get('unit')!r}, "
                             f"not {unit.key!r} (moved by hand?)")
    wrong = history_problems(run.history, cfg.get("epochs"))  # never read as what it is not
    if wrong:
        raise res.DamagedFileError(f"the fragment {path} of {unit.key} is not what its "
                                   f"manifest says: {wrong[0]}; restore it (git checkout -- "
                                   f"{path}), or delete the folder to retrain the unit")
    if artifacts and restore:
        init_maps.restore([run])
    run.name = unit.run
    return run


def _diff_text(cfg: dict, unit: Unit, keys: Sequence[str]) -> str:
    want = unit.config().to_dict()
    return "; ".join(f"{k}: stored {json.dumps(dotted_get(cfg, k))}, recipe "
                     f"{json.dumps(dotted_get(want, k))}" for k in keys)


def done_units(results_dir: str | Path | None = None,
               units: Sequence[Unit] | None = None) -> list[Unit]:
    """The units whose fragment folder holds a manifest (published; verified on load)."""
    units = plan() if units is None else units
    return [u for u in units if (u.path(results_dir) / "manifest.json").exists()]


def fragments_of(run: str, pes: Sequence[str], results_dir: str | Path | None = None,
                 seeds: Sequence[int] | None = None, restore: bool = True,
                 **overrides: Any) -> list[res.Run]:
    """The verified fragments that make up ``run`` for ``pes``: its own units, and units of
    other runs with the same recipe for a PE (Table 1's 2d-fixed and learn-0.2 are Table 2's
    units; Table 4's Adam at sigma 0.1 and 0.2 too). One fragment per (PE, seed), the run's
    own first. ``restore``: their attention maps at initialisation rebuilt
    (:func:`lstpe.experiments.init_maps.restore`); False leaves a fragment that dropped them
    without them.

    Raises:
        RecipeMismatch / DamagedFileError: a fragment under the run's own folder is of
            another recipe or damaged (naming it and the keys).
    """
    out: dict[tuple[str, int], res.Run] = {}
    pes = list(pes)
    for u in plan():
        if u.pe not in pes or (seeds is not None and u.seed not in seeds):
            continue
        if (u.pe, u.seed) in out:
            continue
        path = u.path(results_dir)
        if not (path.exists() or path.is_symlink()):
            continue
        own = u.run == run
        if not own:
            other = Unit(run, u.pe, u.seed)
            try:
                same = not res.config_diff(u.config().to_dict(), other.config().to_dict(),
                                           ignore=IGNORED_KEYS)
            except ValueError:
                same = False
            if not same:
                continue
        if not (path / "manifest.json").exists():  # never a unit silently left out
            raise res.DamagedFileError(
                f"the fragment {path} has no manifest.json (deleted?): it cannot be verified "
                f"and is not used; restore it (git checkout -- {path}), or delete the folder "
                "to retrain the unit (lstpe campaign status lists it)")
        out[(u.pe, u.seed)] = load_fragment(u, results_dir, restore=False, **overrides)
    if restore:
        init_maps.restore(list(out.values()))  # one batched model for the maps at initialisation
    # the run's own units first wins: load them before borrowed ones of the same (pe, seed)
    order = sorted(out.values(), key=lambda r: (pes.index(r.config["pes"][0]),
                                                r.config["seeds"][0]))
    return order


def merge(fragments: Sequence[res.Run], name: str) -> res.Run:
    """One :class:`~lstpe.store.results.Run` of several fragments (PEs in the given order).

    Models are renumbered 0, 1, ... in the order of ``fragments``; artefacts are stacked
    along the model axis; the manifest's config lists the PEs and seeds present, and
    ``fragments`` / ``seeds_per_pe`` say which fragment holds what.
    """
    if not fragments:
        raise ValueError(f"no fragments to merge for {name!r}")
    hist, noise, arts = [], [], []
    for m, f in enumerate(fragments):
        h = f.history.copy()
        h["model"] = m
        hist.append(h)
        if "noise" in f.tables:
            t = f.tables["noise"].copy()
            t["model"] = m
            noise.append(t)
        arts.append(f.artifacts)
    history = pd.concat(hist, ignore_index=True)
    artifacts: dict[str, Any] = {}
    if all(arts):
        common = set.intersection(*(set(a) for a in arts))
        for key in sorted(common):
            vals = [a[key] for a in arts]
            if isinstance(vals[0], torch.Tensor):
                artifacts[key] = torch.cat(vals)
            else:
                artifacts[key] = [v for val in vals for v in val]
    pes = list(dict.fromkeys(f.config["pes"][0] for f in fragments))
    seeds = sorted({f.config["seeds"][0] for f in fragments})
    per_pe = {p: [f.config["seeds"][0] for f in fragments if f.config["pes"][0] == p]
              for p in pes}
    first = fragments[0].manifest
    config = {**first["config"], "pes": pes, "seeds": seeds}
    manifest = {
        "kind": "campaign-merge", "config": config, "seeds_per_pe": per_pe,
        "fragments": [str(f.path) for f in fragments],
        "git_commit": "; ".join(sorted({str(f.manifest.get("git_commit"))[:12]
                                        for f in fragments})),
        "device": "; ".join(sorted({str(f.manifest.get("device")) for f in fragments})),
        "torch_version": "; ".join(sorted({str(f.manifest.get("torch_version"))
                                           for f in fragments})),
        "finished_at": max(str(f.manifest.get("finished_at")) for f in fragments),
        "wall_time_s": round(sum(unit_seconds(f.manifest) for f in fragments), 1),
        "resumed": any(f.manifest.get("resumed") for f in fragments),
        "precisions": dict(Counter(precision_of(f.manifest) for f in fragments)),
    }
    tables = {"noise": pd.concat(noise, ignore_index=True)} if noise else {}
    return res.Run(history, manifest, artifacts, tables, path=None, name=name,
                   source="stored")


def precision_of(manifest: dict) -> str:
    """A fragment's precision: its ``campaign.precision``, else ``bf16`` where its config used
    autocast, else ``fp32``."""
    camp = manifest.get("campaign") or {}
    return str(camp.get("precision") or
               ("bf16" if (manifest.get("config") or {}).get("amp") else "fp32"))


def unit_seconds(manifest: dict) -> float:
    """Wall seconds of the machine spent on one unit (its share of the chunk it trained in)."""
    camp = manifest.get("campaign") or {}
    if "unit_wall_s" in camp:
        return float(camp["unit_wall_s"])
    return float(manifest.get("wall_time_s", 0.0)) / max(1, int(manifest.get("n_models", 1)))


def unit_commits(manifest: dict) -> str:
    """The commits that trained a unit, short, oldest first (``a87a39c+36b4298`` for a chunk
    paused under one and resumed under the next; ``?`` for a segment that did not record its
    commit)."""
    return "+".join(c[:7] for c in res.run_commits(manifest))


STORED_COLUMNS = ("unit", "epochs", "precision", "hours", "device", "cpu flags", "commit",
                  "how")
"""The columns of :func:`stored_units` (an empty results folder gives them too)."""


def stored_units(results_dir: str | Path | None = None) -> pd.DataFrame:
    """One row per stored unit: ``unit, epochs, precision, hours, device, cpu flags, commit``
    (every commit that trained it, :func:`unit_commits`), ``how`` (trained by the campaign, or
    imported from a run of the same recipe). A unit whose manifest cannot be read is left
    out (:func:`lstpe.campaign.status.status` names it); one whose wall time is
    unusable has NaN hours."""
    rows = []
    for u in done_units(results_dir):
        try:
            man = res.read_manifest(u.path(results_dir))
            hours = round(unit_seconds(man) / 3600, 2)
        except (ValueError, OSError, TypeError, ArithmeticError):
            continue  # damaged: campaign_status.status() names it and why
        if not isinstance(man.get("config"), dict):
            continue

        camp = man.get("campaign") or {}
        mach = camp.get("machine") or {}
        rows.append({"unit": u.key, "epochs": man["config"].get("epochs"),
                     "precision": camp.get("precision", ""),
                     "hours": hours if math.isfinite(hours) and hours >= 0 else math.nan,
                     "device": man.get("device", ""),
                     "cpu flags": " ".join(mach.get("cpu_flags", [])) or "-",
                     "commit": unit_commits(man),
                     "how": "imported" if "imported_from" in camp else "campaign"})
    return pd.DataFrame(rows, columns=list(STORED_COLUMNS))


# --------------------------------------------------------------------------- import


def import_run(path: str | Path, results_dir: str | Path | None = None,
               run: str | None = None, note: str = "", **overrides: Any) -> list[Unit]:
    """Split a finished, verified multi-model run of the campaign's recipe into fragments.

    Each (PE, seed) of the run becomes the fragment of the plan's unit of that PE and seed
    (``run``: which registry run, if more than one has it). Its history rows, artefacts and
    noise rows are cut out of the run's; its manifest is the run's, narrowed to the one model,
    with ``campaign.imported_from`` (folder, commit, checksums of the original files) and
    ``campaign.unit_wall_s`` (the run's wall time / its number of models).

    Raises:
        FileNotFoundError / DamagedFileError: the run is missing or fails verification.
        RecipeMismatch: the run was not trained with the units' recipe (naming the keys).
        FileExistsError: a fragment is already stored (it is never overwritten).
        ValueError: a (PE, seed) has no unit in the plan, or several and ``run`` is not given.
    """
    try:  # runs of older code have no manifest checksum; a sealed one is always checked
        sealed = res.MANIFEST_HASH_KEY in res.read_manifest(path, verify=False)
    except (OSError, ValueError):
        sealed = True  # res.load names what is wrong
    src = res.load(path, sealed=sealed)
    cfg = src.config
    wrong = nonfinite_problems(src.history) + history_problems(src.history, cfg.get("epochs"))
    if src.manifest.get("diverged_models") or wrong:  # the history decides, whatever it says
        raise ValueError(f"{path}: models diverged or the history is not what the manifest "
                         f"says ({'; '.join(wrong) or src.manifest['diverged_models']}); not "
                         "imported (a unit is a model trained to its epochs: retrain the run)")
    pes, seeds = cfg.get("pes") or [], cfg.get("seeds") or []
    pairs = [(p, s) for p in pes for s in seeds]
    units = []
    for p, s in pairs:
        one = {**cfg, "pes": [p], "seeds": [s]}
        cand = [u for u in plan() if u.pe == p and u.seed == s and (run is None or u.run == run)]
        if not cand:
            raise ValueError(f"{path}: {p} with seed {s} is no unit of the campaign's plan"
                             + (f" in run {run!r}" if run else ""))
        fits = [u for u in cand if not recipe_diff(one, u, **overrides)]
        if not fits:
            u = cand[0]
            diff = recipe_diff(one, u, **overrides)
            raise RecipeMismatch(f"{path} was not trained with the recipe of {u.key} "
                                 f"(differs in: {_diff_text(one, u, diff)})")
        if len(fits) > 1:
            raise ValueError(f"{path}: {p} with seed {s} fits {len(fits)} units "
                             f"({', '.join(u.key for u in fits)}); give --run")
        units.append(fits[0])
    for u in units:
        if u.path(results_dir).exists() or u.path(results_dir).is_symlink():
            raise FileExistsError(f"the fragment {u.path(results_dir)} is already stored; it is "
                                  "never overwritten (delete it by hand to replace it)")
        chunk = paused_chunk(u, results_dir)
        if chunk is not None:
            raise ValueError(f"{u.key} waits in the paused chunk {chunk} (its checkpoint), "
                             "which the next campaign run resumes; not imported (to import "
                             f"anyway, delete {chunk}: its training so far is lost)")
    share = float(src.manifest.get("wall_time_s", 0.0)) / max(1, len(pairs))
    origin = {"path": str(Path(path)), "git_commit": src.manifest.get("git_commit"),
              "files": src.manifest.get("files"), "bundle_models": len(pairs), "note": note,
              "manifest_sealed": res.MANIFEST_HASH_KEY in src.manifest}
    with contextlib.ExitStack() as claims:  # as training does: never a unit in training
        for u in units:
            try:
                claims.enter_context(RunLock(campaign_work(results_dir) / "claims" / u.slug))
            except res.RunLockedError as e:
                raise res.RunLockedError(f"{u.key} is being trained: {e}; not imported") \
                    from None
        for m, u in enumerate(units):
            _write_fragment_from(src, m, u, results_dir, share, origin)
    return units


def paused_chunk(unit: Unit, results_dir: str | Path | None = None) -> Path | None:
    """The paused chunk (a folder with ``chunk.json`` and a checkpoint) that holds ``unit``,
    or None."""
    chunks = campaign_work(results_dir) / "chunks"
    for d in sorted(chunks.glob("*")) if chunks.is_dir() else []:
        if not any(d.glob("checkpoints/*.pt")):
            continue
        try:
            keys = json.loads((d / "chunk.json").read_text())["units"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(keys, list) and unit.key in keys:
            return d
    return None


def _write_fragment_from(src: res.Run, m: int, u: Unit, results_dir: str | Path | None,
                         share: float, origin: dict) -> None:
    hist = src.history[src.history["model"] == m].copy()
    hist["model"] = 0
    arts: dict[str, Any] = {}
    for key, val in src.artifacts.items():
        arts[key] = val[m:m + 1].clone() if isinstance(val, torch.Tensor) else [val[m]]
    tables = {}
    for name, t in src.tables.items():
        t = t[t["model"] == m].copy()
        t["model"] = 0
        tables[name] = t.reset_index(drop=True)
    manifest = {k: v for k, v in src.manifest.items() if k != "files"}
    manifest["config"] = {**src.config, "pes": [u.pe], "seeds": [u.seed]}
    manifest["n_models"] = 1
    manifest["campaign"] = {"unit": u.key, "unit_wall_s": round(share, 1),
                            "precision": "bf16" if src.config.get("amp") else "fp32",
                            "imported_from": {**origin, "model": m}}
    stage = campaign_work(results_dir) / "staging" / f"import-{u.slug}"
    if stage.exists():
        shutil.rmtree(stage)
    res.save_run(stage, hist.reset_index(drop=True), manifest, arts, tables)
    publish(stage, u, results_dir)


def publish(stage: Path, unit: Unit, results_dir: str | Path | None = None) -> Path:
    """Verify a staged fragment and rename it to its fragment path (atomic on one file
    system); refuse if the fragment exists.

    Raises:
        FileExistsError: the fragment is already stored (the staging folder is kept).
        DamagedFileError: the staged files fail verification.
    """
    init_maps.drop_maps(stage)  # drops the maps at initialisation if this code recomputes them
    res.load(stage)  # verify every file against the manifest before publishing
    (stage / ".lock").unlink(missing_ok=True)
    dest = unit.path(results_dir)
    if dest.exists():
        raise FileExistsError(f"the fragment {dest} is already stored; the new one stays in "
                              f"{stage} (a fragment is never overwritten)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage.rename(dest)
    return dest


def compact_stored(unit: Unit, results_dir: str | Path | None = None) -> float | None:
    """Drop a stored fragment's attention maps at initialisation if this code recomputes them
    (:func:`lstpe.experiments.init_maps.drop_maps`), for fragments published before
    :func:`publish` did so.

    The fragment is compacted in a copy under the campaign's staging folder, then swapped in
    by two renames (the original kept aside until the new folder is in place), under the
    unit's claim: a unit in training or being imported is not touched.

    Returns:
        The largest |difference| between stored and recomputed maps, or None if the maps stay
        (already dropped, or not recomputed within tolerance).
    Raises:
        FileNotFoundError / DamagedFileError / RecipeMismatch: as :func:`load_fragment`.
        lstpe.store.results.RunLockedError: the unit is claimed by a campaign run.
    """
    dest = unit.path(results_dir)
    if init_maps.KEY not in load_fragment(unit, results_dir, restore=False).artifacts:
        return None  # verified, of its recipe, and nothing to drop
    work = campaign_work(results_dir) / "staging"
    new, old = work / f"compact-{unit.slug}", work / f"compacted-{unit.slug}"
    with RunLock(campaign_work(results_dir) / "claims" / unit.slug):
        for d in (new, old):
            if d.exists():
                shutil.rmtree(d)
        work.mkdir(parents=True, exist_ok=True)
        shutil.copytree(dest, new)
        diff = init_maps.drop_maps(new)
        if diff is None:
            shutil.rmtree(new)
            return None
        dest.rename(old)
        new.rename(dest)
        shutil.rmtree(old)
    return diff
