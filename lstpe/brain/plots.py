"""Figures of the brain experiment: matrices grouped by network, MSE bars, PE similarities,
network measures (matplotlib is imported when a function is called)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lstpe.brain.data import TEST_MASK
from lstpe.rendering import style

NETWORK_SHORT: dict[str, str] = {
    "Vis": "Vis", "SomMot": "SM", "DorsAttn": "DA", "SalVentAttn": "SVA", "Limbic": "Lim",
    "Cont": "Cont", "Default": "Def",
}
"""Short tick labels of the Yeo-7 networks (a 100-region matrix gives Limbic 5 rows: its full
name runs into its neighbours')."""

NETWORK_LONG: dict[str, str] = {
    "Vis": "visual", "SomMot": "somatomotor", "DorsAttn": "dorsal attention",
    "SalVentAttn": "salience / ventral attention", "Limbic": "limbic", "Cont": "control",
    "Default": "default",
}
"""What each Yeo-7 network's name stands for (the key under the abbreviated figures)."""


def network_key(names: Sequence[str]) -> str:
    """One line naming the abbreviations of :data:`NETWORK_SHORT` used for ``names``
    (``"Vis visual, SM somatomotor, ..."``); empty when none of ``names`` is a Yeo-7 name."""
    return ", ".join(f"{NETWORK_SHORT[n]} {NETWORK_LONG[n]}" for n in names
                     if n in NETWORK_SHORT)


def sigma_order(pes: Sequence[str]) -> list[str]:
    """``pes`` with the learnable ones (``learn-<sigma>``) in increasing sigma after the others
    (which keep their order): the order the paper reads modularity in."""
    def sigma(pe: str) -> float | None:
        m = re.fullmatch(r"learn-([0-9.]+)", str(pe))
        return float(m.group(1)) if m else None

    fixed = [p for p in pes if sigma(p) is None]
    return fixed + sorted((p for p in pes if sigma(p) is not None), key=sigma)


def plot_by_network(w: np.ndarray, networks: np.ndarray, names: Sequence[str], ax=None,
                    title: str = "", sort: bool = True, short: bool = True,
                    labels: tuple[bool, bool] = (True, True), **imshow_kw):
    """Show an (R, R) matrix with tokens grouped by network (boundaries and network names).

    Args:
        w: (R, R) matrix in token order.
        networks: (R,) network code of each token; names: the codes' names.
        sort: group the tokens by network (False: token order, networks as a colour strip).
        short: tick labels abbreviated (:data:`NETWORK_SHORT`, key: :func:`network_key`).
        labels: whether the (x, y) tick names are shown (a grid shows its outer panels';
            the inner ones are hidden, so a phone's layout can show them again).

    Fits the Axes' figure to the page's column (:func:`lstpe.rendering.style.readable`), so that
    the network names show at 9 pt or more.
    """
    import matplotlib.pyplot as plt

    from lstpe.analysis.networks import network_order

    ax = ax or plt.gca()
    codes = np.asarray(networks)
    order = network_order(codes, range(len(names))) if sort else np.arange(len(codes))
    im = ax.imshow(np.asarray(w)[np.ix_(order, order)], interpolation="nearest", **imshow_kw)
    ax.grid(False)
    if sort:
        sizes = np.bincount(codes, minlength=len(names))
        edges = np.cumsum(sizes)
        for e in edges[:-1]:
            ax.axhline(e - 0.5, color="w", lw=0.6)
            ax.axvline(e - 0.5, color="w", lw=0.6)
        centres = edges - sizes / 2 - 0.5
        keep = sizes > 0
        shown = np.asarray([NETWORK_SHORT.get(n, n) if short else n for n in names])[keep]
        ax.set_xticks(centres[keep], shown, rotation=90, fontsize=9)
        ax.set_yticks(centres[keep], shown, fontsize=9)
        # an inner panel's names are hidden, not dropped: stacked on a phone
        # (lstpe.rendering.phone) every panel shows them again
        ax.tick_params(labelbottom=labels[0], labelleft=labels[1])
    else:
        ax.set_xlabel("token (region) index")
        ax.set_ylabel("token (region) index")
    ax.set_title(title)
    style.readable(ax.figure)
    return im


def _seeds(summary: pd.DataFrame) -> int:
    """The fewest seeds behind a PE of :func:`mse_summary` output (its ``*_count`` columns;
    without them, 2 where every SD exists, else 1)."""
    counts = [c for c in ("train_count", "test_count") if c in summary]
    if counts:
        return int(summary[counts].min().min())
    return 2 if summary[["train_std", "test_std"]].notna().all().all() else 1


def error_bar_note(n_seeds: int) -> str:
    """What the error bars of :func:`plot_mse_bars` are, for ``n_seeds`` seeds per PE."""
    return ("error bars: SD over seeds" if n_seeds >= 2 else
            "one seed: no error bars")


def plot_mse_bars(summary: pd.DataFrame, baseline: float | None = None, ax=None,
                  title: str = ""):
    """Final train and test MSE per PE as paired bars (the paper's Fig. 3D), with SD error
    bars where every PE has two seeds or more; the title's last line says which
    (:func:`error_bar_note`).

    Args:
        summary: :func:`mse_summary` output (sorted as it should be drawn).
        baseline: the linear predictor's test MSE, drawn as a dashed line.
        title: the first line(s) of the title; a clause ``error bars: ...`` in it (as older
            chapter cells wrote) is dropped for the note.
    """
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=style.figsize(1.0, 3.8))[1]
    x = np.arange(len(summary))
    n = _seeds(summary)
    err = {s: summary[f"{s}_std"].fillna(0) if n >= 2 else None for s in ("train", "test")}
    ax.bar(x - 0.2, summary["train_mean"], 0.4, yerr=err["train"], label="train (main)")
    ax.bar(x + 0.2, summary["test_mean"], 0.4, yerr=err["test"], label="test (holdout)")
    lows = [summary[["train_mean", "test_mean"]].min().min()]
    if baseline is not None:
        ax.axhline(baseline, color="k", ls="--", lw=1, label="linear baseline (test)")
        lows.append(baseline)
    ax.set_ylim(0.9 * min(lows), None)
    ax.set_xticks(x, summary["pe"], rotation=30)
    head = re.sub(r"[;,]?\s*error bars:[^;\n]*", "", title).strip()
    note = error_bar_note(n)
    ax.set(ylabel=f"MSE at {TEST_MASK:.0%} masked", title=f"{head}\n{note}" if head else note)
    ax.legend(fontsize=9)
    style.readable(ax.figure)
    return ax


