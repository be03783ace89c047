"""Long units: models trained past 200 epochs, published in verified 200-epoch segments.

The paper's figures of what a learnable PE learns are from 4000-epoch models; the campaign's
200-epoch units cannot show whether the structure a small-sigma PE starts to learn comes to
dominate it later. A **long unit** (:class:`LongUnit`) is one model of the authors' recipe
configured for :data:`LONG_EPOCHS` epochs and trained in legs towards a **target**
(1000 first, 4000 later): the same configuration throughout, so extending a target continues
one trajectory. Long units train in fixed groups (:class:`LongChunk`), one batch of models.

Every :data:`SEGMENT` epochs each unit publishes a **segment**, an ordinary verified run folder::

    results/long/<run>/<pe>/<seed>/e0200/   history.csv (epochs 0-200), artifacts.pt, manifest
    results/long/<run>/<pe>/<seed>/e0400/   history.csv (epochs 201-400), ...

``artifacts.pt`` holds the unit's PE snapshots (``pe``: (k, blocks, 16, d) at ``pe_epochs``) and
validation attention maps (``val_attention``: (k', 108, blocks, 16, 16) float16 at
``attention_epochs``) of the segment's epochs (:func:`snapshot_epochs`, dense early, then every
50 epochs; attention every 100). Each segment's manifest names the previous segment's
manifest checksum, so :func:`load_long` checks the chain when it joins them.

**Resume state across machines.** The chunk's checkpoint (weights and Adam moments of every
model, its history and snapshots not yet published; about 15 MB per model) is written every
:data:`~lstpe.experiments.campaign.CHECKPOINT_EVERY` epochs to
``results/long/_resume/<chunk>/chunk0.pt``, a path git tracks, and committed when a session
stops (one file per chunk in the tree, replaced by each commit). Why this and not a bound:
work that continues on a new machine has only what is committed, and a long chunk is hours;
a checkpoint committed at each session's end loses nothing when the machine changes, at a
history cost of about 15 MB per model per session that trained it (:data:`RESUME_BUDGET_MB`).
Resuming from it continues the trajectory bit for bit on the same kind of machine
(tests/test_long_units.py).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from lstpe.experiments.campaign import CHECKPOINT_EVERY, TABLE1_OTHER
from lstpe.experiments.registry import run_config
from lstpe.nn.attention import bitwise_on
from lstpe.runtime import PAPER_SEEDS, cpu_flags, default_results_dir
from lstpe.store import results as res

LONG_EPOCHS = 4000
"""Epochs in every long unit's configuration (the paper's length); targets stop short of it."""

SEGMENT = 200
"""Epochs per published segment (the authors log every 200 epochs)."""

RESUME_BUDGET_MB = 400
"""The repository's budget for committed resume checkpoints, history included: about 15 MB
per model per session that trains it; the three mechanism units to 1000 epochs at about 0.17
model-epochs/s need about 3 sessions (135 MB), the weight-decay pair about 2 (60 MB)."""

@dataclass(frozen=True)
class LongUnit:
    """One long model: a registry run (its optimizer recipe), a PE and a seed."""

    run: str
    pe: str
    seed: int

    @property
    def key(self) -> str:
        """``run/pe/seed`` (its folder under ``results/long/``)."""
        return f"{self.run}/{self.pe}/{self.seed}"

    def path(self, results_dir: str | Path | None = None) -> Path:
        """``<results>/long/<run>/<pe>/<seed>``."""
        return long_root(results_dir) / self.key

    def config(self, device: str = "cpu", **overrides: Any):
        """The recipe for :data:`LONG_EPOCHS` epochs, fp32 unless ``overrides`` say otherwise."""
        kw: dict[str, Any] = dict(pes=[self.pe], seeds=[self.seed], epochs=LONG_EPOCHS,
                                  checkpoint_every=CHECKPOINT_EVERY, device=device, amp=False,
                                  noise_levels=[], save_attention=True)
        kw.update(overrides)
        return run_config(self.run, "paper", **kw)


@dataclass(frozen=True)
class LongChunk:
    """A fixed group of long units trained together towards ``target`` epochs."""

    name: str
    units: tuple[LongUnit, ...]
    target: int
    item: int
    reason: str
    snapshots: str = "dense"
    """``dense``: :func:`snapshot_epochs`; ``sparse``: :func:`sparse_snapshot_epochs` (a lease
    of many units, whose segments must come back in a few MiB)."""

    @property
    def key(self) -> str:
        return f"{self.name}@{self.target}"


def _table1(seed: int) -> LongChunk:
    return LongChunk(f"table1-{seed}", tuple(LongUnit("table1", pe, seed)
                                             for pe in TABLE1_OTHER), 1000, 10,
                     "Table 1 at its own length: these PEs are still training at epoch 200",
                     snapshots="sparse")


def _mech(seed: int = 2235) -> tuple[LongUnit, ...]:
    return tuple(LongUnit("table2", pe, seed) for pe in ("learn-0.1", "learn-0.2", "learn-2"))


LONG_PLAN: tuple[LongChunk, ...] = (
    LongChunk("mechanism", _mech(), 1000, 4,
              "does a small-sigma PE's learned 2-D structure dominate it after 200 epochs?"),
    LongChunk("weight-decay", (LongUnit("tables56", "learn-0.2", 2235),
                               LongUnit("tables56", "learn-2", 2235)), 1000, 5,
              "AdamW's decay shrinks the init to 0.53 of its size by epoch 1000"),
    LongChunk("mechanism", _mech(), 4000, 6, "the paper's length"),
    LongChunk("sgd", tuple(LongUnit("table4/sgd", f"learn-{s}", 2235)
                           for s in (0.01, 0.05, 0.1, 0.2)), 1000, 8,
              "Table 4: SGD's dependence on sigma, which forms slowly"),
    LongChunk("weight-decay-sigmas", tuple(LongUnit("tables56", f"learn-{s}", 2235)
                                           for s in ("0.5", "1", "1.5")), 1000, 8,
              "Table 5: the sigmas that weight decay rescues"),
    *(_table1(seed) for seed in PAPER_SEEDS[:5]),
)
"""The long chunks in the campaign's order (their items: :data:`lstpe.experiments.campaign.ITEMS`).
A chunk with the name of an earlier one continues its models (same resume state)."""


def find_chunk(name: str, target: int | None = None) -> LongChunk:
    """The chunk of :data:`LONG_PLAN` named ``name`` (its first target, or ``target``).

    Raises:
        ValueError: no such chunk, naming the plan's chunks.
    """
    for c in LONG_PLAN:
        if c.name == name and (target is None or c.target == target):
            return c
    raise ValueError(f"no long chunk {name!r} (target {target}); the plan's chunks: "
                     f"{sorted({c.name for c in LONG_PLAN})}")


def next_chunk(results_dir: str | Path | None = None) -> LongChunk | None:
    """The first long chunk of :data:`LONG_PLAN` short of its target. A chunk without its
    resume checkpoint but with published segments (:func:`unresumable`) is passed over: it
    cannot go on here."""
    for c in LONG_PLAN:
        if chunk_epoch(c, results_dir) < c.target and not unresumable(c, results_dir):
            return c
    return None


def unresumable(chunk: LongChunk, results_dir: str | Path | None = None) -> bool:
    """True when a unit of ``chunk`` has published segments but the chunk's resume
    checkpoint is not here (a tree trimmed for a GPU lease, a checkpoint lost): training it
    would start again from epoch 0, so :func:`train_chunk` refuses."""
    return not resume_checkpoint(chunk, results_dir).exists() and \
        any(published_epoch(u, results_dir) > 0 for u in chunk.units)


def long_status(results_dir: str | Path | None = None,
                s_per_model_epoch: float | None = None) -> pd.DataFrame:
    """One row per (chunk, target) of :data:`LONG_PLAN`: ``item, chunk, units, target,
    epoch`` (the smallest published epoch over its units), ``from`` (where the hours left
    start: its epoch, or an earlier target of the same chunk), ``resume_epoch`` (its resume
    checkpoint), ``s_per_epoch`` (the chunk's seconds per epoch in its last segment, over the
    epochs its wall time covers; before one, when it ran on a GPU, or when it does not say
    which epochs it timed, ``s_per_model_epoch`` times its models, else NaN): hours of
    the CPU the campaign is planned for, ``basis`` (what that rate rests on) and
    ``hours_left`` (to the target at that rate, from the later of the last segment and the
    resume checkpoint).

    ``s_per_model_epoch``: the 200-epoch units' measured rate
    (:func:`lstpe.experiments.campaign_status.long_table` passes it)."""
    rows = []
    for c in LONG_PLAN:
        ep = chunk_epoch(c, results_dir)
        rate, basis = float("nan"), ""
        last = segments(c.units[0], results_dir)
        if last:
            man = res.read_manifest(last[-1])
            info = man.get("long") or {}
            # the wall time covers the epochs from ``timed_from`` (a segment resumed in its
            # middle was timed only from there); a segment without it does not say which
            # epochs its time covers and gives no rate
            span = info.get("to_epoch", 0) - info.get("timed_from", info.get("to_epoch", 0))
            on_cpu = str(man.get("device", "cpu")).startswith("cpu")
            if span > 0 and man.get("wall_time_s") and on_cpu:
                rate, basis = float(man["wall_time_s"]) / span, "its last segment"
        if rate != rate and s_per_model_epoch:  # no CPU segment yet (none, or a GPU's)
            rate, basis = s_per_model_epoch * len(c.units), "the 200-epoch units' rate"
        # a later target of the same chunk starts where the earlier one ends; a resume
        # checkpoint past the last segment counts
        start = max([ep, min(resume_epoch(c, results_dir), c.target)]
                    + [x.target for x in LONG_PLAN if x.name == c.name and x.target < c.target])
        rows.append({"item": c.item, "chunk": c.name, "units": len(c.units),
                     "target": c.target, "epoch": min(ep, c.target), "from": start,
                     "resume_epoch": resume_epoch(c, results_dir), "s_per_epoch": rate,
                     "basis": basis, "hours_left": max(c.target - start, 0) * rate / 3600})
    return pd.DataFrame(rows)


def long_status_text(table: pd.DataFrame) -> str:
    """``lstpe campaign status``'s lines for long chunks (``table``: :func:`long_status`)."""
    lines = []
    for _, r in table.iterrows():
        at = f" at {r['basis']}" if r["basis"] else " (no rate measured yet)"
        gpu = r.get("gpu_minutes_left", float("nan"))
        on_gpu = f", or {gpu:.0f} GPU-minutes" if gpu == gpu else ""
        lines.append(f"item {r['item']} (long): {r['chunk']} ({r['units']} models) at epoch "
                     f"{r['epoch']} of {r['target']} (resume checkpoint at epoch "
                     f"{r['resume_epoch']}); {r['hours_left']:.1f} machine-hours left{at}"
                     f"{on_gpu}")
    return "\n".join(lines)


