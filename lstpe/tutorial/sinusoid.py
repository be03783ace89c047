r"""Chapter 3 (deriving the sinusoidal encoding): the numerical checks and the figures.

Each check returns a small table of residuals that the derivation says are zero (up to float
rounding); each ``plot_*`` returns a Figure with labelled axes, colour bars on heatmaps and
legends outside the data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from lstpe.nn import encodings as enc
from lstpe.rendering import style

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _figure(*args, **kw):
    import matplotlib.pyplot as plt

    kw.setdefault("layout", "constrained")
    return plt.subplots(*args, squeeze=False, **kw)


def toeplitz_gap(G) -> float:
    """Largest spread of ``G`` along one of its diagonals: 0 iff ``G[m, n]`` depends on ``n - m``
    only."""
    G = np.asarray(G)
    return max(float(np.ptp(np.diagonal(G, o))) for o in range(-len(G) + 1, len(G[0])))


def frequencies(d: int, base: float = 10000.0) -> np.ndarray:
    r""":math:`\theta_i = \text{base}^{-2i/d}`, ``i = 0 .. d/2-1``."""
    return base ** (-np.arange(0, d, 2) / d)


# --------------------------------------------------------------------------- 1. order


def permutation_residual(n: int = 16, d_h: int = 8, seed: int = 0) -> float:
    r"""max :math:`|\mathrm{Attn}(PX) - P\,\mathrm{Attn}(X)|` for random q, k, v and a random
    permutation, with the attention of the LST models and no PE."""
    from lstpe.nn.model import attention

    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(3, 1, n, d_h, generator=g, dtype=torch.float64)
    perm = torch.randperm(n, generator=g)
    out, _ = attention(q, k, v, enc.parse_pe("nope"))
    out_perm, _ = attention(q[:, perm], k[:, perm], v[:, perm], enc.parse_pe("nope"))
    return float((out_perm - out[:, perm]).abs().max())


@torch.no_grad()
def shuffle_change(x: torch.Tensor, pes=("nope", "2d-fixed"), d_model: int = 32,
                   n_layers: int = 2, seed: int = 0) -> pd.Series:
    """Largest logit change of small untrained LST models when cells 0-14 are shuffled."""
    from lstpe.nn.architecture import ModelConfig
    from lstpe.nn.model import LSTTransformer

    g = torch.Generator().manual_seed(seed)
    shuffle = torch.cat([torch.randperm(15, generator=g), torch.tensor([15])])
    cfg = ModelConfig(d_model=d_model, n_layers=n_layers)
    out = {}
    for pe in pes:
        model = LSTTransformer(pe, seed=seed, cfg=cfg).double().eval()
        out[pe] = float((model(x.double()[:, shuffle]) - model(x.double())).abs().max())
    return pd.Series(out, name="max logit change after shuffling cells 0-14")


# --------------------------------------------------------------------------- 3. Gram matrix


def gram_checks(n: int = 64, d: int = 32) -> pd.Series:
    r"""The Gram matrix :math:`PP^\top` of ``sinusoid_1d`` is Toeplitz, equals the cosine sum,
    and does not change when every position is shifted by one (1-based positions)."""
    P = enc.sinusoid_1d(n, d).double()
    G = (P @ P.T).numpy()
    m = np.arange(n)
    closed = np.cos(np.subtract.outer(m, m)[..., None] * frequencies(d)).sum(-1)
    shifted = enc.sinusoid_1d(torch.arange(1, n + 1), d).double()
    return pd.Series({
        "spread along a diagonal of PPᵀ": toeplitz_gap(G),
        "max |PPᵀ − Σᵢ cos((m−n)θᵢ)|": float(np.abs(G - closed).max()),
        "max change of PPᵀ, counting from 1": float(np.abs((shifted @ shifted.T).numpy() - G)
                                                    .max()),
    }, name="residual")


def scientific(table: pd.Series | pd.DataFrame, digits: int = 2) -> pd.Series | pd.DataFrame:
    """``table`` with every number written in scientific notation with ``digits`` significant
    digits (``5.6e-07``), for display: residuals of float rounding are read by their order of
    magnitude, and a narrow column fits a phone's screen."""
    fmt = f"{{:.{digits - 1}e}}".format
    return table.map(fmt)


