"""A long chunk's resume state, and the checks before it trains or is read.

**Resume state across machines.** The chunk's checkpoint (weights and Adam moments of every
model, its history and snapshots not yet published; about 16 MB per model) is written every
:data:`~lstpe.experiments.units.CHECKPOINT_EVERY` epochs to
``results/long/_resume/<chunk>/chunk0.pt``, a path git tracks, so a fresh clone continues the
same trajectory (bit for bit on the same kind of machine; tests/test_long_units.py). What may
be committed of it is bounded (:mod:`lstpe.campaign.long_plan`: 100 MB in the tree, at most
one checkpoint per 1000 epochs of a chunk, none once its last planned leg is done).

**Integrity.** Published segments and the checkpoint depend on each other: a segment cannot be
published again once the checkpoint is past it, and a checkpoint continues only the segments
its trajectory published (it records their manifest checksums). :func:`chunk_problems` checks
a chunk before it trains and for ``lstpe campaign status``: the checkpoint against its digest,
``chunk.json``, every segment against its manifest and the one before it, a folder without
its manifest (an incomplete copy), a segment missing behind the checkpoint, and a segment
other than the one the checkpoint's trajectory published. A chunk with a problem is refused,
naming the file and a repair that keeps the work (restore it as git holds it), never
"delete it": that would leave a chunk that can neither resume nor publish again. Training
(:func:`lstpe.campaign.long_train.train_chunk`) compares a segment it finds already
published with the one it recomputes, and refuses a different one (two trajectories would be
spliced); every process that trained epochs of a segment is in its manifest
(``long.processes``).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from lstpe.experiments import long_units as lu
from lstpe.store import model as mf
from lstpe.store import results as res
from lstpe.store.storage import read_json_object


def next_chunk(results_dir: str | Path | None = None,
               skip: Collection[str] = ()) -> lu.LongChunk | None:
    """The first long chunk of :data:`~lstpe.experiments.long_units.LONG_PLAN` short of its
    target and not named in ``skip`` (chunks a run found damaged or claimed). A chunk without
    its resume checkpoint but with published segments (:func:`unresumable`) is passed over:
    it cannot go on here. Reads only manifests (the checks are :func:`chunk_problems`)."""
    for c in lu.LONG_PLAN:
        if c.name not in skip and lu.chunk_epoch(c, results_dir) < c.target and \
                not unresumable(c, results_dir):
            return c
    return None


def unresumable(chunk: lu.LongChunk, results_dir: str | Path | None = None) -> bool:
    """True when a unit of ``chunk`` has published segments but the chunk's resume
    checkpoint is not here (a clone without the resume state, a checkpoint lost): training it
    would start again from epoch 0, so :func:`train_chunk` refuses."""
    return not resume_checkpoint(chunk, results_dir).exists() and \
        any(lu.published_epoch(u, results_dir) > 0 for u in chunk.units)


def resume_dir(chunk: lu.LongChunk | str, results_dir: str | Path | None = None) -> Path:
    """Where a chunk's resume state lives (tracked by git): ``long/_resume/<name>/``."""
    name = chunk if isinstance(chunk, str) else chunk.name
    return lu.long_root(results_dir) / "_resume" / name


class LongChunkError(res.DamagedFileError):
    """A long chunk cannot be trained as it is stored: a file damaged, missing or not the one
    its trajectory wrote (the message names it and a repair that keeps the work)."""


class SegmentConflictError(LongChunkError):
    """A segment already published differs from the one a resumed run recomputed."""


def resume_checkpoint(chunk: lu.LongChunk, results_dir: str | Path | None = None) -> Path:
    """The chunk's resume checkpoint (the file the engine writes in :func:`resume_dir`)."""
    return resume_dir(chunk, results_dir) / "chunk0.pt"


