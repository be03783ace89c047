"""Learning curves: accuracy over epochs, summarised over seeds, and their plot.

The training history (:data:`lstpe.store.results.HISTORY_COLUMNS`) holds one row per model, epoch,
split and condition; a learning curve is its mean and t confidence interval over seeds per PE
and epoch (:func:`lstpe.stats.seed_stats.summarize`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lstpe.stats.seed_stats import MIN_SEEDS_FOR_CI, rank_correlation, summarize

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["learning_curves", "plot_learning_curves", "first_epoch_above", "sigma_effect",
           "late_gain", "plot_split_facets", "plot_sigma_curves", "SPLIT_STYLE"]


def learning_curves(history: pd.DataFrame, split: str = "val", condition: str = "all",
                    value: str = "accuracy", by: str = "pe") -> pd.DataFrame:
    """Mean and CI over seeds of ``value`` per ``by`` group and epoch.

    Args:
        history: tidy training history.
        split: ``train``, ``test`` or ``val``. condition: ``all`` or ``1``/``2``/``3``.
    Returns:
        Columns ``by, epoch, n, mean, sd, sem, ci_low, ci_high``, sorted by group and epoch.
    Raises:
        ValueError: no rows for that split and condition.
    """
    h = history[(history["split"] == split) & (history["condition"].astype(str) == condition)]
    if h.empty:
        raise ValueError(f"no history rows for split={split!r}, condition={condition!r}; "
                         f"splits: {sorted(set(history['split']))}")
    return summarize(h, value, [by, "epoch"]).sort_values([by, "epoch"]).reset_index(drop=True)


def first_epoch_above(curves: pd.DataFrame, threshold: float, by: str = "pe") -> pd.Series:
    """First epoch at which each group's mean curve reaches ``threshold`` (NaN if never)."""
    def first(g: pd.DataFrame) -> float:
        hit = g.loc[g["mean"] >= threshold, "epoch"]
        return float(hit.iloc[0]) if len(hit) else float("nan")

    return curves.groupby(by, sort=False)[["epoch", "mean"]].apply(first).rename(
        f"first_epoch_mean_ge_{threshold:g}")


def late_gain(history: pd.DataFrame, split: str = "val_dropout", window: int = 50,
              condition: str = "all") -> pd.DataFrame:
    """Is each PE still rising when its run stops? The seed-mean curve averaged over its last
    ``window`` epochs minus the same over the ``window`` epochs before.

    Each PE's windows end at its own last evaluated epoch ``E``: epochs ``E-w+1 .. E`` against
    ``E-2w+1 .. E-w``. The curve is linearly interpolated onto every epoch of a window before
    it is averaged, so an uneven evaluation schedule (every epoch early, every 10th later)
    weighs each epoch once, and a straight line ``a + b e`` gains exactly ``b w``. Averaging a
    window smooths the jitter of 108 validation puzzles (one puzzle is 0.009).

    Returns:
        Index ``pe``; ``final`` (seed mean at the last epoch), ``gain``, ``from_epoch`` /
        ``to_epoch`` (the late window), ``n`` (seeds at the last epoch). Sorted by ``gain``,
        largest first.
    Raises:
        ValueError: ``window`` < 1, no rows for the split, or a PE whose first evaluation comes
            after ``E - 2w`` (too short for two windows; named).
    """
    if window < 1:
        raise ValueError(f"window must be a positive number of epochs, got {window}")
    c = learning_curves(history, split, condition)
    rows, short = {}, []
    for pe, g in c.groupby("pe", sort=False):
        e, m = g["epoch"].to_numpy(float), g["mean"].to_numpy(float)
        last = int(e.max())
        if e.min() > last - 2 * window:
            short.append(f"{pe} (epochs {int(e.min())}-{last})")
            continue
        late = np.interp(np.arange(last - window + 1, last + 1), e, m).mean()
        early = np.interp(np.arange(last - 2 * window + 1, last - window + 1), e, m).mean()
        rows[pe] = {"final": m[e.argmax()], "gain": late - early,
                    "from_epoch": last - window + 1, "to_epoch": last,
                    "n": int(g.loc[g["epoch"] == last, "n"].iloc[0])}
    if short:
        raise ValueError(f"too short for two windows of {window} epochs: {', '.join(short)}")
    out = pd.DataFrame.from_dict(rows, orient="index").rename_axis("pe")
    return out.sort_values("gain", ascending=False)


