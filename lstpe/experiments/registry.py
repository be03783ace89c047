"""The named training runs of the paper: one registry for the chapters and the GPU driver.

A chapter asks for a run by name; ``lstpe reproduce`` trains the same run into
``results/paper/<name>``. Each entry fixes the PEs, the optimizer and the number of epochs per
scale, with the reason for that number, so a stored run holds exactly what the chapter that
reads it would have trained.

==============  ===================================================  =========  ============
name            PEs                                                  optimizer  paper epochs
==============  ===================================================  =========  ============
``table1``      the 8 paper PEs (learn = learn-0.2) + alibi, rope-2d  adam       1000
``table2``      2d-fixed (reference) + learn-sigma, sigma 0.1..2.0   adam       200
``table4/adam`` learn-sigma, sigma in 0.01, 0.05, 0.1, 0.2           adam       1000
``table4/sgd``  the same                                             sgd        1000
``tables56``    learn-sigma for the Table-2 sigmas + the other PEs   adamw      1000
``long4000``    2d-fixed, learn-0.2                                  adam       4000
==============  ===================================================  =========  ============

Why these epochs (the authors trained every model for 4000): their per-seed logs show every
learn-sigma's mean validation accuracy at epoch 200 within about 0.02 of its epoch-4000 value,
so the sigma sweep stops at 200. 2d-fixed is not settled at 200 (mean validation 0.938 at 200,
0.960 at 400, 0.969 at 1000, 0.977 at 4000; training accuracy 1.0 only from about epoch 1000),
and there are no logs for the other PEs of Table 1 or for SGD, so Table 1, Table 4 and the AdamW
tables train 1000 epochs. ``long4000`` shows the 200-vs-4000 gap for 2d-fixed on our code.

Runs that share a number of epochs (and everything else but PEs and optimizer) train as one
batch of models (:func:`bundles`, :func:`lstpe.training.train.train_many`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lstpe.nn.encodings import PAPER_PES, parse_pe
from lstpe.training.config import preset, sigmas_for

TABLE1_PES: list[str] = ["learn-0.2" if p == "learn" else p for p in PAPER_PES]
"""Table 1's eight PEs (the learnable one at sigma 0.2)."""

EXTRA_PES: list[str] = ["alibi", "rope-2d"]
"""PEs this book adds to Table 1 (not in the paper)."""

TABLE4_SIGMAS: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2)
"""Table 4's sigmas (Adam vs SGD)."""

LONG_FACTOR = 20
"""``long4000`` trains this many times the preset's epochs at preview scale."""

LONG_PES: list[str] = ["2d-fixed", "learn-0.2"]


def learn_pes(sigmas: Sequence[float]) -> list[str]:
    """``["learn-0.1", ...]`` for the given sigmas, as given (no rounding beyond the PE label's
    12 significant digits).

    Raises:
        ValueError: a negative or non-finite sigma, or one given twice (naming it).
    """
    pes: list[str] = []
    for s in sigmas:
        label = parse_pe("learn", sigma=float(s)).label
        if label in pes:
            raise ValueError(f"sigma {s!r} is given twice")
        pes.append(label)
    return pes


def table1_pes() -> list[str]:
    """Table 1's PEs plus this book's two extra ones."""
    return TABLE1_PES + EXTRA_PES


def table2_pes(sigmas: Sequence[float]) -> list[str]:
    """The 2d-fixed reference followed by the sigma sweep."""
    return ["2d-fixed"] + learn_pes(sigmas)


def tables56_pes(sigmas: Sequence[float]) -> list[str]:
    """The sigma sweep and the other paper PEs (Tables 5 and 6 share one AdamW run)."""
    sweep = learn_pes(sigmas)
    return sweep + [p for p in TABLE1_PES if p not in sweep]


