r"""The lazy/rich toy of the learnable-PE chapter: one attention head, one learnable PE, a
synthetic task on the 4x4 grid, trained at two initial scales :math:`\sigma`.

**Task.** Each of the 16 cells of a 4x4 grid (row-major, as the LST's tokens) holds a random
vector :math:`x_i \in \mathbb R^k`; the target of cell :math:`i` is the mean of :math:`x_j`
over cell :math:`i` and its grid neighbours (Manhattan distance at most 1), a blur of the grid:
:math:`Y = K X` with :func:`blur_kernel` :math:`K`. Solving it means attending to one's grid
neighbours, and the only place the model can learn where they are is its PE.

**Model** (:class:`ToyModel`). :math:`h = x W_e + P`, one softmax attention head on
:math:`h` (query, key, value and output projections, no LayerNorm, no MLP); :math:`P` is
(16, d), drawn as the package draws a ``learn-σ`` PE
(:func:`lstpe.nn.encodings.additive_pe`), entries :math:`\mathcal N(0, \sigma^2)`.

**What is measured** (:func:`toy_table`): the learned part :math:`\Delta P = P_T - P_0`
against the initialisation (Frobenius norms), and the grid score of
:func:`lstpe.analysis.pe_structure.grid_score` (the correlation, over the 120 pairs of cells,
of the cosine of their centred PE rows with minus their grid distance) of :math:`P_0`,
:math:`\Delta P` and :math:`P_T`. With the defaults (800 Adam steps, seeds 0-3 tried),
:math:`\sigma = 0.02` gives a learned part about 22 times the init and a grid score of
:math:`P_T` of 0.72-0.75 (rich); :math:`\sigma = 2` a learned part under a tenth of the init,
and :math:`P_T` keeps about the grid score its random init had (lazy); both fit the task.
``tests/test_tutorial.py`` checks this at seed 0. Each run takes a few seconds on one CPU
core.

A high grid score does not mean that a cell's direct neighbours are coded most like it:
:func:`seen_from` tabulates the cosine of one cell's trained code with the others, by grid
distance. At seed 0, seen from cell (1, 1), the four neighbours sit near 0 and the cells two
steps away are the most alike; what falls with distance is the far side of the grid. The
task needs neighbours to *score* high under the query-key product, not to be coded alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from torch import nn

from lstpe.analysis import pe_structure as ps
from lstpe.nn import encodings as enc
from lstpe.rendering import style

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_CELLS = 16
"""Cells of the 4x4 grid."""
TOY_SIGMAS = (0.02, 2.0)
"""The two initial scales the chapter trains: small (rich) and large (lazy)."""


def blur_kernel() -> torch.Tensor:
    """(16, 16) averaging weights: row i is uniform over cell i and its grid neighbours."""
    near = torch.from_numpy(ps.grid_distance(_CELLS) <= 1).float()
    return near / near.sum(1, keepdim=True)


def grid_batch(batch: int, k: int, generator: torch.Generator) -> tuple[torch.Tensor,
                                                                        torch.Tensor]:
    """A minibatch of the task: x (batch, 16, k) standard normal, y = K x (batch, 16, k)."""
    x = torch.randn(batch, _CELLS, k, generator=generator)
    return x, blur_kernel() @ x


class ToyModel(nn.Module):
    """One attention head over embedding + learnable PE; reads out every cell."""

    def __init__(self, sigma: float, d: int = 32, k: int = 4,
                 generator: torch.Generator | None = None) -> None:
        super().__init__()
        pe = enc.additive_pe(f"learn-{sigma}", 1, _CELLS, d, generator=generator)[0]  # (16, d)
        self.P = nn.Parameter(pe)
        self.embed, self.out = nn.Linear(k, d), nn.Linear(d, k)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 16, k) -> (B, 16, k), the prediction of the blurred grid."""
        h = self.embed(x) + self.P
        scores = self.q(h) @ self.k(h).transpose(1, 2) / h.shape[-1] ** 0.5  # (B, 16, 16)
        return self.out(torch.softmax(scores, dim=-1) @ self.v(h))


@dataclass
class ToyRun:
    """One trained toy: its sigma and seed, the PE before and after (16, d), the loss per step,
    the loss of predicting 0 (the targets' mean square) on the last minibatch, and the model."""

    sigma: float
    seed: int
    pe_init: np.ndarray
    pe_final: np.ndarray
    losses: np.ndarray
    zero_loss: float
    model: ToyModel | None = None
    """The trained model itself (its attention can be read again)."""


def train_toy(sigma: float, steps: int = 800, seed: int = 0, d: int = 32, k: int = 4,
              batch: int = 64, lr: float = 1e-2) -> ToyRun:
    """Train :class:`ToyModel` with Adam on fresh minibatches of :func:`grid_batch`.

    The PE is drawn from a generator seeded with ``seed`` (so every sigma scales the same
    draw), the other weights from PyTorch's default init under ``torch.manual_seed(seed)``
    (the global RNG is restored afterwards), the minibatches from the PE's generator. It
    trains on one thread (restored afterwards): on two busy cores, two threads made each step
    about 40 times slower.
    """
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0 for the toy, got sigma={sigma}")
    g = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ToyModel(sigma, d, k, generator=g)
    pe_init = model.P.detach().clone()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = np.empty(steps)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors of a few thousand numbers: more threads only wait
    try:
        for t in range(steps):
            x, y = grid_batch(batch, k, g)
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[t] = loss.item()
    finally:
        torch.set_num_threads(threads)
    return ToyRun(sigma, seed, pe_init.double().numpy(), model.P.detach().double().numpy(),
                  losses, float((y ** 2).mean()), model)


