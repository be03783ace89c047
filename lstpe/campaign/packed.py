"""Packed chunks: long units at different epochs trained as one batch of models.

A GPU's step costs about the same for 3 models as for 12 (the fits of this project's past GPU
leases, ``results/benchmarks/lease_*.json``: 2.0 ms + 0.8 ms per model on an H100), so a GPU
should train every long unit it can in one chunk: units that start at epoch 0 beside units
paused on a CPU at epoch 2817. No command drives a packed chunk now (the GPU lease that did
is gone); :func:`train_packed` is kept for a trainer of long units on a GPU. A
:class:`PackedChunk` maps each unit to a model slot with its own offset (the epoch it starts
at) and target:

* a unit that **continues a paused chunk** of the plan (its *source*,
  :data:`lstpe.experiments.long_units.LONG_PLAN`) takes its weights, Adam moments and step
  count from the source's resume checkpoint (:meth:`lstpe.training.optim.StackedOptimizer.adopt`),
  and what that chunk held of its open segment (history rows, snapshots, processes:
  :meth:`lstpe.campaign.long_train.SegmentWriter.carry`), so its segments chain to the
  ones published before;
* each model keeps its own data order, dropout keys, bias correction and schedule
  (:class:`lstpe.training.task.LSTTask` with ``offsets``, ``targets`` and ``total``), and
  publishes its segments at its own epochs; a model past its target still computes but is
  retired;
* **the source owns its resume state.** When a source's units reach their target, and at a
  pause before that, the packed chunk writes the source's resume checkpoint again, in the
  source's own format, at the epoch its units reached (:func:`write_back`): the next leg of
  that chunk resumes from it anywhere, as if the source had trained alone.
* **so does a new group that pauses.** Units that started at epoch 0 and pause short of
  their target get their group's resume checkpoint written the same way (``chunk.json``,
  fp32, the checkpoint of their chunk trained alone from epoch 0 to where they stopped), so
  ``lstpe campaign run`` continues them; a group that reaches its target keeps its published
  segments alone.

The packed chunk's own checkpoint (``long/.work/packed/<name>/``, untracked) exists only to
pause at a deadline; after a pause it is removed (and one left over is never resumed), so a
unit's trajectory has one owner: its chunk's own checkpoint.
Tested on tiny models (``tests/test_packed.py``): a source resumed in a packed chunk, and one
written back at a pause and finished alone, publish the segments of the source trained
alone, bit for bit on the CPU.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lstpe.campaign import long_train as lt
from lstpe.campaign import resume as rs
from lstpe.experiments import long_units as lu
from lstpe.store import results as res


@dataclass(frozen=True)
class PackedSlot:
    """One unit of a packed chunk: trained to ``target``, continuing ``source`` (a chunk of
    the plan with a resume checkpoint) or from epoch 0 (``source`` None) as a unit of the
    chunk ``fresh``."""

    unit: lu.LongUnit
    target: int
    source: lu.LongChunk | None = None
    snapshots: str = "sparse"
    fresh: lu.LongChunk | None = None


@dataclass(frozen=True)
class PackedChunk:
    """Units at different epochs trained as one chunk (module docstring)."""

    name: str
    slots: tuple[PackedSlot, ...]
    reason: str

    @property
    def units(self) -> tuple[lu.LongUnit, ...]:
        return tuple(s.unit for s in self.slots)

    def sources(self) -> list[lu.LongChunk]:
        """The paused chunks its slots continue, in slot order, each once."""
        return list({s.source.name: s.source for s in self.slots if s.source}.values())

    def fresh(self) -> list[lu.LongChunk]:
        """The chunks its slots train from epoch 0, in slot order, each once."""
        return list({s.fresh.name: s.fresh for s in self.slots if s.fresh}.values())

    def as_chunk(self) -> lu.LongChunk:
        """The chunk its segments name (``long.chunk`` of their manifests)."""
        return lu.LongChunk(self.name, self.units, max(s.target for s in self.slots), 0,
                            self.reason, snapshots="sparse")


def packed_chunk(name: str, sources: Sequence[lu.LongChunk], fresh: Sequence[lu.LongChunk],
         reason: str = "", fresh_snapshots: str | None = None) -> PackedChunk:
    """A packed chunk of the paused ``sources`` (each to its target, its units continuing its
    resume checkpoint, with its snapshot schedule) and the ``fresh`` chunks (from epoch 0;
    their snapshot schedule ``fresh_snapshots``, default each one's)."""
    slots = [PackedSlot(u, c.target, c, c.snapshots) for c in sources for u in c.units]
    slots += [PackedSlot(u, c.target, None, fresh_snapshots or c.snapshots, c)
              for c in fresh for u in c.units]
    keys = [s.unit.key for s in slots]
    if len(set(keys)) != len(keys):
        raise ValueError(f"a unit is packed twice: {sorted(k for k in keys if keys.count(k) > 1)}")
    return PackedChunk(name, tuple(slots), reason or ", ".join(
        c.name for c in (*sources, *fresh)))


def _source_state(src: lu.LongChunk, results_dir: str | Path | None) -> dict[str, Any]:
    """The source's resume checkpoint, checked (its digest, ``chunk.json``, its segments), in
    fp32."""
    problems = rs.chunk_problems(src, results_dir, whole=False)
    if problems:
        raise rs.LongChunkError(f"the long chunk {src.name} cannot be packed: "
                                + "; ".join(problems))
    state = rs.read_checkpoint(src, results_dir)
    if state is None:
        raise FileNotFoundError(f"{rs.resume_checkpoint(src, results_dir)} is missing: "
                                f"{src.name} has nothing to continue")
    spec = rs.read_spec(src, results_dir) or {}
    if spec.get("precision", "fp32") != "fp32":
        raise ValueError(f"{src.name} trains in {spec['precision']}: only fp32 chunks pack")
    return state


def _models(cfgs: Sequence[Any]):
    """A bare stacked model and optimizer of one-unit configurations ``cfgs`` (on the CPU)."""
    from lstpe.nn.model import BatchedLSTTransformer
    from lstpe.training.optim import StackedOptimizer

    model = BatchedLSTTransformer([c.specs[0] for c in cfgs], [c.seeds[0] for c in cfgs],
                                  cfgs[0].model)
    opt = StackedOptimizer(model.parameters(), [c.optimizer for c in cfgs],
                           [c.lr for c in cfgs], [c.weight_decay for c in cfgs])
    return model, opt


def _open(snaps: dict[int, dict[str, torch.Tensor]], i: int, lo: int
          ) -> dict[int, dict[str, torch.Tensor]]:
    """Model ``i``'s snapshots past ``lo`` (and at 0 while nothing is published) from a
    chunk's stacked ones, by epoch."""
    return {int(e): {k: v[i] for k, v in s.items()} for e, s in snaps.items()
            if int(e) > lo or lo == int(e) == 0}


def write_back(src: lu.LongChunk, cfgs: Sequence[Any], state: dict[str, Any] | None,
               slots: Sequence[int], opt: Any, hook: lt.SegmentWriter,
               diverged: Sequence[bool], results_dir: str | Path | None, tmp: Path) -> int:
    """Write ``src``'s resume checkpoint from the packed chunk's models ``slots`` (one per unit
    of ``src``, in its order), in the source's own format: its weights, moments, step counts,
    history, open snapshots and processes at the epoch its units reached; ``state`` is the
    checkpoint the source was packed from (its meta, init and earlier rows), or None for a
    chunk the packed chunk trained from epoch 0 (then its meta is that of ``cfgs`` trained
    alone, its init the units' snapshots at epoch 0, and its ``chunk.json`` is written:
    fp32). Returns that epoch."""
    from lstpe.training.checkpoint import DIGEST_KEY, state_digest

    fresh = state is None
    own = {min(hook.own(j), hook.targets[j]) for j in slots}
    if len(own) != 1:
        raise RuntimeError(f"the units of {src.name} are at epochs {sorted(own)}")
    epoch = own.pop()
    s_model, s_opt = _models(cfgs)
    if fresh:  # from epoch 0 here: the checkpoint its chunk alone would have
        if hook.init is None:
            raise RuntimeError(f"no snapshot at epoch 0 of {src.name}'s units was kept")
        idx = torch.as_tensor(list(slots))
        state = {"meta": {"configs": [c.to_dict() for c in cfgs], "ids": list(range(len(cfgs)))},
                 "epoch": -1, "history": [], "init": {k: v[idx] for k, v in hook.init.items()},
                 "nonfinite": torch.zeros(len(slots), dtype=torch.bool)}
        res.save_json({"units": [u.key for u in src.units], "precision": "fp32", "amp": False},
                      rs.resume_dir(src, results_dir) / "chunk.json", tmp)
    else:
        s_model.load_state_dict(state["model"])
        s_opt.load_state_dict(state["opt"])
    for i, j in enumerate(slots):
        s_opt.adopt(i, opt, j)
    rows = [r for r in state["history"] if r["epoch"] <= state["epoch"]]
    at = {j: i for i, j in enumerate(slots)}
    rows += [{**r, "_config": at[r["_config"]]} for r in hook.history
             if r["_config"] in at and r["epoch"] <= hook.targets[r["_config"]]
             and r["epoch"] > state["epoch"]]
    lo = epoch // lu.SEGMENT * lu.SEGMENT
    snaps: dict[int, dict[str, torch.Tensor]] = {}
    for key, at_ in (("pe", hook.pe_at), ("val_attention", hook.att_at)):
        per = [hook.snapshots_of(j, lo, epoch, key, at_[j]) for j in slots]
        for e in per[0]:
            snaps.setdefault(e, {})[key] = torch.stack([p[e] for p in per])
    nonfinite = state["nonfinite"].clone().bool() | torch.as_tensor(
        [bool(diverged[j]) for j in slots])
    earlier = [] if fresh else [
        *state.get("segments", []),
        {"wall_s": float(state.get("wall_s", 0.0)), **state.get("process", {})}]
    new = {"meta": state["meta"], "epoch": epoch, "model": s_model.state_dict(),
           "opt": s_opt.state_dict(), "nonfinite": nonfinite, "history": rows,
           "init": state["init"], "segments": earlier,
           "wall_s": 0.0, "process": res.checkpoint_record(hook.process),
           "hook": {"snaps": snaps,
                    "published": {u.key: hook.published.get(u.key, {}) for u in src.units},
                    "processes": hook.unit_processes(slots[0])}}
    res.save_torch({**new, DIGEST_KEY: state_digest(new)},
                   rs.resume_checkpoint(src, results_dir), tmp)
    return epoch


def packed_dir(packed: PackedChunk, results_dir: str | Path | None = None) -> Path:
    """Where a packed chunk's own (untracked) checkpoint lives."""
    return lu.long_root(results_dir) / ".work" / "packed" / packed.name


def train_packed(packed: PackedChunk, deadline: float, results_dir: str | Path | None = None,
                 device: torch.device | None = None, log=print, stop_at: int | None = None,
                 **overrides: Any) -> bool:
    """Train ``packed`` until every unit reaches its target or ``deadline`` (a
    ``time.monotonic()`` value); fp32 only. Returns True when all reached their targets,
    False when it paused (at the deadline, or after loop epoch ``stop_at``): then every
    source's resume checkpoint is written back, and so is that of every new group short of
    its target (:func:`write_back`), so that all of them go on from there.

    Raises:
        lstpe.store.rundir.RunLockedError: another process trains one of its units.
        lstpe.campaign.resume.LongChunkError: a source that
            :func:`~lstpe.campaign.resume.chunk_problems` finds damaged, or a fresh
            unit that has published segments already or whose chunk has a resume
            checkpoint (naming them: it goes on from there, never from epoch 0).
    """
    from lstpe.store.rundir import RunLock
    from lstpe.training.config import load_data
    from lstpe.training.engine import LoopOptions, Paused, resolve_mode, run_chunk
    from lstpe.training.task import one_model_chunk
    from lstpe.training.train import check_bundle, chunk_sizes

    device = device or torch.device("cpu")
    work = lu.long_root(results_dir) / ".work"
    tmp, pdir = work / "tmp" / packed.name, packed_dir(packed, results_dir)
    with contextlib.ExitStack() as claims:
        for u in packed.units:
            claims.enter_context(RunLock(work / "claims" / u.key.replace("/", "__")))
        states = {c.name: _source_state(c, results_dir) for c in packed.sources()}
        src_cfgs = {c.name: [u.config(**overrides) for u in c.units] for c in packed.sources()}
        begun = [s.unit.key for s in packed.slots
                 if s.source is None and lu.published_epoch(s.unit, results_dir) > 0]
        if begun:
            raise rs.LongChunkError(f"{', '.join(begun)} published segments already: a unit "
                                    "packed from epoch 0 must not have begun")
        resumable = [str(rs.resume_checkpoint(c, results_dir)) for c in packed.fresh()
                     if rs.resume_checkpoint(c, results_dir).exists()]
        if resumable:
            raise rs.LongChunkError(f"{', '.join(resumable)} exist: those chunks go on from "
                                    "their checkpoints (pack them as sources), never again "
                                    "from epoch 0")
        fresh_cfgs = {c.name: [u.config(**overrides) for u in c.units] for c in packed.fresh()}
        offsets = [int(states[s.source.name]["epoch"]) if s.source else 0
                   for s in packed.slots]
        targets = [s.target for s in packed.slots]
        cfgs = [s.unit.config(device=str(device), amp=False, **overrides)
                for s in packed.slots]
        check_bundle(cfgs)
        base, splits = cfgs[0], load_data(cfgs[0])
        mode = resolve_mode(base.step_mode, device)
        evals = chunk_sizes(base, len(cfgs), device, mode, len(splits["val"]))[1]
        task, opt = one_model_chunk(cfgs, device, splits, eval_chunk=evals, offsets=offsets,
                                    targets=targets, total=lu.LONG_EPOCHS)
        hook = lt.SegmentWriter(packed.as_chunk(), cfgs, splits["val"].x, device, results_dir,
                                "fp32", log, offsets, targets,
                                [s.snapshots for s in packed.slots])
        groups = {c.name: [j for j, s in enumerate(packed.slots)
                           if s.source is not None and s.source.name == c.name]
                  for c in packed.sources()}
        news = {c.name: [j for j, s in enumerate(packed.slots)
                         if s.fresh is not None and s.fresh.name == c.name]
                for c in packed.fresh()}
        ckpt = pdir / "chunk0.pt"
        if ckpt.exists():  # left by a process killed at a pause: its sources are the truth
            log(f"long: {ckpt} is left over; the packed chunk starts from its sources")
            shutil.rmtree(pdir)
        _adopt(packed, states, src_cfgs, groups, task, opt, hook)
        written: set[str] = set()

        def back(names: Sequence[str]) -> None:
            for c in packed.sources():
                if c.name in names and c.name not in written:
                    e = write_back(c, src_cfgs[c.name], states[c.name], groups[c.name], opt,
                                   hook, task.diverged, results_dir, tmp)
                    written.add(c.name)
                    log(f"long: {c.name}'s resume checkpoint written at epoch {e}")

        hook.on_target = lambda epoch, done: back(
            [n for n, js in groups.items() if all(hook.own(j) >= hook.targets[j] for j in js)
             and set(js) & set(done)])
        opts = LoopOptions(epochs=task.loop_epochs, schedule=set(range(1, task.loop_epochs + 1)),
                           device=device, mode=mode,
                           checkpoint=ckpt, checkpoint_every=0,
                           checkpoint_meta={"configs": [c.to_dict() for c in cfgs],
                                            "offsets": offsets, "targets": targets},
                           deadline=deadline, stop_at=stop_at, hook=hook, on_damaged="refuse",
                           tmp_dir=tmp)
        log(f"long: training {packed.name}: " + ", ".join(
            f"{s.unit.key} {o}->{s.target}" for s, o in zip(packed.slots, offsets, strict=True)))
        t0 = time.perf_counter()
        try:
            run_chunk(task, opt, opts, lambda: {})
        except Paused as e:
            from lstpe.training.engine import Stopped

            log(f"long: {packed.name} paused after its epoch {hook.epoch} ("
                f"{'as asked' if isinstance(e, Stopped) else 'the deadline'}); each chunk's "
                "own resume checkpoint is written where its units stopped")
            back(list(groups))
            for c in packed.fresh():  # new units short of their target: their own checkpoint
                if any(hook.own(j) < hook.targets[j] for j in news[c.name]):
                    e = write_back(c, fresh_cfgs[c.name], None, news[c.name], opt, hook,
                                   task.diverged, results_dir, tmp)
                    log(f"long: {c.name}'s resume checkpoint written at epoch {e} "
                        f"({rs.resume_checkpoint(c, results_dir)})")
            shutil.rmtree(pdir, ignore_errors=True)  # one owner: each chunk's checkpoint
            return False
        back(list(groups))
        shutil.rmtree(pdir, ignore_errors=True)
        log(f"long: {packed.name} reached every target in {time.perf_counter() - t0:.0f} s")
        return True


def _adopt(packed: PackedChunk, states: dict[str, dict], cfgs: dict[str, list[Any]],
           groups: dict[str, list[int]], task: Any, opt: Any, hook: lt.SegmentWriter) -> None:
    """Each source's units take their state from its checkpoint (weights, moments, steps,
    divergence) and what it held of their open segments."""
    for c in packed.sources():
        st = states[c.name]
        s_model, s_opt = _models(cfgs[c.name])
        s_model.load_state_dict(st["model"])
        s_opt.load_state_dict(st["opt"])
        h = st.get("hook") or {}
        lo = int(st["epoch"]) // lu.SEGMENT * lu.SEGMENT
        for i, (u, j) in enumerate(zip(c.units, groups[c.name], strict=True)):
            opt.adopt(j, s_opt, i)
            task.diverged[j] = bool(st["nonfinite"][i])
            rows = [r for r in st["history"] if r["_config"] == i
                    and (r["epoch"] > lo or lo == r["epoch"] == 0)]
            procs = h.get("unit_processes", [h.get("processes") or []] * len(c.units))[i]
            hook.carry(j, rows, _open(h.get("snaps") or {}, i, lo), procs,
                       (h.get("published") or {}).get(u.key, {}))
