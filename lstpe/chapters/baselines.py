"""Our numbers beside the models' initialisation.

* :func:`init_vs_final`: a measure at initialisation beside its value after training and the
  change, per sigma, so that a trend the models had before any training is not read as learned;
* :func:`accuracy_correlations`: each measure's rank correlation with accuracy across sigma,
  after training and at initialisation.

Part of :mod:`lstpe.chapters`; imports from :mod:`lstpe.chapters.tables`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

__all__ = ["init_vs_final", "accuracy_correlations"]


# --------------------------------------------------------------------------- init vs trained


def init_vs_final(init: pd.DataFrame, final: pd.DataFrame, values: str | Sequence[str],
                  by: str = "sigma", paper: int | str | None = None,
                  paper_metric: str = "attention_cosine", digits: int = 3) -> pd.DataFrame:
    """Each value at initialisation, after training and the change, per ``by`` group.

    Args:
        init, final: one row per model at each stage, the same models (paired by ``model``),
            with ``by`` and ``values`` (e.g. :func:`lstpe.analysis.attention.table3`).
        paper: a paper table (``3``): adds its means (4000 epochs, 15 seeds) of
            ``paper_metric``, matched on the ``pe`` label (``final`` then needs ``pe``).
    Returns:
        Index ``by`` (first-seen order); columns ``("n", "")`` (models per group), then per
        value ``(value, "at init" | "trained" | "change")``: group means of each stage and of
        the per-model trained - init; with ``paper``, ``("paper", "@4000 ep.")`` (NaN where
        the paper has no such row).
    Raises:
        ValueError: empty tables, missing columns, or different models at the two stages.
    """
    values = [values] if isinstance(values, str) else list(values)
    for name, t in (("init", init), ("final", final)):
        need = ("model", by, *values, *(("pe",) if paper is not None else ()))
        missing = [c for c in need if c not in t]
        if t.empty or missing:
            raise ValueError(f"the {name} table is empty or lacks columns {missing}")
    if sorted(init["model"]) != sorted(final["model"]) or init["model"].duplicated().any():
        raise ValueError("init and final must hold the same models, one row each")
    both = final.merge(init[["model", *values]], on="model", suffixes=("", "@init"))
    g = both.groupby(by, sort=False)
    out = pd.DataFrame({("n", ""): g.size()})
    for v in values:
        out[(v, "at init")] = g[f"{v}@init"].mean()
        out[(v, "trained")] = g[v].mean()
        out[(v, "change")] = (both[v] - both[f"{v}@init"]).groupby(both[by], sort=False).mean()
    if paper is not None:  # matched on the PE label
        from lstpe.references.paper_tables import load_paper_tables

        pt = load_paper_tables()
        pt = pt[(pt["table"] == str(paper)) & (pt["metric"] == paper_metric)]
        means = both["pe"].map(dict(zip(pt["pe"], pt["mean"], strict=True)))
        out[("paper", "@4000 ep.")] = means.groupby(both[by], sort=False).first()
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out.index.name = by
    out = out.round(digits)
    floats = out.select_dtypes("float").columns
    out[floats] = out[floats] + 0.0  # a change that rounds to zero shows 0.0, never -0.0
    return out


def accuracy_correlations(measures: Sequence[tuple[str, pd.DataFrame, pd.DataFrame, str]],
                          history: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """Spearman correlation across sigma (per-sigma means) of each measure with the models'
    validation accuracy after training, for the measure after training and at initialisation.

    Args:
        measures: ``(name, trained, at_init, column)``: per-model tables (``model``,
            ``sigma``) of the measure after training and at initialisation.
        history: the run's history (:func:`lstpe.stats.seed_stats.with_accuracy`).
    Returns:
        Index ``measure``; ``rho``, ``pvalue`` (exact up to 8 sigmas), ``n`` (sigmas) of the
        trained measure, and ``rho at init.``: the measure before training against the same
        accuracy. Where that is as strong as ``rho``, the correlation was there before training.
        Each measure is rounded to ``digits`` first, as :func:`init_vs_final` shows it, so a
        measure the tables show as constant has no correlation (NaN), not one of float noise.
    """
    from lstpe.stats.seed_stats import rank_correlation, with_accuracy

    rows = []
    for name, trained, init, col in measures:
        r, r0 = (rank_correlation(with_accuracy(t.assign(**{col: t[col].round(digits)}),
                                                history), col) for t in (trained, init))
        rows.append({"measure": name, **r, "rho at init.": r0["rho"]})
    return pd.DataFrame(rows).set_index("measure")