def toy_table(runs: list[ToyRun]) -> pd.DataFrame:
    """Per run: final loss (mean of the last 20 steps) against predicting 0, the norms of
    :math:`P_0`, :math:`\\Delta P` and their ratio, and the grid score of each part."""
    rows = []
    for r in runs:
        dec = ps.decompose(r.pe_init, r.pe_final)
        rows.append({
            "sigma": r.sigma,
            "final loss / loss of predicting 0": r.losses[-20:].mean() / r.zero_loss,
            "|P_0|": float(dec["norm_init"]), "|ΔP|": float(dec["norm_dpe"]),
            "|ΔP| / |P_0|": float(dec["norm_dpe"] / dec["norm_init"]),
            "grid score P_0": float(ps.grid_score(r.pe_init)),
            "grid score ΔP": float(ps.grid_score(dec["dpe"])),
            "grid score P_T": float(ps.grid_score(r.pe_final)),
        })
    return pd.DataFrame(rows).set_index("sigma")


def seen_from(pe: np.ndarray, cell: int = 5) -> pd.DataFrame:
    """How alike ``cell``'s code is to every other cell's (cosine of centred rows, as the grid
    score and :func:`plot_toy`'s grid panel take it), by grid distance: per distance, the
    number of cells, their mean cosine, the highest one and the cell (row, column) that has
    it."""
    cos = ps.centred_kernel(pe)[cell]
    dist = ps.grid_distance(_CELLS)[cell]
    rows = []
    for k in sorted(set(dist[dist > 0].astype(int))):
        at = np.flatnonzero(dist == k)
        best = int(at[cos[at].argmax()])
        rows.append({"grid distance": k, "cells": len(at), "mean cosine": cos[at].mean(),
                     "highest": cos[best], "at": f"({best // 4}, {best % 4})"})
    return pd.DataFrame(rows).set_index("grid distance")


def plot_toy(runs: list[ToyRun], cell: int = 5) -> Figure:
    """Four panels (stacked on a phone): the loss per step of each run; the trained PE of the
    first run seen from ``cell`` on the grid (cosine of centred rows, colour bar); per run,
    the cosine of every pair of cells against their grid distance, at init and after
    training. Each legend sits under the panel it belongs to, at every width."""
    import matplotlib.pyplot as plt

    fig, axd = plt.subplot_mosaic([["loss", "grid"], ["pairs0", "pairs1"]],
                                  figsize=style.figsize(1.0, 6.6), layout="constrained")
    for r in runs:
        axd["loss"].plot(np.arange(1, len(r.losses) + 1), r.losses / r.zero_loss,
                         lw=1, label=f"σ = {r.sigma:g}")
    axd["loss"].set_yscale("log")
    axd["loss"].set_xlabel("training step")
    axd["loss"].set_ylabel("loss / loss of 0")
    axd["loss"].set_title("both scales learn the task", fontsize=10)
    kern = ps.centred_kernel(runs[0].pe_final)[cell].reshape(4, 4)
    im = axd["grid"].imshow(kern, cmap="viridis", vmin=-1, vmax=1)
    fig.colorbar(im, ax=axd["grid"], label="cosine")
    axd["grid"].plot(cell % 4, cell // 4, "r*", ms=12)
    axd["grid"].set_title(f"σ = {runs[0].sigma:g}, trained: similarity\nto cell "
                          f"({cell // 4}, {cell % 4}) (star)", fontsize=10)
    axd["grid"].set_xlabel("column")
    axd["grid"].set_ylabel("row")
    axd["grid"].set_xticks(range(4))
    axd["grid"].set_yticks(range(4))
    axd["grid"].grid(False)
    upper = np.triu_indices(_CELLS, 1)  # the 120 pairs of cells
    dist = ps.grid_distance(_CELLS)[upper]
    jitter = np.random.default_rng(0).uniform(-0.15, 0.15, dist.size)
    for key, r in zip(("pairs0", "pairs1"), runs[:2], strict=False):
        ax = axd[key]
        for pe, what, color in ((r.pe_init, "init", "0.6"), (r.pe_final, "trained", "C3")):
            cos = ps.centred_kernel(pe)[upper]
            ax.plot(dist + jitter, cos, ".", ms=3, color=color, label=f"PE {what}")
        ax.set_xlabel("grid distance")
        ax.set_ylabel("cosine of two cells")
        ax.set_title(f"σ = {r.sigma:g}: grid score {float(ps.grid_score(r.pe_final)):.2f}",
                     fontsize=10)
    fig.canvas.draw()  # legend_below measures the drawn tick labels
    style.legend_below(axd["loss"])  # under its own panel: on a phone it stays beside it
    for key in ("pairs0", "pairs1"):
        style.legend_below(axd[key], markerscale=3)
    return style.readable(fig)