def long_root(results_dir: str | Path | None = None) -> Path:
    """``<results>/long``."""
    return (Path(results_dir) if results_dir is not None else default_results_dir()) / "long"


def resume_dir(chunk: LongChunk | str, results_dir: str | Path | None = None) -> Path:
    """Where a chunk's resume state lives (tracked by git): ``long/_resume/<name>/``."""
    name = chunk if isinstance(chunk, str) else chunk.name
    return long_root(results_dir) / "_resume" / name


def snapshot_epochs(upto: int | None = None) -> tuple[list[int], list[int]]:
    """(PE epochs, attention epochs) up to ``upto``: the PE at 0, 1, 2, 3, 5, 7, 10, 15, 20,
    30, 40, 50 and every 50 after; the attention maps (0.22 MB each) at 0, 1, 3, 10, 30 and
    every 100 (``upto``: default :data:`LONG_EPOCHS`)."""
    upto = LONG_EPOCHS if upto is None else upto
    early = [0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 40]
    pe = [e for e in early if e <= upto] + list(range(50, upto + 1, 50))
    att = [e for e in (0, 1, 3, 10, 30) if e <= upto] + list(range(100, upto + 1, 100))
    return pe, att


def sparse_snapshot_epochs(upto: int | None = None) -> tuple[list[int], list[int]]:
    """(PE epochs, attention epochs) of a ``sparse`` chunk: the PE at 0 and at every segment's
    end, the attention maps at 0 and every 500 epochs."""
    upto = LONG_EPOCHS if upto is None else upto
    return list(range(0, upto + 1, SEGMENT)), list(range(0, upto + 1, 500))


