"""The reproduction as a campaign: the plan of the paper's runs, grown one unit at a time.

The paper-size model costs about 8e11 FLOPs per model-epoch, a 200-epoch model 20-30 minutes
of a 2-core CPU (GPUs come only as short leases, :mod:`lstpe.experiments.lease`). So the
paper's runs are cut into **units** (:class:`Unit`: a registry run, one PE, one seed), each
trained with the authors' recipe (d=160, 4 blocks, batch 128, Adam lr 1e-4, their 8100/900
split, fp32) for :data:`CAMPAIGN_EPOCHS` epochs and stored as its own **fragment**
``results/paper/<run>/<pe>/<seed>/`` (:mod:`lstpe.experiments.fragments`: load, verify, merge,
import, publish).

This module is the plan: :data:`ITEMS` in the campaign's order, :data:`WHY` each has its place,
and :func:`plan`, the fixed, ordered list of 200-epoch units (the long units' legs are
:data:`lstpe.experiments.long_units.LONG_PLAN`, their costs and the CPU's order
:mod:`lstpe.experiments.long_plan`). :mod:`lstpe.experiments.campaign_run` trains them,
:mod:`lstpe.experiments.campaign_status` says what is done.

Where the work happens (ignored by git): ``results/paper/.campaign/`` holds a claim per unit
in training (a :class:`lstpe.store.rundir.RunLock`: two processes never train the same unit), the
staging folders units are trained into, and the checkpoints of the chunk in training.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lstpe.experiments.registry import REGISTRY, TABLE4_SIGMAS, learn_pes, run_config, tables56_pes
from lstpe.runtime import PAPER_SEEDS
from lstpe.store import results as res
from lstpe.training.config import PAPER_SIGMAS, TrainConfig

CAMPAIGN_EPOCHS = 200
"""Epochs of every unit: the authors' logs show every learn-sigma settled by epoch 200 (within
about 0.02 of epoch 4000) and they log every 200 epochs, so a 200-epoch unit compares like for
like with their epoch-200 log. 2d-fixed is still rising at 200 (0.938, 0.977 at 4000): its
units are compared with the authors at 200 first, the paper's 4000-epoch table second."""

CHECKPOINT_EVERY = 5
"""Epochs between checkpoints of a chunk in training."""

TABLE2_CORE: tuple[str, ...] = ("2d-fixed", "learn-0.1", "learn-0.2", "learn-0.5", "learn-1",
                                "learn-1.5", "learn-2")
"""Item 1: the 2-D reference and six sigmas of Table 2."""

TABLE1_OTHER: tuple[str, ...] = ("1d-fixed", "random", "relative", "rope", "nope", "c-nope")
"""Item 2: Table 1's other PEs (its learnable PE and 2d-fixed are item 1's units)."""

WORK = ".campaign"
"""The work folder under ``results/paper/`` (claims, staging, checkpoints; ignored by git)."""

IGNORED_KEYS: tuple[str, ...] = (*res.EXECUTION_KEYS, "save_attention", "preset", "amp")
"""Config keys in which a fragment may differ from its unit's recipe: how it was executed,
whether attention maps were kept (what was computed is the same), and ``amp``: bf16 autocast,
which the campaign uses only where a precision pair has shown it moves accuracy less than a
change of seed (:mod:`lstpe.experiments.precision`); each fragment's manifest names its
precision and why."""


class RecipeMismatch(ValueError):
    """A fragment (or a run to import) that was not trained with its unit's recipe."""