def _band(ax: Axes, c: pd.DataFrame, color, min_seeds: int) -> bool:
    """Draw the CI band (clipped to [0, 1]) only when every point has ``min_seeds`` seeds."""
    if c.empty or c["n"].min() < min_seeds:
        return False
    ax.fill_between(c["epoch"], c["ci_low"].clip(0, 1), c["ci_high"].clip(0, 1), alpha=0.2,
                    color=color, lw=0)
    return True


def plot_learning_curves(curves: pd.DataFrame, ax: Axes | None = None, by: str = "pe",
                         groups: Sequence | None = None, ylabel: str = "accuracy",
                         chance: float | None = 0.25,
                         min_seeds: int = MIN_SEEDS_FOR_CI) -> Axes:
    """One line per group (mean over seeds) against epoch, with its CI band (clipped to
    [0, 1]) when the group has at least ``min_seeds`` seeds; the legend outside, right."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots()
    for g in groups if groups is not None else list(dict.fromkeys(curves[by])):
        c = curves[curves[by] == g]
        (line,) = ax.plot(c["epoch"], c["mean"], label=str(g), lw=1.5)
        _band(ax, c, line.get_color(), min_seeds)
    if chance is not None:
        ax.axhline(chance, color="0.5", ls=":", lw=1, label="chance")
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return ax


SPLIT_STYLE: dict[str, dict] = {
    "train_running": {"color": "tab:blue", "ls": "-",
                      "label": "training, running mean, train mode (paper's)"},
    "train": {"color": "tab:blue", "ls": "--", "label": "training, eval mode"},
    "val": {"color": "tab:orange", "ls": "-", "label": "validation, eval mode"},
    "val_dropout": {"color": "tab:red", "ls": ":",
                    "label": "validation, dropout on (authors')"},
}
"""Colour, line style and legend label of each split in :func:`plot_split_facets`."""


def plot_split_facets(history: pd.DataFrame, pes: Sequence[str] | None = None,
                      splits: Sequence[str] = ("train_running", "train", "val", "val_dropout"),
                      ncols: int = 4, chance: float | None = 0.25,
                      min_seeds: int = MIN_SEEDS_FOR_CI):
    """Learning curves, one small panel per PE, one line per split (mean over seeds).

    ``val_dropout`` is drawn only for PEs where it differs from ``val`` (the models with
    dropout: 2d-fixed and 1d-fixed of the paper variant). CI bands (clipped to [0, 1]) only
    with at least ``min_seeds`` seeds. One legend for the figure, below the panels.

    Returns:
        The Figure; ``fig.axes[:len(pes)]`` are the panels in ``pes`` order.
    Raises:
        ValueError: a PE or split without rows.
    """
    import math

    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    h = history[history["condition"].astype(str) == "all"]
    pes = list(pes) if pes is not None else list(dict.fromkeys(h["pe"]))
    for s in splits:
        if s not in set(h["split"]):
            raise ValueError(f"no history rows for split {s!r}; splits: {sorted(set(h['split']))}")
    curves = {s: learning_curves(h, s) for s in splits}
    nrows = math.ceil(len(pes) / ncols)
    ncols = min(ncols, len(pes))
    fig, axes = plt.subplots(nrows, ncols, figsize=(min(2.0 * ncols + 0.4, 7.1),
                                                    1.9 * nrows + 1.2),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")
    for ax in axes.flat[len(pes):]:
        ax.set_visible(False)
    for ax, pe in zip(axes.flat[:len(pes)], pes, strict=True):
        if not any((c["pe"] == pe).any() for c in curves.values()):
            raise ValueError(f"no history rows for PE {pe!r}")
        for s in splits:
            c = curves[s][curves[s]["pe"] == pe]
            if s == "val_dropout" and "val" in curves:
                v = curves["val"][curves["val"]["pe"] == pe]
                if len(v) == len(c) and (c["mean"].to_numpy() == v["mean"].to_numpy()).all():
                    continue
            st = SPLIT_STYLE.get(s, {"label": s})
            ax.plot(c["epoch"], c["mean"], lw=1.4, **st)
            _band(ax, c, st.get("color"), min_seeds)
        if chance is not None:
            ax.axhline(chance, color="0.5", ls=":", lw=1, label=f"chance ({chance:g})")
        ax.set_title(pe, fontsize=11)
        ax.set_ylim(0, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
    for ax in axes[-1]:
        ax.set_xlabel("epoch")
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy")
    handles: dict = {}
    for ax in axes.flat[:len(pes)]:
        for hd, lb in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lb, hd)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=2,
               fontsize=9, frameon=False)
    return fig


def plot_sigma_curves(history: pd.DataFrame, split: str = "val",
                      reference: str | None = "2d-fixed", ax: Axes | None = None,
                      chance: float | None = 0.25, authors: bool = True) -> Axes:
    """Mean learning curve per sigma (``learn`` models); the reference PE's curve dashed
    black; chance dotted; the accuracy axis from 0 to 1. Up to 8 sigmas get distinct colours,
    more a viridis colour bar; the legend sits under the axes. With ``authors`` (validation
    splits), the authors' own mean at each epoch they logged (0, 200, ...) within our epochs is
    marked with a diamond of the PE's colour
    (:func:`lstpe.references.authors_logs.authors_logs`); diamonds that would hide each other at
    one epoch are moved sideways (:func:`lstpe.rendering.style.swarm_offsets`; inwards at the
    first and last epoch), so that every PE's diamond shows.

    Raises:
        ValueError: no learn-sigma rows for the split.
    """
    import matplotlib as mpl
    import matplotlib.pyplot as plt

    from lstpe.rendering import style

    if ax is None:
        _, ax = plt.subplots(figsize=style.figsize(1.0, 4.2))
    c = learning_curves(history, split)
    sig = history.drop_duplicates("pe").set_index("pe")["sigma"]
    learn = history.loc[history["pe_name"] == "learn", "pe"].unique()
    if len(learn) == 0:
        raise ValueError(f"no learn-sigma rows for split {split!r}")
    s = sig.loc[learn].astype(float).sort_values()
    if len(s) <= 8:
        colour = {pe: mpl.colormaps["tab10"](i) for i, pe in enumerate(s.index)}
        bar = None
    else:
        norm = mpl.colors.Normalize(vmin=s.min(), vmax=s.max())
        cmap = mpl.colormaps["viridis"]
        colour = {pe: cmap(norm(v)) for pe, v in s.items()}
        bar = mpl.cm.ScalarMappable(norm=norm, cmap=cmap)
    for pe in s.index:
        g = c[c["pe"] == pe]
        ax.plot(g["epoch"], g["mean"], color=colour[pe], lw=1.3,
                label=f"σ = {s[pe]:g}" if bar is None else None)
    if reference is not None and (c["pe"] == reference).any():
        g = c[c["pe"] == reference]
        ax.plot(g["epoch"], g["mean"], color="black", ls="--", lw=1.5, label=reference)
        colour[reference] = "black"
    if chance is not None:
        ax.axhline(chance, color="0.5", ls=":", lw=1, label="chance")
    if bar is not None:
        ax.figure.colorbar(bar, ax=ax, label="σ (PE init std)")
    ax.set_xlabel("epoch")
    names = {"val": "validation", "val_dropout": "validation (dropout on)",
             "train": "training (eval mode)", "train_running": "training (running)"}
    ax.set_ylabel(f"{names.get(split, split)} accuracy\n(mean over seeds)")
    ax.set_ylim(0, 1.03)
    if authors and split in ("val", "val_dropout"):
        _mark_authors(ax, colour, int(c["epoch"].min()), int(c["epoch"].max()))
    if ax.get_legend_handles_labels()[0]:
        style.legend_below(ax, ncols=4)
    return ax


def _mark_authors(ax: Axes, colour: dict, min_epoch: int, max_epoch: int) -> None:
    """The authors' logged mean validation accuracy (diamonds) at their epochs <= max_epoch,
    one per PE of ``colour``, each drawn as its own line (``ax.get_lines()``, the PE as its
    ``gid``). At one epoch, diamonds that would cover each other are moved sideways (a beeswarm
    in screen space, inwards at ``min_epoch`` and ``max_epoch``; they may overlap by a third),
    except where every PE's mean lies within one diamond's height (at epoch 0 all sit at
    chance): there one grey diamond, ``gid`` ``"every PE"``, stands for them all."""
    import matplotlib.transforms as mtransforms

    from lstpe.references.authors_logs import authors_logs
    from lstpe.rendering import style

    t = authors_logs()
    t = t[(t["phase"] == "validation") & (t["condition"] == "average")
          & (t["epoch"] <= max_epoch) & (t["pe"].isin(list(colour)))]
    if t.empty:
        return
    ax.set_xlim(ax.get_xlim())  # freeze the view: the offsets are computed on it
    fig, ms = ax.figure, 6.0
    size_px = ms * fig.dpi / 72 + 1.0  # the diamond and its white edge
    label = "authors' logs (mean)"
    for epoch, g in t.sort_values("acc_mean", ascending=False).groupby("epoch", sort=False):
        pts = [(float(epoch), float(v)) for v in g["acc_mean"]]
        y_px = ax.transData.transform(pts)[:, 1]
        if len(g) > 1 and np.ptp(y_px) < size_px:  # indistinguishable: one marker for all
            ax.plot([epoch], [g["acc_mean"].mean()], "D", color="0.45", mec="white", ms=ms,
                    zorder=4, gid="every PE", label=label)
            label = None
            continue
        side = "right" if epoch <= min_epoch else "left" if epoch >= max_epoch else "both"
        dx = style.swarm_offsets(y_px, 2 / 3 * size_px, side)
        for (_, r), d in zip(g.iterrows(), dx, strict=True):
            shift = mtransforms.ScaledTranslation(d / fig.dpi, 0, fig.dpi_scale_trans)
            ax.plot([epoch], [r["acc_mean"]], "D", color=colour[r["pe"]], mec="white", ms=ms,
                    zorder=4, transform=ax.transData + shift, gid=r["pe"], label=label)
            label = None


def sigma_effect(history: pd.DataFrame, split: str = "val", condition: str = "all"
                 ) -> pd.DataFrame:
    """Spearman correlation between sigma and accuracy at every evaluated epoch.

    Uses the ``learn`` models only and the per-sigma mean over seeds (as the paper's rank
    correlations do). A strongly negative ``rho`` means: the smaller the init, the better.

    Returns:
        Columns ``epoch, rho, pvalue, n`` (n = number of sigmas).
    Raises:
        ValueError: fewer than 3 sigmas, or no rows for the split/condition.
    """
    h = history[(history["pe_name"] == "learn") & (history["split"] == split)
                & (history["condition"].astype(str) == condition)]
    if h.empty:
        raise ValueError(f"no learn-sigma rows for split={split!r}, condition={condition!r}")
    rows = [{"epoch": e, **rank_correlation(g, "sigma", "accuracy", level="sigma")}
            for e, g in h.groupby("epoch")]
    return pd.DataFrame(rows)