class SegmentWriter:
    """The :class:`~lstpe.training.engine.EpochHook` of a long chunk: takes the snapshots and
    publishes each unit's segment every :data:`SEGMENT` epochs."""

    def __init__(self, chunk: LongChunk, cfgs: Sequence[Any], val_x: torch.Tensor,
                 device: torch.device, results_dir: str | Path | None, precision: str,
                 log=print) -> None:
        self.chunk, self.cfgs, self.val_x, self.device = chunk, list(cfgs), val_x, device
        self.results_dir, self.precision, self.log = results_dir, precision, log
        epochs = sparse_snapshot_epochs if chunk.snapshots == "sparse" else snapshot_epochs
        self.pe_at, self.att_at = map(set, epochs())
        self.snaps: dict[int, dict[str, torch.Tensor]] = {}
        self.t_last = time.perf_counter()
        self.timed_from: int | None = None  # the epoch self.t_last's clock starts at
        ok, why = bitwise_on(device, [u.pe for u in chunk.units])
        self.bitwise = {"ok": ok, "why": why}  # whether a resume here repeats the trajectory

    def state(self) -> dict[str, Any]:
        return {"snaps": self.snaps}

    def load(self, state: dict[str, Any]) -> None:
        # on the CPU whatever device the checkpoint was loaded to: a chunk paused on a GPU
        # resumes on a CPU and the other way round, and its snapshots are stacked together
        self.snaps = {e: {k: v.cpu() for k, v in s.items()}
                      for e, s in state.get("snaps", {}).items()}

    def after_epoch(self, epoch: int, model: Any, history: list[dict]) -> None:
        from lstpe.training.task import predict

        if self.timed_from is None:  # the first epoch this process trains (or 0)
            self.timed_from = max(epoch - 1, 0)
        if epoch in self.pe_at:
            snap = {"pe": model.pe().detach().cpu().clone()}
            if epoch in self.att_at:
                _, att = predict(model, self.val_x, return_attention=True)
                snap["val_attention"] = att.to(torch.float16).cpu()
            self.snaps[epoch] = snap
        if epoch > 0 and epoch % SEGMENT == 0:
            for i, unit in enumerate(self.chunk.units):
                self._publish(i, unit, epoch, history)
            self.t_last, self.timed_from = time.perf_counter(), epoch
            self.snaps = {e: s for e, s in self.snaps.items() if e > epoch}

    def _publish(self, i: int, unit: LongUnit, epoch: int, history: list[dict]) -> None:
        dest = unit.path(self.results_dir) / f"e{epoch:04d}"
        if (dest / "manifest.json").exists():  # published before a restart: same numbers
            res.load(dest, artifacts=False)
            return
        lo = epoch - SEGMENT
        rows = [{k: v for k, v in r.items() if k != "_config"} for r in history
                if r["_config"] == i and (lo < r["epoch"] <= epoch or (lo == 0 and
                                                                       r["epoch"] == 0))]
        hist = pd.DataFrame(rows)
        eps = sorted(e for e in self.snaps if e <= epoch)
        att = [e for e in eps if "val_attention" in self.snaps[e]]
        arts = {"pe_epochs": eps, "pe": torch.stack([self.snaps[e]["pe"][i] for e in eps]),
                "attention_epochs": att}
        if att:
            arts["val_attention"] = torch.stack([self.snaps[e]["val_attention"][i]
                                                 for e in att])
        prev = unit.path(self.results_dir) / f"e{lo:04d}"
        prev_sha = res.read_manifest(prev)["manifest_sha256"] if lo > 0 else None
        man = res.make_manifest(self.cfgs[i].to_dict(), self.device,
                                time.perf_counter() - self.t_last, n_models=1,
                                kind="long-segment",
                                long={"unit": unit.key, "chunk": self.chunk.name,
                                      "from_epoch": lo, "to_epoch": epoch,
                                      "timed_from": max(self.timed_from or 0, lo),
                                      "previous": prev_sha, "precision": self.precision,
                                      "tf32": bool(torch.backends.cuda.matmul.allow_tf32)
                                      if self.device.type == "cuda" else None,
                                      "autocast": None if self.precision == "fp32"
                                      else self.precision,
                                      "cpu_flags": cpu_flags(),
                                      "threads": torch.get_num_threads(),
                                      "bitwise": self.bitwise})
        stage = long_root(self.results_dir) / ".work" / "staging" / \
            f"{unit.key.replace('/', '__')}__e{epoch:04d}"
        shutil.rmtree(stage, ignore_errors=True)
        res.save_run(stage, hist, man, arts)
        res.load(stage)  # verify before publishing
        dest.parent.mkdir(parents=True, exist_ok=True)
        stage.rename(dest)
        self.log(f"long: published {unit.key} segment {lo}-{epoch}")


