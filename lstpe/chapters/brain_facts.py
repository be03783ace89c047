"""The numbers chapter 10's hand-written paragraphs glue in (the brain masked-prediction run),
one function per paragraph, as :mod:`lstpe.chapters.facts` does for the other chapters."""

from __future__ import annotations

from typing import Any

import pandas as pd

from lstpe.chapters import findings as fd
from lstpe.chapters.facts import SOURCES

__all__ = ["brain_facts", "surrogate_fit_facts", "brain_curve_facts", "mask_facts"]


def brain_facts(run: Any, cells: pd.DataFrame, con: pd.DataFrame,
                train_mask: float) -> dict[str, str]:
    """Chapter 10's paragraph: ``run`` the brain run, ``cells, con`` from
    :func:`lstpe.evidence.claim_tables.network_evidence`, ``train_mask`` the page's mask
    ratio. Keys: ``preset``, ``source``, ``parcels``, ``seeds``, ``steps``, ``batch`` (the
    run), ``test_mask``, ``best_pe``, ``best_mse``, ``linear_mse`` (the lowest test error
    after training and the optimal linear predictor's), ``differs`` / ``rest`` (the trained PEs
    whose modularity z differs from its null, and the others), ``zs`` (each trained PE's z with
    its 95% CI), ``init_z`` (the learnable PEs' z at initialisation, as a value or a range)
    and ``floor`` / ``order`` (the smallest exact p the contrasts can reach, and what follows
    for the order over sigma)."""
    from lstpe import brain

    rc, c = run.config, cells.set_index("cell")
    best = brain.mse_summary(run.history, train_mask).iloc[-1]
    fin = [x for x in cells["cell"] if "(init)" not in x]
    init = c.loc[[x for x in cells["cell"] if "(init)" in x], "mean"]
    lo, hi = f"{init.min():.1f}", f"{init.max():.1f}"
    floor = con["p_floor"].min() if len(con) else float("nan")
    return {"preset": rc["preset"], "source": SOURCES.get(run.source, run.source),
            "parcels": str(rc["n_parcels"]), "seeds": str(len(rc["seeds"])),
            "steps": str(rc["steps"]), "batch": str(rc["batch_size"]),
            "test_mask": f"{brain.TEST_MASK:.0%}", "best_pe": str(best["pe"]),
            "best_mse": f"{best['test_mean']:.4f}",
            "linear_mse": f"{run.artifacts['linear_baseline'][f'test@{brain.TEST_MASK:g}']:.4f}",
            "differs": fd.names([p for p in fd.having(cells, "differs") if p in fin], "no PE"),
            "rest": fd.names([p for p in fin if c.loc[p, "verdict"] != "differs"], "no PE"),
            "zs": ", ".join(f"`{p}` {fd.ci(*c.loc[p, ['mean', 'ci_low', 'ci_high']], digits=1)}"
                            for p in fin),
            "init_z": fd.span_text(lo, hi), "floor": f"{floor:.2g}",
            "order": "their verdicts are in the table" if floor < 0.05
            else "the order over σ is not tested by this run"}


def surrogate_fit_facts(fit: pd.DataFrame) -> dict[str, str]:
    """Chapter 10's takeaway under the surrogate fit (``fit``: the table
    :func:`lstpe.brain.plots.plot_surrogate_fit` returns, rows ``train`` / ``test``, columns
    ``main`` / ``holdout``: mean absolute differences). Keys: ``train_main``, ``test_holdout``,
    ``test_main`` (the differences, 3 decimals) and ``closer`` (``closer to`` or ``no closer
    to``: the test split against the holdout group's FC, compared with the main group's)."""
    return {"train_main": f"{fit.loc['train', 'main']:.3f}",
            "test_holdout": f"{fit.loc['test', 'holdout']:.3f}",
            "test_main": f"{fit.loc['test', 'main']:.3f}",
            "closer": "closer to" if fit.loc["test", "holdout"] < fit.loc["test", "main"]
            else "no closer to"}


def brain_curve_facts(run: Any, summ: pd.DataFrame) -> dict[str, str]:
    """Chapter 10's takeaway under the training curves: ``run`` the brain run, ``summ``
    :func:`lstpe.brain.analysis.mse_summary` at the page's mask ratio. Keys: ``steps``,
    ``low`` / ``high`` (the lowest and highest final test MSE over the PEs, 4 decimals),
    ``linear`` (the optimal linear predictor's test MSE) and ``stage`` (what a run of this
    preset shows: a run below paper scale is far from converged)."""
    from lstpe import brain

    rc = run.config
    return {"steps": str(rc["steps"]), "low": f"{summ['test_mean'].min():.4f}",
            "high": f"{summ['test_mean'].max():.4f}",
            "linear": f"{run.artifacts['linear_baseline'][f'test@{brain.TEST_MASK:g}']:.4f}",
            "stage": "the end of the paper's schedule" if rc["preset"] == "paper" else
            f"a `{rc['preset']}` run far from converged: it shows how fast each PE starts, "
            "not where it ends"}


def mask_facts(history: pd.DataFrame, masks: Any) -> dict[str, str] | None:
    """Chapter 10's takeaway under the test error per training mask ratio: ``history`` the
    brain run's, ``masks`` its training mask ratios. None when the run has one ratio (no
    figure). Keys: ``masks`` (the ratios, as percentages), ``test_mask`` and ``best`` (per
    ratio, the PE with the lowest test MSE at the test mask and that MSE)."""
    from lstpe import brain

    ratios = sorted(set(float(m) for m in masks))
    if len(ratios) < 2:
        return None
    best = [brain.mse_summary(history, m).iloc[-1] for m in ratios]
    return {"masks": fd.names([f"{m:.0%}" for m in ratios], code=False),
            "test_mask": f"{brain.TEST_MASK:.0%}",
            "best": "; ".join(f"{m:.0%}: `{b['pe']}` ({b['test_mean']:.4f})"
                              for m, b in zip(ratios, best, strict=True))}
