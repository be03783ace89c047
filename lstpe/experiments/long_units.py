"""Long units: models trained past 200 epochs, published in verified 200-epoch segments.

The paper's figures of what a learnable PE learns are from 4000-epoch models; the campaign's
200-epoch units cannot show whether the structure a small-sigma PE starts to learn comes to
dominate it later. A **long unit** (:class:`LongUnit`) is one model of the authors' recipe
configured for :data:`LONG_EPOCHS` epochs and trained in legs towards a **target**
(1000 first, 4000 later): the same configuration throughout, so extending a target continues
one trajectory. Long units train in fixed groups (:class:`LongChunk`), one batch of models.

Every :data:`SEGMENT` epochs each unit publishes a **segment** into its one model folder
(:mod:`lstpe.store.model`)::

    results/long/<run>/<pe>/<seed>/history.csv        every logged epoch from 0
    results/long/<run>/<pe>/<seed>/snapshots/e0200.pt  the snapshots of epochs 0-200, ...
    results/long/<run>/<pe>/<seed>/manifest.json      checksums, and each segment's manifest

A snapshot file holds the unit's PE snapshots (``pe``: (k, blocks, 16, d) at ``pe_epochs``) and
validation attention maps (``val_attention``: (k', 108, blocks, 16, 16) float16 at
``attention_epochs``) of the segment's epochs: :func:`snapshot_epochs` (dense) to the
mechanism's epoch 2800, then :func:`sparse_snapshot_epochs` for every leg, so that a shallow
clone stays small. Each segment's manifest names the previous segment's
manifest checksum, so :func:`load_long` checks the chain when it reads them.

Their resume state and the checks that keep it and the model folders consistent are the
campaign's (:mod:`lstpe.campaign.resume`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lstpe.experiments.registry import run_config
from lstpe.experiments.units import CHECKPOINT_EVERY, TABLE1_OTHER
from lstpe.runtime import PAPER_SEEDS
from lstpe.store import model as mf
from lstpe.store import results as res

LONG_EPOCHS = 4000
"""Epochs in every long unit's configuration (the paper's length); targets stop short of it."""

SEGMENT = 200
"""Epochs per published segment (the authors log every 200 epochs)."""

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
    """``dense``: :func:`snapshot_epochs`; ``sparse``: :func:`sparse_snapshot_epochs`, from the
    epoch the chunk resumes at (what a checkpoint holds is published as taken)."""

    @property
    def key(self) -> str:
        return f"{self.name}@{self.target}"


def _mech(seed: int = 2235) -> tuple[LongUnit, ...]:
    return tuple(LongUnit("table2", pe, seed) for pe in ("learn-0.1", "learn-0.2", "learn-2"))


def _legs(item: int, reason: str, cells: list[tuple[str, str]], seeds: tuple[int, ...],
          earlier: list[LongChunk], group: str = "") -> list[LongChunk]:
    """1000-epoch legs of ``cells`` (run, PE) at ``seeds`` (the outer loop), leaving out a
    model an earlier leg already trains (same optimizer, PE and seed: the same recipe, e.g.
    Table 4's Adam at sigma 0.2 and Table 1's learn-0.2). ``group``: one chunk per seed named
    ``<group>-<seed>`` (several models, as this project's past GPU leases trained them); else
    one single-model chunk per model, named ``<run>-<pe>-<seed>`` (what a CPU trains, one
    model at a time)."""
    from lstpe.experiments.registry import REGISTRY

    have = {(REGISTRY[u.run].optimizer, u.pe, u.seed) for c in earlier for u in c.units}
    out: list[LongChunk] = []
    for seed in seeds:
        units = [LongUnit(r, pe, seed) for r, pe in cells
                 if (REGISTRY[r].optimizer, pe, seed) not in have]
        have |= {(REGISTRY[u.run].optimizer, u.pe, u.seed) for u in units}
        out += [LongChunk(f"{group}-{seed}", tuple(units), 1000, item, reason, "sparse")] \
            if group else [LongChunk(f"{u.run.replace('/', '-')}-{u.pe}-{seed}", (u,), 1000,
                                     item, reason, "sparse") for u in units]
    return out


def _long_plan() -> tuple[LongChunk, ...]:
    """:data:`LONG_PLAN`, built in its order (each entry's reason: its item's
    :data:`lstpe.campaign.items.WHY`)."""
    from lstpe.experiments.registry import TABLE1_PES, TABLE4_SIGMAS, learn_pes

    s13, s45 = PAPER_SEEDS[:3], PAPER_SEEDS[3:5]
    plan = [LongChunk("mechanism", _mech(), 1000, 4, "does a small-sigma PE's learned 2-D "
                      "structure dominate it after 200 epochs?"),
            LongChunk("weight-decay", (LongUnit("tables56", "learn-0.2", 2235),
                                       LongUnit("tables56", "learn-2", 2235)), 1000, 5,
                      "AdamW's decay shrinks the init to 0.53 of its size by epoch 1000"),
            LongChunk("mechanism", _mech(), 4000, 6, "the paper's length", "sparse")]
    t1 = "Table 1 at its own length: its PEs are still training at epoch 200"
    for seed in s13:  # table1-2235 and -6312 hold the six others (stored); then the two more
        both = seed in PAPER_SEEDS[:2]
        plan += _legs(10, t1, [("table1", p) for p in (TABLE1_OTHER if both else TABLE1_PES)],
                      (seed,), plan, "table1")
        plan += _legs(10, t1, [("table1", "2d-fixed"), ("table1", "learn-0.2")], (seed,), plan)
    sig4 = learn_pes(TABLE4_SIGMAS)
    plan += _legs(13, "Table 4: SGD against Adam at small sigma, which forms slowly",
                  [("table4/sgd", p) for p in sig4] + [("table4/adam", p) for p in sig4],
                  s13, plan)
    plan += _legs(14, "Table 6: every PE with AdamW", [("tables56", p) for p in TABLE1_PES],
                  s13, plan)
    plan += _legs(15, "Table 5: AdamW where the paper's accuracy falls",
                  [("tables56", p) for p in learn_pes(TABLE5_SIGMAS)], s13, plan)
    plan += _legs(16, t1, [("table1", p) for p in TABLE1_PES], s45, plan, "table1")
    plan += [LongChunk(c.name, c.units, LONG_EPOCHS, 17, "the paper's length, one seed",
                       "sparse") for c in plan if c.item in (13, 14, 15) and
             c.units[0].seed == PAPER_SEEDS[0]]
    return tuple(plan)


TABLE5_SIGMAS: tuple[float, ...] = (1.6, 1.7, 1.8, 1.9, 2.0)
"""Table 5's sigmas that decide its claim: the paper reports 0.983 at sigma 1.6 (0.98 or more
from 0.1 up to it), then 0.929, 0.900, 0.707 and 0.586."""

LONG_PLAN: tuple[LongChunk, ...] = _long_plan()
"""The long chunks' legs in the campaign's order, each with its item
(:data:`lstpe.campaign.items.ITEMS`, whose :data:`~lstpe.campaign.items.WHY` is its
reason; :mod:`lstpe.campaign.long_plan` prices them): the mechanism and the weight-decay
pair to 1000 (begun before this plan), the mechanism to 4000, Table 1 at 1000 (its 8 PEs at
seeds 1-3), Tables 4, 6 and 5 at 1000 (seeds 1-3), Table 1 at seeds 4-5, then seed 1 of
Tables 4-6 to 4000. A leg with the name of an earlier one continues its models (same resume
state): its final state at the earlier target is kept (:func:`extended`)."""


def extended(chunk: LongChunk) -> bool:
    """Whether :data:`LONG_PLAN` takes ``chunk``'s models further after its target (a later
    leg of the same name): its final state (weights, optimizer) is then kept in the tree."""
    return any(c.name == chunk.name and c.target > chunk.target for c in LONG_PLAN)


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


def long_root(results_dir: str | Path | None = None) -> Path:
    """``<results>/long``."""
    return res.results_root(results_dir) / "long"


def snapshot_epochs(upto: int | None = None) -> tuple[list[int], list[int]]:
    """(PE epochs, attention epochs) up to ``upto``: the PE at 0, 1, 2, 3, 5, 7, 10, 15, 20,
    30, 40, 50 and every 50 after; the attention maps (0.22 MB each) at 0, 1, 3, 10, 30 and
    every 100 (``upto``: default :data:`LONG_EPOCHS`)."""
    upto = LONG_EPOCHS if upto is None else upto
    early = [0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 40]
    pe = [e for e in early if e <= upto] + list(range(50, upto + 1, 50))
    att = [e for e in (0, 1, 3, 10, 30) if e <= upto] + list(range(100, upto + 1, 100))
    return pe, att


SPARSE_ATTENTION_EVERY = 1000
"""A ``sparse`` chunk's attention maps: every this many epochs (taken with a PE snapshot)."""


