"""Training the campaign's units: measure this machine, take what fits, train, publish.

``lstpe campaign run --minutes N`` (:func:`run`):

1. resumes a chunk that stopped with a checkpoint, if its units are still free;
2. otherwise measures this machine (:func:`probe`: a few real training steps and one
   evaluation of the paper-size model, in the precision chosen by :func:`choose_precision`),
   estimates the wall time of a unit from it, and takes the next free units of the plan that
   fit in the time left (with ``allow_partial``, a full chunk even if it cannot finish: it
   pauses at the deadline and the next run resumes it);
3. claims them (one :class:`~lstpe.store.rundir.RunLock` per unit: two processes never train the
   same unit), trains them as one batch of models (:func:`lstpe.training.train.train_many`,
   checkpointed every :data:`~lstpe.experiments.units.CHECKPOINT_EVERY` epochs, pausing
   cleanly before the deadline), then verifies and publishes each unit as its fragment
   (:func:`lstpe.experiments.fragments.publish`);
4. repeats while another unit fits and the budget lasts. Long chunks come first on a GPU, last
   on a CPU; one that is damaged, claimed or at its target without all its segments is named
   and passed over for the rest of the run
   (:func:`lstpe.campaign.long_train.train_or_pass`).

The estimate (:mod:`lstpe.campaign.probe`): seconds per model-epoch measured by
:func:`probe`, times the chunk's models and epochs, plus the evaluations and noise test after
training; a chunk of more models than the first probe is probed again at its size
(:func:`fit_chunk`). Each fragment's manifest keeps the estimate beside the measured wall time
(``campaign.estimate_s``, ``unit_wall_s``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from lstpe.campaign import items as cp
from lstpe.campaign import long_plan as lp
from lstpe.campaign import long_train as lt
from lstpe.campaign import resume as rs
from lstpe.campaign import status as cs
from lstpe.campaign.probe import estimate_s, floor_of, machine, probe
from lstpe.experiments import fragments as fr
from lstpe.experiments import long_units as lu
from lstpe.experiments import units as un
from lstpe.runtime import pick_device
from lstpe.store import results as res
from lstpe.store.storage import read_json_object

MAX_UNITS = 8
"""At most this many units per chunk (they all finish together at the end)."""

MIN_PARTIAL_EPOCHS = 5
"""``allow_partial`` starts a chunk that cannot finish only if this many of its epochs fit
(one checkpoint interval): less would be training thrown away if the machine changes."""


def choose_precision(device: torch.device, results_dir: str | Path | None = None
                     ) -> tuple[str, str]:
    """The campaign's precision on ``device`` and why: the one decision of
    :func:`lstpe.campaign.precision.decide` (bf16 on a CPU only after its precision pair)."""
    from lstpe.campaign.precision import decide

    _, name, why = decide(device, results_dir)
    return name, why


def fit_chunk(free: Sequence[un.Unit], p: dict[str, Any], dev: torch.device, deadline: float,
              epochs: int, overrides: dict, log) -> tuple[int, dict[str, Any]]:
    """How many of ``free`` to train as one chunk, and the probe that priced it.

    ``p`` is :func:`probe` of the first few; a chunk of more models than it held is probed
    again at that size and sized by that rate (never above the first count), since a model's
    cost can grow with the models beside it: the stored 2-core CPU chunks of 3-4 models took
    a median 1.25x, up to 2x, what a 2-model probe predicted, and 5 models started on 8.6 s
    per model-epoch against a 2-model probe's 6.7 would have run past its budget.
    """
    def fits(rate: float) -> int:
        left, n = deadline - time.monotonic(), 0
        while n < len(free) and estimate_s(n + 1, rate, epochs) <= left:
            n += 1
        return n

    n = fits(p["s_per_model_epoch"])
    if n > p["models"]:
        q = probe(free[:n], dev, **overrides)
        log(f"probe: {q['models']} model(s) -> {q['s_per_model_epoch']} s per model-epoch "
            f"({p['models']}: {p['s_per_model_epoch']})")
        n, p = min(n, fits(q["s_per_model_epoch"])), q
    log(f"probe: {p['models']} model(s), {p['step_s']} s/step, eval {p['eval_s']} s -> "
        f"{p['s_per_model_epoch']} s per model-epoch; "
        f"{(deadline - time.monotonic()) / 60:.1f} min left: {n} unit(s) fit")
    return n, p


def free_units(results_dir: str | Path | None = None, only: Sequence[str] | None = None
               ) -> list[un.Unit]:
    """Units not stored, not claimed by a live process, not waiting in a paused chunk
    (``only``: these unit keys), in plan order."""
    table = cs.status(results_dir, verify=False)
    free = set(table.loc[table["state"] == "todo", "unit"])
    units = un.plan()
    if only is not None:
        keys = [un.find_unit(k, units).key for k in only]
        units = [u for u in units if u.key in keys]
    else:  # listed, never trained unless asked for by name (cp.ITEMS says why)
        units = [u for u in units if u.item not in cp.NOT_TRAINED]
    return [u for u in units if u.key in free]


def run(minutes: float, results_dir: str | Path | None = None, device: str = "auto",
        units: Sequence[str] | None = None, max_units: int = MAX_UNITS,
        allow_partial: bool = False, log=print, **overrides: Any) -> list[un.Unit]:
    """Train the next units that fit in ``minutes`` (module docstring); return those published.

    Args:
        minutes: the time budget (wall clock) of this command.
        results_dir: the results folder (default: the repository's ``results/``).
        device: where to train.
        units: train only these unit keys (``run/pe/seed``), e.g. one per SLURM array task.
        max_units: at most this many units per chunk.
        allow_partial: fill the budget: when fewer than ``max_units`` units would finish,
            start ``max_units`` anyway (at least :data:`MIN_PARTIAL_EPOCHS` of their epochs must
            fit); the chunk pauses before the deadline with its checkpoint and the next ``run``
            on this machine resumes it first.
        overrides: recipe overrides (tests only: a tiny model).
    """
    if not (minutes > 0):
        raise ValueError(f"--minutes must be > 0, got {minutes}")
    if max_units < 1:
        raise ValueError(f"--max-units must be >= 1, got {max_units}")
    deadline = time.monotonic() + 60.0 * minutes
    res.ensure_writable_dir(un.campaign_work(results_dir))  # a file or read-only: before the probe
    cs.check_long_root(results_dir)
    dev = pick_device(device)
    precision, why = choose_precision(dev, results_dir)
    log(f"campaign: {precision} ({why}); device {res.device_name(dev)}; budget {minutes:g} min")
    fresh = {**overrides, "amp": precision != "fp32"}  # new chunks train in that precision
    published: list[un.Unit] = []
    measured: float | None = None  # this process's last probe (s per model-epoch)
    chunks = {str(v): v for v in cs.paused_units(results_dir).values()}
    for _, chunk in sorted(chunks.items()):
        spec = chunk_spec(chunk)
        if units is not None and not set(spec["units"]) <= set(units):
            continue
        at, of = cs.paused_epoch(chunk)
        where = (f" at epoch {at} of {of}, about {spec['estimate_s'] * (of - at) / of / 60:.1f}"
                 f" min left" if at >= 0 and of > 0 else "")
        log(f"resuming the paused chunk {chunk.name}{where}: {', '.join(spec['units'])}")
        same = {**overrides, "amp": spec.get("precision", "fp32") != "fp32"}  # as it began
        done = _train_chunk([un.find_unit(k) for k in spec["units"]], results_dir, dev,
                            deadline, spec, log, same)
        published += done
        if not done:
            return published
    held = cs.held_long(results_dir)  # by another process: named, never "no checkpoint here"
    for c in {c.name: c for c in lu.LONG_PLAN if rs.unresumable(c, results_dir)
              and lu.chunk_epoch(c, results_dir) < c.target and c.name not in held}.values():
        log(f"long: {c.name} has published segments but no resume checkpoint here "
            f"({rs.resume_dir(c, results_dir)}; a clone made without it, as the chapters' "
            "Colab cell makes, fetches it with git sparse-checkout disable): passed over")
    for name, who in held.items():
        log(f"long: {name} is held by another process ({who}), which trains it: passed over")
    passed = lt.damaged_chunks(results_dir, log) if units is None else set()  # not to pick
    waiting: set[str] = set()  # legs that do not finish in the time left (this run)
    rates: dict[tuple, float] = {}  # probed seconds per model-epoch of long legs
    while True:
        if time.monotonic() >= deadline:  # whatever the chunks do, the budget ends a run
            log("campaign: the time budget is spent")
            return published
        free = free_units(results_dir, units)
        # a GPU trains long units first; a CPU the legs of lp.cpu_first that finish in the
        # time left, then 200-epoch units, then other legs that finish in it
        skip = passed | waiting
        chunk = None if units is not None else lp.next_leg(
            results_dir, dev.type == "cuda", deadline, skip, bool(free),
            lambda c, left: leg_seconds(c, dev, fresh, rates, left, results_dir), log)
        waiting |= skip - passed
        if chunk is not None:  # a long chunk comes before the next 200-epoch unit
            done = lt.train_or_pass(chunk, deadline, results_dir, dev, precision,
                                    fresh["amp"], log, overrides, passed)
            if done is False:  # paused at the deadline
                return published
            if done:
                lp.retire(chunk, results_dir, log)
            waiting.add(chunk.name)  # (a leg to its target is trained once a run)
            continue
        if not free:
            log("campaign: no free unit left" + (" of those asked for" if units else "")
                + "".join(f"; the long chunk {n} is held by another process ({w})"
                          for n, w in cs.held_long(results_dir).items()))
            return published
        left = deadline - time.monotonic()
        head = free[:max(1, min(max_units, 2))]
        epochs = head[0].config(**fresh).epochs
        prior = measured if measured else prior_rate(results_dir)
        need = estimate_s(1, prior or 0.0, min(MIN_PARTIAL_EPOCHS, epochs) if allow_partial
                          else epochs)
        if left < need:  # the probe itself would eat the budget (a paper-size probe: minutes)
            log(f"campaign: {left / 60:.1f} min left, one unit needs about {need / 60:.1f} min"
                + (f" at the {prior} s per model-epoch measured before" if prior else "")
                + ": not probing")
            return published
        p = probe(head, dev, **fresh)
        measured = p["s_per_model_epoch"]
        n, p = fit_chunk(free[:min(max_units, len(free))], p, dev, deadline, epochs, fresh,
                         log)
        left = deadline - time.monotonic()  # the probes count against the budget
        want = min(max_units, len(free))
        if n < want and allow_partial:
            if left < estimate_s(want, p["s_per_model_epoch"], min(MIN_PARTIAL_EPOCHS, epochs)):
                log("campaign: too little time left to start a chunk that pauses")
                return published
            log(f"campaign: {n} of {want} unit(s) would finish; --allow-partial starts all "
                f"{want}: the chunk pauses at the deadline and the next run here resumes it")
            n = want
        if n == 0:
            log("campaign: no further unit fits in the time left")
            return published
        spec = {"units": [u.key for u in free[:n]], "probe": p,
                "floor": floor_of(head[0].config(**overrides), n, p["n_train"], dev),
                "setting": {"precision": precision, "step_mode": "eager", "models": n,
                            "threads": torch.get_num_threads()},
                "estimate_s": round(estimate_s(n, p["s_per_model_epoch"], epochs), 1),
                "started_at": res.utc_now(), "machine": machine(), "precision": precision,
                "precision_reason": why}
        done = _train_chunk(free[:n], results_dir, dev, deadline, spec, log, fresh)
        published += done
        if not done:
            return published


def leg_seconds(chunk: lu.LongChunk, dev: torch.device, overrides: dict,
                rates: dict[tuple, float], left: float,
                results_dir: str | Path | None = None) -> float:
    """Estimated wall seconds of ``chunk``'s leg to its target: :func:`probe` of its units
    (once per optimizer and number of models, kept in ``rates``), priced as
    :func:`estimate_s`; a leg longer than ``left`` even at half the fastest rate probed so far
    is not probed (its models: minutes of a paper-size probe) and comes back as that lower
    bound, a :class:`~lstpe.campaign.long_plan.AtLeast`, which the log words as such."""
    from lstpe.experiments.registry import REGISTRY

    epochs = lp.epochs_left(chunk, results_dir)
    if epochs <= 0:
        return 0.0
    if rates and (low := 0.5 * min(rates.values()) * len(chunk.units) * epochs) > left:
        return lp.AtLeast(low)
    key = (REGISTRY[chunk.units[0].run].optimizer, len(chunk.units))
    if key not in rates:
        rates[key] = probe(list(chunk.units), dev, **overrides)["s_per_model_epoch"]
    return estimate_s(len(chunk.units), rates[key], epochs)


def prior_rate(results_dir: str | Path | None = None) -> float | None:
    """The fastest probe (s per model-epoch) recorded by a stored unit the campaign trained,
    or None: what :func:`run` expects at best before it probes."""
    rates = []
    for u in fr.done_units(results_dir):
        try:
            man = res.read_manifest(u.path(results_dir), verify=False)
            rates.append(float(((man.get("campaign") or {}).get("probe") or {})
                               ["s_per_model_epoch"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    rates = [r for r in rates if r > 0]
    return min(rates) if rates else None


SPEC_KEYS: dict[str, type | tuple[type, ...]] = {
    "units": list, "estimate_s": (int, float), "precision": str, "precision_reason": str,
    "machine": dict, "probe": dict}
"""What a chunk's ``chunk.json`` must hold (and the types)."""


def chunk_spec(chunk: Path) -> dict:
    """The ``chunk.json`` of a paused chunk, checked: every key of :data:`SPEC_KEYS`, and
    every unit one of the plan.

    Raises:
        ValueError: naming the file, what is wrong and what to do.
    """
    path = chunk / "chunk.json"
    hint = (f"restore it, or delete the folder {chunk} to drop the paused chunk (its units then "
            "train again from the start)")
    spec = read_json_object(path, hint)
    for key, typ in SPEC_KEYS.items():
        if not isinstance(spec.get(key), typ) or isinstance(spec.get(key), bool):
            raise ValueError(f"{path} has no valid {key!r} (got {json.dumps(spec.get(key))}); "
                             f"{hint}")
    for key in spec["units"]:
        try:
            un.find_unit(str(key))
        except ValueError:
            raise ValueError(f"{path} names {key!r}, which is no unit of the campaign's plan; "
                             f"{hint}") from None
    return spec


def check_targets(chunk: Sequence[un.Unit], results_dir: str | Path | None) -> None:
    """Check, before training, that every unit of ``chunk`` can be published: its fragment path
    is no symbolic link and the nearest existing folder above it is a writable folder.

    Raises:
        ValueError: naming the path and what to do (nothing was trained).
    """
    for u in chunk:
        dest = u.path(results_dir)
        if dest.is_symlink():
            raise ValueError(f"the fragment path {dest} of {u.key} is a symbolic link (to "
                             f"{os.readlink(dest)}), not a folder: remove it; nothing was trained")
        above = next(p for p in dest.parents if p.exists() or p.is_symlink())
        if not above.is_dir() or not os.access(above, os.W_OK | os.X_OK):
            raise ValueError(f"{u.key} cannot be published under {above} (not a writable "
                             "folder); nothing was trained")


def _finished_stage(stage: Path, unit: un.Unit, overrides: dict) -> bool:
    """Whether ``stage`` holds ``unit``'s finished, verified run of its recipe."""
    if not (stage / "manifest.json").is_file():
        return False
    try:
        cfg = res.load(stage).config
    except (OSError, ValueError):
        return False
    return cfg.get("pes") == [unit.pe] and cfg.get("seeds") == [unit.seed] and \
        not fr.recipe_diff(cfg, unit, **overrides)


def _publish_unit(unit: un.Unit, stage: Path, spec: dict, results_dir: str | Path | None
                  ) -> None:
    """Record the chunk in the staged run's manifest (once) and publish it."""
    man = res.read_manifest(stage)
    if (man.get("campaign") or {}).get("unit") != unit.key:
        res.update_manifest(stage, campaign={
            "unit": unit.key, "chunk": spec["units"], "unit_wall_s":
            round(float(man["wall_time_s"]) / len(spec["units"]), 1),
            "estimate_s": spec["estimate_s"], "probe": spec["probe"],
            "floor": spec.get("floor"), "setting": spec.get("setting"),
            "precision": spec["precision"], "precision_reason": spec["precision_reason"],
            "machine": spec["machine"], "pid": os.getpid()})
    fr.publish(stage, unit, results_dir)


def _chunk_dir(results_dir: str | Path | None, keys: Sequence[str]) -> Path:
    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:12]
    return un.campaign_work(results_dir) / "chunks" / digest


