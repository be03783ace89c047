r"""Su's position probe: can attention map ``n`` identical tokens to the positions ``1..n``?

Su (kexue.fm/archives/9105) asks a model to turn the input ``[0, 0, ..., 0]`` into the output
``[1, 2, ..., n]``. Nothing but the positional encoding (PE) can tell the tokens apart, so the
probe isolates what a PE lets a transformer *know* about absolute position.

The model (:class:`ProbeModel`) is one attention layer with ``H`` heads and a position-wise
MLP readout, in float64::

    h_i = e (+ p_i for "absolute")              e: the one learned token embedding, (d,)
    q_i, k_i, v_i = h_i W_q, h_i W_k, h_i W_v   per head, (d_h,)
    b_ij = q_i.k_j / sqrt(d_h) + PE terms        RoPE / Shaw keys / ALiBi / causal mask
    a_ij = normalise_j(exp b_ij)                 softmax (l1) or l2
    z_i  = h_i + [sum_j a_ij v_j]_heads W_o
    y_i  = MLP(z_i)                              scalar prediction of the target i

with the ``n`` tokens numbered ``i = 1..n`` (a ``+cls`` marker sits at position 0).

**Why relative-only softmax attention fails exactly.** With identical inputs every
position-wise map gives identical results: :math:`h_i = e`, :math:`v_j = v` for all ``i, j``.
A *relative* PE (RoPE, ALiBi, Shaw's key embeddings, a causal mask) changes only the logits
:math:`b_{ij}`, so the attention *weights* do depend on ``i`` -- but softmax rows sum to one and

.. math::
    o_i = \sum_j a_{ij} v_j = \Big(\sum_j a_{ij}\Big) v = v \qquad\text{for every } i,

so :math:`z_i = e + vW_o` and :math:`y_i = \mathrm{MLP}(z_i)` are the same for all ``i``. By
induction this holds after any number of such layers, for any weights: at initialisation, after
training, for any seed. It is a property of the function class, not of the optimiser. Among
constant predictions ``c`` the squared error :math:`\sum_{i=1}^n (i - c)^2` is smallest at the
mean ``c = (n+1)/2``, so the RMSE of any such model is at least

.. math:: \sqrt{\tfrac1n \textstyle\sum_{i=1}^n (i - \tfrac{n+1}2)^2} = \sqrt{(n^2-1)/12}

(:func:`constant_floor`; 4.61 for ``n = 16``), and the predictions have zero spread up to
float64 rounding (:func:`output_spread`).

**What escapes it.** Only a position-dependent quantity that survives :math:`AV` helps:

* ``absolute``: a learned :math:`p_i` is added to :math:`h_i`, so the tokens differ before
  attention (the MLP alone can then read the position).
* ``+l2``: :math:`a_{ij} = e^{b_{ij}} / \lVert e^{b_{i\cdot}} \rVert_2` (Su's fix). Now
  :math:`o_i = s_i v` with :math:`s_i = \lVert e^{b_{i\cdot}}\rVert_1 / \lVert e^{b_{i\cdot}}
  \rVert_2`, a scalar per head that depends on which offsets ``j - i`` exist around position
  ``i``; the readout can decode ``i`` from it if it is injective. Caveat (exact, not a training
  artefact): ALiBi's bias :math:`-m|i-j|` is symmetric, so ``s_i = s_{n+1-i}`` for mirror
  positions and ``alibi+l2`` is stuck at the same floor (each mirror pair averages to
  ``(n+1)/2``). ``nope+l2`` has ``s_i`` constant; ``c-nope+l2`` has ``s_i = sqrt(i)``.
* ``+cls``: a learned marker token is prepended at position 0 (Su's [CLS]); the values are no
  longer identical and :math:`o_i = \alpha_i v_{cls} + (1-\alpha_i) v` with a weight
  :math:`\alpha_i` on the marker that a relative PE makes depend on ``i``. ``nope+cls`` still
  fails (no PE: :math:`\alpha_i` is the same for all ``i``), ``c-nope+cls`` works (the marker
  competes with ``i`` identical keys).

Shaw et al.'s original relative PE also adds embeddings to the *values*, which escapes the
argument; lstpe's ``relative`` (like the paper's) has key embeddings only, so it fails here.

A variant is named ``"<base>[+<fix>]"``: base in :data:`BASES`, fix in :data:`FIXES`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from torch import nn

from lstpe.nn import encodings as enc

if TYPE_CHECKING:
    from matplotlib.axes import Axes

BASES: tuple[str, ...] = ("rope", "alibi", "relative", "nope", "c-nope", "absolute")
"""Positional information of the probe model: rotary, ALiBi, Shaw relative keys, none, causal
mask without PE, learned absolute PE."""

FIXES: tuple[str, ...] = ("l2", "cls")
"""Optional fixes: l2-normalised attention weights, a prepended marker token."""

PROBE_VARIANTS: tuple[str, ...] = ("rope", "alibi", "absolute", "rope+l2", "rope+cls")
"""The default set: two relative PEs that fail, absolute PE and Su's two fixes."""