def sparse_snapshot_epochs(upto: int | None = None) -> tuple[list[int], list[int]]:
    """(PE epochs, attention epochs) of a ``sparse`` chunk: the PE at 0 and at every segment's
    end, the attention maps at 0 and every :data:`SPARSE_ATTENTION_EVERY` epochs."""
    upto = LONG_EPOCHS if upto is None else upto
    return list(range(0, upto + 1, SEGMENT)), list(range(0, upto + 1, SPARSE_ATTENTION_EVERY))


def restore_hint(path: Path) -> str:
    """How to repair a damaged or missing file of a long chunk without losing work."""
    return (f"restore it as git holds it (git checkout -- {path}) or copy it again from the "
            "machine that wrote it; do not delete it: the chunk's checkpoint and segments "
            "depend on each other, so it would not train again")


def segment_damage(path: Path, err: Exception) -> str:
    """The message of a damaged model folder: ``err``'s, its "delete it to retrain" hint
    (wrong for a long model: its checkpoint is past it) replaced by one that keeps the work
    (:func:`lstpe.store.model.keep_hint`)."""
    return mf.keep_hint(err, path)


def load_long(unit: LongUnit, results_dir: str | Path | None = None) -> dict[str, Any] | None:
    """The unit's model folder, verified and its chain checked: ``{"history", "pe_epochs",
    "pe" (k, blocks, 16, d), "attention_epochs", "val_attention", "epoch" (the last),
    "manifests" (each segment's)}``; None if no segment is published.

    Raises:
        lstpe.store.results.DamagedFileError: a file fails verification, or a segment does
            not follow the one before it, naming the file.
    """
    return load_model(unit.path(results_dir), unit.key)


