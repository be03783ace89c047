r"""Self-attention with every PE's modifications, for one model or M stacked models.

.. math::
    e_{ij} = \frac{\tilde q_i \cdot \tilde k_j + q_i \cdot a_{j-i}}{\sqrt{d_h}\,T}
             + b_{ij},\qquad A = \mathrm{softmax}_j(e)

with rotary PEs applied to q and k first (:math:`\tilde q = R_i q`), relative key vectors
:math:`a` (``relative``), an additive bias :math:`b` holding ALiBi's :math:`-m|i-j|` and
:math:`-\infty` where a causal mask forbids a key, and temperature T (``c-nope``: 1/100).

Every modification is a tensor with leading dims that broadcast against the batch, so one call
serves a plain model (no leading model axis) and M stacked models with M different PEs: a model
without rotation has cos = 1, sin = 0; without relative keys, zero vectors; without bias, zeros.
The scores are computed in (at least) float32 even under bf16 autocast (a temperature of 1/100
multiplies their rounding error by 100).

The *authors'* relative attention is Music-Transformer-style: scores ``q_i . E_r`` for 16
vectors, "skewed" so that entry (i, j) holds ``q_i . E[j - i + 15]`` (valid for j <= i, the
causal part). That is exactly a gather at offset ``j - i``, which is what :func:`attend` does
(``tests/test_model.py`` checks it against the skew).
"""

from __future__ import annotations

import contextlib
import math

import torch

from lstpe.nn import encodings as enc
from lstpe.nn.architecture import BlockStructure


def score_bias(struct: BlockStructure, n: int, n_heads: int = 1) -> torch.Tensor:
    """(H, n, n) additive score bias of a PE: ALiBi distances and the causal mask (-inf).

    ALiBi head h uses slope ``alibi_slope * 0.5**h`` (the geometric sequence of Press et al.).
    """
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).abs().float()
    slopes = struct.alibi_slope * 0.5 ** torch.arange(n_heads, dtype=torch.float32)
    bias = -slopes[:, None, None] * dist
    if struct.causal:
        bias = bias.masked_fill(~enc.causal_mask(n), float("-inf"))
    return bias


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
           partner: torch.Tensor) -> torch.Tensor:
    """``x * cos + x[..., partner] * sin`` with per-model tables.

    Args:
        x: (..., n, d_h) queries or keys.
        cos, sin: broadcastable to x, e.g. (M, 1, 1, n, d_h).
        partner: long, broadcastable to x's shape, e.g. (M, 1, 1, 1, d_h).
    """
    return x * cos + torch.gather(x, -1, partner.expand(x.shape)) * sin


def _no_autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """Attention scores are computed in float32 or wider: autocast off where the device has
    it, a plain context where torch has no autocast for the device (MPS on torch 2.3)."""
    from lstpe.runtime import autocast_supported

    if autocast_supported(device):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
           scale: torch.Tensor | float, bias: torch.Tensor | None = None,
           rope: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
           rel: torch.Tensor | None = None, rel_index: torch.Tensor | None = None
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of one or many models.

    Args:
        q, k, v: (*lead, H, n, d_h); ``lead`` is (B,) for one model, (M, B) for M models.
        scale: multiplier of the raw scores, ``1 / (sqrt(d_h) T)``; a float or a tensor
            broadcastable to the scores (*lead, H, n, n), e.g. (M, 1, 1, 1, 1).
        bias: additive score bias broadcastable to the scores (ALiBi, causal -inf).
        rope: (cos, sin, partner) for :func:`rotate_pairs`, or None (no model rotates).
        rel: relative key table, (2n-1, d_h) for one model or (M, 2n-1, d_h) for M models
            (zeros where a model has none), or None.
        rel_index: (n, n) long :func:`lstpe.nn.encodings.relative_index` already on the device
            (built here if None; pass a buffer inside CUDA-graph capture, where no host copy may
            happen).
    Returns:
        output (*lead, H, n, d_h) and attention weights (*lead, H, n, n).
    """
    n = q.shape[-2]
    if rope is not None:
        q_r, k_r = rotate_pairs(q, *rope), rotate_pairs(k, *rope)
    else:
        q_r, k_r = q, k
    with _no_autocast(q.device):
        dt = torch.promote_types(q.dtype, torch.float32)  # at least float32, float64 stays
        qf = q.to(dt)
        scores = q_r.to(dt) @ k_r.to(dt).transpose(-1, -2)
        if rel is not None:
            relf = rel.to(dt)
            if relf.dim() == 2:
                qr = qf @ relf.T  # (*lead, H, n, 2n-1)
            else:  # one table per model: q (M, B, H, n, d) x (M, R, d)
                M = qf.shape[0]
                qr = torch.bmm(qf.reshape(M, -1, qf.shape[-1]), relf.transpose(1, 2))
                qr = qr.view(*qf.shape[:-1], relf.shape[1])
            if rel_index is None:
                rel_index = enc.relative_index(n).to(q.device)
            idx = rel_index.expand(*qr.shape[:-2], n, n)
            scores = scores + torch.gather(qr, -1, idx)
        scores = scores * scale
        if bias is not None:
            scores = scores + bias
        weights = scores.softmax(-1)
    out = weights.to(v.dtype) @ v
    return out, weights


def default_scale(struct: BlockStructure, d_head: int) -> float:
    """``1 / (sqrt(d_head) * temperature)``."""
    return 1.0 / (math.sqrt(d_head) * struct.temperature)


def bitwise_on(device: torch.device | str, pes: list[str]) -> tuple[bool, str]:
    """Whether training models with the PEs ``pes`` on ``device`` repeats bit for bit (a chunk
    paused and resumed, or trained twice), and why, in one line.

    Rotary PEs and relative keys read their partners with :func:`torch.gather`, whose backward
    accumulates with atomic adds on CUDA, in an order that varies from run to run; on a CPU
    the order is fixed. Everything else the models compute is deterministic on both.
    """
    from lstpe.nn.architecture import block_structure

    dev = torch.device(device)
    gathers = [p for p in pes if enc.parse_pe(p).name in ("rope", "rope-2d")
               or block_structure(p).rel_offsets]
    if dev.type != "cuda" or not gathers:
        return True, f"bit for bit on {dev.type}"
    return False, (f"not bit for bit on CUDA: {', '.join(sorted(set(gathers)))} gather in "
                   "attention, whose backward adds atomically in a varying order")