def plot_gram(n: int = 64, d: int = 32) -> Figure:
    """Heatmap of the Gram matrix of ``sinusoid_1d`` (colour range: its own min to max)."""
    P = enc.sinusoid_1d(n, d).double()
    fig, axes = _figure(figsize=(4.8, 4))
    ax = axes[0, 0]
    im = ax.imshow((P @ P.T).numpy(), cmap="viridis")
    fig.colorbar(im, ax=ax, label=r"$\langle p_m, p_n\rangle$")
    ax.set_xlabel("position n")
    ax.set_ylabel("position m")
    ax.set_title(f"Gram matrix of sinusoid_1d (d={d}): Toeplitz")
    ax.grid(False)
    return style.readable(fig)


def plot_pe(P, title: str, ylabel: str = "position k", split: int | None = None) -> Figure:
    """Heatmap of an encoding ``P`` (positions x dims, e.g. the chapter's own ``sinusoid``),
    on a colour range symmetric about 0 (its largest absolute value), with its colour bar;
    ``split``: a dashed line before that dim (where the 2-D sinusoid's second half begins)."""
    P = np.asarray(P, dtype=float)
    lim = float(np.abs(P).max()) or 1.0
    fig, axes = _figure(figsize=style.figsize(1.0, 3.4))
    ax = axes[0, 0]
    im = ax.imshow(P, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest")
    fig.colorbar(im, ax=ax, label="value")
    if split is not None:
        ax.axvline(split - 0.5, color="k", ls="--", lw=1)
    ax.set_xlabel("dimension")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}: {P.shape[0]} positions x {P.shape[1]} dims", fontsize=10)
    ax.grid(False)
    return style.readable(fig)


def shift_map(step: int, d: int, base: float = 10000.0) -> torch.Tensor:
    """The block-diagonal rotation :math:`M_k` with :math:`p_{m+k} = M_k p_m` for every m
    (acting on the (sin, cos) pairs of ``sinusoid_1d``)."""
    blocks = [torch.tensor([[np.cos(step * t), np.sin(step * t)],
                            [-np.sin(step * t), np.cos(step * t)]])
              for t in frequencies(d, base)]
    return torch.block_diag(*blocks).double()


def shift_checks(step: int = 3, n: int = 64, d: int = 32) -> pd.Series:
    """:math:`p_{m+k} = M_k p_m` at every position, and :math:`M_k` is orthogonal."""
    P = enc.sinusoid_1d(n, d).double()
    M = shift_map(step, d)
    return pd.Series({
        f"max over m of |p(m+{step}) - M p(m)|": float((P[:-step] @ M.T - P[step:]).abs().max()),
        "max |M^T M - I|": float((M.T @ M - torch.eye(d, dtype=torch.float64)).abs().max()),
    }, name="residual")


# --------------------------------------------------------------------------- 4. decay


def decay_integral(x, base: float | None = None) -> np.ndarray:
    r""":math:`\int_0^1 \cos(x\,\theta_t)\,dt` for :math:`\theta_t = \text{base}^{-t}`
    (closed form with the cosine integral Ci), or for :math:`\theta_t = t` if ``base`` is None."""
    from scipy.special import sici

    x = np.asarray(x, dtype=float)
    out = np.ones_like(x)
    nz = x > 0
    if base is None:
        out[nz] = np.sin(x[nz]) / x[nz]
    else:
        out[nz] = (sici(x[nz])[1] - sici(x[nz] / base)[1]) / np.log(base)
    return out


def sinusoid_decay(x_max: int, d: int, base: float = 10000.0) -> np.ndarray:
    r"""The normalised inner products :math:`\frac{2}{d}\langle p_0, p_k\rangle`, k = 0..x_max."""
    P = enc.sinusoid_1d(torch.arange(x_max + 1), d, base=base).double()
    return (P @ P[0]).numpy() / (d / 2)


SCHEDULES = {10000: r"$\theta_t = 10000^{-t}$", 1000: r"$\theta_t = 1000^{-t}$",
             100: r"$\theta_t = 100^{-t}$", None: r"$\theta_t = t$ (linear)"}


