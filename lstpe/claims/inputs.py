"""What every claim reads, typed once: :class:`Inputs`.

The claims sit between :mod:`lstpe.experiments` (the stored units) and :mod:`lstpe.chapters`
(the pages). A page, or ``lstpe.chapters.claims.claims_card``, measures the stored runs once
and hands this record to :func:`lstpe.claims.scorecard`; each claim module reads the fields it
needs and says ``not testable yet`` where a field is empty. Every frame is one row per model
(or per unit and snapshot) with the columns named here; shapes are rows x columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from lstpe.stats.seed_stats import check_range

__all__ = ["Inputs"]

_ACCURACIES: dict[str, tuple[str, ...]] = {
    "final": ("accuracy",), "adam4": ("accuracy",), "sgd4": ("accuracy",),
    "witness": ("accuracy",), "noise": ("clean", "noisy"),
    "noise_levels": ("accuracy",)}
"""The fields of :class:`Inputs` that hold accuracies, and their columns: each value must lie
in [0, 1]."""


@dataclass
class Inputs:
    """The measured units every claim reads.

    Attributes:
        final: one row per stored model of Tables 1-2: ``pe, seed, accuracy, epoch``
            (validation accuracy with dropout on, as the authors evaluated it).
        paper_scale: the runs are the authors' recipe (a preview tests no claim).
        structure: :func:`lstpe.analysis.pe_structure.stored_structure` of Table 2: one row
            per (model, block), ``sigma, block, score_dpe, p_dpe, score_final, p_final,
            init_share, epoch``.
        table3 / table3_init: :func:`lstpe.analysis.attention.table3` after training / at
            initialisation (learnable PEs): ``pe, sigma, seed, cosine_paper``;
            ``table3_init_other``: at initialisation against another seed's 2d-fixed
            (``pairing="other-seed"``: independent attention weights, as in the authors' code).
        procrustes / procrustes_init: the learnable PEs' Procrustes alignment to 2d-fixed,
            averaged over blocks (``attention.average_layers(procrustes.pe_alignment(...))``):
            ``pe, sigma, seed, distance, distance_normalized``.
        noise: :func:`lstpe.evidence.claim_tables.noise_loss_per_model` of Tables 1-2:
            ``pe, seed, clean, noisy, loss`` (``attrs["noise_max"]``).
        noise_levels: accuracy under every stored noise std, Tables 1-2, all puzzles: one
            row per (model, std), ``pe, seed, noise, accuracy`` (the paper's measure, Fig.
            A9).
        similarity: :func:`lstpe.analysis.humans.human_similarity`, one row per PE:
            ``pe, spearman, spearman_p`` (the paper's measure, shown beside the humans claim).
        agreement: :func:`lstpe.evidence.claim_tables.model_human_agreement`, one row per
            model: ``pe, seed, accuracy, cosine, r`` (the measure the humans claim tests).
        table1_long: :func:`lstpe.chapters.long_mechanism.table1_long`: Table 1's PEs past
            epoch 200 (``pe, seeds, epoch, val_200, val_last, train_200, train_last``).
        mechanism_epoch: the epoch every mechanism long unit has published (0: none).
        mechanism_long: their :func:`lstpe.analysis.long_runs.long_summary` (``pe, sigma,
            seed, epoch, init_share, p_final, moved_after, cosine_at, cosine``).
        adam4 / sgd4: Table 4's Adam / SGD units: ``pe, seed, accuracy`` (val with dropout),
            None or empty where none is stored.
        optimizer_units: stored 200-epoch units per run of Tables 4-6 (``table4/sgd``, ...).
        witness: :func:`lstpe.chapters.long_mechanism.weight_decay_witness` (AdamW long units
            beside their Adam twins; empty: none).
        brain_runs: paper-scale brain runs stored.
        table1_attention: Table 1's PEs against the 2d-fixed model of the same seed
            (:func:`lstpe.analysis.attention.table3` of the ``table1`` run, both stages:
            ``pe, seed, stage, cosine_paper``, and ``pairing``: ``"seed"``, or ``"mean"`` for
            the trained models against the 2d-fixed maps averaged over seeds), for Fig. A8C,D.

    An accuracy outside [0, 1] in a field (at construction or set later) raises ValueError
    naming the field, the value and its PE and seed: it is a fault upstream, not a verdict.
    """

    final: pd.DataFrame
    paper_scale: bool = True
    structure: pd.DataFrame | None = None
    table3: pd.DataFrame | None = None
    table3_init: pd.DataFrame | None = None
    table3_init_other: pd.DataFrame | None = None
    procrustes: pd.DataFrame | None = None
    procrustes_init: pd.DataFrame | None = None
    noise: pd.DataFrame | None = None
    noise_levels: pd.DataFrame | None = None
    similarity: pd.DataFrame | None = None
    agreement: pd.DataFrame | None = None
    table1_long: pd.DataFrame | None = None
    mechanism_epoch: int = 0
    mechanism_long: pd.DataFrame | None = None
    adam4: pd.DataFrame | None = None
    sgd4: pd.DataFrame | None = None
    optimizer_units: dict[str, int] = field(default_factory=dict)
    witness: pd.DataFrame | None = None
    brain_runs: int = 0
    table1_attention: pd.DataFrame | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, pd.DataFrame):
            for col in _ACCURACIES.get(name, ()):
                if col in value:
                    where = ([f"pe {p}, seed {k}" for p, k in zip(value["pe"], value["seed"],
                                                                   strict=True)]
                             if {"pe", "seed"} <= set(value) else None)
                    check_range(value[col], 0, 1, f"Inputs.{name} {col}", where)
        super().__setattr__(name, value)

    @property
    def epoch(self) -> int:
        """The epoch of the stored Tables 1-2 units (their largest; 0 when none)."""
        if "epoch" not in self.final or self.final["epoch"].isna().all():
            return 0
        return int(self.final["epoch"].max())


def have(frame: pd.DataFrame | None) -> bool:
    """Whether a field holds rows."""
    return frame is not None and len(frame) > 0
