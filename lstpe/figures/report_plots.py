"""The report's figures beyond the forest plot (Table 2 over every sigma, the campaign) and
chapter 8's previews of Tables 4-6.

* :func:`plot_sigma_sweep`: validation accuracy over the 20 sigmas of Table 2: the authors'
  logs at our units' epoch (mean and t 95% interval of their seeds), the paper at 4000 epochs
  (mean, open squares), and ours (every stored seed, and its mean with a t 95% interval where
  a sigma has two or more).
* :func:`plot_progress`: the campaign's items, units done of each, and the long chunks' epochs
  of their targets.
* :func:`plot_run_finals`: final accuracy per PE of whole runs (chapter 8's Tables 4-6), each
  model and the mean, on the full accuracy axis with chance.
* :func:`plot_noise_loss`: chapter 8's accuracy lost to embedding noise, every model and each
  PE's mean with its interval: the named PEs in one panel, the learnable PEs over sigma in
  the other.
* :func:`plot_pe_norm_decay`: chapter 8's PE norms over the epochs of the long runs, AdamW
  against Adam and against what the decay alone leaves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from lstpe.rendering import style
from lstpe.stats.seed_stats import mean_ci, t_half

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_sigma_sweep", "plot_progress", "plot_run_finals", "plot_noise_loss",
           "plot_pe_norm_decay", "run_tag"]


DODGE = 0.2
"""How far the paper's squares sit right of their sigma and ours left of it, as a share of the
smallest spacing of the sigmas."""


def _sigma(pe: str) -> float:
    return float(pe.split("-", 1)[1]) if pe.startswith("learn-") else float("nan")


def plot_sigma_sweep(final: pd.DataFrame, authors: pd.DataFrame, paper: pd.DataFrame,
                     epoch: int = 200) -> Figure:
    """Table 2 over every sigma.

    At each sigma the paper's square sits a little right of the sigma and ours (seeds and mean)
    a little left (:data:`DODGE` of the sigmas' spacing), so that neither hides the other; the
    axes hold every point with a margin, and chance.

    Args:
        final: one row per stored model: ``pe``, ``accuracy`` (validation, as the authors
            evaluated it); non-learnable PEs are left out.
        authors: the authors' logs at ``epoch``: index ``pe``, ``acc_mean, acc_sd, n_seeds``
            (:func:`lstpe.references.authors_logs.authors_at`).
        paper: the paper's Table 2: ``sigma``, ``mean`` (validation accuracy; the rows of
            :func:`lstpe.references.paper_tables.load_paper_tables` for table 2, ``val_acc``).
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
    ours = final[final["pe"].astype(str).str.startswith("learn-")].copy()
    ours["sigma"] = ours["pe"].map(_sigma)
    sig = np.unique(np.concatenate([a["sigma"], p["sigma"], ours["sigma"]]).astype(float))
    d = DODGE * (float(np.diff(sig).min()) if len(sig) > 1 else 1.0)
    ax.plot(p["sigma"] + d, p["mean"], "s", mfc="none", mec="k", ms=5, label="paper @4000")
    ax.plot(ours["sigma"] - d, ours["accuracy"], "o", color="C0", alpha=0.35, ms=4,
            label=f"ours @{epoch}, each seed")
    for s, g in ours.groupby("sigma"):
        if len(g) >= 2:
            m, lo, hi = mean_ci(g["accuracy"].to_numpy())
            ax.errorbar(s - d, m, yerr=[[m - max(lo, 0)], [min(hi, 1) - m]], fmt="D",
                        color="C0", ms=5, capsize=3, label=None)
    ax.errorbar([], [], yerr=[], fmt="D", color="C0", capsize=3,
                label=f"ours @{epoch}, mean and 95% CI")
    ax.axhline(0.25, color="0.6", ls=":", lw=1)
    ax.annotate("chance", (1, 0.25), xycoords=("axes fraction", "data"), xytext=(-2, 2),
                textcoords="offset points", ha="right", va="bottom", fontsize=9, color="0.4")
    lo_x, hi_x = float(sig.min()) - d, float(sig.max()) + d
    pad = 0.05 * (hi_x - lo_x or 1.0)
    ax.set(xlabel="sigma of the learnable PE's initialisation", ylabel="validation accuracy",
           ylim=(-0.05, 1.05), xlim=(lo_x - pad, hi_x + pad))  # caps at 0 and 1 in view
    ax.legend(loc="lower left", fontsize=9, ncol=2, frameon=False)
    fig.tight_layout()
    return fig


