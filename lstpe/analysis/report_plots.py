"""Chapter 11's figures beyond the forest plot: Table 2 over every sigma, and the campaign.

* :func:`plot_sigma_sweep`: validation accuracy over the 20 sigmas of Table 2: the authors'
  logs at our units' epoch (mean and t 95% interval of their seeds), the paper at 4000 epochs
  (mean, open squares), and ours (every stored seed, and its mean with a t 95% interval where
  a sigma has two or more).
* :func:`plot_progress`: the campaign's items, units done of each, and the long chunks' epochs
  of their targets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lstpe.analysis import style
from lstpe.analysis.seed_stats import mean_ci, t_half

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_sigma_sweep", "plot_progress"]


def _sigma(pe: str) -> float:
    return float(pe.split("-", 1)[1]) if pe.startswith("learn-") else float("nan")


def plot_sigma_sweep(final: pd.DataFrame, authors: pd.DataFrame, paper: pd.DataFrame,
                     epoch: int = 200) -> Figure:
    """Table 2 over every sigma.

    Args:
        final: one row per stored model: ``pe``, ``accuracy`` (validation, as the authors
            evaluated it); non-learnable PEs are left out.
        authors: the authors' logs at ``epoch``: index ``pe``, ``acc_mean, acc_sd, n_seeds``
            (:func:`lstpe.analysis.authors_logs.authors_at`).
        paper: the paper's Table 2: ``sigma``, ``mean`` (validation accuracy; the rows of
            :func:`lstpe.analysis.paper_compare.load_paper_tables` for table 2, ``val_acc``).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=style.figsize(1.0, 3.8))
    a = authors[[p.startswith("learn-") for p in authors.index]].copy()
    a["sigma"] = [_sigma(p) for p in a.index]
    a = a.sort_values("sigma")
    half = t_half(a["acc_sd"], a["n_seeds"])
    ax.fill_between(a["sigma"], (a["acc_mean"] - half).clip(0, 1),
                    (a["acc_mean"] + half).clip(0, 1), color="0.85",
                    label=f"authors @{epoch}, 95% CI")
    ax.plot(a["sigma"], a["acc_mean"], color="0.45", lw=1.5, label=f"authors @{epoch}, mean")
    p = paper.sort_values("sigma")
    ax.plot(p["sigma"], p["mean"], "s", mfc="none", mec="k", ms=5, label="paper @4000")
    ours = final[final["pe"].astype(str).str.startswith("learn-")].copy()
    ours["sigma"] = ours["pe"].map(_sigma)
    ax.plot(ours["sigma"], ours["accuracy"], "o", color="C0", alpha=0.35, ms=4,
            label=f"ours @{epoch}, each seed")
    for s, g in ours.groupby("sigma"):
        if len(g) >= 2:
            m, lo, hi = mean_ci(g["accuracy"].to_numpy())
            ax.errorbar(s, m, yerr=[[m - max(lo, 0)], [min(hi, 1) - m]], fmt="D", color="C0",
                        ms=5, capsize=3, label=None)
    ax.errorbar([], [], yerr=[], fmt="D", color="C0", capsize=3,
                label=f"ours @{epoch}, mean and 95% CI")
    ax.axhline(0.25, color="0.6", ls=":", lw=1)
    ax.text(2.02, 0.25, "chance", va="center", fontsize=9, color="0.4")
    ax.set(xlabel="sigma of the learnable PE's initialisation", ylabel="validation accuracy",
           ylim=(0, 1.02), xlim=(0, 2.2))
    ax.legend(loc="lower left", fontsize=9, ncol=2, frameon=False)
    fig.tight_layout()
    return fig


def plot_progress(progress: pd.DataFrame, long: pd.DataFrame) -> Figure:
    """The campaign: per item of 200-epoch units the share done (``progress``:
    :func:`lstpe.experiments.campaign_status.progress`, its numbered rows), and per long chunk
    the share of its target reached (``long``: ``chunk, item, epoch, target``)."""
    import matplotlib.pyplot as plt

    items = progress[[str(i).isdigit() for i in progress.index]]
    labels = [f"item {i}: {r['what']}" for i, r in items.iterrows()]
    frac = list(items["done"] / items["units"])
    text = [f"{int(r['done'])}/{int(r['units'])} units" for _, r in items.iterrows()]
    for _, r in long.iterrows():
        labels.append(f"item {r['item']}: {r['chunk']} to {r['target']} epochs")
        frac.append(min(r["epoch"] / r["target"], 1.0))
        text.append(f"epoch {int(r['epoch'])}/{int(r['target'])}")
    order = np.argsort([int(lbl.split()[1].rstrip(":")) for lbl in labels], kind="stable")
    labels, frac, text = ([x[i] for i in order] for x in (labels, frac, text))
    fig, ax = plt.subplots(figsize=style.figsize(1.0, 0.35 * len(labels) + 0.9))
    y = np.arange(len(labels))[::-1]
    ax.barh(y, [1] * len(y), color="0.9")
    ax.barh(y, frac, color="C2")
    for yi, t in zip(y, text, strict=True):
        ax.text(1.01, yi, t, va="center", fontsize=9)
    ax.set_yticks(y, labels, fontsize=9)
    ax.set(xlim=(0, 1), xticks=[0, 0.5, 1], xlabel="share done")
    fig.tight_layout()
    return fig