def plot_pe_similarities(artifacts: dict, models: Sequence[int], vmin: float = 0.0,
                         vmax: float = 1.0, align: str = "none"):
    """One :func:`plot_by_network` panel of :func:`~lstpe.analysis.networks.pe_similarity`
    per model (additive PEs), up to 3 a row, sized so the square panels fill the figure; the
    networks are named (abbreviated, with a key under the panels) on the outer panels only.
    Returns the Figure.

    Args:
        artifacts: a run's artefacts (``pe_final`` (M, L, R, d), ``labels``, ``networks``,
            ``network_names``).
        models: indices of the models to show.
        align: ``"none"`` (plain distances, default) or ``"pair"`` (per-pair Procrustes); with
            ``"pair"`` a PE whose distances are all equal (``1d-fixed``) gets a note instead
            of a panel, since its similarity is undefined.
    """
    import matplotlib.pyplot as plt

    from lstpe.analysis.networks import pe_similarity

    names, nets = artifacts["network_names"], np.asarray(artifacts["networks"])
    n = max(1, len(models))
    cols = min(3, n)
    rows = -(-n // cols)
    side = min(2.4, (style.WIDTH - 1.5) / cols - 0.1)  # a square panel; names, colour bar
    key = network_key([names[c] for c in sorted(set(nets.tolist()))])
    fig, axes = plt.subplots(rows, cols, squeeze=False, layout="constrained",
                             figsize=(style.WIDTH, rows * (side + 0.3) + 0.75 + 0.3 * bool(key)))
    im = None
    for k, (ax, i) in enumerate(zip(axes.flat, models, strict=False)):
        label = artifacts["labels"][i]
        outer = (k + cols >= len(models), k % cols == 0)  # bottom of its column, left column
        try:
            im = plot_by_network(pe_similarity(artifacts["pe_final"][i], align), nets, names,
                                 ax=ax, title=label, vmin=vmin, vmax=vmax, labels=outer)
        except ValueError as e:  # all distances equal (1d-fixed, align="pair"): W undefined
            if "distances are equal" not in str(e):
                raise
            ax.text(0.5, 0.5, f"all distances equal\n(align={align!r})", ha="center",
                    va="center")
            ax.set_title(label)
            ax.axis("off")
    for ax in axes.flat[len(models):]:
        ax.axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes, fraction=0.03, label="1 - scaled distance")
    if key:
        fig.supxlabel(f"networks: {key}", fontsize=9, wrap=True)
    return style.readable(fig)