def plot_progress(progress: pd.DataFrame, long: pd.DataFrame,
                  names: Mapping[int, str] | None = None) -> Figure:
    """How far the reproduction's runs have got: one bar per part of the plan, its share
    done. A part of 200-epoch models (``progress``:
    :func:`lstpe.campaign.status.progress`, its numbered rows) counts models
    stored; a part of long runs (``long``: ``item, units, epoch, target``, one row per run
    and target) counts model-epochs reached against its targets, and how many of its models
    stand at their target. ``names``: each part's description by its number (default:
    ``progress``' ``what``); the bars are labelled by it, never by the plan's numbers."""
    import matplotlib.pyplot as plt

    items = progress[[str(i).isdigit() for i in progress.index]]
    what = {int(i): r["what"] for i, r in items.iterrows()} | dict(names or {})
    rows = [(int(i), r["done"] / r["units"], f"{int(r['done'])}/{int(r['units'])} models")
            for i, r in items.iterrows()]
    for item, g in long.groupby("item"):
        reached = (g["units"] * g["epoch"].clip(upper=g["target"])).sum()
        at = int(g.loc[g["epoch"] >= g["target"], "units"].sum())
        rows.append((int(item), reached / (g["units"] * g["target"]).sum(),
                     f"{at}/{int(g['units'].sum())} models at target"))
    labels = [what.get(i, f"part {i}") for i, _, _ in rows]
    fig, ax = plt.subplots(figsize=style.figsize(1.0, 0.35 * len(rows) + 0.9))
    y = np.arange(len(rows))[::-1]
    ax.barh(y, [1] * len(y), color="0.9")
    ax.barh(y, [f for _, f, _ in rows], color="C2")
    for yi, (_, _, t) in zip(y, rows, strict=True):
        ax.text(1.01, yi, t, va="center", fontsize=9)
    ax.set_yticks(y, labels, fontsize=9)
    ax.set(xlim=(0, 1), xticks=[0, 0.5, 1], xlabel="share done")
    fig.tight_layout()
    return fig


def run_tag(run: Any) -> str:
    """What a run is, for a panel's title: its scale (``preview: illustrates the analysis,
    tests nothing`` below paper scale) and epochs."""
    tag = "preview: illustrates the analysis, tests nothing" if run.scale != "paper" \
        else run.scale
    return f"{tag}, {run.config.get('epochs')} ep."


def plot_run_finals(runs: Mapping[str, Any], split: str = "val", chance: float = 0.25
                    ) -> Figure:
    """Final ``split`` accuracy per PE of each run, one panel a run, stacked: every model a
    grey dot, the mean over models an orange square; the accuracy axis runs from 0 to 1 with
    chance dotted, so a run at chance reads as chance (a zoomed axis would show its noise as
    effects). Chapter 8 draws Table 4's SGD run and the AdamW run of Tables 5-6 with it.

    Args:
        runs: panel title -> run (a :class:`lstpe.store.results.Run`, or anything with
            ``final(split)`` (one row per model: ``pe``, ``accuracy``), ``scale`` and
            ``config``); :func:`run_tag` is added to each title.
    Raises:
        ValueError: no runs.
    """
    import matplotlib.pyplot as plt

    if not runs:
        raise ValueError("no runs to plot")
    fig, axes = plt.subplots(len(runs), 1, squeeze=False, layout="constrained",
                             figsize=style.figsize(1.0, 2.9 * len(runs) + 0.4))
    for ax, (title, run) in zip(axes[:, 0], runs.items(), strict=True):
        f = run.final(split)
        pes = list(dict.fromkeys(f["pe"]))
        x = {pe: i for i, pe in enumerate(pes)}
        for pe, g in f.groupby("pe", sort=False):
            k = len(g)
            jit = np.linspace(-0.12, 0.12, k) if k > 1 else np.zeros(1)
            ax.plot(x[pe] + jit, g["accuracy"], "o", color="0.6", ms=3.5, zorder=2,
                    label="each model" if x[pe] == 0 else None)
        mean = f.groupby("pe", sort=False)["accuracy"].mean()
        ax.plot([x[p] for p in mean.index], mean, "s", color="C1", ms=6, zorder=3,
                label="mean over models")
        ax.axhline(chance, color="0.4", ls=":", lw=1.2, label=f"chance ({chance:g})")
        ax.set_xticks(range(len(pes)), pes, rotation=90)
        ax.set(ylabel=f"{'validation' if split.startswith('val') else split} accuracy",
               ylim=(0, 1.04), yticks=[0, 0.25, 0.5, 0.75, 1.0], xlim=(-0.6, len(pes) - 0.4),
               title=f"{title}\n{run_tag(run)}")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=3,
               fontsize=9)
    return style.readable(fig)


