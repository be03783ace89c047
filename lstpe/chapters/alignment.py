"""The paper's two alignment measures read for chapter 7b's finding: Table 3's attention cosine
to ``2d-fixed`` and the Procrustes distance to the 2-D sinusoid, each per sigma at
initialisation and after training, beside the paper and the two claims' verdicts.

* :func:`alignment_by_sigma`: the per-sigma means the finding quotes (the alignment columns of
  :func:`lstpe.analysis.mechanism.mechanism_table`, without the grid scores that need a
  permutation null per model);
* :func:`alignment_correlations`: each measure's rank correlation with accuracy across sigma,
  trained and at initialisation (:func:`lstpe.chapters.baselines.accuracy_correlations`);
* :func:`alignment_facts`: the finding's numbers, formatted, with the correlations of
  :func:`lstpe.chapters.facts.correlation_facts` and the verdicts' labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from lstpe.chapters.baselines import accuracy_correlations
from lstpe.chapters.facts import correlation_facts

__all__ = ["ALIGNMENT_COLUMNS", "alignment_by_sigma", "alignment_correlations",
           "alignment_facts"]

ALIGNMENT_COLUMNS = ("sigma", "n", "cos_init", "cos_trained", "cos_paper", "procrustes_init",
                     "procrustes_trained")
"""Columns of :func:`alignment_by_sigma` (the names of the mechanism table's columns)."""


def _mean(t: pd.DataFrame, col: str) -> pd.Series:
    """Mean of ``col`` per sigma over the rows with a sigma."""
    t = t.dropna(subset=["sigma"])
    return t.groupby(t["sigma"].astype(float))[col].mean()


def alignment_by_sigma(t3_init: pd.DataFrame, t3: pd.DataFrame, align_init: pd.DataFrame,
                       align: pd.DataFrame, paper: Mapping[float, float] | None = None
                       ) -> pd.DataFrame:
    """Per sigma of the learnable PEs: the mean over models of Table 3's cosine (paper
    variant) and of the Procrustes distance, at initialisation and after training.

    Args:
        t3_init, t3: :func:`lstpe.analysis.attention.table3` at ``stage="init"`` and
            ``"final"`` (one row per model: ``sigma``, ``cosine_paper``).
        align_init, align: the learnable PEs' Procrustes tables, mean over blocks (one row per
            model: ``sigma``, ``distance``).
        paper: the paper's Table 3 cosine per sigma (NaN where it has none).
    Returns:
        :data:`ALIGNMENT_COLUMNS`, one row per sigma of ``t3`` in increasing order; ``n`` the
        models of ``t3`` at that sigma.
    Raises:
        ValueError: ``t3`` holds no learnable PE, or a table lacks its column.
    """
    for name, t, col in (("t3_init", t3_init, "cosine_paper"), ("t3", t3, "cosine_paper"),
                         ("align_init", align_init, "distance"), ("align", align, "distance")):
        if "sigma" not in t or col not in t:
            raise ValueError(f"{name} lacks the columns 'sigma' and {col!r}: pass "
                             "attention.table3 / the Procrustes alignment tables")
    if t3["sigma"].dropna().empty:
        raise ValueError("t3 holds no learnable PE (no row with a sigma)")
    learn = t3.dropna(subset=["sigma"])
    n = learn.groupby(learn["sigma"].astype(float)).size()
    out = pd.DataFrame({"n": n, "cos_init": _mean(t3_init, "cosine_paper"),
                        "cos_trained": _mean(t3, "cosine_paper")}).loc[n.index]
    out["cos_paper"] = [float((paper or {}).get(s, np.nan)) for s in out.index]
    out["procrustes_init"] = _mean(align_init, "distance")
    out["procrustes_trained"] = _mean(align, "distance")
    out.index.name = "sigma"
    return out.sort_index().reset_index()[list(ALIGNMENT_COLUMNS)]


def alignment_correlations(t3: pd.DataFrame, t3_init: pd.DataFrame, align: pd.DataFrame,
                           align_init: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    """Spearman's rho across sigma of each alignment measure with validation accuracy, the
    measure after training and at initialisation
    (:func:`lstpe.chapters.baselines.accuracy_correlations`): Table 3's cosine (paper variant
    and ours), its Jensen-Shannon divergence (paper variant), the Procrustes distance and its
    normalised form. Empty (indexed by ``measure``) with fewer than three sigmas in ``t3``:
    no order to correlate."""
    if t3["sigma"].nunique() < 3:
        return pd.DataFrame(index=pd.Index([], name="measure"))
    return accuracy_correlations(
        [("attention cosine, paper variant", t3, t3_init, "cosine_paper"),
         ("attention cosine, ours", t3, t3_init, "cosine_ours"),
         ("attention JSD, paper variant", t3, t3_init, "jsd_paper"),
         ("Procrustes distance", align, align_init, "distance"),
         ("Procrustes, normalised (ours)", align, align_init, "distance_normalized")], history)


def alignment_facts(table: pd.DataFrame, cor: pd.DataFrame,
                    verdicts: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Chapter 7b's finding.

    Args:
        table: :func:`alignment_by_sigma`.
        cor: :func:`lstpe.chapters.baselines.accuracy_correlations` indexed by measure (empty
            with fewer than three sigmas).
        verdicts: claim name -> its :class:`lstpe.claims.verdicts.Verdict` (``label``).
    Returns:
        ``s0`` / ``sN`` (the smallest and largest sigma); ``cos_init``, ``cos_trained``,
        ``cos_paper``, ``pr_init``, ``pr_trained`` as "a to b" from ``s0`` to ``sN``
        (cosines 3 decimals, distances 2, the paper's cosine ``–`` where it has none);
        ``cos_drop`` / ``cos_drop_init`` (the cosine at ``s0`` minus at ``sN``, trained / at
        initialisation); ``n``, ``cos``, ``cos0``, ``pr``, ``pr0`` from
        :func:`lstpe.chapters.facts.correlation_facts` (``–`` each without correlations);
        ``<name>_label`` per verdict.
    """
    t = table.set_index("sigma")
    lo, hi = t.iloc[0], t.iloc[-1]

    def span(c: str, f: str) -> str:
        return " to ".join("–" if v != v else format(v, f) for v in (lo[c], hi[c]))

    out = {"s0": f"{t.index[0]:g}", "sN": f"{t.index[-1]:g}",
           "cos_init": span("cos_init", ".3f"), "cos_trained": span("cos_trained", ".3f"),
           "cos_paper": span("cos_paper", ".3f"), "pr_init": span("procrustes_init", ".2f"),
           "pr_trained": span("procrustes_trained", ".2f"),
           "cos_drop": f"{lo['cos_trained'] - hi['cos_trained']:.3f}",
           "cos_drop_init": f"{lo['cos_init'] - hi['cos_init']:.3f}"}
    out.update(correlation_facts(cor) or dict.fromkeys(("n", "cos", "cos0", "pr", "pr0"), "–"))
    out.update({f"{k}_label": v.label for k, v in (verdicts or {}).items()})
    return out
