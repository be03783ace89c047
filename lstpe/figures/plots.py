"""Plotting helpers for the analysis tables (each returns the matplotlib Axes or Figure).

They draw tables produced by the other analysis modules and compute nothing new:

* :func:`plot_attention_grid`   attention maps, models x layers (Fig. 3-style)
* :func:`plot_similarity_matrix` PE x PE similarity heatmap (Fig. 3B)
* :func:`plot_vs_paper`         our mean and CI, marked by verdict, beside the paper's mean +- SD
* :func:`plot_sigma_curve`      a summary against sigma with its CI band (Fig. 2, 4, 10)
* :func:`plot_noise_curves`     accuracy against noise level per PE (Fig. 5)
* :func:`plot_noise_heatmap`    accuracy per PE x noise level, annotated (Fig. 5B-C)
* :func:`plot_pe_kernels`       position x position cosine of PEs, one colour bar per panel
* :func:`plot_human_scatter`    per-puzzle model vs human accuracy (Fig. 6D)
* :func:`plot_condition_curves` accuracy per relational complexity, models and humans
* :func:`plot_against_authors`  our seeds beside the authors' epoch-200 logs and the paper
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from lstpe.stats.seed_stats import MIN_SEEDS_FOR_CI

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "plot_attention_grid", "plot_similarity_matrix", "plot_vs_paper", "plot_sigma_curve",
    "plot_noise_curves", "plot_noise_heatmap", "plot_human_scatter", "plot_condition_curves",
    "plot_pe_kernels", "legend_outside", "plot_against_authors", "kernel_range", "draw_kernel",
]


def legend_outside(ax: Axes, **kw: Any) -> Any:
    """The Axes' legend to the right of it, off the data (keyword arguments go to
    ``ax.legend``)."""
    opts = {"fontsize": 9, "loc": "upper left", "bbox_to_anchor": (1.02, 1.0),
            "borderaxespad": 0.0, **kw}
    return ax.legend(**opts)


def _ax(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots()[1]


def _need(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    if df.empty:
        raise ValueError(f"{what}: the table is empty")
    missing = [c for c in cols if c not in df]
    if missing:
        raise ValueError(f"{what}: table lacks columns {missing}; has {', '.join(df.columns)}")


def plot_attention_grid(maps: Any, titles: Sequence[str] | None = None,
                        vmax: float | None = None, scale: str = "row") -> Figure:
    """Attention maps in a grid: one row per model, one column per layer.

    Args:
        maps: (L, n, n) for one model or (P, L, n, n) for P models (e.g. maps averaged over
            the validation puzzles: ``attention_maps(artifacts)[m].mean(0)``).
        titles: one row title per model.
        vmax: colour scale maximum of a shared scale (default: the largest weight).
        scale: ``row`` (default): each model's row on its own scale, 0 to that model's
            largest weight, with a colour bar per row (models' ranges differ a lot: a shared
            scale leaves the diffuse ones uniformly dark); ``shared``: one scale, one colour
            bar (also when ``vmax`` is given).
    Returns:
        The Figure (axes ``fig.axes`` row-major, then the colour bars: one per row, or one).
    """
    import matplotlib.pyplot as plt

    a = np.asarray(maps, dtype=np.float64)
    if a.ndim == 3:
        a = a[None]
    if a.ndim != 4 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"maps must be (L, n, n) or (P, L, n, n), got shape {a.shape}")
    P, L = a.shape[:2]
    if titles is not None and len(titles) != P:
        raise ValueError(f"got {len(titles)} titles for {P} models")
    n = a.shape[-1]
    from lstpe.rendering import style

    if scale not in ("row", "shared"):
        raise ValueError(f"scale must be 'row' or 'shared', got {scale!r}")
    shared = scale == "shared" or vmax is not None
    fig, axes = plt.subplots(P, L, figsize=(style.WIDTH, (style.WIDTH - 1.4) / L * P + 0.5),
                             squeeze=False, layout="constrained")
    vmax = float(a.max()) if vmax is None else vmax
    im = None
    ticks = [0, n - 1] if n > 1 else [0]
    for i in range(P):
        for j in range(L):
            ax = axes[i, j]
            top = vmax if shared else float(a[i].max())
            im = ax.imshow(a[i, j], vmin=0, vmax=top, cmap="viridis")
            ax.set_xticks(ticks)
            ax.set_yticks(ticks)
            ax.tick_params(labelsize=9)
            ax.grid(False)
            if i == 0:
                ax.set_title(f"block {j + 1}")
            if i == P - 1:
                ax.set_xlabel("key position", fontsize=9)
            if j == 0:
                name = titles[i] if titles is not None else f"model {i}"
                ax.set_ylabel(f"{name}\nquery position", fontsize=9)
        if not shared:
            fig.colorbar(im, ax=axes[i], shrink=0.9, label="attention weight")
    if shared:
        fig.colorbar(im, ax=axes, shrink=0.8, label="attention weight")
    return style.readable(fig)


def _annotate_cells(ax: Axes, v: np.ndarray, mid: float) -> None:
    """Write each cell's value (2 decimals) on a heatmap ``v`` of shape ``(rows, cols)``: black
    on cells brighter than ``mid`` in viridis, white on darker ones."""
    for i in range(v.shape[0]):
        for j in range(v.shape[1]):
            ax.text(j, i, f"{v[i, j]:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if v[i, j] > mid else "white")


def plot_similarity_matrix(matrix: pd.DataFrame, ax: Axes | None = None,
                           annotate: bool = True, vmin: float | None = None,
                           vmax: float | None = None, label: str = "cosine") -> Axes:
    """Heatmap of a square PE x PE matrix (:func:`lstpe.analysis.attention.similarity_matrix`)."""
    if matrix.empty or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"need a non-empty square matrix, got shape {matrix.shape}")
    ax = _ax(ax)
    v = matrix.to_numpy(dtype=float)
    im = ax.imshow(v, vmin=vmin, vmax=vmax, cmap="viridis")
    ax.set_xticks(range(v.shape[1]), [str(c) for c in matrix.columns], rotation=60, ha="right")
    ax.set_yticks(range(v.shape[0]), [str(i) for i in matrix.index])
    ax.grid(False)
    if annotate:
        _annotate_cells(ax, v, float(np.nanmean(v)))
    ax.figure.colorbar(im, ax=ax, label=label)
    return ax


VERDICT_STYLE: dict[str, dict[str, Any]] = {
    "equivalent": {"color": "tab:green", "marker": "o"},
    "differs": {"color": "tab:red", "marker": "X"},
    "inconclusive": {"color": "tab:orange", "marker": "D"},
}
"""Marker and colour of our points per verdict of
:func:`lstpe.evidence.paper_compare.compare_to_paper`; any other verdict (``n=1``: one
model) is drawn as an open grey circle without interval."""

_TOO_FEW_STYLE: dict[str, Any] = {"color": "0.55", "marker": "o", "mfc": "none"}


def plot_vs_paper(comparison: pd.DataFrame, ax: Axes | None = None, x: str = "pe",
                  ylabel: str = "validation accuracy", logx: bool = False,
                  chance: float | None = None,
                  reference: tuple[float, str] | None = None) -> Axes:
    """Our mean and CI, coloured and shaped by verdict, beside the paper's mean +- SD.

    One errorbar series per verdict present (in the order of :data:`VERDICT_STYLE`, then the
    rest), labelled ``ours: <verdict>``; then the paper's mean +- SD over 15 seeds as open grey
    squares. Points without an interval (one model) have no error bar. The legend sits below
    the axes (and their tick labels).

    Args:
        comparison: output of :func:`lstpe.evidence.paper_compare.compare_to_paper` (needs ``x``,
            ``mean``, ``ci_low``, ``ci_high``, ``paper_mean``, ``paper_sd``, ``verdict``).
        x: ``pe`` (categorical) or ``sigma`` (numeric).
        ylabel: label of the metric axis.
        logx: a log x axis (numeric ``x`` only; ours and the paper's points offset by a
            factor instead of a difference).
        chance: draw this level as a dotted line, labelled ``chance`` in the legend.
        reference: ``(value, label)``: a dashed line at ``value`` named ``label`` inside the
            axes, at its right end (e.g. chapter 6's own 2d-fixed).
    Returns:
        The Axes (``ax.containers``: one per verdict present, then the paper's).
    """
    _need(comparison, [x, "mean", "ci_low", "ci_high", "paper_mean", "paper_sd", "verdict"],
          "plot_vs_paper")
    ax = _ax(ax)
    c = comparison.reset_index(drop=True)
    if x == "pe":
        pos = np.arange(len(c), dtype=float)
        off = 0.15
        ax.set_xticks(pos, c["pe"].astype(str), rotation=45, ha="right")
        ax.set_xlabel("positional encoding")
    else:
        pos = c[x].to_numpy(float)
        off = 0.15 * (np.min(np.diff(np.sort(pos))) if len(pos) > 1 else 1.0)
        ax.set_xlabel("σ (initial PE scale)" if x == "sigma" else x)
    if logx:
        if x == "pe" or not (pos > 0).all():
            raise ValueError("logx needs a numeric, positive x")
        ax.set_xscale("log")
        ax.set_xticks(pos, [f"{v:g}" for v in pos])
        ax.minorticks_off()
    shift = (lambda p, k: p * 1.06 ** k) if logx else (lambda p, k: p + k * off)
    verdicts = [v for v in VERDICT_STYLE if (c["verdict"] == v).any()]
    verdicts += [v for v in dict.fromkeys(c["verdict"]) if v not in VERDICT_STYLE]
    for v in verdicts:
        sel = (c["verdict"] == v).to_numpy()
        d = c[sel]
        err = np.vstack([d["mean"] - d["ci_low"], d["ci_high"] - d["mean"]])
        has_ci = bool(np.isfinite(err).any())
        style = VERDICT_STYLE.get(v, _TOO_FEW_STYLE)
        ax.errorbar(shift(pos[sel], -1), d["mean"], yerr=np.nan_to_num(err) if has_ci else None,
                    fmt=style["marker"], color=style["color"],
                    mfc=style.get("mfc", style["color"]), capsize=3, ms=6,
                    label=f"ours (mean{', 95% CI' if has_ci else ''}): {v}")
    ax.errorbar(shift(pos, 1), c["paper_mean"], yerr=c["paper_sd"], fmt="s", mfc="none",
                capsize=3, color="0.4", label="paper (mean ± SD, 15 seeds)")
    if chance is not None:
        ax.axhline(chance, color="0.5", ls=":", lw=1, label="chance")
    if reference is not None:  # named inside the axes: a name past the frame widens the PNG
        ax.axhline(reference[0], color="C2", ls="--", lw=1)
        lo, hi = ax.get_ylim()
        up = reference[0] < (lo + hi) / 2
        ax.annotate(reference[1], (1, reference[0]), xycoords=("axes fraction", "data"),
                    xytext=(-3, 2 if up else -2), textcoords="offset points", ha="right",
                    va="bottom" if up else "top", color="C2", fontsize=9)
    from lstpe.rendering.style import legend_below

    ax.set_ylabel(ylabel)
    legend_below(ax)  # below the tick labels: a label at the right edge stays clear
    return ax


def plot_sigma_curve(summary: pd.DataFrame, ax: Axes | None = None, label: str | None = None,
                     ylabel: str | None = None, color: str | None = None,
                     min_seeds: int = MIN_SEEDS_FOR_CI, **line_kw: Any) -> Axes:
    """A per-sigma summary (:func:`lstpe.stats.seed_stats.summarize` with ``by="sigma"``): the
    mean as a line and the confidence interval as a band, drawn only where every sigma has at
    least ``min_seeds`` seeds (default 2: one model has no interval).

    ``ylabel`` labels the y axis; None leaves the axis label as it is (so a second curve drawn
    on the same Axes keeps the first one's label). ``line_kw`` go to ``ax.plot`` (``ls``...).
    The legend, when ``label`` is given, sits outside the axes, to the right."""
    _need(summary, ["sigma", "mean", "ci_low", "ci_high"], "plot_sigma_curve")
    ax = _ax(ax)
    s = summary.dropna(subset=["sigma"]).sort_values("sigma")
    kw = {"marker": "o", "ms": 3, **line_kw}
    (line,) = ax.plot(s["sigma"], s["mean"], label=label, color=color, **kw)
    if "n" not in s or s["n"].min() >= min_seeds:
        ax.fill_between(s["sigma"], s["ci_low"], s["ci_high"], alpha=0.25,
                        color=line.get_color(), lw=0)
    ax.set_xlabel("σ (PE init std)")
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if label:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return ax


def plot_noise_curves(robustness: pd.DataFrame, ax: Axes | None = None,
                      condition: str = "all", pes: Sequence[str] | None = None) -> Axes:
    """Mean accuracy (over seeds, +- SEM) against noise std, one line per PE
    (:func:`lstpe.training.noise.noise_robustness`)."""
    _need(robustness, ["noise", "pe", "condition", "accuracy"], "plot_noise_curves")
    r = robustness[robustness["condition"].astype(str) == condition]
    if r.empty:
        raise ValueError(f"no rows for condition {condition!r}; present: "
                         f"{sorted(set(robustness['condition'].astype(str)))}")
    ax = _ax(ax)
    order = list(pes) if pes is not None else list(dict.fromkeys(r["pe"]))
    for pe in order:
        g = r[r["pe"] == pe]
        if g.empty:
            raise ValueError(f"no rows for PE {pe!r}")
        s = g.groupby("noise")["accuracy"].agg(["mean", "sem"]).reset_index()
        ax.errorbar(s["noise"], s["mean"], yerr=s["sem"].fillna(0), marker="o", ms=3,
                    capsize=2, label=pe)
    ax.set_xlabel("embedding noise std")
    ax.set_ylabel("validation accuracy")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return ax


def plot_noise_heatmap(robustness: pd.DataFrame, ax: Axes | None = None,
                       condition: str = "all", pes: Sequence[str] | None = None,
                       label: str = "validation accuracy (mean over seeds)") -> Axes:
    """Mean accuracy over seeds per PE (rows) and noise std (columns), annotated, with a
    colour bar on the range of the values shown (so that small differences stay visible).
    Without ``ax``, the figure is page-wide (7 in) and as tall as its rows need.

    Returns:
        The Axes (``ax.images[0].get_array()`` is the PE x noise table).
    Raises:
        ValueError: missing columns, no rows for the condition, or a PE without rows.
    """
    _need(robustness, ["noise", "pe", "condition", "accuracy"], "plot_noise_heatmap")
    r = robustness[robustness["condition"].astype(str) == condition]
    if r.empty:
        raise ValueError(f"no rows for condition {condition!r}; present: "
                         f"{sorted(set(robustness['condition'].astype(str)))}")
    order = list(pes) if pes is not None else list(dict.fromkeys(r["pe"]))
    t = r.pivot_table(index="pe", columns="noise", values="accuracy", aggfunc="mean")
    missing = [p for p in order if p not in t.index]
    if missing:
        raise ValueError(f"no rows for PE(s) {missing}")
    t = t.loc[order]
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.subplots(figsize=(7.0, 1.3 + 0.36 * len(t)))[1]
    v = t.to_numpy(float)
    lo, hi = float(np.nanmin(v)), float(np.nanmax(v))
    if hi - lo < 1e-9:
        lo, hi = lo - 0.01, hi + 0.01
    im = ax.imshow(v, vmin=lo, vmax=hi, cmap="viridis", aspect="auto")
    ax.set_xticks(range(v.shape[1]), [f"{c:g}" for c in t.columns])
    ax.set_yticks(range(v.shape[0]), [str(i) for i in t.index])
    ax.set_xlabel("embedding noise std")
    ax.set_ylabel("positional encoding")
    ax.grid(False)
    _annotate_cells(ax, v, (lo + hi) / 2)
    ax.figure.colorbar(im, ax=ax, label=label)
    return ax


def kernel_range(v: np.ndarray) -> tuple[float, float]:
    """Colour range of a position x position kernel (n, n): its off-diagonal values (the
    diagonal of a cosine is 1 and would hide the rest), widened where they are all equal."""
    off = v[~np.eye(v.shape[0], dtype=bool)] if v.shape[0] > 1 else v.ravel()
    lo, hi = float(off.min()), float(off.max())
    return (lo, hi) if hi - lo > 1e-9 else (lo - 0.01, hi + 0.01)


def draw_kernel(ax: Axes, v: np.ndarray, vrange: tuple[float, float] | None = None,
                title: str | None = None, fontsize: float = 9, xlabel: bool = True,
                ylabel: bool = True) -> Any:
    """A kernel (n, n) on ``ax`` with position ticks and its own colour bar (returned), on
    ``vrange`` or :func:`kernel_range`; every text at ``fontsize`` (at least
    :data:`lstpe.rendering.style.MIN_PT`). ``xlabel`` / ``ylabel``: name the axis
    ``position`` (a grid of panels names only its outer ones)."""
    from matplotlib.ticker import MaxNLocator

    from lstpe.rendering.style import MIN_PT

    fs = max(float(fontsize), MIN_PT)
    lo, hi = vrange or kernel_range(v)
    im = ax.imshow(v, vmin=lo, vmax=hi, cmap="viridis")
    if title:
        ax.set_title(title, fontsize=fs)
    m = v.shape[0]
    ax.set_xticks([0, m - 1])
    ax.set_yticks([0, m - 1])
    ax.tick_params(labelsize=fs)
    if xlabel:
        ax.set_xlabel("position", fontsize=fs, labelpad=1)
    if ylabel:
        ax.set_ylabel("position", fontsize=fs, labelpad=1)
    ax.grid(False)
    cb = ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    cb.ax.tick_params(labelsize=fs)
    cb.ax.yaxis.set_major_locator(MaxNLocator(nbins=3))
    return cb


def plot_pe_kernels(kernels: dict[str, Any], ncols: int = 3, share: bool = False,
                    suptitle: str | None = None) -> Figure:
    """Position x position matrices (e.g. :func:`lstpe.analysis.kernels.pe_kernels`), one panel
    each, in a figure as wide as the page's column with every text at 9 pt or more there
    (:mod:`lstpe.rendering.style`); only the outer panels name their axes.

    Every panel gets its own colour bar, on the range of its off-diagonal values (the diagonal
    of a cosine kernel is 1 and would hide the rest), unless ``share``: then one range for all.

    Returns:
        The Figure (panels first in ``fig.axes``, then their colour bars).
    Raises:
        ValueError: no kernels, or a kernel that is not square.
    """
    import matplotlib.pyplot as plt

    from lstpe.rendering import style

    if not kernels:
        raise ValueError("no kernels to plot")
    mats = {k: np.asarray(v, dtype=np.float64) for k, v in kernels.items()}
    for k, v in mats.items():
        if v.ndim != 2 or v.shape[0] != v.shape[1]:
            raise ValueError(f"kernel {k!r} is not square: shape {v.shape}")

    if share:
        rngs = [kernel_range(v) for v in mats.values()]
        shared = (min(r[0] for r in rngs), max(r[1] for r in rngs))
    n = len(mats)
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    side = min(2.2, (style.WIDTH - 0.3) / ncols - 0.75)  # a panel, its colour bar beside it
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                             figsize=(style.WIDTH, nrows * (side + 0.45) + 0.3 * bool(suptitle)))
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for k, (ax, (name, v)) in enumerate(zip(axes.flat[:n], mats.items(), strict=True)):
        r, c = divmod(k, ncols)
        cb = draw_kernel(ax, v, shared if share else None, title=name,
                         xlabel=k + ncols >= n, ylabel=c == 0)
        cb.set_label("cosine", fontsize=9, labelpad=1)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    return style.readable(fig)


def plot_human_scatter(puzzles: pd.DataFrame, humans: pd.DataFrame, pe: str,
                       ax: Axes | None = None) -> Axes:
    """Per-puzzle accuracy of one PE (mean over seeds) against humans (mean over
    participants), coloured by relational complexity (paper Fig. 6D); the legend above the axes.

    Args:
        puzzles: :func:`lstpe.analysis.humans.puzzle_accuracy` output.
        humans: :func:`lstpe.lst.human_accuracy` output.
    """
    _need(puzzles, ["pe", "id", "accuracy"], "plot_human_scatter")
    _need(humans, ["id", "accuracy", "vectors"], "plot_human_scatter")
    g = puzzles[puzzles["pe"] == pe]
    if g.empty:
        raise ValueError(f"no rows for PE {pe!r}; PEs: {', '.join(dict.fromkeys(puzzles['pe']))}")
    m = g[["id", "accuracy"]].merge(humans[["id", "accuracy", "vectors"]], on="id",
                                    suffixes=("_model", "_human"))
    ax = _ax(ax)
    for v, d in m.groupby("vectors"):
        ax.scatter(d["accuracy_human"], d["accuracy_model"], s=12, alpha=0.7,
                   label=f"{v}-vector")
    ax.plot([0, 1], [0, 1], color="gray", lw=0.8, ls="--")
    ax.set_xlabel("human accuracy (per puzzle)")
    ax.set_ylabel(f"{pe} accuracy (per puzzle)")
    ax.set(xlim=(-0.03, 1.03), ylim=(-0.03, 1.03))
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=3,
              borderaxespad=0.0)
    return ax


def plot_condition_curves(table: pd.DataFrame, ax: Axes | None = None,
                          pes: Sequence[str] | None = None) -> Axes:
    """Accuracy against relational complexity for PEs (+- SD over seeds) and humans
    (:func:`lstpe.analysis.humans.condition_accuracy`)."""
    _need(table, ["pe", "vectors", "accuracy", "sd"], "plot_condition_curves")
    ax = _ax(ax)
    order = list(pes) if pes is not None else list(dict.fromkeys(table["pe"]))
    if "human" in set(table["pe"]) and "human" not in order:
        order.append("human")
    for pe in order:
        g = table[table["pe"] == pe].sort_values("vectors")
        if g.empty:
            raise ValueError(f"no rows for PE {pe!r}")
        kw = {"color": "black", "ls": "--"} if pe == "human" else {}
        ax.errorbar(g["vectors"], g["accuracy"], yerr=g["sd"].fillna(0), marker="o", ms=3,
                    capsize=2, label=pe, **kw)
    ax.set_xticks([1, 2, 3])
    ax.set_xlabel("relational complexity (vectors)")
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return ax


def plot_against_authors(final: pd.DataFrame, like: pd.DataFrame, epoch: int = 200,
                         ax: Axes | None = None, chance: float | None = 0.25) -> Axes:
    """Each of our models (dots, one per seed) beside the authors' mean ± SD at ``epoch``
    (bars) and the paper's 4000-epoch mean ± SD (open squares), one column per PE.

    Args:
        final: one row per model (``pe``, ``seed``, ``accuracy``).
        like: :func:`lstpe.references.authors_logs.compare_with_authors` of ``final``.
    """
    _need(final, ("pe", "seed", "accuracy"), "plot_against_authors")
    _need(like, ("pe", "authors_mean", "authors_sd", "paper_mean", "paper_sd"),
          "plot_against_authors")
    ax = _ax(ax)
    pes = list(like["pe"])
    x = np.arange(len(pes))
    for i, pe in enumerate(pes):
        acc = final.loc[final["pe"] == pe, "accuracy"].to_numpy()
        jitter = np.linspace(-0.08, 0.08, len(acc)) if len(acc) > 1 else np.zeros(1)
        ax.plot(i + jitter, acc, "o", color="C0", ms=6, zorder=3,
                label="ours, one dot per seed" if i == 0 else None)
    ax.errorbar(x - 0.25, like["authors_mean"], yerr=like["authors_sd"], fmt="D", color="C1",
                capsize=3, label=f"authors' logs at epoch {epoch} (mean ± SD)")
    ax.errorbar(x + 0.25, like["paper_mean"], yerr=like["paper_sd"], fmt="s", mfc="white",
                color="0.4", capsize=3, label="paper, epoch 4000 (mean ± SD)")
    if chance is not None:
        ax.axhline(chance, color="0.6", lw=1, ls=":")
        ax.text(len(pes) - 0.5, chance, "chance", va="bottom", ha="right", fontsize=8,
                color="0.4")
    ax.set_xticks(x, pes, rotation=30, ha="right")
    ax.set(ylabel="validation accuracy", ylim=(0, 1.05))
    legend_outside(ax)
    return ax