def plot_noise_loss(losses: pd.DataFrame, cells: pd.DataFrame, noise: float) -> Figure:
    """Accuracy lost at noise std ``noise``: every model (grey dots) and each PE's mean with
    its 95% interval (blue squares), the PEs that are not ``learn-<sigma>`` by name on the
    left, the ``learn-<sigma>`` PEs on a sigma axis on the right (one panel where only one
    kind is present).

    Args:
        losses: ``pe, loss`` per model (:func:`lstpe.evidence.claim_tables.noise_loss_per_model`).
        cells: ``cell, mean, ci_low, ci_high`` per PE
            (:func:`lstpe.evidence.claim_tables.noise_evidence`).
    Raises:
        ValueError: a PE of ``cells`` without a model in ``losses``.
    """
    import matplotlib.pyplot as plt

    rows = cells.set_index("cell")
    missing = [pe for pe in rows.index if not (losses["pe"] == pe).any()]
    if missing:
        raise ValueError(f"no model of PE(s) {missing} in losses")
    named = [pe for pe in rows.index if np.isnan(_sigma(str(pe)))]
    swept = [pe for pe in rows.index if pe not in named]
    groups = [g for g in (named, swept) if g]
    fig, axes = plt.subplots(1, len(groups), figsize=style.figsize(1.0, 3.4), sharey=True,
                             layout="constrained", squeeze=False,
                             width_ratios=[max(len(g), 4) for g in groups])
    for ax, group in zip(axes[0], groups, strict=True):
        xs = [_sigma(pe) if group is swept else i for i, pe in enumerate(group)]
        for x, pe in zip(xs, group, strict=True):
            y = losses.loc[losses["pe"] == pe, "loss"].to_numpy(float)
            ax.plot(np.full(len(y), x), y, "o", color="0.6", ms=4,
                    label="one model" if pe == group[0] else None)
            r = rows.loc[pe]
            ax.errorbar(x, r["mean"], yerr=[[r["mean"] - r["ci_low"]], [r["ci_high"] - r["mean"]]],
                        fmt="s", color="C0", capsize=3,
                        label="mean, 95% interval" if pe == group[0] else None)
        ax.axhline(0, color="0.3", lw=0.8)
        if group is swept:
            ax.set_xlabel("σ of learn-σ (init std)")
        else:
            ax.set_xticks(range(len(group)), group, rotation=90)
            ax.set_xlim(-0.6, len(group) - 0.4)
            ax.set_xlabel("positional encoding")
    axes[0, 0].set_ylabel(f"accuracy lost at noise {noise:g}")
    fig.suptitle("accuracy lost to embedding noise, per model", fontsize=10)
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=2,
               fontsize=9, frameon=False)
    return style.readable(fig)


def plot_pe_norm_decay(norms: pd.DataFrame) -> Figure:
    """Per PE, the PE's norm over its norm at epoch 0 (mean over blocks) along the long runs:
    AdamW solid, Adam dashed, what AdamW's decoupled decay alone would leave dotted.

    Args:
        norms: :func:`lstpe.chapters.long_mechanism.weight_decay_witness`'s rows (``pe``,
            ``optimizer``, ``epoch``, ``norm_ratio``, ``decay_only``).
    Returns:
        The Figure of :func:`lstpe.analysis.long_runs.plot_witness`, which draws it; this is
        its name for a reader, after what it shows.
    """
    from lstpe.analysis.long_runs import plot_witness

    return plot_witness(norms)
