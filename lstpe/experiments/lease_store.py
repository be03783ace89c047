"""What a GPU lease reads and writes in the tree (:mod:`lstpe.experiments.lease`).

* :func:`survey`: every long chunk whose resume checkpoint is in the tree is either a
  **source** a lease continues from that checkpoint, or **held** with its reason: damaged
  (named and passed over, never aborting the lease or its plan), in bf16, a checkpoint too
  large to bring back (the chunk is CPU-only for leases: ``lstpe campaign run`` resumes it),
  or ``later`` while another chunk's checkpoint takes the lease's bring-back budget. A chunk
  with a checkpoint is never trained from epoch 0 by a lease (:func:`hold_groups`).
* :func:`read_records`: the lease records that hold a step-time fit; a damaged one (not
  JSON, a ``fit`` without its numbers) is named and passed over.
* :func:`clear_pieces`: an ``--out`` folder's ``results.tgz.*`` of an earlier lease are
  removed before a lease writes its own (``cat results.tgz.* | tar xzf -`` must read one
  archive); pieces it did not make are refused, named.
* :func:`check_minutes`: a lease's budget is a positive, finite number of minutes.
* :func:`unfinished` and :func:`pack_results`: what comes back. A new group the lease paused
  comes back with the resume checkpoint written for it, or, where that is too large, not at
  all (it stays open at home): never segments without the state that continues them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lstpe.experiments import long_units as lu
from lstpe.store.results import results_root

FIT_KEYS = ("a", "b", "e", "capture")
"""The numbers of a lease record's step-time fit (:func:`lstpe.experiments.lease.fit_steps`)."""

HELD_STATES = ("damaged", "CPU only", "later", "begun")
"""Why a chunk is held out of a lease (the plan's ``state`` column)."""

SPLIT_PIECE = re.compile(r"results\.tgz\.[a-z]{2}")
"""The pieces ``split`` makes of ``results.tgz`` (``.aa``, ``.ab``, ...)."""


