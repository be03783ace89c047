r"""Chapter 4 (rotary, relative, ALiBi): the numerical checks, the figures and the tables.

Checks return small tables of residuals that the algebra says are zero (float rounding aside);
``plot_*`` functions return Figures with labelled axes, colour bars on heatmaps and legends
outside the data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from lstpe.nn import encodings as enc
from lstpe.rendering import style
from lstpe.tutorial.sinusoid import toeplitz_gap

if TYPE_CHECKING:
    from matplotlib.figure import Figure

N = 16
"""Tokens of the LST (a 4x4 grid, flattened row by row)."""


def _figure(*args, **kw):
    import matplotlib.pyplot as plt

    kw.setdefault("layout", "constrained")
    return plt.subplots(*args, squeeze=False, **kw)


def _heatmap(fig, ax, M, title: str, xlabel: str = "key j", ylabel: str = "query i",
             label: str = "", **kw) -> None:
    im = ax.imshow(np.asarray(M), **kw)
    fig.colorbar(im, ax=ax, fraction=0.046, label=label)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(False)


# --------------------------------------------------------------------------- 1. RoPE


def plot_rotation_2d(theta: float = 0.6, m_max: int = 7, q=(1.0, 0.35)) -> Figure:
    r"""A 2-D query rotated by :math:`m\theta`, m = 0..m_max (``lstpe.nn.encodings.rotate``)."""
    qv = torch.tensor(q, dtype=torch.float64)
    rot = enc.rotate(qv.expand(m_max + 1, 2), torch.arange(m_max + 1.0)[:, None] * theta)
    fig, axes = _figure(figsize=(4.2, 4.0))
    ax = axes[0, 0]
    from matplotlib.patches import Circle

    r = float(qv.norm())
    ax.add_patch(Circle((0, 0), r, fill=False, color="0.8"))
    for m, (x, y) in enumerate(rot.tolist()):
        ax.annotate("", (x, y), (0, 0), arrowprops={"arrowstyle": "->",
                                                    "color": _viridis(m / m_max)})
        ax.text(1.13 * x, 1.13 * y, f"m={m}", fontsize=7, ha="center", va="center")
    ax.set_xlim(-1.3 * r, 1.3 * r)
    ax.set_ylim(-1.3 * r, 1.3 * r)
    ax.set_aspect("equal")
    ax.set_xlabel("first coordinate")
    ax.set_ylabel("second coordinate")
    ax.set_title(rf"RoPE in 2-D: q rotated by m$\theta$ ($\theta$={theta})")
    return style.readable(fig)


def _viridis(t: float):
    import matplotlib

    return matplotlib.colormaps["viridis"](t)


def shift_invariance(d: int = 16, shifts=(1, 5, 100), seed: int = 0) -> pd.Series:
    """Largest change of the 16x16 RoPE score matrix of random queries and keys when every
    position is shifted by ``t``."""
    g = torch.Generator().manual_seed(seed)
    Q, K = torch.randn(2, N, d, generator=g, dtype=torch.float64)

    def scores(pos: torch.Tensor) -> torch.Tensor:
        a = enc.rope_angles(pos, d)
        return enc.rotate(Q, a) @ enc.rotate(K, a).T

    base = scores(torch.arange(N))
    return pd.Series({f"shift {t}": float((scores(torch.arange(t, t + N)) - base).abs().max())
                      for t in shifts}, name="max score change")


def constant_content_scores(d: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    """RoPE scores of one query and one key repeated at all 16 positions, for ``rope`` and
    ``rope-2d`` in both variants of :func:`lstpe.nn.encodings.apply_rope`."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, d, generator=g, dtype=torch.float64)
    out = {}
    for name in ("rope", "rope-2d"):
        for variant in enc.VARIANTS:
            spec = enc.parse_pe(name, variant=variant)
            S = enc.apply_rope(spec, q.expand(N, d)) @ enc.apply_rope(spec, k.expand(N, d)).T
            out[f"{name} ({variant})"] = S.numpy()
    return out


def offset_spread(S: np.ndarray) -> float:
    """Largest spread of ``S`` among query-key pairs with the same grid offset (dr, dc)."""
    r, c = (t.numpy() for t in enc.grid_positions(4, 4))
    off = pd.DataFrame({"dr": np.subtract.outer(r, r).ravel(),
                        "dc": np.subtract.outer(c, c).ravel(), "s": np.asarray(S).ravel()})
    return float(off.groupby(["dr", "dc"])["s"].agg(np.ptp).max())


