r"""The learned part of a learnable PE, summarised per sigma: how many units' update
:math:`\Delta = P_T - P_0` carries 2-D structure, for a page's one-line finding (chapter 6).

:func:`by_sigma` reads a :func:`lstpe.analysis.pe_structure.pe_structure` table (one row per
model and block) and gives, per sigma of one block, the units' grid score of the chosen part
(``dpe`` by default) with its t 95% CI over seeds, how many units score above their permutation
null (p < ``alpha``) and the largest such p, Fisher's combination of the units' permutation p
values (the seeds are independent models, so their p values are independent under the null),
and the range of the init share :math:`s_0` (how much of the final PE is still its initial
draw). Fixed PEs (no sigma, or a zero update) are left out.
"""

from __future__ import annotations

import pandas as pd
from scipy import stats

from lstpe.stats.seed_stats import mean_ci
from lstpe.stats.seed_tests import ALPHA

__all__ = ["BY_SIGMA_COLUMNS", "by_sigma"]

BY_SIGMA_COLUMNS = ("sigma", "n", "score_mean", "score_low", "score_high", "n_below",
                    "p_max", "p_fisher", "init_share_min", "init_share_max")
"""Columns of :func:`by_sigma`."""


def by_sigma(structure: pd.DataFrame, block: int = 0, part: str = "dpe",
             alpha: float = ALPHA) -> pd.DataFrame:
    """Per sigma, the grid score of ``part`` (``init``, ``dpe`` or ``final``) of ``block``.

    Args:
        structure: :func:`lstpe.analysis.pe_structure.pe_structure` rows, with ``sigma``,
            ``block``, ``score_<part>``, ``p_<part>`` and ``init_share``.
        block: the block (0 = the first).
        part: which part of the PE is scored.
        alpha: the level at which a unit's permutation p counts as below.
    Returns:
        :data:`BY_SIGMA_COLUMNS`, one row per sigma in increasing order: ``n`` units,
        ``score_mean`` with its t 95% CI (NaN for n = 1), ``n_below`` units with p < alpha,
        ``p_max`` the largest unit p, ``p_fisher`` Fisher's combined p, ``init_share_min/max``.
    """
    if part not in ("init", "dpe", "final"):
        raise ValueError(f"part must be init, dpe or final, got {part!r}")
    need = ["sigma", "block", f"score_{part}", f"p_{part}", "init_share"]
    missing = [c for c in need if c not in structure]
    if missing:
        raise ValueError(f"structure lacks columns {missing}")
    t = structure[(structure["block"] == block) & structure["sigma"].notna()]
    t = t.dropna(subset=[f"score_{part}", f"p_{part}"])
    rows = []
    for sigma, g in t.groupby("sigma", sort=True):
        s, p = g[f"score_{part}"].to_numpy(float), g[f"p_{part}"].to_numpy(float)
        m, lo, hi = mean_ci(s)
        fisher = float(stats.combine_pvalues(p, method="fisher").pvalue)
        rows.append((float(sigma), int(s.size), m, lo, hi, int((p < alpha).sum()),
                     float(p.max()), fisher, float(g["init_share"].min()),
                     float(g["init_share"].max())))
    return pd.DataFrame(rows, columns=list(BY_SIGMA_COLUMNS))