@dataclass(frozen=True)
class RunSpec:
    """A named run of the registry.

    Attributes:
        name: ``table1``, ``table2``, ...
        pes: ``"table1"``, ``"table2"``, ``"table4"``, ``"tables56"`` or ``"long"``: which PE
            list (the sigma sweeps follow the scale's sigmas).
        optimizer: ``adam``, ``adamw`` or ``sgd`` (lr and weight decay: the paper's).
        paper_epochs: epochs at paper scale.
        why: the reason for that number.
        attention: keep validation attention maps (only the runs whose chapters read them:
            they are most of a stored run's size).
    """

    name: str
    pes: str
    optimizer: str
    paper_epochs: int
    why: str
    attention: bool = False

    def pe_list(self, scale: str, sigmas: Sequence[float] | None = None) -> list[str]:
        """The run's PEs at ``scale`` (``sigmas``: the sweep's sigmas instead of the
        scale's)."""
        sig = sigmas_for(scale, sigmas)
        return {"table1": table1_pes(), "table2": table2_pes(sig),
                "table4": learn_pes(TABLE4_SIGMAS), "tables56": tables56_pes(sig),
                "long": list(LONG_PES)}[self.pes]

    def epochs(self, scale: str) -> int:
        """Epochs at ``scale`` (preview: the preset's, 20x for the long run)."""
        if scale == "paper":
            return self.paper_epochs
        base = preset(scale).epochs
        return base * LONG_FACTOR if self.pes == "long" else base


_SETTLED = "learn-sigma is settled by epoch 200 in the authors' logs (within ~0.02 of 4000)"
_SLOW = ("2d-fixed is still rising at 200 (0.938; 0.969 at 1000, 0.977 at 4000) and the "
         "other PEs have no logs")
REGISTRY: dict[str, RunSpec] = {s.name: s for s in (
    RunSpec("table1", "table1", "adam", 1000, _SLOW, attention=True),
    RunSpec("table2", "table2", "adam", 200, _SETTLED, attention=True),
    RunSpec("table4/adam", "table4", "adam", 1000, "Table 4 pairs Adam with SGD: same budget"),
    RunSpec("table4/sgd", "table4", "sgd", 1000,
            "plain SGD at lr 1e-3 has no logs and learns slowly"),
    RunSpec("tables56", "tables56", "adamw", 1000, _SLOW),
    RunSpec("long4000", "long", "adam", 4000, "the paper's full schedule, to measure the "
            "200-vs-4000 gap on our code"),
)}
"""Every named LST run."""


BRAIN_RUN = "brain"
"""The brain experiment's name: :func:`run_config` gives its
:class:`~lstpe.brain.config.BrainConfig` (the scale's preset of :mod:`lstpe.brain.config`)."""


def run_config(name: str, scale: str = "paper", sigmas: Sequence[float] | None = None,
               **overrides: Any) -> Any:
    """The :class:`~lstpe.training.train.TrainConfig` of a named run at ``scale`` (for
    :data:`BRAIN_RUN`, its :class:`~lstpe.brain.config.BrainConfig`).

    ``sigmas`` replaces the scale's sigmas of a run that sweeps sigma (the brain's learnable
    PEs too); ``overrides`` (None values ignored) replace the registry's other choices
    (``pes``, ``seeds``, ``epochs``, ``device``, ...; ``pes`` wins over ``sigmas``).

    Raises:
        ValueError: an unknown run name (listing the valid ones) or scale, or a bad value.
    """
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if name == BRAIN_RUN:
        from lstpe.brain.config import BRAIN_PES, brain_preset

        if sigmas is not None and "pes" not in overrides:
            fixed = [p for p in BRAIN_PES if not p.startswith("learn")]
            overrides["pes"] = fixed + learn_pes(sigmas_for(scale, sigmas))
        return brain_preset(scale, **overrides)
    if name not in REGISTRY:
        raise ValueError(f"unknown run {name!r}; valid runs: {', '.join(REGISTRY)}, "
                         f"{BRAIN_RUN}")
    spec = REGISTRY[name]
    kw: dict[str, Any] = {"pes": spec.pe_list(scale, sigmas), "optimizer": spec.optimizer,
                          "epochs": spec.epochs(scale), "save_attention": spec.attention}
    kw.update(overrides)
    return preset(scale, **kw)


def bundles(names: Sequence[str], scale: str = "paper", **overrides: Any
            ) -> list[list[str]]:
    """The named runs grouped into batches that can train together (same epochs and
    everything else but PEs and optimizer), in first-seen order."""
    groups: dict[str, list[str]] = {}
    for n in names:
        shared = run_config(n, scale, **overrides).shared_settings()
        key = repr(sorted((k, repr(v)) for k, v in shared.items()))
        groups.setdefault(key, []).append(n)
    return list(groups.values())
