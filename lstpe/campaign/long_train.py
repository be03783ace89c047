"""Training a long chunk: the hook that publishes its segments, and :func:`train_chunk`.

:class:`SegmentWriter` takes each unit's snapshots and publishes a verified segment every
:data:`lstpe.experiments.long_units.SEGMENT` epochs. Its state travels in the chunk's resume
checkpoint: the snapshots not yet published, the manifest checksum of every segment its
trajectory published (:func:`lstpe.campaign.resume.chunk_problems` compares them with
the stored ones before a resume), and the processes that trained epochs of the open segment
(each segment's manifest names all of them in ``long.processes``: device, commit, host, the
epochs it trained and its wall time).

**A segment already published** when a resumed run reaches its epoch (a process killed between
two units' publishes, or a segment brought from elsewhere) is compared with the one recomputed
here (:func:`segment_diff`): config, the segment before it, history, snapshots. Equal (the same
trajectory; on the same kind of machine a resume repeats it bit for bit): it is kept as it is.
Different: training stops with :class:`~lstpe.campaign.resume.SegmentConflictError`
naming it; the stored segment is never replaced and nothing is chained to it from the other
trajectory. The recomputed segment is kept for inspection under ``long/.work/conflicts/``. The
choice is refusal, not a fork: a segment's successors chain to one predecessor, and a
trajectory continued on another kind of machine differs in its last bits, so one of the two
must be chosen by hand (continue where the stored one was trained, or move it and its
successors out of ``results/`` to publish this one).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from lstpe.campaign import resume as rs
from lstpe.experiments import long_units as lu
from lstpe.nn.attention import bitwise_on
from lstpe.runtime import cpu_flags
from lstpe.store import model as mf
from lstpe.store import results as res


class SegmentWriter:
    """The :class:`~lstpe.training.engine.EpochHook` of a long chunk: takes the snapshots and
    publishes each unit's segment every :data:`~lstpe.experiments.long_units.SEGMENT`
    epochs of its own.

    ``offsets``/``targets`` (one per unit; default 0 and none): unit i's own epoch at loop
    epoch e is ``offsets[i] + e`` (a unit resumed in a packed chunk,
    :mod:`lstpe.campaign.packed`), and nothing of it is recorded past ``targets[i]``;
    ``snapshots``: each unit's schedule (``dense`` or ``sparse``,
    :class:`~lstpe.experiments.long_units.LongChunk`; default the chunk's). :meth:`carry`
    hands it what its earlier chunk held of its open segment (history rows, snapshots,
    processes). ``on_target(epoch, units)`` is called at the loop epoch at which units reach
    their targets, after their last segment is published.
    """

    def __init__(self, chunk: lu.LongChunk, cfgs: Sequence[Any], val_x: torch.Tensor,
                 device: torch.device, results_dir: str | Path | None, precision: str,
                 log=print, offsets: Sequence[int] | None = None,
                 targets: Sequence[int] | None = None,
                 snapshots: Sequence[str] | None = None) -> None:
        self.chunk, self.cfgs, self.val_x, self.device = chunk, list(cfgs), val_x, device
        self.results_dir, self.precision, self.log = results_dir, precision, log
        n = len(chunk.units)
        self.offsets = [int(o) for o in offsets] if offsets is not None else [0] * n
        self.targets = [int(t) for t in targets] if targets is not None else \
            [lu.LONG_EPOCHS] * n
        kinds = list(snapshots) if snapshots is not None else [chunk.snapshots] * n
        at = [(lu.sparse_snapshot_epochs if k == "sparse" else lu.snapshot_epochs)()
              for k in kinds]
        self.pe_at = [set(a[0]) for a in at]  # each unit's snapshot epochs (own)
        self.att_at = [set(a[1]) & set(a[0]) for a in at]  # taken with a PE snapshot only
        self.snaps: dict[int, dict[str, torch.Tensor]] = {}  # loop epoch -> (M, ...) each
        self.held: set[int] = set()  # loop epochs of the snapshots the checkpoint held
        self.t_last = [time.perf_counter()] * n  # each unit's clock, since its last segment
        self.timed_from: list[int | None] = [None] * n  # own epoch each clock starts at
        self.epoch = 0  # the last loop epoch seen
        ok, why = bitwise_on(device, [u.pe for u in chunk.units])
        self.bitwise = {"ok": ok, "why": why}  # whether a resume here repeats the trajectory
        self.process = res.process_record(device)
        self.published: dict[str, dict[str, str]] = {}  # unit -> {epoch: manifest checksum}
        self.earlier: list[list[dict[str, Any]]] = [[] for _ in range(n)]  # of open segments
        self.carried: dict[int, dict[str, Any]] = {}  # unit -> rows and snaps carried in
        self.on_target = None
        self.history: list[dict] = []  # the loop's history, as the last epoch saw it
        self.init: dict[str, torch.Tensor] | None = None  # the snapshot at loop epoch 0

    def own(self, i: int, epoch: int | None = None) -> int:
        """Unit ``i``'s own epoch at loop epoch ``epoch`` (default: the last seen)."""
        return self.offsets[i] + (self.epoch if epoch is None else epoch)

    def _live(self, i: int, epoch: int) -> bool:
        """Whether loop epoch ``epoch`` is a new epoch of unit ``i`` (not past its target)."""
        return (epoch > 0 or self.offsets[i] == 0) and self.own(i, epoch) <= self.targets[i]

    def _me(self, i: int, lo: int, upto: int) -> list[dict[str, Any]]:
        """This process's record for the epochs of unit ``i`` it trained in (``lo``,
        ``upto``]."""
        start = max(self.timed_from[i] or 0, lo)
        if upto <= start:
            return []
        return [{**self.process, "from_epoch": start, "to_epoch": upto,
                 "wall_s": round(time.perf_counter() - self.t_last[i], 3)}]

    def unit_processes(self, i: int) -> list[dict[str, Any]]:
        """The processes that trained unit ``i``'s open segment, this one included."""
        own = min(self.own(i), self.targets[i])
        return self.earlier[i] + self._me(i, own // lu.SEGMENT * lu.SEGMENT, own)

    def state(self) -> dict[str, Any]:
        out = {"snaps": self.snaps, "published": self.published,
               "processes": self.unit_processes(0) if self.earlier else []}
        if any(self.offsets) or self.carried:  # a packed chunk: each unit its own
            out["unit_processes"] = [self.unit_processes(i) for i in range(len(self.earlier))]
            out["carried"] = self.carried
        return out

    def load(self, state: dict[str, Any]) -> None:
        # on the CPU whatever device the checkpoint was loaded to: a chunk paused on a GPU
        # resumes on a CPU and the other way round, and its snapshots are stacked together
        self.snaps = {e: {k: v.cpu() for k, v in s.items()}
                      for e, s in state.get("snaps", {}).items()}
        self.held = set(self.snaps)
        self.published = {k: dict(v) for k, v in (state.get("published") or {}).items()}
        per = state.get("unit_processes")
        self.earlier = [[dict(p) for p in (per[i] if per is not None else
                                           state.get("processes") or [])]
                        for i in range(len(self.earlier))]
        self.carried = {int(i): c for i, c in (state.get("carried") or {}).items()}

    def carry(self, i: int, rows: list[dict], snaps: dict[int, dict[str, torch.Tensor]],
              processes: list[dict], published: dict[str, str]) -> None:
        """Unit ``i`` continues a trajectory begun in another chunk: that chunk's history rows
        and snapshots (own epochs) of its open segment, the processes that trained it, and
        the manifest checksums of the segments it published."""
        self.carried[i] = {"rows": [{**r, "_config": i} for r in rows],
                           "snaps": {int(e): {k: v.cpu() for k, v in s.items()}
                                     for e, s in snaps.items()}}
        self.earlier[i] = [dict(p) for p in processes]
        self.published[self.chunk.units[i].key] = dict(published)

    def after_epoch(self, epoch: int, model: Any, history: list[dict]) -> None:
        from lstpe.training.task import predict

        n, self.history = len(self.offsets), history
        for i in range(n):
            if self.timed_from[i] is None:  # the first epoch this process trains (or 0)
                self.timed_from[i] = self.own(i, max(epoch - 1, 0))
        self.epoch = epoch
        live = [i for i in range(n) if self._live(i, epoch)]
        if any(self.own(i) in self.pe_at[i] for i in live):
            snap = {"pe": model.pe().detach().cpu().clone()}
            if any(self.own(i) in self.att_at[i] for i in live):
                _, att = predict(model, self.val_x, return_attention=True)
                snap["val_attention"] = att.to(torch.float16).cpu()
            self.snaps[epoch] = snap
            if epoch == 0:  # every unit's init (a new unit's checkpoint needs it at a pause)
                self.init = snap
        done = []
        for i in live:
            own = self.own(i)
            if own > 0 and own % lu.SEGMENT == 0:
                self._publish(i, self.chunk.units[i], own, history)
                self.t_last[i], self.timed_from[i], self.earlier[i] = \
                    time.perf_counter(), own, []
                self.carried.pop(i, None)
            if own == self.targets[i]:
                done.append(i)
        self.snaps = {e: s for e, s in self.snaps.items()
                      if any(self._unpublished(i, e) for i in range(n))}
        if done and self.on_target is not None:
            self.on_target(epoch, done)

    def _unpublished(self, i: int, e: int) -> bool:
        """Whether loop epoch ``e`` is an epoch of unit ``i`` its segments have not yet
        published (its epoch 0 until the first is)."""
        lo = min(self.own(i), self.targets[i]) // lu.SEGMENT * lu.SEGMENT
        own = self.own(i, e)
        return (e > 0 or self.offsets[i] == 0) and (lo < own <= self.targets[i]
                                                    or lo == own == 0)

    def snapshots_of(self, i: int, lo: int, epoch: int, key: str, at: set[int]
                  ) -> dict[int, torch.Tensor]:
        """Unit ``i``'s snapshots ``key`` in its segment (``lo``, ``epoch``] (and at 0 in
        the first), by own epoch: carried in, then taken here. Those at epochs of its schedule
        ``at``, and every one taken before this process resumed the chunk (carried in, or held
        in the checkpoint): a chunk resumed under another schedule publishes what it took."""
        def inside(e: int, taken: bool = False) -> bool:
            return (taken or e in at) and (lo < e <= epoch or (lo == 0 and e == 0))

        out = {e: s[key] for e, s in (self.carried.get(i) or {}).get("snaps", {}).items()
               if key in s and inside(e, True)}
        for e, s in self.snaps.items():
            if key in s and (e > 0 or self.offsets[i] == 0) and \
                    inside(self.own(i, e), e in self.held):
                out[self.own(i, e)] = s[key][i]
        return dict(sorted(out.items()))

    def _publish(self, i: int, unit: lu.LongUnit, epoch: int, history: list[dict]) -> None:
        folder = unit.path(self.results_dir)
        segs = {s.epoch: s for s in mf.segments(unit.path(self.results_dir))}
        lo = epoch - lu.SEGMENT
        if lo > 0 and lo not in segs:
            raise rs.LongChunkError(f"the segment to epoch {lo} of {folder} ({unit.key}) is "
                                    f"missing: the segment to epoch {epoch} cannot name it; "
                                    f"{lu.restore_hint(folder)}")
        stage = self._stage(i, unit, epoch, lo, history, segs[lo].checksum if lo > 0 else None)
        if epoch in segs:  # published before: by a process killed before its checkpoint?
            self._keep_if_equal(stage, segs[epoch], unit, epoch)
            return
        if segs and max(segs) > epoch:
            raise rs.LongChunkError(f"{folder} is past epoch {epoch} (to {max(segs)}) without "
                                    f"its segment to epoch {epoch}; {lu.restore_hint(folder)}")
        seg = mf.append_segment(folder, stage, unit.key,
                                lu.long_root(self.results_dir) / ".work" / "tmp")
        shutil.rmtree(stage)
        self.published.setdefault(unit.key, {})[str(epoch)] = seg.checksum
        self.log(f"long: published {unit.key} segment {lo}-{epoch}")

    def _stage(self, i: int, unit: lu.LongUnit, epoch: int, lo: int, history: list[dict],
               prev_sha: str | None) -> Path:
        """Write unit ``i``'s segment (``lo``, ``epoch``] to its staging folder, verified."""
        def inside(r: dict) -> bool:
            return lo < r["epoch"] <= epoch or (lo == 0 and r["epoch"] == 0)

        carried = [r for r in (self.carried.get(i) or {}).get("rows", []) if inside(r)]
        rows = [{k: v for k, v in r.items() if k != "_config"} for r in
                carried + [r for r in history if r["_config"] == i and inside(r)]]
        hist = pd.DataFrame(rows)
        pes = self.snapshots_of(i, lo, epoch, "pe", self.pe_at[i])
        atts = self.snapshots_of(i, lo, epoch, "val_attention", self.att_at[i])
        arts = {"pe_epochs": list(pes), "pe": torch.stack(list(pes.values())),
                "attention_epochs": list(atts)}
        if atts:
            arts["val_attention"] = torch.stack(list(atts.values()))
        procs = [p for p in self.earlier[i] if p.get("to_epoch", 0) > lo] + \
            self._me(i, lo, epoch)
        man = res.make_manifest(self.cfgs[i].to_dict(), self.device,
                                time.perf_counter() - self.t_last[i], n_models=1,
                                kind="long-segment",
                                long={"unit": unit.key, "chunk": self.chunk.name,
                                      "from_epoch": lo, "to_epoch": epoch,
                                      "timed_from": max(self.timed_from[i] or 0, lo),
                                      "processes": procs,
                                      "previous": prev_sha, "precision": self.precision,
                                      "tf32": bool(torch.backends.cuda.matmul.allow_tf32)
                                      if self.device.type == "cuda" else None,
                                      "autocast": None if self.precision == "fp32"
                                      else self.precision,
                                      "cpu_flags": cpu_flags(),
                                      "threads": torch.get_num_threads(),
                                      "bitwise": self.bitwise})
        stage = lu.long_root(self.results_dir) / ".work" / "staging" / \
            f"{unit.key.replace('/', '__')}__e{epoch:04d}"
        shutil.rmtree(stage, ignore_errors=True)
        res.save_run(stage, hist, man, arts)
        res.load(stage)  # verify before publishing
        return stage

    def _keep_if_equal(self, stage: Path, seg: mf.Segment, unit: lu.LongUnit,
                       epoch: int) -> None:
        """Keep the published ``seg`` if it equals the recomputed ``stage``; else refuse."""
        try:
            diff = segment_diff(stage, seg)
        except (OSError, ValueError) as e:
            raise rs.LongChunkError(lu.segment_damage(seg.folder, e)) from None
        if not diff:
            shutil.rmtree(stage)
            self.published.setdefault(unit.key, {})[str(epoch)] = seg.checksum
            self.log(f"long: kept {seg.name}, published before an interruption (equal to the "
                     "segment recomputed here)")
            return
        aside = lu.long_root(self.results_dir) / ".work" / "conflicts" / \
            f"{stage.name}-{time.strftime('%Y%m%dT%H%M%S')}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        stage.rename(aside)
        raise rs.SegmentConflictError(
            f"{seg.name} is already published and differs from the one this run "
            f"recomputed from the chunk's resume checkpoint (in {', '.join(diff)}): it belongs "
            "to another trajectory (another machine's, or a replaced segment), and going on "
            f"would splice two trajectories. {seg.folder} is kept as it is; the recomputed "
            f"segment is in {aside}. Go on where {seg.folder} was trained (with the checkpoint "
            f"that continues it), or keep its segments to epoch {epoch - lu.SEGMENT} only "
            "(lstpe.store.model.truncate, which copies the folder aside first) to publish this "
            "trajectory instead")


def segment_diff(stage: Path, seg: mf.Segment) -> list[str]:
    """What differs between a verified segment folder ``stage`` and a published segment in
    what they computed: ``config`` (execution keys aside), ``segment`` (unit, epochs, the
    segment before it, precision), ``history`` (the bytes of its rows) and ``snapshots``
    (every artefact); [] if nothing."""
    ma, mb = res.read_manifest(stage), seg.manifest
    lu.segment_run(seg)  # its rows as published
    res.verify_files(seg.folder, {"files": {seg.snapshot: mb["files"]["artifacts.pt"]}})
    out = []
    if res.config_diff(ma.get("config", {}), mb.get("config", {}), res.EXECUTION_KEYS):
        out.append("config")
    keys = ("unit", "chunk", "from_epoch", "to_epoch", "previous", "precision")
    la, lb = ma.get("long") or {}, mb.get("long") or {}
    if any(la.get(k) != lb.get(k) for k in keys):
        out.append("segment")
    if ma["files"]["history.csv"]["sha256"] != (mb["files"].get("history.csv") or {}).get(
            "sha256"):
        out.append("history")
    xa = res.load_torch(stage / "artifacts.pt", "artifacts")
    xb = res.load_torch(seg.folder / seg.snapshot, "snapshots")
    if xa.keys() != xb.keys() or any(not _same(xa[k], xb[k]) for k in xa):
        out.append("snapshots")
    return out


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
    return x == y


def _clean_temporaries(*folders: Path) -> None:
    """Delete the temporary files killed writes left in ``folders`` (only while holding the
    claims of every unit of the chunk that writes there)."""
    for folder in folders:
        for p in folder.glob(".*.tmp") if folder.is_dir() else []:
            p.unlink(missing_ok=True)


def train_chunk(chunk: lu.LongChunk, deadline: float, results_dir: str | Path | None = None,
                device: torch.device | None = None, amp: bool = False, precision: str = "fp32",
                log=print, **overrides: Any) -> bool:
    """Train ``chunk`` towards its target until ``deadline`` (a ``time.monotonic()`` value).

    Resumes from the chunk's resume checkpoint; the precision is the one the chunk began with
    (``chunk.json`` beside the checkpoint), whatever ``amp`` says now. On a GPU the checkpoint
    is written at every segment's end and at the deadline (not every
    :data:`~lstpe.experiments.units.CHECKPOINT_EVERY` epochs), unless ``overrides`` say.
    Temporary files of the resume folder's writes go to ``long/.work/tmp/<chunk>/`` (a
    killed write never leaves one in the folder git tracks; they are removed at the next
    start). Returns True when the chunk reached its target, False when it paused at the
    deadline.

    Raises:
        lstpe.store.rundir.RunLockedError: another process trains a unit of the chunk.
        FileNotFoundError: segments are published but the resume checkpoint is missing
            (:func:`~lstpe.campaign.resume.unresumable`), naming it.
        lstpe.campaign.resume.LongChunkError: before training, whatever
            :func:`~lstpe.campaign.resume.chunk_problems` finds (a damaged checkpoint
            or ``chunk.json``, an incomplete, damaged, missing or replaced segment), naming
            it; while training, a published segment that differs from the recomputed one
            (:class:`~lstpe.campaign.resume.SegmentConflictError`).
    """
    from lstpe.store.rundir import RunLock
    from lstpe.training.config import load_data
    from lstpe.training.engine import Paused
    from lstpe.training.train import train_many

    device = device or torch.device("cpu")
    rdir = rs.resume_dir(chunk, results_dir)
    if rs.unresumable(chunk, results_dir):
        raise FileNotFoundError(
            f"{rs.resume_checkpoint(chunk, results_dir)} is missing but {chunk.name} has "
            f"published epoch {max(lu.published_epoch(u, results_dir) for u in chunk.units)}: "
            "refusing to train it again from epoch 0. If git holds that checkpoint, restore "
            "it (git checkout -- PATH; in a clone made without the resume state, as the "
            "chapters' Colab cell makes, git sparse-checkout disable); if none was ever "
            "written (segments a lease brought back without one), move the folders of "
            f"{', '.join(u.key for u in chunk.units)} "
            f"under {lu.long_root(results_dir)} out of results/ so that the chunk trains "
            "again from epoch 0")
    work = lu.long_root(results_dir) / ".work"
    tmp = work / "tmp" / chunk.name
    with contextlib.ExitStack() as claims:
        for u in chunk.units:
            claims.enter_context(RunLock(work / "claims" / u.key.replace("/", "__")))
        _clean_temporaries(rdir, tmp)
        problems = rs.chunk_problems(chunk, results_dir, whole=False)
        if problems:
            raise rs.LongChunkError(f"the long chunk {chunk.name} is not trained: "
                                    + "; ".join(problems))
        spec = rs.read_spec(chunk, results_dir) or \
            {"units": [u.key for u in chunk.units], "precision": precision, "amp": amp}
        if device.type == "cuda":  # hashing ~15 MB per model every 5 epochs would cost minutes
            overrides = {"checkpoint_every": lu.SEGMENT, **overrides}
        cfgs = [u.config(device=str(device), amp=spec["amp"], **overrides) for u in chunk.units]
        res.save_json(spec, rdir / "chunk.json", tmp)
        splits = load_data(cfgs[0])
        hook = SegmentWriter(chunk, cfgs, splits["val"].x, device, results_dir,
                             spec["precision"], log)
        stop = chunk.target if chunk.target < lu.LONG_EPOCHS else None
        at = rs.resume_epoch(chunk, results_dir)
        if at >= chunk.target:
            return True
        log(f"long: training {chunk.name} ({', '.join(u.key for u in chunk.units)}) from "
            f"epoch {at} towards {chunk.target} in {spec['precision']}")
        ckpt = rs.resume_checkpoint(chunk, results_dir)
        try:
            train_many(cfgs, [None] * len(cfgs), progress=False, splits=splits, work_dir=rdir,
                       deadline=deadline, stop_at=stop, hook=hook, on_damaged="refuse",
                       checkpoint_hint=lu.restore_hint(ckpt), tmp_dir=tmp)
        except Paused as e:
            from lstpe.training.engine import Stopped

            log(f"long: {e}")
            return isinstance(e, Stopped)
        return True


def damaged_chunks(results_dir: str | Path | None, log) -> set[str]:
    """The long chunks whose stores :func:`lstpe.campaign.resume.chunk_problems`
    finds damaged, each logged with what it found (``lstpe campaign run`` passes them
    over)."""
    out = set()
    for c in {c.name: c for c in lu.LONG_PLAN}.values():
        problems = rs.chunk_problems(c, results_dir, whole=False)
        if problems:
            log(f"long: {c.name} is damaged and passed over until it is repaired: "
                + "; ".join(problems))
            out.add(c.name)
    return out


def train_or_pass(chunk: lu.LongChunk, deadline: float, results_dir: str | Path | None,
                  dev: torch.device, precision: str, amp: bool, log, overrides: dict,
                  passed: set[str]) -> bool | None:
    """:func:`train_chunk` in ``lstpe campaign run`` :
    True when it reached its target, False when it paused at the deadline, None when it is
    passed over (claimed, refused as damaged, or at its target with a unit short of it:
    added to ``passed``, and logged)."""
    try:
        if not train_chunk(chunk, deadline, results_dir, dev, amp=amp, precision=precision,
                              log=log, **overrides):
            return False
    except res.RunLockedError as e:
        log(f"long: {chunk.name} is claimed by another process ({e}); passed over")
        passed.add(chunk.name)
        return None
    except res.RunDirError as e:  # damaged, incomplete, a segment that conflicts: named
        log(f"long: {chunk.name} is passed over: {e}")
        passed.add(chunk.name)
        return None
    short = [u.key for u in chunk.units if lu.published_epoch(u, results_dir) < chunk.target]
    if short:  # at its target, yet not every unit's segments: never picked again in this run
        log(f"long: {chunk.name} is at its target {chunk.target} but {', '.join(short)} "
            f"published less ({lu.long_root(results_dir)}): passed over")
        passed.add(chunk.name)
        return None
    return True