RELATIVE_ONLY: frozenset[str] = frozenset({"rope", "alibi", "relative", "nope", "c-nope"})
"""Bases whose position information only enters the attention logits."""


@dataclass(frozen=True)
class ProbeConfig:
    """Sizes and optimisation of the probe (defaults run one variant in about a second).

    Attributes:
        n: number of identical tokens (targets ``1..n``).
        d_model, n_heads, d_mlp: model sizes (``d_model`` divisible by ``2 * n_heads``).
        steps, lr: full-batch Adam steps and learning rate (the input is a single sequence).
        rope_base: rotary base, :math:`\\theta_k = \\text{base}^{-2k/d_h}` (lstpe's 10000).
        init_std: std of the token, marker and absolute-PE embeddings at init.
    """

    n: int = 16
    d_model: int = 32
    n_heads: int = 4
    d_mlp: int = 64
    steps: int = 800
    lr: float = 1e-2
    rope_base: float = 10000.0
    init_std: float = 1.0

    def __post_init__(self) -> None:
        for name in ("n", "d_model", "n_heads", "d_mlp"):
            if getattr(self, name) < 1:
                raise ValueError(f"ProbeConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.n < 2:
            raise ValueError(f"ProbeConfig.n must be >= 2 (positions 1..n), got {self.n}")
        if self.steps < 0:
            raise ValueError(f"ProbeConfig.steps must be >= 0, got {self.steps}")
        if self.d_model % (2 * self.n_heads):
            raise ValueError(f"d_model={self.d_model} must be divisible by 2 * n_heads="
                             f"{2 * self.n_heads} (rotary needs an even head dimension)")


def parse_variant(name: str) -> tuple[str, str | None]:
    """Split ``"rope+l2"`` into ``("rope", "l2")`` and ``"alibi"`` into ``("alibi", None)``.

    Raises:
        ValueError: unknown base or fix (the message lists the valid ones).
    """
    if not isinstance(name, str):
        raise ValueError(f"probe variant must be a string like 'rope+l2', got {name!r}; valid "
                         f"bases: {', '.join(BASES)}; valid fixes: {', '.join(FIXES)}")
    base, _, fix = name.partition("+")
    if base not in BASES:
        raise ValueError(f"unknown probe base {base!r} in {name!r}; valid bases: "
                         f"{', '.join(BASES)} (optionally '+' one of {', '.join(FIXES)})")
    if fix and fix not in FIXES:
        raise ValueError(f"unknown probe fix {fix!r} in {name!r}; valid fixes: "
                         f"{', '.join(FIXES)}")
    return base, fix or None


def exact_failure(variant: str) -> bool:
    """True where the argument of the module docstring proves the probe must fail for any
    weights (RMSE >= :func:`constant_floor`): a relative-only base under softmax, ``nope`` with
    either fix (no position information at all), and ``alibi+l2`` (mirror symmetry)."""
    base, fix = parse_variant(variant)
    return (base in RELATIVE_ONLY and fix is None) or base == "nope" or variant == "alibi+l2"


def constant_floor(n: int) -> float:
    """Smallest RMSE of a prediction that is the same at every position, for targets ``1..n``:
    ``sqrt((n**2 - 1) / 12)`` (the standard deviation of ``1..n``)."""
    return math.sqrt((n * n - 1) / 12.0)


class ProbeModel(nn.Module):
    """One attention layer + MLP readout over ``n`` identical tokens (module docstring).

    Args:
        variant: ``"<base>[+<fix>]"`` (:func:`parse_variant`).
        cfg: sizes.
        seed: init seed (``torch.Generator``; independent of the global RNG).
    """

    def __init__(self, variant: str, cfg: ProbeConfig | None = None, seed: int = 0) -> None:
        super().__init__()
        self.variant = variant
        self.base, self.fix = parse_variant(variant)
        self.cfg = cfg = cfg or ProbeConfig()
        d, H, dt = cfg.d_model, cfg.n_heads, torch.float64
        self.n_tot = cfg.n + (self.fix == "cls")
        g = torch.Generator().manual_seed(int(seed))

        def lin(i: int, o: int) -> nn.Parameter:
            return nn.Parameter((torch.rand(i, o, generator=g, dtype=dt) * 2 - 1) / math.sqrt(i))

        def emb(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=g, dtype=dt) * cfg.init_std)

        self.token = emb(d)
        self.marker = emb(d) if self.fix == "cls" else None
        self.pos = emb(cfg.n, d) if self.base == "absolute" else None
        self.rel = emb(2 * self.n_tot - 1, d // H) if self.base == "relative" else None
        self.w_qkv, self.w_o = lin(d, 3 * d), lin(d, d)
        self.w1, self.b1 = lin(d, cfg.d_mlp), nn.Parameter(torch.zeros(cfg.d_mlp, dtype=dt))
        self.w2, self.b2 = lin(cfg.d_mlp, 1), nn.Parameter(torch.zeros(1, dtype=dt))

    def inputs(self) -> torch.Tensor:
        """(n_tot, d) residual stream before attention: the marker (if any), then ``n`` copies
        of the token embedding (+ the absolute PE)."""
        h = self.token.expand(self.cfg.n, -1)
        if self.pos is not None:
            h = h + self.pos
        if self.marker is not None:
            h = torch.cat([self.marker[None], h], dim=0)
        return h

    def attention(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h: (N, d) -> attention output (N, d) (heads concatenated) and weights (H, N, N)."""
        N, d = h.shape
        H = self.cfg.n_heads
        q, k, v = (h @ self.w_qkv).view(N, 3, H, d // H).permute(1, 2, 0, 3)  # (H, N, d_h)
        if self.base == "rope":
            ang = enc.rope_angles(N, d // H, self.cfg.rope_base).to(h.dtype)
            q, k = enc.rotate(q, ang), enc.rotate(k, ang)
        b = q @ k.transpose(-1, -2)
        if self.base == "relative":
            b = b + torch.einsum("hid,ijd->hij", q, self.rel[enc.relative_index(N)])
        b = b / math.sqrt(d // H)
        if self.base == "alibi":
            slopes = enc.ALIBI_SLOPE ** torch.arange(1, H + 1, dtype=h.dtype)
            b = b + slopes[:, None, None] / enc.ALIBI_SLOPE * enc.alibi_bias(N).to(h.dtype)
        if self.base == "c-nope":
            b = b.masked_fill(~enc.causal_mask(N), float("-inf"))
        if self.fix == "l2":
            u = (b - b.amax(-1, keepdim=True)).exp()  # the ratio is shift-invariant
            w = u / u.square().sum(-1, keepdim=True).sqrt()
        else:
            w = b.softmax(-1)
        return (w @ v).transpose(0, 1).reshape(N, d), w

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Predictions (n,) for the ``n`` identical tokens (marker row dropped) and the
        attention weights (H, n_tot, n_tot)."""
        h = self.inputs()
        o, w = self.attention(h)
        z = h + o @ self.w_o
        y = (torch.nn.functional.gelu(z @ self.w1 + self.b1) @ self.w2 + self.b2)[:, 0]
        return y[self.n_tot - self.cfg.n:], w


def output_spread(model: ProbeModel) -> float:
    """max - min of the model's predictions (position units) over the ``n`` positions: 0, up to
    float64 rounding, for a model that cannot tell positions apart."""
    y = probe_predict(model)
    return float(y.max() - y.min())


def attention_mass(model: ProbeModel) -> np.ndarray:
    r"""(H, n) total attention weight :math:`s_i = \sum_j a_{ij}` of each of the ``n`` token
    queries, per head: the only channel through which identical values can carry position
    (all ones under softmax; :math:`\lVert e^{b}\rVert_1 / \lVert e^{b}\rVert_2` under l2)."""
    with torch.no_grad():
        _, w = model()
    return w.sum(-1)[:, model.n_tot - model.cfg.n:].numpy()


def train_probe(variant: str, seed: int = 0, cfg: ProbeConfig | None = None
                ) -> tuple[ProbeModel, list[float]]:
    """Fit a :class:`ProbeModel` to the targets ``1..n`` by full-batch Adam on the MSE
    (single-threaded: on these tiny tensors more CPU threads only add overhead).

    The readout is fitted to the standardised target ``(t - (n+1)/2) / constant_floor(n)``;
    :func:`probe_predict` maps its output back to position units.

    Returns:
        The trained model and the RMSE (in position units) after every step.
    """
    cfg = cfg or ProbeConfig()
    model = ProbeModel(variant, cfg, seed)
    target = _standardised_targets(cfg.n)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    floor = constant_floor(cfg.n)
    curve = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors of a few hundred numbers: extra threads only cost
    try:
        for _ in range(cfg.steps):
            y, _ = model()
            loss = (y - target).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            curve.append(math.sqrt(loss.item()) * floor)
    finally:
        torch.set_num_threads(threads)
    return model, curve


def _standardised_targets(n: int) -> torch.Tensor:
    t = torch.arange(1, n + 1, dtype=torch.float64)
    return (t - (n + 1) / 2) / constant_floor(n)


def probe_predict(model: ProbeModel) -> np.ndarray:
    """(n,) predictions in position units (targets are ``1..n``)."""
    n = model.cfg.n
    with torch.no_grad():
        y, _ = model()
    return (y * constant_floor(n) + (n + 1) / 2).numpy()


def run_probe(variants: Sequence[str] = PROBE_VARIANTS, seeds: Sequence[int] = (0, 1, 2),
              cfg: ProbeConfig | None = None) -> pd.DataFrame:
    """Train every variant for every seed and return one row per (variant, seed, position).

    Returns:
        Tidy frame with columns ``variant, seed, position`` (1..n), ``target`` (= position),
        ``prediction``, ``error`` (prediction - target), ``init_prediction`` (the same model
        before training) and ``exact_failure`` (:func:`exact_failure` of the variant).
    """
    cfg = cfg or ProbeConfig()
    for v in variants:
        parse_variant(v)
    rows = []
    pos = np.arange(1, cfg.n + 1)
    for v in variants:
        for s in seeds:
            init = probe_predict(ProbeModel(v, cfg, s))
            model, _ = train_probe(v, s, cfg)
            pred = probe_predict(model)
            rows.append(pd.DataFrame({
                "variant": v, "seed": int(s), "position": pos, "target": pos.astype(float),
                "prediction": pred, "error": pred - pos, "init_prediction": init,
                "exact_failure": exact_failure(v)}))
    return pd.concat(rows, ignore_index=True)


def summarize_probe(df: pd.DataFrame) -> pd.DataFrame:
    """One row per variant (in order of appearance) of a :func:`run_probe` frame.

    Columns: ``rmse_mean`` / ``rmse_max`` over seeds (position units), ``accuracy`` (share of
    positions whose rounded prediction is the target, mean over seeds), ``spread_max`` and
    ``init_spread_max`` (largest max - min of the predictions over positions, after training
    and at init), ``n_seeds``, ``floor`` = ``sqrt((n^2-1)/12)`` (the best RMSE of a
    prediction that is the same at every position) and ``exact_failure``.
    """
    n = int(df["position"].max())
    d = df.assign(sq=df["error"] ** 2, hit=df["prediction"].round() == df["target"])
    per_seed = d.groupby(["variant", "seed"], sort=False).agg(
        mse=("sq", "mean"), accuracy=("hit", "mean"),
        p_max=("prediction", "max"), p_min=("prediction", "min"),
        i_max=("init_prediction", "max"), i_min=("init_prediction", "min"))
    per_seed = per_seed.assign(rmse=np.sqrt(per_seed["mse"]),
                               spread=per_seed["p_max"] - per_seed["p_min"],
                               init_spread=per_seed["i_max"] - per_seed["i_min"])
    out = per_seed.groupby("variant", sort=False).agg(
        rmse_mean=("rmse", "mean"), rmse_max=("rmse", "max"), accuracy=("accuracy", "mean"),
        spread_max=("spread", "max"), init_spread_max=("init_spread", "max"),
        n_seeds=("rmse", "size"))
    out["floor"] = constant_floor(n)
    out["exact_failure"] = [exact_failure(v) for v in out.index]
    return out.reset_index()


def plot_probe(df: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Prediction vs position, one line per variant (mean over seeds, band = min..max)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.0))
    n = int(df["position"].max())
    ax.plot([1, n], [1, n], color="0.6", ls="--", lw=1, label="target")
    for v, g in df.groupby("variant", sort=False):
        st = g.groupby("position")["prediction"].agg(["mean", "min", "max"])
        (line,) = ax.plot(st.index, st["mean"], marker="o", ms=3, label=v)
        ax.fill_between(st.index, st["min"], st["max"], color=line.get_color(), alpha=0.2)
    ax.set_xlabel("position i of an identical token")
    ax.set_ylabel("predicted position")
    ax.set_title("Su's probe: map n identical tokens to 1..n")
    ax.legend(fontsize=8)
    return ax