@dataclass(frozen=True)
class Unit:
    """One model of the campaign: a registry run, a PE and a seed.

    Attributes:
        run: the registry name (``table2``, ``table1``, ``table4/sgd``, ``tables56``...).
        pe: the PE label (``learn-0.2``, ``2d-fixed``, ...).
        seed: one of the paper's seeds.
        item: its place in the order of value (1 = Table 2 core, ...).
    """

    run: str
    pe: str
    seed: int
    item: int = 0

    @property
    def key(self) -> str:
        """``run/pe/seed``: the unit's name (``--unit``) and its fragment's relative path."""
        return f"{self.run}/{self.pe}/{self.seed}"

    @property
    def slug(self) -> str:
        """The key as one file name (work folders)."""
        return self.key.replace("/", "__")

    def path(self, results_dir: str | Path | None = None) -> Path:
        """Its fragment folder ``<results>/paper/<run>/<pe>/<seed>``."""
        return res.results_root(results_dir) / "paper" / self.key

    def config(self, device: str = "cpu", **overrides: Any) -> TrainConfig:
        """The unit's recipe: the registry run at paper scale, this PE and seed,
        :data:`CAMPAIGN_EPOCHS` epochs, fp32 (``overrides``: tests shrink the model)."""
        kw: dict[str, Any] = dict(pes=[self.pe], seeds=[self.seed], epochs=CAMPAIGN_EPOCHS,
                                  checkpoint_every=CHECKPOINT_EVERY, device=device, amp=False)
        kw.update(overrides)
        return run_config(self.run, "paper", **kw)


ITEMS: dict[int, str] = {
    1: "Table 2 core: 2d-fixed and six sigmas, seeds 1-3",
    2: "Table 1's other PEs, seeds 1-3",
    3: "Tables 1-2 at seeds 4-5",
    11: "Table 4, Adam at sigma 0.01 and 0.05, seeds 1-5",
    7: "the other 14 sigmas of Table 2, seeds 1-3",
    12: "the other 14 sigmas of Table 2, seeds 4-5",
    9: "Tables 4-6 at 200 epochs (not trained)",
    4: "mechanism: 3 long units to 1000 epochs",
    5: "weight decay: 2 AdamW long units to 1000",
    6: "mechanism: item 4 extended to 4000 epochs",
    10: "Table 1 at 1000: its 8 PEs, seeds 1-3",
    13: "Table 4 at 1000: SGD and Adam at sigma 0.01-0.2, seeds 1-3",
    14: "Table 6 at 1000: the 8 PEs with AdamW, seeds 1-3",
    15: "Table 5 at 1000: AdamW at sigma 1.6-2.0, seeds 1-3",
    16: "Table 1 at 1000, seeds 4-5",
    17: "Tables 4-6 at seed 1 to 4000",
}
"""Each item of the plan (:data:`WHY`: why there); numbers are names. The 200-epoch items
(:func:`plan`) in the campaign's order (item 11 before 7, item 12 after it), then the long
plan's (:data:`lstpe.experiments.long_units.LONG_PLAN`, ordered by what a model-epoch shows;
costs in :mod:`lstpe.experiments.long_plan`)."""