def rope_checks(scores: dict[str, np.ndarray], d: int = 16) -> pd.DataFrame:
    """Per encoding: rotated dims, spread along 1-D diagonals (Toeplitz gap) and within one
    grid offset. ``rope`` is Toeplitz; ``rope-2d`` is constant per (dr, dc) but not Toeplitz."""
    rows = []
    for key, S in scores.items():
        name, variant = key.split(" (")
        spec = enc.parse_pe(name, variant=variant.rstrip(")"))
        rows.append({"encoding": key, "rotated dims": f"{enc.rope_dims(spec, d)} of {d}",
                     "Toeplitz gap (1-D offset)": toeplitz_gap(S),
                     "spread within one (dr, dc)": offset_spread(S)})
    return pd.DataFrame(rows).set_index("encoding")


def ones_vs_sinusoid(d: int = 16, n: int = 64) -> float:
    r"""max :math:`|\text{RoPE score}(q=k=\mathbf 1) - 2\langle p_m, p_n\rangle|` over 64
    positions (interleaved pairing, all dims rotated)."""
    ones = torch.ones(n, d, dtype=torch.float64)
    R = enc.rotate(ones, enc.rope_angles(n, d))
    P = enc.sinusoid_1d(n, d).double()
    return float((R @ R.T - 2 * P @ P.T).abs().max())


def plot_scores(scores: dict[str, np.ndarray],
                keys=("rope (textbook)", "rope-2d (textbook)")) -> Figure:
    """Score matrices side by side (each with its colour bar, on its own data range)."""
    fig, axes = _figure(1, len(keys), figsize=(4.3 * len(keys), 3.7))
    for ax, key in zip(axes[0], keys, strict=True):
        _heatmap(fig, ax, scores[key], f"{key}: scores, same q and k everywhere",
                 xlabel="key cell", ylabel="query cell", label="score", cmap="viridis")
    return style.readable(fig)


# --------------------------------------------------------------------------- 3. Shaw