def resume_epoch(chunk: lu.LongChunk, results_dir: str | Path | None = None) -> int:
    """The epoch of the chunk's resume checkpoint (0: none), unchecked.

    Raises:
        lstpe.store.results.DamagedFileError: it cannot be read (naming it).
    """
    path = resume_checkpoint(chunk, results_dir)
    if not path.exists():
        return 0
    state = res.load_torch(path, "checkpoint", map_location="cpu", hint=lu.restore_hint(path))
    return int(state.get("epoch", 0)) if isinstance(state, dict) else 0


def read_checkpoint(chunk: lu.LongChunk, results_dir: str | Path | None = None) -> dict | None:
    """The chunk's resume checkpoint on the CPU, checked against its digest; None if there is
    none.

    Raises:
        lstpe.store.results.DamagedFileError: it is empty, truncated, or does not match its
            digest, naming it with :func:`~lstpe.experiments.long_units.restore_hint`.
    """
    from lstpe.training.checkpoint import verify_checkpoint

    path = resume_checkpoint(chunk, results_dir)
    if not path.exists():
        return None
    return verify_checkpoint(path, "cpu", lu.restore_hint(path))


PRECISIONS = ("fp32", "bf16", "fp16")
"""The precisions a chunk may train in (``chunk.json``'s ``precision``)."""


def read_spec(chunk: lu.LongChunk, results_dir: str | Path | None = None) -> dict | None:
    """The chunk's ``chunk.json`` (its units and the precision it began in), checked; None if
    there is none.

    Raises:
        LongChunkError: naming the file: not JSON, not an object, ``units`` not the chunk's,
            ``precision`` not one of :data:`PRECISIONS`, ``amp`` not a boolean, or the two
            contradict each other (``amp`` is true exactly when the precision is not fp32).
    """
    path = resume_dir(chunk, results_dir) / "chunk.json"
    if not path.exists():
        return None
    hint = lu.restore_hint(path)
    spec = read_json_object(path, hint, LongChunkError)
    if not isinstance(spec.get("units"), list):
        raise LongChunkError(f"{path} has no list of 'units'; {hint}")
    if spec["units"] != [u.key for u in chunk.units]:
        raise LongChunkError(f"{path} holds units {spec['units']}, not those of the chunk "
                             f"{chunk.name}: the plan changed under a chunk in training")
    prec, amp = spec.get("precision"), spec.get("amp")
    if prec not in PRECISIONS or not isinstance(amp, bool) or amp != (prec != "fp32"):
        raise LongChunkError(f"{path} holds precision {json.dumps(prec)} and amp "
                             f"{json.dumps(amp)}: the precision must be one of {PRECISIONS} "
                             "and amp true exactly when it is not fp32; " + hint)
    return spec


def chunk_problems(chunk: lu.LongChunk, results_dir: str | Path | None = None,
                   whole: bool = True) -> list[str]:
    """What keeps ``chunk`` from training on, or its stored models from being used, each
    naming the file or folder and a repair that keeps the work; [] when none.

    Checks the resume checkpoint against its digest, ``chunk.json`` (:func:`read_spec`) and,
    per unit, its model folder: files without a manifest (an incomplete copy), a file that
    fails verification, a segment whose rows or snapshots differ from those it was published
    with, one that does not follow the one before it, a segment missing although the
    checkpoint is past it (it cannot be published again), a segment other than the one the
    checkpoint's trajectory published (its record of their manifest checksums), or one past
    the checkpoint's open segment that it did not publish (another trajectory). ``whole`` is
    kept for callers (a model folder always starts at epoch 0). A chunk without its
    checkpoint is :func:`unresumable`, not a problem here.
    """
    out: list[str] = []
    ckpt = resume_checkpoint(chunk, results_dir)
    try:
        state = read_checkpoint(chunk, results_dir) or {}
    except res.DamagedFileError as e:
        out.append(str(e))
        state = {}
    try:
        read_spec(chunk, results_dir)
    except LongChunkError as e:
        out.append(str(e))
    at = int(state.get("epoch", 0))
    recorded = (state.get("hook") or {}).get("published") or {}
    for u in chunk.units:
        out += _unit_problems(u, results_dir, at, ckpt, recorded.get(u.key) or {}, bool(state))
    return out


