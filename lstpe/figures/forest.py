"""The forest plot of the evidence tables (:mod:`lstpe.evidence.tables`): every cell, our
seeds and mean with its CI beside the authors' logs at our epoch and the paper at 4000 epochs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lstpe.evidence.tables import CHANCE_LINE, Reference

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_forest"]


def plot_forest(evidence: pd.DataFrame, level: float = 0.95) -> Figure:
    """Every cell of ``evidence`` (:func:`lstpe.evidence.tables.stack_claims`; a cell in
    several claims once):
    our seeds (dots) and mean with its CI, the authors' mean at our epoch with the CI of
    their mean, the paper's at 4000 with its CI, and the row's verdict at the right. Sized
    for a 700 px column (7 in at 100 dpi), text 9 pt or more."""
    import matplotlib.pyplot as plt

    ev = evidence[evidence.get("kind", pd.Series("cell", index=evidence.index)) == "cell"]
    ev = ev.drop_duplicates("cell")
    if ev.empty:
        raise ValueError("no cells to plot")
    fig, ax = plt.subplots(figsize=(7.0, 1.4 + 0.42 * len(ev)))
    y = np.arange(len(ev))[::-1].astype(float)
    for yi, r in zip(y, ev.itertuples(index=False), strict=True):
        pts = [float(v) for v in str(r.values).split()] if r.n else []
        ax.plot(pts, [yi] * len(pts), "o", ms=4, mfc="none", mec="0.5", zorder=2)
        if r.n:
            lo, hi = (r.ci_low, r.ci_high) if r.n > 1 else (r.mean, r.mean)
            ax.errorbar(r.mean, yi, xerr=[[r.mean - lo], [hi - r.mean]], fmt="o", color="k",
                        ms=6, capsize=3, zorder=3)
        for dy, (m, s, n, c, mk) in ((-0.27, (r.authors_mean, r.authors_sd, r.authors_n,
                                               "tab:orange", "s")),
                                     (0.27, (r.paper_mean, r.paper_sd, 15, "tab:blue", "D"))):
            if not math.isnan(m):
                lo, hi = Reference(m, s, int(n), "").ci(level)
                ax.errorbar(m, yi + dy, xerr=[[m - lo], [hi - m]], fmt=mk, color=c, ms=5,
                            capsize=2)
        ax.text(1.02, yi, r.verdict, transform=ax.get_yaxis_transform(), va="center",
                fontsize=9)
    ax.axvline(CHANCE_LINE, color="0.6", ls=":", lw=1)
    ax.text(1.02, 1.0, "ours vs ref.", transform=ax.transAxes, va="bottom", fontsize=9)
    ax.set_yticks(y, [f"{c} (n={int(n)})" for c, n in zip(ev["cell"], ev["n"], strict=True)],
                  fontsize=10)
    ax.set_xlim(-0.04, 1.04)  # room for a cap at 0 or 1: an interval clipped to [0, 1]
    ax.set_ylim(-0.7, len(ev) - 0.3)
    ax.set_xlabel("validation accuracy (dotted: chance)", fontsize=10)
    ax.tick_params(axis="x", labelsize=9)
    epochs = sorted({r for r in ev["ref"] if str(r).startswith("authors@")})
    handles = [
        plt.Line2D([], [], marker="o", color="k", label=f"ours, mean and {level:.0%} CI"),
        plt.Line2D([], [], marker="o", ls="", mfc="none", mec="0.5", label="our seeds"),
        plt.Line2D([], [], marker="s", color="tab:orange",
                   label=f"authors' logs, {', '.join(e.split('@')[1] for e in epochs) or '-'}"
                         " epochs"),
        plt.Line2D([], [], marker="D", color="tab:blue", label="paper, 4000 epochs"),
    ]
    ax.legend(handles=handles, fontsize=9, ncol=2, loc="lower center",
              bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.tight_layout()
    return fig