def _train_chunk(chunk: Sequence[un.Unit], results_dir: str | Path | None,
                 dev: torch.device, deadline: float, spec: dict, log,
                 overrides: dict) -> list[un.Unit]:
    """Claim, train, verify and publish one chunk; [] if it paused or was claimed."""
    import contextlib

    from lstpe.store.rundir import RunLock, RunLockedError
    from lstpe.training.engine import Paused
    from lstpe.training.train import train_many

    work = un.campaign_work(results_dir)
    cdir = _chunk_dir(results_dir, spec["units"])
    with contextlib.ExitStack() as claims:
        try:
            for u in chunk:
                claims.enter_context(RunLock(work / "claims" / u.slug))
        except RunLockedError as e:
            log(f"campaign: a unit of this chunk is claimed by another process ({e}); skipped")
            return []
        check_targets(chunk, results_dir)
        resumed = (cdir / "chunk.json").is_file() and any(cdir.glob("checkpoints/*.pt"))
        out: list[un.Unit] = []
        for u in chunk if resumed else []:  # killed while publishing: its verified stages
            stage = work / "staging" / u.slug
            if not u.path(results_dir).exists() and _finished_stage(stage, u, overrides):
                _publish_unit(u, stage, spec, results_dir)
                out.append(u)
        if out:
            log(f"campaign: published {', '.join(u.key for u in out)} from the chunk's "
                "verified staging folders (trained before an interruption)")
        stored = [u for u in chunk if u.path(results_dir).exists()]
        rest = [u for u in chunk if u not in stored]
        if not rest:
            shutil.rmtree(cdir, ignore_errors=True)
            return out
        if stored and not resumed:  # stored before the claim: a chunk of the others
            log(f"campaign: {', '.join(u.key for u in stored)} stored meanwhile; training "
                f"the other {len(rest)}")
            shutil.rmtree(cdir, ignore_errors=True)
            return _train_chunk(rest, results_dir, dev, deadline,
                                {**spec, "units": [u.key for u in rest]}, log, overrides)
        if stored and not out:
            log(f"campaign: {', '.join(u.key for u in stored)} stored meanwhile; the chunk "
                f"resumes from its checkpoint to publish the other {len(rest)} (the stored "
                "units' models train along; their results are not kept)")
        if not (cdir / "chunk.json").exists():
            res.save_json(spec, cdir / "chunk.json")
        cfgs = [u.config(device=str(dev), **overrides) for u in chunk]
        stages = [work / "staging" / u.slug for u in chunk]
        for stage in stages:  # saved but not published (killed in between): the chunk's
            if stage.exists() and not (cdir / "checkpoints").is_dir():  # checkpoint is gone
                shutil.rmtree(stage)
            elif (stage / "manifest.json").exists():  # its final checkpoint redoes the end
                shutil.rmtree(stage)
        log(f"training {len(chunk)} unit(s): {', '.join(u.key for u in chunk)} "
            f"(estimate {spec['estimate_s'] / 60:.1f} min for all its epochs)")
        t0 = time.monotonic()
        try:
            runs = train_many(cfgs, stages, progress=False, work_dir=cdir / "checkpoints",
                              deadline=deadline)
        except Paused as e:
            log(f"campaign: {e}")
            return []
        wall = time.monotonic() - t0
        for u, stage in zip(chunk, stages, strict=True):
            if u in stored:  # trained along from the shared checkpoint; not kept
                shutil.rmtree(stage, ignore_errors=True)
                continue
            try:
                _publish_unit(u, stage, spec, results_dir)
            except FileExistsError as e:  # stored meanwhile by another route: the others go on
                log(f"campaign: {e}")
                continue
            out.append(u)
        shutil.rmtree(cdir, ignore_errors=True)
        # a resumed chunk trained in several processes: its rate is over all of them
        total = float(runs[0].manifest["wall_time_s"])
        rate = len(chunk) * cfgs[0].epochs / total
        floor = (spec.get("floor") or {}).get("model_epochs_per_s")
        here = f", {wall / 60:.1f} min of it in this process" if total > wall + 1 else ""
        log(f"published {len(out)} fragment(s) trained in {total / 60:.1f} min{here} (estimate "
            f"{spec['estimate_s'] / 60:.1f} min): {', '.join(u.key for u in out)}; "
            f"{rate:.3f} model-epochs/s" + (f" = {rate / floor:.2f} of the fp32 floor"
                                            if floor else ""))
        return out