def plot_network_measures(table: pd.DataFrame, order: Sequence[str]):
    """Modularity and network clustering per PE: after training (mean, SD over seeds), at
    initialisation, and the shuffled-network null mean (:func:`network_table` output with
    stages ``init`` and ``final``). The PEs go in :func:`sigma_order` (fixed ones, then the
    learnable ones by sigma), the legend below the panels. Returns the Figure."""
    import matplotlib.pyplot as plt

    order = sigma_order(order)
    fig, axes = plt.subplots(1, 2, figsize=style.figsize(1.0, 3.9), layout="constrained")
    x = np.arange(len(order))
    g = table.groupby(["stage", "pe"])
    for ax, m in zip(axes, ["modularity", "clustering"], strict=True):
        mean, sd = g[m].mean(), g[m].std().fillna(0)
        ax.errorbar(x, mean["final"][order], yerr=sd["final"][order], fmt="o", capsize=3,
                    label="after training (mean, SD over seeds)")
        ax.plot(x, mean["init"][order], "o", mfc="none", color="k", label="at initialisation")
        ax.plot(x, g[f"{m}_null_mean"].mean()["final"][order], "_", ms=18, color="r",
                label="shuffled-network null (mean)")
        ax.set_xticks(x, list(order), rotation=90)
        ax.set_xlim(-0.6, len(order) - 0.4)
        ax.margins(y=0.15)  # the null's wide marks drawn whole
        ax.set(ylabel=m, title=f"{m} of the PE\nvs the Yeo-7 networks")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2,
               fontsize=9)
    return style.readable(fig)