def _unit_problems(unit: lu.LongUnit, results_dir: str | Path | None, at: int, ckpt: Path,
                   recorded: dict, here: bool = False) -> list[str]:
    """:func:`chunk_problems` of one unit (``at``: the checkpoint's epoch, 0 without one;
    ``recorded``: epoch -> manifest checksum of the segments its trajectory published;
    ``here``: the checkpoint is here and whole)."""
    folder = unit.path(results_dir)
    if folder.is_dir() and not (folder / "manifest.json").is_file() and any(folder.iterdir()) \
            and not (here and at < lu.SEGMENT and _first_append_cut(folder)):
        return [f"the model folder {folder} has files but no manifest.json (an incomplete "
                "copy): nothing in it is published, and nothing can be published over it; "
                "copy it again whole, or move that folder away (nothing in it is verified)"]
    try:
        man = mf.read(folder)
        out = mf.segment_problems(folder, man) if man else []
    except (OSError, ValueError) as e:
        return [lu.segment_damage(folder, e)]
    prev_sha, prev_to, ahead = None, 0, False
    end = at // lu.SEGMENT * lu.SEGMENT + lu.SEGMENT  # the end of the checkpoint's open segment
    for seg in mf.segments(folder, man):
        info, p = seg.manifest.get("long") or {}, seg.name
        if info.get("unit") != unit.key:
            out.append(f"{p} holds {info.get('unit')}, not {unit.key}: "
                       f"{lu.restore_hint(folder)}")
        elif info.get("from_epoch") != prev_to or info.get("previous") != prev_sha:
            out.append(f"{p} does not follow the segment before it (it names "
                       "another one: a replaced segment, two trajectories spliced); "
                       f"{lu.restore_hint(folder)}")
        mine = recorded.get(str(seg.epoch))
        if mine is not None and mine != seg.checksum:
            out.append(f"{p} is not the one the trajectory of {ckpt} published "
                       "(its manifest checksum differs: replaced, e.g. by a copy from another "
                       f"machine); the checkpoint cannot continue it: {lu.restore_hint(folder)}")
        if here and mine is None and seg.epoch > end and not ahead:
            ahead = True  # (one line per unit: its later segments are the same story)
            out.append(f"{p} is past the resume checkpoint {ckpt} (epoch {at}), "
                       "which did not publish it: another trajectory trained "
                       f"{unit.key} past the checkpoint, and resuming would splice the two. "
                       f"Keep one: move {ckpt.parent} out of results/ to keep {folder} as "
                       "it is, or keep its segments to epoch "
                       f"{at // lu.SEGMENT * lu.SEGMENT} only (lstpe.store.model.truncate, "
                       "which copies "
                       "the folder aside first) to continue from the checkpoint")
        prev_sha, prev_to = seg.checksum, info.get("to_epoch")
    need = at // lu.SEGMENT * lu.SEGMENT
    if need > prev_to:
        out.append(f"{unit.key}: the segment to epoch {need} is missing from "
                   f"{folder} (it ends at epoch {prev_to}), but the resume checkpoint {ckpt} "
                   f"is at epoch {at}, past it: it cannot be published again from the "
                   f"checkpoint; {lu.restore_hint(folder)}")
    return out


def _first_append_cut(folder: Path) -> bool:
    """Whether ``folder`` (no manifest) holds only what a first publish killed before its
    manifest leaves: ``history.csv``, snapshot files and temporary files. The checkpoint is
    then before its first segment's end, so nothing was published, and the publish that
    comes writes over them."""
    return all(p.name == "history.csv" or p.parent.name == "snapshots" or p.suffix == ".tmp"
               for p in folder.rglob("*") if p.is_file())