def plot_decay(ranges=(40, 1000), d: int = 128) -> Figure:
    """The decay integral for four schedules (lines) and the finite sums of ``sinusoid_1d``
    (markers), short and long range side by side; one legend below both panels."""
    fig, axes = _figure(1, len(ranges), figsize=(10, 4.2))
    for ax, x_max in zip(axes[0], ranges, strict=True):
        x = np.linspace(0, x_max, 2000)
        for base, label in SCHEDULES.items():
            ax.plot(x, decay_integral(x, base), lw=1.3, label="integral, " + label)
        k = np.arange(x_max + 1)
        for base, fmt in [(10000, "k."), (100, "kx")]:
            ax.plot(k, sinusoid_decay(x_max, d, base), fmt, ms=3 if x_max < 100 else 1,
                    label=f"sinusoid_1d sum, d={d}, base {base}")
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_xlabel("offset |m - n|")
        ax.set_ylabel(r"$\frac{2}{d}\langle p_m, p_n\rangle$")
        ax.set_title(f"Long-range decay, offsets 0-{x_max}")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8)
    return style.readable(fig)


# --------------------------------------------------------------------------- 5. pictures


def varying_columns(M: np.ndarray, tol: float = 0.05) -> np.ndarray:
    """Indices of the columns of ``M`` whose values span more than ``tol`` (max - min): the
    others are constant over the rows shown, and a picture of them says nothing."""
    M = np.asarray(M, dtype=float)
    return np.flatnonzero(M.max(axis=0) - M.min(axis=0) > tol)


def plot_clocks_and_counter(n: int = 50, d: int = 16, hands: int = 4, steps: int = 8) -> Figure:
    """``sinusoid_1d`` and a binary counter as heatmaps (with colour bars), each with only its
    columns that vary over the ``n`` positions (:func:`varying_columns`; the others are named
    in the title), and the first clock hands of the sinusoid for positions 0..steps-1 (legend
    in the panel beside the clock face)."""
    from matplotlib.patches import Circle

    fig, axd = _mosaic([["sin", "bin"], ["clock", "legend"]], style.figsize(1.0, 7.4))
    pe = enc.sinusoid_1d(n, d).numpy()
    bits = (np.arange(n)[:, None] >> np.arange(d)[::-1]) & 1
    for key, M, cmap, lim, what, cb in (
            ("sin", pe, "RdBu_r", (-1, 1), "sinusoid_1d", {"label": "value"}),
            ("bin", bits, "Greys", (0, 1), "binary counter", {"label": "bit", "ticks": [0, 1]})):
        ax, keep = axd[key], varying_columns(M)
        im = ax.imshow(M[:, keep], cmap=cmap, aspect="auto", vmin=lim[0], vmax=lim[1],
                       interpolation="nearest")
        fig.colorbar(im, ax=ax, **cb)
        ax.set_xticks(range(len(keep)), [str(k) for k in keep], fontsize=9)
        ax.set_title(f"{what}: {n} positions,\n{len(keep)} of {d} columns vary", fontsize=10)
        ax.set_xlabel("bit (most significant first)" if key == "bin" else "dimension")
        ax.set_ylabel("position k")
        ax.grid(False)
    ax = axd["clock"]
    ax.add_patch(Circle((0, 0), 1, fill=False, color="0.7"))
    for i in range(hands):
        theta = 10000.0 ** (-2 * i / d)
        ang = np.arange(steps) * theta
        ax.plot(np.cos(ang), np.sin(ang), "o-", ms=5, lw=1,
                label=rf"hand {i}: $\theta_{i}$ = {theta:.3f}")
    ax.set_aspect("equal")
    ax.set_xlim(-1.15, 1.15)
    ax.set_ylim(-1.15, 1.15)
    ax.set_xlabel(r"$\cos k\theta_i$")
    ax.set_ylabel(r"$\sin k\theta_i$")
    ax.set_title(f"clock hands, positions 0-{steps - 1}")
    axd["legend"].axis("off")
    axd["legend"].legend(*ax.get_legend_handles_labels(), loc="center left", fontsize=10)
    return style.readable(fig)


def _mosaic(layout: list[list[str]], figsize: tuple[float, float]):
    """``plt.subplot_mosaic`` with constrained layout: (figure, dict of Axes)."""
    import matplotlib.pyplot as plt

    return plt.subplot_mosaic(layout, figsize=figsize, layout="constrained")


# --------------------------------------------------------------------------- 6. general H


def hessian_table(n: int = 64, d: int = 32, seed: int = 0) -> pd.Series:
    r"""Toeplitz gap of :math:`P\mathcal H P^\top` for four choices of :math:`\mathcal H`."""
    g = torch.Generator().manual_seed(seed)
    P = enc.sinusoid_1d(n, d).double()
    h = torch.rand(d, generator=g, dtype=torch.float64) + 0.5
    tied = h.view(-1, 2).mean(1).repeat_interleave(2)  # equal entries within each pair
    A = torch.randn(d, d, generator=g, dtype=torch.float64)
    Hs = {"identity": torch.eye(d, dtype=torch.float64), "random diagonal": torch.diag(h),
          "diagonal, tied pairs": torch.diag(tied), "random full (A A^T / d)": A @ A.T / d}
    return pd.Series({k: toeplitz_gap((P @ H @ P.T).numpy()) for k, H in Hs.items()},
                     name="Toeplitz gap of P H P^T")


