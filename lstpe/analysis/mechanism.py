r"""The paper's mechanism claim per sigma in one evidence table: what training writes into a
learnable PE, how much of the trained PE its initial draw still carries, and the paper's two
alignment measures (Table 3, Procrustes) at initialisation and after training, beside the paper.

:func:`mechanism_table` joins, per sigma of the learnable PEs:

* from :func:`lstpe.analysis.pe_structure.stored_structure` (one row per model and block, of
  ``block``): the grid score of the update :math:`\Delta = P_T - P_0` (``dpe``) and of the
  trained PE (``final``) as median, minimum and maximum over the units, how many units score
  above their permutation null (p < ``alpha``), and the range of the init share :math:`s_0`
  (:func:`lstpe.analysis.pe_structure.decompose`);
* from :func:`lstpe.analysis.attention.table3` at ``stage="init"`` and ``"final"``: the mean
  over units of the paper variant's cosine to ``2d-fixed`` (``cosine_paper``), and the paper's
  Table 3 (4000 epochs, 15 seeds);
* from ``average_layers(pe_alignment(...))`` at both stages: the mean Procrustes distance to
  the 2-D sinusoid (mean over blocks; the paper gives no number, only its Fig. 2D-F).

Median and range, not a mean and CI, for the structure scores: with 3-5 units per sigma the
range shows every unit, and a p-value per unit already tests each against its null
(:func:`lstpe.analysis.learned_part.by_sigma` gives the t intervals and Fisher's combined p).
:func:`mechanism_view` formats the table as a page shows it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from lstpe.stats.seed_tests import ALPHA

__all__ = ["MECHANISM_COLUMNS", "mechanism_table", "mechanism_view"]

MECHANISM_COLUMNS = (
    "sigma", "n", "dpe_median", "dpe_min", "dpe_max", "dpe_below", "final_median", "final_min",
    "final_max", "final_below", "init_share_min", "init_share_max", "cos_init", "cos_trained",
    "cos_paper", "procrustes_init", "procrustes_trained")
"""Columns of :func:`mechanism_table` (``*_below``: units with permutation p < alpha)."""


def _by_sigma(t: pd.DataFrame, col: str) -> pd.Series:
    """Mean of ``col`` per sigma over the rows with a sigma (per-model tables)."""
    t = t.dropna(subset=["sigma"])
    return t.groupby(t["sigma"].astype(float))[col].mean()


def mechanism_table(structure: pd.DataFrame, t3_init: pd.DataFrame, t3: pd.DataFrame,
                    align_init: pd.DataFrame, align: pd.DataFrame,
                    paper: Mapping[float, float] | None = None, block: int = 0,
                    alpha: float = ALPHA) -> pd.DataFrame:
    """Per sigma: the learned part's structure, the init share, Table 3 and Procrustes.

    Args:
        structure: :func:`lstpe.analysis.pe_structure.stored_structure` rows (``sigma``,
            ``block``, ``score_dpe``, ``p_dpe``, ``score_final``, ``p_final``,
            ``init_share``), one run's (a PE in two runs would count twice).
        t3_init, t3: :func:`lstpe.analysis.attention.table3` at init and after training (one
            row per model: ``sigma``, ``cosine_paper``).
        align_init, align: per-model Procrustes tables (``sigma``, ``distance``).
        paper: the paper's Table 3 cosine per sigma (NaN where absent).
        block: the block whose PE is scored.
        alpha: level of a unit's permutation p-value.
    Returns:
        :data:`MECHANISM_COLUMNS`, one row per sigma of ``structure``'s learnable PEs, in
        increasing order.
    """
    need = ["sigma", "block", "score_dpe", "p_dpe", "score_final", "p_final", "init_share"]
    missing = [c for c in need if c not in structure]
    if missing:
        raise ValueError(f"structure lacks columns {missing}")
    s = structure[(structure["block"] == block) & structure["sigma"].notna()]
    s = s.dropna(subset=["score_dpe"])
    if s.empty:
        raise ValueError(f"no learnable PE with an update in block {block}")
    g = s.groupby(s["sigma"].astype(float))
    out = pd.DataFrame({"n": g.size()})
    for part in ("dpe", "final"):
        sc = g[f"score_{part}"]
        out[f"{part}_median"], out[f"{part}_min"], out[f"{part}_max"] = (
            sc.median(), sc.min(), sc.max())
        out[f"{part}_below"] = g[f"p_{part}"].apply(lambda p: int((p < alpha).sum()))
    out["init_share_min"], out["init_share_max"] = g["init_share"].min(), g["init_share"].max()
    out["cos_init"] = _by_sigma(t3_init, "cosine_paper")
    out["cos_trained"] = _by_sigma(t3, "cosine_paper")
    out["cos_paper"] = [float((paper or {}).get(x, np.nan)) for x in out.index]
    out["procrustes_init"] = _by_sigma(align_init, "distance")
    out["procrustes_trained"] = _by_sigma(align, "distance")
    out.index.name = "sigma"
    return out.sort_index().reset_index()[list(MECHANISM_COLUMNS)]


def _rng(m: float, lo: float, hi: float, digits: int) -> str:
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def mechanism_view(table: pd.DataFrame, epoch: int | None = None) -> pd.DataFrame:
    """:func:`mechanism_table` as a page shows it: scores as ``median [min, max]`` (2
    decimals), units below alpha as ``k/n``, cosines 3 decimals, Procrustes 2; indexed by
    sigma, columns in two levels (``epoch``: the trained units' epoch, in the headers)."""
    at = f"@{epoch}" if epoch is not None else "trained"
    rows = {}
    for _, r in table.iterrows():
        n = int(r["n"])
        rows[f"{r['sigma']:g}"] = {
            ("", "models"): n,
            ("dPE (learned) grid score", "median [range]"):
                _rng(r["dpe_median"], r["dpe_min"], r["dpe_max"], 2),
            ("dPE (learned) grid score", "p<0.05"): f"{int(r['dpe_below'])}/{n}",
            ("final PE grid score", "median [range]"):
                _rng(r["final_median"], r["final_min"], r["final_max"], 2),
            ("final PE grid score", "p<0.05"): f"{int(r['final_below'])}/{n}",
            ("init share", "[range]"):
                f"[{r['init_share_min']:.2f}, {r['init_share_max']:.2f}]",
            ("Table 3 cosine (paper variant)", "init"): f"{r['cos_init']:.3f}",
            ("Table 3 cosine (paper variant)", at): f"{r['cos_trained']:.3f}",
            ("Table 3 cosine (paper variant)", "paper@4000"):
                "–" if r["cos_paper"] != r["cos_paper"] else f"{r['cos_paper']:.3f}",
            ("Procrustes distance", "init"): f"{r['procrustes_init']:.2f}",
            ("Procrustes distance", at): f"{r['procrustes_trained']:.2f}",
        }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out.index.name = "σ"
    return out
