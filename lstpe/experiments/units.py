"""The campaign's units as a reader finds them stored: what a unit is and which units exist.

A **unit** (:class:`Unit`) is one model of the paper's runs: a registry run, one PE, one seed,
trained with the authors' recipe (d=160, 4 blocks, batch 128, Adam lr 1e-4, their 8100/900
split, fp32) for :data:`CAMPAIGN_EPOCHS` epochs and stored as its own **fragment**
``results/paper/<run>/<pe>/<seed>/`` (:mod:`lstpe.experiments.fragments`: load, verify, merge).
:func:`plan` lists every 200-epoch unit in the campaign's order (why each item has its place:
:data:`lstpe.campaign.items.ITEMS` and :data:`~lstpe.campaign.items.WHY`);
:func:`find_unit` names one. The chapters read the stored units through these; the campaign
(:mod:`lstpe.campaign.scheduler`) trains them.

Where the campaign works (ignored by git): ``results/paper/.campaign/`` (:data:`WORK`) holds a
claim per unit in training (a :class:`lstpe.store.rundir.RunLock`: two processes never train the
same unit), the staging folders units are trained into, and the checkpoints of the chunk in
training.
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
change of seed (:mod:`lstpe.campaign.precision`); each fragment's manifest names its
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


STEPS_PER_EPOCH = 64
"""Optimizer steps per epoch of the recipe (8100 puzzles in batches of 128)."""


def plan() -> list[Unit]:
    """Every 200-epoch unit, in the order of :data:`lstpe.campaign.items.ITEMS` (which
    says what each item holds; its long units are
    :data:`lstpe.experiments.long_units.LONG_PLAN`): 21, 18, 26, 10, 42 and 28 units for items
    1, 2, 3, 11, 7 and 12, then item 9's, listed but not trained
    (:data:`lstpe.campaign.items.NOT_TRAINED`). Within an item, seeds are the outer loop:
    every PE gets its first seed before any gets a second. Seeds 6-15 are not listed (a reader
    with a GPU runs them with ``get_run``).
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


def campaign_work(results_dir: str | Path | None) -> Path:
    """The campaign's work folder ``<results>/paper/.campaign`` (:data:`WORK`)."""
    return res.results_root(results_dir) / "paper" / WORK