# --------------------------------------------------------------------------- 7. the grid


def grid_pe(name: str = "2d-fixed", d: int = 160) -> torch.Tensor:
    """The (16, d) additive PE a model of the given name starts with (block 0)."""
    return enc.additive_pe(enc.parse_pe(name), 1, 16, d)[0].double()


def grid_checks(d: int = 160, P: torch.Tensor | None = None) -> pd.DataFrame:
    """For ``2d-fixed`` (or the (16, d) PE ``P``): the largest spread of the similarity of two
    cells among all pairs of cells with the same (row offset dr, column offset dc), the same
    dr, or the same dc; for all dims and for each half. A spread of 0 means "depends on these
    offsets only"."""
    P = grid_pe("2d-fixed", d) if P is None else P.double()
    d = P.shape[1]
    r, c = (t.numpy() for t in enc.grid_positions(4, 4))
    off = pd.DataFrame({"dr": np.subtract.outer(r, r).ravel(),
                        "dc": np.subtract.outer(c, c).ravel()})

    def spread(S: np.ndarray, by: list[str]) -> float:
        return float(off.assign(s=S.ravel()).groupby(by)["s"].agg(np.ptp).max())

    rows = []
    parts = {"all dims": P, f"dims 0-{d // 2 - 1}": P[:, :d // 2],
             f"dims {d // 2}-{d - 1}": P[:, d // 2:]}
    for name, Q in parts.items():
        S = (Q @ Q.T).numpy()
        rows.append({"dims": name, "same (dr, dc)": spread(S, ["dr", "dc"]),
                     "same dr": spread(S, ["dr"]), "same dc": spread(S, ["dc"])})
    return pd.DataFrame(rows).set_index("dims")


def plot_grid_similarity(d: int = 160, cell: int = 5) -> Figure:
    """Top: the 16x16 similarity of ``2d-fixed`` and ``1d-fixed`` and one row of each.
    Bottom: that row drawn on the 4x4 grid (colour bars everywhere, each on its own range)."""
    sims = {}
    for pe in ("2d-fixed", "1d-fixed"):
        P = grid_pe(pe, d)
        sims[pe] = (P @ P.T).numpy()
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(11, 7), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 0.9])
    axes = top.subplots(1, 3)
    for ax, (pe, S) in zip(axes[:2], sims.items(), strict=True):
        im = ax.imshow(S, cmap="viridis")
        top.colorbar(im, ax=ax, fraction=0.046, label=r"$\langle p_i, p_j\rangle$")
        ax.set_title(f"{pe}: 16x16 similarity", fontsize=10)
        ax.set_xlabel("key cell (row-major)")
        ax.set_ylabel("query cell")
        ax.grid(False)
    for (pe, S), ls in zip(sims.items(), ("-", "--"), strict=True):
        axes[2].plot(range(16), S[cell] / S[cell, cell], ls, marker="o", ms=3, label=pe)
    axes[2].set_xticks(range(0, 16, 4), [f"r{i}" for i in range(4)])
    axes[2].set_xlabel("key cell (rN: row N starts)")
    axes[2].set_ylabel("similarity / self-similarity")
    axes[2].set_title(f"cell {cell} (r{cell // 4} c{cell % 4}) vs every cell", fontsize=10)
    axes[2].legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncols=2)
    grid_axes = bottom.subplots(1, 2)
    for ax, (pe, S) in zip(grid_axes, sims.items(), strict=True):  # each on its own range
        im = ax.imshow((S[cell] / S[cell, cell]).reshape(4, 4), cmap="viridis")
        ax.plot(cell % 4, cell // 4, "r*", ms=12)
        bottom.colorbar(im, ax=ax, fraction=0.046, label="similarity / self-similarity")
        ax.set_title(f"{pe}: similarity to cell {cell} (star)", fontsize=10)
        ax.set_xlabel("column")
        ax.set_ylabel("row")
        ax.set_xticks(range(4))
        ax.set_yticks(range(4))
        ax.grid(False)
    return style.readable(fig)
