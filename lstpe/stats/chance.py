"""Is a model guessing? The chance test of the LST's 4-way validation puzzles.

* :data:`CHANCE`, :data:`N_VAL_PUZZLES`: guessing accuracy and the puzzles behind an accuracy;
* :func:`chance_test`: per group (PE), a one-sided binomial test of its seeds' pooled correct
  answers against chance; :func:`chance_pes`: the groups within noise of it.

A group at chance is left out of rankings and correlations: they would rank guessing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

__all__ = ["CHANCE", "N_VAL_PUZZLES", "chance_test", "chance_pes", "p_above_chance"]

CHANCE = 0.25
"""Accuracy of guessing one of the four shapes."""

N_VAL_PUZZLES = 108
"""Validation puzzles (the ones people solved)."""

def chance_test(final: pd.DataFrame, chance: float = CHANCE, n_items: int = N_VAL_PUZZLES,
                by: str = "pe", value: str = "accuracy", alpha: float = 0.05) -> pd.DataFrame:
    """Is each group's accuracy above chance, beyond what guessing gives?

    Pools the group's seeds: ``k`` correct answers out of ``n_items * seeds`` (each seed's
    accuracy times ``n_items``, rounded) and a one-sided binomial test of ``k`` against
    ``chance``. A group is ``at_chance`` when that test does not reject at ``alpha``: its
    accuracy is within noise of guessing, and any ranking or correlation built on it is noise.

    Args:
        final: one row per model (e.g. ``Run.final("val")``).
        n_items: puzzles behind each accuracy (108 validation puzzles).
    Returns:
        ``by, seeds, mean, k, trials, p_above_chance, at_chance`` in first-seen order.
    Raises:
        ValueError: empty table, missing columns, accuracies outside [0, 1], ``n_items < 1``.
    """
    if final.empty:
        raise ValueError("the table is empty")
    missing = [c for c in (by, value) if c not in final]
    if missing:
        raise ValueError(f"table lacks columns {missing}; has {', '.join(final.columns)}")
    if n_items < 1:
        raise ValueError(f"n_items must be >= 1, got {n_items}")
    acc = final[value].to_numpy(float)
    if not np.all((acc >= 0) & (acc <= 1)):
        raise ValueError(f"{value} must lie in [0, 1]")
    rows = []
    for key, g in final.groupby(by, sort=False):
        correct = np.rint(g[value].to_numpy(float) * n_items).astype(int)
        k, n = int(correct.sum()), n_items * len(g)
        p = p_above_chance(k, n, chance)
        rows.append({by: key, "seeds": len(g), "mean": float(g[value].mean()), "k": k,
                     "trials": n, "p_above_chance": p, "at_chance": p >= alpha})
    return pd.DataFrame(rows)

def chance_pes(final: pd.DataFrame | None, **kw: Any) -> set[str]:
    """The groups of ``final`` (PE names, as text) within noise of chance by
    :func:`chance_test` (``kw`` passed on); empty for None or an empty table: the one reading
    of "at chance" that every sentence leaving rows out of a comparison uses."""
    if final is None or final.empty:
        return set()
    ct = chance_test(final, **kw)
    return set(ct.loc[ct["at_chance"], kw.get("by", "pe")].astype(str))

def p_above_chance(k: int, trials: int, chance: float = CHANCE) -> float:
    """p of the one-sided binomial test of ``k`` correct out of ``trials`` against ``chance``
    (:func:`chance_test` pools the seeds of a group)."""
    return float(sps.binomtest(k, trials, chance, alternative="greater").pvalue)