def segments(unit: LongUnit, results_dir: str | Path | None = None) -> list[Path]:
    """The unit's published segment folders, in epoch order."""
    root = unit.path(results_dir)
    return sorted(p for p in root.glob("e[0-9][0-9][0-9][0-9]") if p.is_dir())


def load_long(unit: LongUnit, results_dir: str | Path | None = None) -> dict[str, Any] | None:
    """Every published segment of ``unit`` joined (each verified, the chain checked):
    ``{"history", "pe_epochs", "pe" (k, blocks, 16, d), "attention_epochs", "val_attention",
    "epoch" (the last), "manifests"}``; None if none is published.

    Raises:
        lstpe.store.results.DamagedFileError: a segment fails verification, or a segment does
            not follow the one before it (a gap or a replaced segment), naming the folder.
    """
    paths = segments(unit, results_dir)
    if not paths:
        return None
    hists, pes, pe_ep, atts, att_ep, mans = [], [], [], [], [], []
    prev_sha, prev_to = None, 0
    for p in paths:
        r = res.load(p)
        info = r.manifest.get("long") or {}
        if info.get("from_epoch") != prev_to or info.get("previous") != prev_sha \
                or info.get("unit") != unit.key:
            raise res.DamagedFileError(
                f"the segment {p} does not follow the segment before it (expected unit "
                f"{unit.key} from epoch {prev_to}); the chain of {unit.path(results_dir)} is "
                "broken")
        prev_sha, prev_to = r.manifest["manifest_sha256"], info["to_epoch"]
        hists.append(r.history)
        pes.append(r.artifacts["pe"])
        pe_ep += list(r.artifacts["pe_epochs"])
        if "val_attention" in r.artifacts:
            atts.append(r.artifacts["val_attention"])
            att_ep += list(r.artifacts["attention_epochs"])
        mans.append(r.manifest)
    return {"history": pd.concat(hists, ignore_index=True), "pe_epochs": pe_ep,
            "pe": torch.cat(pes), "attention_epochs": att_ep,
            "val_attention": torch.cat(atts) if atts else None, "epoch": prev_to,
            "manifests": mans}