def plot_token_order(fc: np.ndarray, file_codes: np.ndarray, token_codes: np.ndarray,
                     names: Sequence[str]):
    """The FC in file order and grouped by network, and each token's network in file order and
    in the model's token order (one figure, three panels).

    Args:
        fc: (R, R) functional connectivity in file order.
        file_codes: (R,) network code of each region in file order.
        token_codes: (R,) network code of each token in the model's order.
        names: the network names of the codes.
    Returns:
        The figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig = plt.figure(figsize=style.figsize(1.0, 7.2), layout="constrained")
    gs = fig.add_gridspec(2, 2, height_ratios=[1, 0.45])  # the strip spans the bottom row
    ax1, ax2, ax3 = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1]), fig.add_subplot(gs[1, :])
    plot_by_network(fc, file_codes, names, ax=ax1, sort=False, vmin=-0.2, vmax=1,
                    title="HCP FC (main group), file order")
    im = plot_by_network(fc, file_codes, names, ax=ax2, vmin=-0.2, vmax=1,
                         title="the same, grouped by network")
    fig.colorbar(im, ax=ax2, fraction=0.046, label="correlation")
    cmap = plt.get_cmap("tab10")
    ax3.imshow(np.stack([file_codes, token_codes]), aspect="auto", cmap=cmap, vmin=0,
               vmax=9, interpolation="nearest")
    ax3.set(yticks=[0, 1], yticklabels=["file", "shuffled"], xlabel="token index",
            title="network of each token")
    ax3.grid(False)
    present = sorted(set(np.asarray(file_codes).tolist()) | set(np.asarray(token_codes).tolist()))
    ax3.legend([Patch(color=cmap(int(c) / 9)) for c in present],
               [str(names[int(c)]) for c in present], loc="upper center",
               bbox_to_anchor=(0.5, -0.35), ncols=4, fontsize=9, title="network")
    return style.readable(fig)


def plot_surrogate_fit(data, fcs: dict[str, np.ndarray]) -> pd.DataFrame:
    """Scatter the surrogate splits' correlations against the HCP group FCs, and return the
    mean absolute difference of each split from each group.

    Args:
        data: a :class:`lstpe.brain.data.BrainData` (train and test splits, token order).
        fcs: group name (``main``, ``holdout``) -> (R, R) FC in file order.
    Returns:
        (2, 2) table: rows train/test, columns the groups.
    """
    import matplotlib.pyplot as plt

    iu = np.triu_indices(data.n_regions, 1)
    o = np.asarray(data.order)
    fcs = {g: np.asarray(f)[np.ix_(o, o)] for g, f in fcs.items()}
    emp = {s: np.corrcoef(getattr(data, s).numpy(), rowvar=False) for s in ("train", "test")}
    fig, axes = plt.subplots(1, 2, figsize=style.figsize(1.0, 3.6), sharey=True,
                             layout="constrained")
    for ax, (split, group) in zip(axes, [("train", "main"), ("test", "holdout")], strict=True):
        ax.plot(fcs[group][iu], emp[split][iu], ".", ms=1, alpha=0.3)
        ax.plot([-0.3, 1], [-0.3, 1], "k--", lw=0.8)
        ax.set(xlabel=f"HCP FC, {group} group", ylabel=f"surrogate correlation ({split})",
               title=f"{split} split\n({len(getattr(data, split))} time points)")
    style.readable(fig)
    return pd.DataFrame({g: {s: float(np.abs(emp[s] - fcs[g])[iu].mean()) for s in emp}
                         for g in fcs}).rename_axis("split")


def plot_curves(history: pd.DataFrame, baseline: dict, train_mask: float):
    """Mean MSE over seeds per step and PE: training split at ``train_mask``, test split at the
    test mask, each with the linear predictor's MSE (``baseline``: ``"split@ratio"`` -> MSE)."""
    import matplotlib.pyplot as plt

    from lstpe.brain.analysis import curves

    fig, axes = plt.subplots(1, 2, figsize=style.figsize(1.0, 4.4), layout="constrained")
    for ax, (split, ratio) in zip(axes, [("train", train_mask), ("test", TEST_MASK)],
                                  strict=True):
        curves(history, split, ratio, train_mask).plot(ax=ax, marker=".", lw=1)
        ax.axhline(baseline[f"{split}@{ratio:g}"], color="k", ls="--", lw=1,
                   label="linear baseline")
        ax.set(xlabel="training step", ylabel="MSE on masked regions",
               title=f"{split} split, {ratio:.0%} masked\n(trained at {train_mask:.0%})")
        ax.get_legend().remove()
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=4,
               fontsize=9)
    return style.readable(fig)


def plot_mse_by_mask(history: pd.DataFrame, masks: Sequence[float]):
    """Test MSE per PE (at the test mask) for each training mask ratio, one panel each."""
    import matplotlib.pyplot as plt

    from lstpe.brain.analysis import mse_summary

    fig, axes = plt.subplots(1, len(masks), figsize=style.figsize(1.0, 3.8), sharey=True,
                             squeeze=False, layout="constrained")
    for ax, m in zip(axes[0], masks, strict=True):
        s = mse_summary(history, m)
        ax.bar(s["pe"], s["test_mean"], yerr=s["test_std"].fillna(0))
        ax.set_ylim(0.9 * s["test_mean"].min(), None)
        ax.set_title(f"trained at {m:.0%}, tested at {TEST_MASK:.0%}")
        ax.tick_params(axis="x", rotation=90)
    axes[0][0].set_ylabel("test MSE")
    return style.readable(fig)
