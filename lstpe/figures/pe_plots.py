"""Figures of :mod:`lstpe.analysis.pe_structure`: the learned PEs on the 4 x 4 grid, and their
structure scores against sigma or epoch (each returns a Figure; sized for a ~700 px column at
100 dpi, no text under 9 pt).

* :func:`pe_pairs`            one block's (init, final) PE per label at one seed
* :func:`plot_pe_grid`        init, dPE and final of a few PEs: the cosine of one cell to every
  cell, drawn on the grid (as chapter 3 draws the 2-D sinusoid), a colour bar per panel
* :func:`plot_structure`      grid score and row-column score of init, dPE and final against
  sigma (or epoch), one point per seed, with the 95% band of Gaussian matrices
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from lstpe.analysis.artifacts import as_array, model_table, require
from lstpe.analysis.pe_structure import centred_kernel, gaussian_null, grid_score

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PARTS", "pe_pairs", "plot_pe_grid", "plot_structure"]

PARTS: dict[str, str] = {"init": "init", "dpe": "dPE (learned)", "final": "final"}
"""The three parts of a PE, as the figures name them."""
_SHORT = {"init": "init", "dpe": "dPE", "final": "final"}
"""The parts as the grid's panel titles name them (short: a phone puts the row's name above)."""
_COLOURS = {"init": "0.55", "dpe": "C3", "final": "C0"}
_FS = 9  # smallest text, in points


def _cell_name(cell: int, side: int) -> str:
    return f"r{cell // side} c{cell % side}"


def pe_pairs(artifacts: Mapping[str, Any], pes: Sequence[str], seed: int | None = None,
             block: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(init, final) PE of one block for each PE label at one seed, for the figures.

    Args:
        artifacts: with ``labels``, ``seeds``, ``pe_init``, ``pe_final`` (M, L, n, d).
        seed: default the first model's seed.
    Returns:
        ``{label: (init (n, d), final (n, d))}`` in the order of ``pes``.
    Raises:
        ValueError: no model of a label at that seed (naming those present).
    """
    models = model_table(artifacts)
    seed = int(models["seed"].iloc[0]) if seed is None else int(seed)
    p0, p1 = (require(artifacts, k) for k in ("pe_init", "pe_final"))
    out = {}
    for label in pes:
        hit = models[(models["pe"] == label) & (models["seed"] == seed)]
        if hit.empty:
            have = models[models["seed"] == seed]["pe"].tolist()
            raise ValueError(f"no model {label!r} at seed {seed}; present: {have}")
        m = int(hit["model"].iloc[0])
        out[label] = (as_array(p0[m, block], "pe_init", 2), as_array(p1[m, block], "pe_final", 2))
    return out