def load_model(folder: Path, key: str) -> dict[str, Any] | None:
    """:func:`load_long` of the model folder ``folder`` of the unit ``key``."""
    try:
        man = mf.read(folder)
    except (OSError, ValueError) as e:
        raise res.DamagedFileError(segment_damage(folder, e)) from None
    if man is None:
        return None
    segs, prev_sha, prev_to = mf.segments(folder, man), None, 0
    for seg in segs:
        info = seg.manifest.get("long") or {}
        if info.get("from_epoch") != prev_to or info.get("previous") != prev_sha \
                or info.get("unit") != key:
            raise res.DamagedFileError(
                f"{seg.name} does not follow the segment before it (expected unit "
                f"{key} from epoch {prev_to}); the chain of {folder} is broken: "
                f"{restore_hint(folder)}")
        if mf.stg.manifest_checksum(seg.manifest) != seg.checksum:
            raise res.DamagedFileError(
                f"{folder / 'manifest.json'}: the manifest of the segment to epoch {seg.epoch} "
                f"does not match its own checksum (edited); {restore_hint(folder)}")
        prev_sha, prev_to = seg.checksum, info["to_epoch"]
    pes, pe_ep, atts, att_ep = [], [], [], []
    for seg in segs:
        arts = res.load_torch(folder / seg.snapshot, "snapshots", hint=restore_hint(folder))
        pes.append(arts["pe"])
        pe_ep += list(arts["pe_epochs"])
        if "val_attention" in arts:
            atts.append(arts["val_attention"])
            att_ep += list(arts["attention_epochs"])
    history = mf.read_history(mf.history_bytes(folder, man), folder / "history.csv")
    return {"history": history, "pe_epochs": pe_ep, "pe": torch.cat(pes),
            "attention_epochs": att_ep, "val_attention": torch.cat(atts) if atts else None,
            "epoch": prev_to, "manifests": [s.manifest for s in segs]}


def segment_run(seg: mf.Segment) -> res.Run:
    """One segment as a run (its rows and the manifest it was published with; no
    snapshots), verified against the checksum of its rows."""
    man = mf.read(seg.folder, verify=False) or {}
    data = mf.segment_bytes(mf.history_bytes(seg.folder, man), seg)
    if hashlib.sha256(data).hexdigest() != seg.manifest["files"]["history.csv"]["sha256"]:
        raise res.DamagedFileError(f"{seg.folder / 'history.csv'}: the rows of the segment to "
                                   f"epoch {seg.epoch} differ from those it was published with; "
                                   f"{restore_hint(seg.folder)}")
    return res.Run(mf.read_history(data, seg.folder / "history.csv"), seg.manifest, {}, {},
                   path=seg.folder, source="stored")


def published_epoch(unit: LongUnit, results_dir: str | Path | None = None) -> int:
    """The last epoch of the unit's published segments (0: none), from its manifest
    (:func:`lstpe.campaign.resume.chunk_problems` checks the files and the chain)."""
    try:
        return mf.epoch(unit.path(results_dir))
    except (OSError, ValueError):  # named by chunk_problems
        return 0


def chunk_epoch(chunk: LongChunk, results_dir: str | Path | None = None) -> int:
    """How far a chunk has got: the smallest published epoch over its units."""
    return min(published_epoch(u, results_dir) for u in chunk.units)