def published_epoch(unit: LongUnit, results_dir: str | Path | None = None) -> int:
    """The last epoch of the unit's published segments (0: none), from the folder names."""
    paths = segments(unit, results_dir)
    return int(paths[-1].name[1:]) if paths else 0


def resume_checkpoint(chunk: LongChunk, results_dir: str | Path | None = None) -> Path:
    """The chunk's resume checkpoint (the file the engine writes in :func:`resume_dir`)."""
    return resume_dir(chunk, results_dir) / "chunk0.pt"


def resume_epoch(chunk: LongChunk, results_dir: str | Path | None = None) -> int:
    """The epoch of the chunk's resume checkpoint (0: none). Reads only its header."""
    path = resume_checkpoint(chunk, results_dir)
    if not path.exists():
        return 0
    state = res.load_torch(path, "checkpoint", map_location="cpu")
    return int(state.get("epoch", 0)) if isinstance(state, dict) else 0


def chunk_epoch(chunk: LongChunk, results_dir: str | Path | None = None) -> int:
    """How far a chunk has got: the smallest published epoch over its units."""
    return min(published_epoch(u, results_dir) for u in chunk.units)


def train_chunk(chunk: LongChunk, deadline: float, results_dir: str | Path | None = None,
                device: torch.device | None = None, amp: bool = False, precision: str = "fp32",
                log=print, **overrides: Any) -> bool:
    """Train ``chunk`` towards its target until ``deadline`` (a ``time.monotonic()`` value).

    Resumes from the chunk's resume checkpoint; the precision is the one the chunk began with
    (``chunk.json`` beside the checkpoint), whatever ``amp`` says now. On a GPU the checkpoint
    is written at every segment's end and at the deadline (not every
    :data:`~lstpe.experiments.campaign.CHECKPOINT_EVERY` epochs), unless ``overrides`` say.
    Returns True when the chunk reached its target, False when it paused at the deadline.

    Raises:
        lstpe.store.rundir.RunLockedError: another process trains a unit of the chunk.
        FileNotFoundError: segments are published but the resume checkpoint is missing
            (:func:`unresumable`), naming it.
    """
    from lstpe.store.rundir import RunLock
    from lstpe.training.config import load_data
    from lstpe.training.engine import Paused
    from lstpe.training.train import train_many

    device = device or torch.device("cpu")
    rdir = resume_dir(chunk, results_dir)
    if unresumable(chunk, results_dir):
        raise FileNotFoundError(
            f"{resume_checkpoint(chunk, results_dir)} is missing but {chunk.name} has "
            f"published epoch {max(published_epoch(u, results_dir) for u in chunk.units)}: "
            "refusing to train "
            "it again from epoch 0 (restore the checkpoint: git checkout -- results/long)")
    spec_path = rdir / "chunk.json"
    if spec_path.exists():
        spec = json.loads(spec_path.read_text())
    else:
        spec = {"units": [u.key for u in chunk.units], "precision": precision, "amp": amp}
    if spec["units"] != [u.key for u in chunk.units]:
        raise ValueError(f"{spec_path} holds units {spec['units']}, not those of the chunk "
                         f"{chunk.name}: the plan changed under a chunk in training")
    if device.type == "cuda":  # hashing ~15 MB per model every 5 epochs would cost minutes
        overrides = {"checkpoint_every": SEGMENT, **overrides}
    cfgs = [u.config(device=str(device), amp=spec["amp"], **overrides) for u in chunk.units]
    work = long_root(results_dir) / ".work" / "claims"
    with contextlib.ExitStack() as claims:
        for u in chunk.units:
            claims.enter_context(RunLock(work / u.key.replace("/", "__")))
        res.save_json(spec, spec_path)
        splits = load_data(cfgs[0])
        hook = SegmentWriter(chunk, cfgs, splits["val"].x, device, results_dir,
                             spec["precision"], log)
        stop = chunk.target if chunk.target < LONG_EPOCHS else None
        at = resume_epoch(chunk, results_dir)
        if at >= chunk.target:
            return True
        log(f"long: training {chunk.name} ({', '.join(u.key for u in chunk.units)}) from "
            f"epoch {at} towards {chunk.target} in {spec['precision']}")
        try:
            train_many(cfgs, [None] * len(cfgs), progress=False, splits=splits, work_dir=rdir,
                       deadline=deadline, stop_at=stop, hook=hook)
        except Paused as e:
            from lstpe.training.engine import Stopped

            log(f"long: {e}")
            return isinstance(e, Stopped)
        return True