WHY: dict[int, str] = {
    1: "the paper's central table, first seeds",
    2: "the paper's comparison of every PE",
    3: "five seeds per cell of Tables 1-2, for the intervals and tests of their claims",
    4: "learn-0.1, learn-0.2, learn-2 (Adam, seed 2235) with PE and attention snapshots: does "
       "a small-sigma PE's learned 2-D structure come to dominate it after 200 epochs?",
    5: "learn-0.2 and learn-2 with AdamW (wd 0.1, Table 5's recipe), seed 2235: decoupled "
       "decay shrinks every weight to 0.88 of its value by epoch 200 but 0.53 by 1000, so "
       "Table 5's rescue of large sigma can only show late; its resume state then leaves",
    6: "the paper's length for the mechanism's figures: a GPU call finishes it (3 models)",
    11: "the paper's 0.588 and 0.836 against 0.925 at sigma 0.1; the authors logged no Adam "
        "sigma below 0.1, so whether these settle by epoch 200 is itself a finding",
    7: "the sigma curve between the core's six points (the authors' logs show every sigma "
       "settled by epoch 200)",
    12: "five seeds at every sigma, as the core has: at three, a row resolves no difference "
        "from the authors' 15 seeds smaller than about three of their SDs (1.8 at five); "
        "still shorter work than any long unit",
    9: "at 200 epochs AdamW's decay and SGD's slow start show nothing the paper claims; listed "
       "so that a finished run of their recipe can still be imported",
    10: "the registry trains Table 1 to 1000 and 1d-fixed, nope and c-nope still rise at 200; "
        "without 2d-fixed and learn-0.2 beside the six others it cannot be read at 1000 "
        "(learn-0.2 at seed 1 is the mechanism's)",
    13: "Table 4's SGD column has no unit at all and is the only optimizer claim no unit "
        "speaks to; Adam beside it at the same epochs (sigma 0.1 and 0.2 where Table 1 or "
        "the mechanism trains the same model)",
    14: "Table 6 has no unit: every PE with AdamW (learn-0.2 at seed 1 is the weight-decay "
        "pair's)",
    15: "the sigmas that decide Table 5's claim: 0.98 or more up to sigma 1.6, then 0.93, "
        "0.90, 0.71 and 0.59 (learn-2 at seed 1 is the weight-decay pair's)",
    16: "five seeds per cell of Table 1 at its length, after every table has three",
    17: "the paper's length, one seed: each continues its model's final state at 1000, kept "
        "in the tree for it (and only for it) while the resume budget allows",
}
"""Why each item of :data:`ITEMS` has its place."""

NOT_TRAINED: tuple[int, ...] = (9,)
"""Items the campaign lists but never trains (:data:`WHY` says why)."""


def plan() -> list[Unit]:
    """Every 200-epoch unit, in the order of :data:`ITEMS` (which says what each item holds;
    its long units are :data:`lstpe.experiments.long_units.LONG_PLAN`): 21, 18, 26, 10, 42 and
    28 units for items 1, 2, 3, 11, 7 and 12, then item 9's, listed but not trained
    (:data:`NOT_TRAINED`). Within an item, seeds are the outer loop: every PE gets its first
    seed before any gets a second. Seeds 6-15 are not listed (a reader with a GPU runs them
    with ``get_run``).
    """
    s13, s45 = PAPER_SEEDS[:3], PAPER_SEEDS[3:5]
    units: list[Unit] = []

    def add(item: int, run: str, pes: Iterable[str], seeds: Iterable[int]) -> None:
        pes = list(pes)
        for seed in seeds:
            units.extend(Unit(run, pe, seed, item) for pe in pes)

    add(1, "table2", TABLE2_CORE, s13)
    add(2, "table1", TABLE1_OTHER, s13)
    add(3, "table2", TABLE2_CORE, s45)
    add(3, "table1", TABLE1_OTHER, s45)
    core = set(TABLE2_CORE)
    add(11, "table4/adam", [p for p in learn_pes(TABLE4_SIGMAS) if p not in core],
        PAPER_SEEDS[:5])
    others = [p for p in learn_pes(PAPER_SIGMAS) if p not in core]
    add(7, "table2", others, s13)
    add(12, "table2", others, s45)
    add(9, "table4/sgd", learn_pes(TABLE4_SIGMAS), s13)
    add(9, "tables56", tables56_pes(PAPER_SIGMAS), s13)
    return units


def find_unit(key: str, units: Sequence[Unit] | None = None) -> Unit:
    """The unit named ``run/pe/seed``.

    Raises:
        ValueError: no such unit in the plan (naming the key and the form expected).
    """
    units = plan() if units is None else units
    for u in units:
        if u.key == key:
            return u
    parts = key.rsplit("/", 2)
    hint = ""
    if len(parts) == 3 and parts[0] not in REGISTRY:
        hint = f" ({parts[0]!r} is not a registry run: {', '.join(REGISTRY)})"
    raise ValueError(f"no unit {key!r} in the campaign's plan{hint}; a unit is written "
                     "run/pe/seed, e.g. table2/learn-0.2/2235 (lstpe campaign plan lists them)")


def _work(results_dir: str | Path | None) -> Path:
    return res.results_root(results_dir) / "paper" / WORK