def relative_demo(d: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    r"""Shaw's key embeddings with one query repeated everywhere and zero keys.

    Returns the index table (``relative_index``), the logits :math:`q\cdot a_{j-i}/\sqrt d`,
    and the softmax weights without (textbook) and with (paper) a causal mask.
    """
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(d, generator=g, dtype=torch.float64)
    idx = enc.relative_index(N)
    rel = torch.randn(int(idx.max()) + 1, d, generator=g, dtype=torch.float64)
    logits = torch.einsum("d,ijd->ij", q, rel[idx]) / np.sqrt(d)
    causal = logits.masked_fill(~enc.causal_mask(N), float("-inf"))
    return {"index": idx.numpy(), "logits": logits.numpy(),
            "weights, textbook (bidirectional)": logits.softmax(-1).numpy(),
            "weights, paper (causal)": causal.softmax(-1).numpy()}


def relative_checks(demo: dict[str, np.ndarray]) -> pd.Series:
    """Toeplitz gaps: the logits depend on j - i only, the bidirectional softmax weights do
    not (each query normalises over a different window of offsets)."""
    idx, weights = demo["index"], demo["weights, textbook (bidirectional)"]
    return pd.Series({"index range": f"{idx.min()}..{idx.max()}",
                      "Toeplitz gap, logits": f"{toeplitz_gap(demo['logits']):.1e}",
                      "Toeplitz gap, softmax weights": f"{toeplitz_gap(weights):.2f}"},
                     name="value")


def plot_relative(demo: dict[str, np.ndarray]) -> Figure:
    """The index table and the two weight matrices."""
    fig, axes = _figure(1, 3, figsize=(12, 3.6))
    _heatmap(fig, axes[0, 0], demo["index"], "relative_index: j - i + 15",
             label="row of the table")
    for ax, key in zip(axes[0, 1:], ("weights, textbook (bidirectional)",
                                     "weights, paper (causal)"), strict=True):
        _heatmap(fig, ax, demo[key], key, label="attention weight", cmap="magma")
    return style.readable(fig)


# --------------------------------------------------------------------------- 4. ALiBi


def plot_alibi(cell: int = 5, slopes=(0.5, 0.25, 0.125), bias=None) -> Figure:
    """The ALiBi bias matrix (``bias``, e.g. the chapter's own, (16, 16); default the
    package's), the attention a bias alone gives position 0 at each slope, and the bias's row
    for ``cell`` drawn on the grid."""
    B = enc.alibi_bias(N).numpy() if bias is None else np.asarray(bias, dtype=float)
    fig, axes = _figure(1, 3, figsize=(7.1, 3.0), width_ratios=[1.1, 1, 0.9])
    _heatmap(fig, axes[0, 0], B, f"ALiBi bias -{-B[0, 1]:g} |i - j|", label="bias",
             cmap="Blues_r")
    ax = axes[0, 1]
    for slope in slopes:
        ax.plot(range(N), enc.alibi_bias(N, slope)[0].softmax(-1).numpy(), marker="o", ms=3,
                label=f"slope {slope}")
    ax.set_xlabel("key j (query 0)")
    ax.set_ylabel("softmax weight")
    ax.set_title("attention of query 0,\nbias alone", fontsize=9)
    _heatmap(fig, axes[0, 2], B[cell].reshape(4, 4), f"bias from cell {cell} (star)\non the grid",
             xlabel="column", ylabel="row", label="bias", cmap="Blues_r")
    axes[0, 2].plot(cell % 4, cell // 4, "r*", ms=12)
    axes[0, 2].set_xticks(range(4))
    axes[0, 2].set_yticks(range(4))
    fig.canvas.draw()  # legend_below measures the drawn tick labels
    style.legend_below(ax, ncols=1)  # under its own panel, on a phone too
    return style.readable(fig)


# --------------------------------------------------------------------------- 5. variants


def variants_table(d_head: int = 160) -> pd.DataFrame:
    """For every PE of the package: where it acts, and how its block is built in the ``paper``
    and ``textbook`` variants (:func:`lstpe.nn.architecture.block_structure`), one compact
    "paper / textbook" entry per property where they differ, so the table fits the page."""
    from lstpe.nn.architecture import block_structure

    def both(name: str, f) -> str:
        vals = [f(enc.parse_pe(name, variant=v), block_structure(enc.parse_pe(name, variant=v)))
                for v in enc.VARIANTS]
        return vals[0] if len(set(vals)) == 1 else " / ".join(vals)

    def out_proj(b) -> str:
        return "none" if not b.out_proj else "bias" if b.out_bias else "no bias"

    def rotated(s) -> str:
        return str(enc.rope_dims(s, d_head)) if s.attention_kind in ("rope", "rope-2d") else "-"

    rows = []
    for base in enc.PE_NAMES:
        name = "learn-0.2" if base == "learn" else base
        spec = enc.parse_pe(name)
        rows.append({
            "PE": base, "acts in": ("nowhere" if base == "nope" else "residual"
                                    if spec.additive else "attention"),
            "causal": both(name, lambda s, b: "yes" if b.causal else "no"),
            "temp.": both(name, lambda s, b: f"{b.temperature:g}"),
            "qkv bias": both(name, lambda s, b: "yes" if b.qkv_bias else "no"),
            "out proj.": both(name, lambda s, b: out_proj(b)),
            "dropout": both(name, lambda s, b: f"{b.dropout:g}"),
            f"rotated (d_h={d_head})": both(name, lambda s, b: rotated(s)),
        })
    return pd.DataFrame(rows).set_index("PE")


# --------------------------------------------------------------------------- 6. probe


def row_gap(weights: torch.Tensor) -> float:
    """Largest difference between two rows of an attention matrix (H, n, n)."""
    return float((weights[:, :, None] - weights[:, None]).abs().amax())


def plot_probe_mass(trained: dict, n: int) -> Figure:
    """Left: trained ``alibi`` weights (rows differ). Right: the attention mass
    :math:`s_i = \\sum_j a_{ij}` per head of ``rope+l2`` and ``alibi+l2`` beside softmax's 1."""
    from lstpe.analysis import probe as P

    fig, axes = _figure(1, 3, figsize=(7.1, 3.2), width_ratios=[1.15, 1, 1])
    with torch.no_grad():
        w = trained["alibi"]()[1]
    _heatmap(fig, axes[0, 0], w[0], "trained alibi, head 0\n(rows differ)",
             label="attention weight", cmap="magma")
    pos = range(1, n + 1)
    for ax, v in zip(axes[0, 1:], ("rope+l2", "alibi+l2"), strict=True):
        mass = P.attention_mass(trained[v])
        for h in range(mass.shape[0]):
            ax.plot(pos, mass[h], marker="o", ms=3, label=f"head {h}")
        ax.plot(pos, P.attention_mass(trained["rope"])[0], "k--", lw=1, label="rope (softmax)")
        ax.set_xlabel("position i")
        ax.set_ylabel(r"mass $s_i$ (row sum of $a$)")
        ax.set_title(f"{v}, trained", fontsize=9)
    handles, labels = axes[0, 1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8)
    return style.readable(fig)