def check_minutes(minutes: Any) -> float:
    """``minutes`` if it is a positive, finite number.

    Raises:
        ValueError: naming the value (``--minutes``).
    """
    ok = isinstance(minutes, (int, float)) and not isinstance(minutes, bool) and \
        math.isfinite(minutes) and minutes > 0
    if not ok:
        raise ValueError(f"--minutes must be a positive, finite number of minutes, got "
                         f"{minutes!r}")
    return float(minutes)


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def survey(results_dir: str | Path | None, epochs: int, budget: int
           ) -> tuple[list[lu.LongChunk], dict[str, tuple[str, str]]]:
    """(sources, held) over :data:`~lstpe.experiments.long_units.LONG_PLAN`: per chunk name
    with a resume checkpoint here, its first leg short of its target. A **source** (fp32,
    nothing :func:`~lstpe.experiments.long_units.chunk_problems` finds, its checkpoint within
    what is left of ``budget`` bytes, in the plan's order) with its lease target: its own,
    or the last segment's end within ``epochs`` of its checkpoint. Every other one is
    **held**: name -> (state, reason), state one of :data:`HELD_STATES`. Never raises for
    a damaged chunk: it is held as ``damaged``, naming the file."""
    sources: list[lu.LongChunk] = []
    held: dict[str, tuple[str, str]] = {}
    seen: set[str] = set()
    size = 0
    for c in lu.LONG_PLAN:
        ckpt = lu.resume_checkpoint(c, results_dir)
        if c.name in seen or not ckpt.exists():
            continue
        try:
            at = lu.resume_epoch(c, results_dir)
        except (OSError, ValueError) as e:  # DamagedFileError: unreadable, truncated
            seen.add(c.name)
            held[c.name] = ("damaged", f"passed over until it is repaired: {e}")
            continue
        if at >= c.target:
            continue  # this leg is done: the next of the same name
        seen.add(c.name)
        problems = lu.chunk_problems(c, results_dir, whole=False)
        if problems:
            held[c.name] = ("damaged", "passed over until it is repaired: "
                            + "; ".join(problems))
            continue
        spec = lu.read_spec(c, results_dir) or {}  # checked by chunk_problems
        target = min(c.target, (at + epochs) // lu.SEGMENT * lu.SEGMENT)
        n = ckpt.stat().st_size
        if spec.get("precision", "fp32") != "fp32":
            held[c.name] = ("CPU only", f"it trains in {spec['precision']} (a chunk keeps "
                            "its precision; a lease packs fp32 only): lstpe campaign run "
                            "resumes it")
        elif n > budget:
            held[c.name] = ("CPU only", f"its resume checkpoint {ckpt} ({_mb(n)}) is more "
                            f"than the {_mb(budget)} a lease brings back: lstpe campaign run "
                            "resumes it (on a CPU or a GPU), never a lease from epoch 0")
        elif size + n > budget:
            held[c.name] = ("later", f"its resume checkpoint ({_mb(n)}) and those of the "
                            f"chunks before it ({_mb(size)}) are more than the {_mb(budget)} "
                            "a lease brings back: a later lease continues it")
        elif target <= at:
            held[c.name] = ("later", f"at epoch {at}, it reaches no segment's end within "
                            f"{epochs} epochs")
        else:
            size += n
            sources.append(dataclasses.replace(c, target=target))
    return sources, held


def hold_groups(groups: Sequence[lu.LongChunk], results_dir: str | Path | None,
                sources: Sequence[lu.LongChunk], held: dict[str, tuple[str, str]]
                ) -> list[lu.LongChunk]:
    """The ``groups`` a lease may train from epoch 0: not a source, not held, without a
    resume checkpoint or ``chunk.json`` (a chunk begun elsewhere), no unit with a published
    segment, nothing damaged; each other one short of its target is added to ``held``
    (name -> (state, reason))."""
    names = {c.name for c in sources}
    out = []
    for g in groups:
        if g.name in names or g.name in held or lu.chunk_epoch(g, results_dir) >= g.target:
            continue  # continued, held already, or done
        ckpt = lu.resume_checkpoint(g, results_dir)
        begun = [u.key for u in g.units if lu.published_epoch(u, results_dir) > 0]
        problems = lu.chunk_problems(g, results_dir, whole=False)
        if problems:
            held[g.name] = ("damaged", "passed over until it is repaired: "
                            + "; ".join(problems))
        elif ckpt.exists():
            held[g.name] = ("begun", f"its resume checkpoint {ckpt} is here: it goes on from "
                            "there (a lease that carries it, or lstpe campaign run), never "
                            "again from epoch 0")
        elif (lu.resume_dir(g, results_dir) / "chunk.json").exists():
            held[g.name] = ("begun", f"{lu.resume_dir(g, results_dir) / 'chunk.json'} is here "
                            "without its resume checkpoint: the chunk began elsewhere (a tree "
                            "trimmed for a lease keeps only that file of it); it goes on where "
                            "its checkpoint is, never again from epoch 0")
        elif begun:
            held[g.name] = ("begun", f"{', '.join(begun)} published segments already; without "
                            f"its resume checkpoint ({ckpt}) here it is not trained again "
                            "from epoch 0")
        else:
            out.append(g)
    return out


def _fit_problem(fit: Any) -> str | None:
    """What is wrong with a record's ``fit`` (None: a dict of finite numbers >= 0)."""
    if not isinstance(fit, dict):
        return "its 'fit' is not an object"
    for k in FIT_KEYS:
        v = fit.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v < 0:
            return f"its 'fit' has {k}={json.dumps(v)}, not a finite number >= 0"
    return None


def read_records(results_dir: str | Path | None = None
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, problems): the lease records (``results/benchmarks/lease_*.json``) with a
    step-time fit, each with its ``path``; and one line per damaged record (not JSON, not
    an object, a ``fit`` without its numbers), naming it, passed over. A record without a
    ``fit`` (a lease that trained nothing) is no record of a fit and no problem."""
    results = results_root(results_dir)
    recs, problems = [], []
    for p in sorted((results / "benchmarks").glob("lease_*.json")):
        try:
            rec = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
            why = "nested too deeply" if isinstance(e, RecursionError) else str(e)[:200]
            problems.append(f"the lease record {p} cannot be read ({why}): passed over; "
                            "restore it (git checkout -- PATH) or move it away")
            continue
        if not isinstance(rec, dict):
            problems.append(f"the lease record {p} does not hold a JSON object: passed over; "
                            "restore it (git checkout -- PATH) or move it away")
            continue
        if not rec.get("fit"):
            continue
        why = _fit_problem(rec["fit"])
        if why:
            problems.append(f"the lease record {p} is damaged ({why}): passed over; restore "
                            "it (git checkout -- PATH) or move it away")
            continue
        recs.append({**rec, "path": str(p)})
    return recs, problems


def clear_pieces(out: Path) -> list[Path]:
    """Remove from ``out`` what an earlier lease packed there (``results.tgz``, its pieces
    ``results.tgz.aa``, ... and the file list); return what was removed.

    Raises:
        FileExistsError: ``out`` holds another ``results.tgz.*`` (not a piece ``split``
            makes, or not a file), naming it: ``cat results.tgz.*`` would read it too.
    """
    if not out.is_dir():
        return []
    mine = [p for p in out.iterdir() if p.is_file() and (
        SPLIT_PIECE.fullmatch(p.name) or p.name in ("results.tgz", ".results.list"))]
    other = sorted(p for p in out.glob("results.tgz*") if p not in mine)
    if other:
        raise FileExistsError(f"{out} holds {', '.join(map(str, other))}, not a piece a lease "
                              "makes: move it out of that folder, or give another --out "
                              "(cat results.tgz.* would read it with the new pieces)")
    for p in mine:
        p.unlink()
    return mine


def record_error(results_dir: str | Path | None, problems: Sequence[str]) -> str:
    """The message of a plan without a usable lease record (the damaged ones named)."""
    where = results_root(results_dir)
    passed = f" (passed over: {'; '.join(problems)})" if problems else ""
    return (f"no lease record under {where / 'benchmarks'} (lease_*.json): no step-time fit "
            f"measured on a GPU yet{passed}")


def unfinished(fresh: Sequence[lu.LongChunk], sources: Sequence[lu.LongChunk],
               results: Path, budget: int, log) -> tuple[list[str], dict[str, Any]]:
    """The new groups short of their lease target (the chunk paused): each comes back with
    the resume checkpoint the packed chunk wrote for it
    (:func:`lstpe.experiments.packed.train_packed`) while that fits what the sources'
    checkpoints leave of ``budget`` bytes, so a later lease or ``lstpe campaign
    run`` resumes it. One that does not fit comes back not at all, neither its segments nor
    its checkpoint: at home it is still open, and a later lease trains it from epoch 0 (on
    this machine ``campaign run`` resumes it). Returns (folders under ``results`` left out
    of the pack, per group what happened)."""
    used = sum(p.stat().st_size for p in (lu.resume_checkpoint(c, results) for c in sources)
               if p.exists())
    left_out: list[str] = []
    info: dict[str, Any] = {}
    for g in fresh:
        if all(lu.published_epoch(u, results) >= g.target for u in g.units):
            continue
        ckpt = lu.resume_checkpoint(g, results)
        size = ckpt.stat().st_size if ckpt.exists() else None
        at = lu.resume_epoch(g, results) if size is not None else 0
        back = size is not None and used + size <= budget
        if back:
            used += size
            log(f"lease: {g.name} paused at epoch {at} of {g.target}: its resume checkpoint "
                f"{ckpt} comes back with its segments; a later lease or lstpe campaign run "
                "continues it")
        else:
            left_out += [str(Path("long") / u.key) for u in g.units]
            left_out.append(str(lu.resume_dir(g, results).relative_to(results)))
            why = "none was written" if size is None else \
                f"{size / 2**20:.1f} MiB beside {used / 2**20:.1f} MiB of others is more " \
                f"than the {budget / 2**20:.0f} MiB a lease brings back"
            log(f"lease: {g.name} paused at epoch {at} of {g.target} and its resume checkpoint "
                f"cannot come back ({why}): neither it nor the group's segments are packed, "
                "so the group stays open where the pieces are unpacked and a later lease "
                "trains it from epoch 0 (here, lstpe campaign run resumes it)")
        info[g.name] = {"epoch": at, "checkpoint": str(ckpt), "bytes": size, "back": back}
    return left_out, info


PIECE_BYTES = 15 * 2**20
"""Bytes per file brought back (the device returns files of at most 16 MiB)."""


def pack_results(results: Path, out: Path, max_pieces: int = 4,
                 since: float | None = None, exclude: Sequence[str] = ()) -> list[Path]:
    """``results/long`` (no work folders; no resume state unless written since ``since``),
    ``results/benchmarks`` and ``results/precision_pair`` (a stored-unit pair's runs and
    verdict, :mod:`lstpe.experiments.lease_pair`) as a gzipped tar split into pieces of
    :data:`PIECE_BYTES` bytes
    ``out/results.tgz.aa``, ...; with ``since`` (a ``time.time()``), only the files written
    since then (what a lease wrote: not the segments it was sent); nothing under the folders
    ``exclude`` (relative to ``results``); refuses (naming the size) beyond ``max_pieces``.
    Whatever an earlier lease packed in ``out`` is removed first
    (:func:`clear_pieces`), so ``cat out/results.tgz.*`` reads
    this archive alone."""
    files = []
    skip = [Path(e) for e in exclude]
    for part in ("long", "benchmarks", "precision_pair"):
        for p in sorted((results / part).rglob("*")) if (results / part).is_dir() else []:
            rel = p.relative_to(results)
            if not p.is_file() or ".work" in rel.parts or (
                    since is None and "_resume" in rel.parts) or (
                    since is not None and p.stat().st_mtime < since) or \
                    any(rel.is_relative_to(e) for e in skip):
                continue
            files.append(str(rel))
    clear_pieces(out)
    if not files:
        return []
    tgz, listing = out / "results.tgz", out / ".results.list"
    listing.write_text("\n".join(files) + "\n")
    subprocess.run(["tar", "czf", str(tgz), "-C", str(results), "-T", str(listing)],
                   check=True)
    listing.unlink()
    size = tgz.stat().st_size
    if size > max_pieces * PIECE_BYTES:
        raise RuntimeError(f"{tgz} is {size / 2**20:.1f} MiB, more than {max_pieces} pieces of "
                           f"{PIECE_BYTES / 2**20:.0f} MiB can bring back")
    subprocess.run(["split", "-b", str(PIECE_BYTES), str(tgz), str(tgz) + "."], check=True)
    tgz.unlink()
    return sorted(out.glob("results.tgz.*"))