def plot_pe_grid(pairs: Mapping[str, tuple[Any, Any]], cells: Sequence[int] = (5,),
                 width: float = 7.0) -> Figure:
    """For each PE and cell: the cosine of that cell's centred PE row to every cell, on the
    grid, for init, dPE and final side by side.

    Args:
        pairs: ``{label: (init (n, d), final (n, d))}``
            (:func:`pe_pairs`), e.g. a small and a large sigma.
        cells: the reference cells (row-major; 0 a corner, 5, the default, an inner cell of
            the 4 x 4 grid).
        width: figure width in inches (height follows).
    Returns:
        A Figure of ``len(pairs) * len(cells)`` rows and 3 columns; each panel marks its cell
        with a star (its own cosine, 1, left out of the colour range), has its own symmetric
        colour range and bar, and gives the matrix's grid score in a one-line title (the
        row's name, the PE and, for several cells, the cell, is its first panel's y label:
        the phone's layout puts it over every panel, :mod:`lstpe.rendering.phone`).
    """
    import matplotlib.pyplot as plt

    if not pairs:
        raise ValueError("no PEs to draw")
    rows = [(lab, c) for lab in pairs for c in cells]
    fig, axes = plt.subplots(len(rows), 3, figsize=(width, 1.85 * len(rows) + 0.4),
                             layout="constrained", squeeze=False)
    for i, (label, cell) in enumerate(rows):
        p0, p1 = (np.asarray(x, dtype=float) for x in pairs[label])
        n = p0.shape[0]
        side = int(round(np.sqrt(n)))
        if side * side != n or not 0 <= cell < n:
            raise ValueError(f"cell {cell} is not on a square grid of {n} positions")
        for j, (part, m) in enumerate(zip(PARTS, (p0, p1 - p0, p1), strict=True)):
            ax = axes[i, j]
            k = centred_kernel(m)[cell].copy()
            k[cell] = np.nan
            lim = max(float(np.nanmax(np.abs(k))), 1e-6) if np.isfinite(k).any() else 1.0
            im = ax.imshow(k.reshape(side, side), cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.plot(cell % side, cell // side, "*", color="k", ms=10)
            cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
            cb.ax.tick_params(labelsize=_FS)
            cb.locator = plt.MaxNLocator(3)
            cb.update_ticks()
            g = float(grid_score(m))
            name = _SHORT[part]
            ax.set_title(f"{name}, grid {g:.2f}" if np.isfinite(g) else name, fontsize=_FS)
            ax.set_xticks(range(side))
            ax.set_yticks(range(side))
            ax.tick_params(labelsize=_FS)
            ax.grid(False)
            if j == 0:
                where = f", {_cell_name(cell, side)}" if len(cells) > 1 else ""
                ax.set_ylabel(f"{label}{where}\nrow", fontsize=_FS)
            if i == len(rows) - 1:
                ax.set_xlabel("column", fontsize=_FS)
    fig.suptitle("cosine of the starred cell's PE to every cell", fontsize=_FS + 1)
    return fig


@functools.lru_cache(maxsize=8)
def _null_band(kind: str, n_mean: int, draws: int = 500) -> tuple[float, float]:
    """Central 95% of the mean score of ``n_mean`` Gaussian (16, 160) matrices."""
    null = gaussian_null(draws=draws * n_mean, kind=kind).reshape(draws, n_mean).mean(1)
    lo, hi = np.quantile(null, [0.025, 0.975])
    return float(lo), float(hi)


_SCORE_LABELS = {"score": "grid score", "rowcol": "row-column score"}


def plot_structure(table: pd.DataFrame, x: str = "sigma", block: int | None = 0,
                   scores: Sequence[str] = ("score", "rowcol"), parts: Sequence[str] = tuple(PARTS),
                   alpha: float = 0.05, width: float = 7.0) -> Figure:
    """Structure scores of init, dPE and final against sigma or epoch.

    Args:
        table: :func:`lstpe.analysis.pe_structure.stored_structure` /
            :func:`~lstpe.analysis.pe_structure.snapshot_structure` rows (columns ``x``,
            ``block``, ``<score>_<part>`` and ``p_<part>`` / ``p_rowcol_<part>``); rows with
            NaN ``x`` (non-learn PEs against sigma) are left out.
        x: ``sigma`` (log axis) or ``epoch`` (log axis).
        block: one block, or None for the mean over blocks (the band is then that of a mean
            of as many Gaussian matrices, and every marker is open: a mean has no p-value).
        scores: ``score`` (grid score) and/or ``rowcol``.
        alpha: filled markers where the permutation p-value is below it, open elsewhere.
    Returns:
        One panel per score: a point per row (seed), the mean per ``x`` joined by a line, and
        the central 95% of the score on Gaussian (16, 160) matrices (grey band).
    """
    import matplotlib.pyplot as plt

    t = table.dropna(subset=[x])
    if block is not None:
        t = t[t["block"] == block]
    if t.empty:
        raise ValueError(f"no rows with {x} and block {block}")
    num = [c for c in t.columns if c.startswith(("score_", "rowcol_", "p_"))]
    n_mean = 1
    if block is None:
        n_mean = int(t["block"].nunique())
        keys = [c for c in ("run", "pe", "seed", x) if c in t]
        t = t.groupby(keys, as_index=False)[num].mean()
        t[[c for c in num if c.startswith("p_")]] = np.nan
    fig, axes = plt.subplots(1, len(scores), figsize=(width, 3.3), layout="constrained",
                             squeeze=False)
    for ax, score in zip(axes[0], scores, strict=True):
        band = _null_band("grid" if score == "score" else "rowcol", n_mean)
        ax.axhspan(*band, color="0.85", label="Gaussian matrices, 95%" if n_mean == 1
                   else f"mean of {n_mean} Gaussian matrices, 95%")
        for part in parts:
            col, pcol = f"{score}_{part}", (f"p_{part}" if score == "score"
                                            else f"p_rowcol_{part}")
            sig = t[pcol] < alpha
            c = _COLOURS[part]
            ax.scatter(t.loc[sig, x], t.loc[sig, col], color=c, s=16, zorder=3)
            ax.scatter(t.loc[~sig, x], t.loc[~sig, col], facecolors="none", edgecolors=c,
                       s=16, zorder=3)
            m = t.groupby(x)[col].mean()
            ax.plot(m.index, m.values, "-", color=c, label=PARTS[part])
        ax.set_xscale("log")
        ax.set_xlabel(x, fontsize=_FS)
        ax.set_ylabel(_SCORE_LABELS.get(score, score), fontsize=_FS)
        ax.tick_params(labelsize=_FS)
        which = f"block {block}" if block is not None else "mean over blocks"
        ax.set_title(f"{_SCORE_LABELS.get(score, score)}, {which}", fontsize=_FS + 1)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    title = f"filled: permutation p < {alpha:g}" if block is not None else None
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=_FS, title=title,
               title_fontsize=_FS)
    return fig

