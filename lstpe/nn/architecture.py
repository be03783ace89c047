r"""What one LST transformer is made of: sizes, the block layout each PE implies, and its init.

Every model, whatever its PE, is stored in one *full layout* (:func:`init_weights`): q/k/v
weights and biases, an output projection with bias, a table of ``2n-1`` relative key vectors
and an additive PE per block. A PE's :class:`BlockStructure` says which of these exist; the
ones that do not are *structural zeros*: stored as zeros, multiplied by a 0 mask in the forward
pass, so their gradient is exactly zero and no optimizer (Adam, AdamW, SGD, with or without
weight decay) ever moves them. This is what lets models of every PE share one batched model.

The ``paper`` variant follows the authors' code (``lstnn/transformer_main.py``), which differs
from the paper's text in several places:

=====================  ===================================================================
PE                     block in the authors' code
=====================  ===================================================================
2d-fixed, 1d-fixed     ``nn.MultiheadAttention``; ``Dropout(p=0.1)`` on embedding+PE at
                       every block (the text says no dropout)
learn, random, nope    ``nn.MultiheadAttention``, no dropout
relative               q/k/v with bias, 16 relative keys N(0,1) (offsets -15..0, causal
                       mask), **no output projection**
c-nope                 q/k/v and output projection **without bias**, temperature 1/100
rope                   labml rotary module: q/k/v and output projection with bias
=====================  ===================================================================

``nn.MultiheadAttention``'s init: the (3d, d) in-projection xavier-uniform
(:math:`\mathcal U(\pm\sqrt{6/(4d)})`, std 0.0559 at d=160), in- and out-projection biases
zero, out-projection weight ``nn.Linear``'s default :math:`\mathcal U(\pm 1/\sqrt d)`. Every
other linear map uses ``nn.Linear``'s default (weights and biases
:math:`\mathcal U(\pm 1/\sqrt{\text{fan\_in}})`). ``alibi`` and ``rope-2d`` (ours, not in the
paper) are built like ``rope``. The ``textbook`` variant gives every PE the same block:
``nn.Linear`` defaults, biases and an output projection everywhere, no dropout.

With these rules the trainable-parameter counts equal the authors' at the paper's size:
1,238,724 (2d-fixed, 1d-fixed, nope, rope, random), 1,248,964 (learn), 1,145,924 (relative),
1,236,164 (c-nope) (``tests/test_model.py``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from lstpe.nn import encodings as enc
from lstpe.nn.encodings import PESpec, parse_pe

PE_STREAM = 1_000_003
"""Offset added to a model's seed for the generator of its PE (independent of the weights)."""

PAPER_DROPOUT = 0.1
"""Dropout on embedding+PE of the authors' sinusoidal PE modules (2d-fixed, 1d-fixed)."""


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the LST transformer (defaults: the paper's)."""

    d_model: int = 160
    n_layers: int = 4
    n_heads: int = 1
    mlp_ratio: int = 4
    n_tokens: int = 16
    n_inputs: int = 5
    n_classes: int = 4

    def __post_init__(self) -> None:
        for name in ("d_model", "n_layers", "n_heads", "mlp_ratio", "n_tokens", "n_inputs",
                     "n_classes"):
            if getattr(self, name) < 1:
                raise ValueError(f"ModelConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class BlockStructure:
    """How the attention of one PE's blocks is built.

    Attributes:
        init_law: ``"mha"`` (``nn.MultiheadAttention``'s init) or ``"linear"``.
        qkv_bias: q/k/v projections have biases.
        out_proj: an output projection exists (else the heads' output goes straight on).
        out_bias: the output projection has a bias.
        rel_offsets: relative offsets ``j - i`` with a learned key vector (empty: none).
        causal: query i attends to keys j <= i only.
        temperature: softmax temperature (scores are divided by it).
        alibi_slope: ALiBi slope of the first head (0 = no ALiBi).
        dropout: dropout probability on embedding+PE at every block (training only).
    """

    init_law: str = "linear"
    qkv_bias: bool = True
    out_proj: bool = True
    out_bias: bool = True
    rel_offsets: tuple[int, ...] = ()
    causal: bool = False
    temperature: float = 1.0
    alibi_slope: float = 0.0
    dropout: float = 0.0


def block_structure(spec: PESpec | str, n_tokens: int = 16) -> BlockStructure:
    """The :class:`BlockStructure` of a PE (see the module docstring for the rules)."""
    spec = parse_pe(spec)
    n = n_tokens
    alibi = enc.ALIBI_SLOPE if spec.name == "alibi" else 0.0
    if spec.variant == "textbook":
        rel = tuple(range(-(n - 1), n)) if spec.name == "relative" else ()
        return BlockStructure(rel_offsets=rel, alibi_slope=alibi, causal=spec.causal,
                              temperature=spec.temperature)
    if spec.additive:
        drop = PAPER_DROPOUT if spec.name in ("2d-fixed", "1d-fixed") else 0.0
        return BlockStructure(init_law="mha", dropout=drop)
    if spec.name == "relative":
        return BlockStructure(out_proj=False, out_bias=False,
                              rel_offsets=tuple(range(-(n - 1), 1)), causal=True)
    if spec.name == "c-nope":
        return BlockStructure(qkv_bias=False, out_bias=False, causal=True,
                              temperature=spec.temperature)
    return BlockStructure(alibi_slope=alibi)


def rel_mask(struct: BlockStructure, n_tokens: int) -> torch.Tensor:
    """(2n-1,) float mask of the relative key rows in use (row ``r`` = offset ``r - n + 1``)."""
    m = torch.zeros(2 * n_tokens - 1)
    for off in struct.rel_offsets:
        m[off + n_tokens - 1] = 1.0
    return m


def _uniform(shape: tuple[int, ...], bound: float, g: torch.Generator) -> torch.Tensor:
    return (torch.rand(shape, generator=g) * 2 - 1) * bound


def init_weights(spec: PESpec | str, seed: int, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """All parameters and buffers of one model in the full layout, drawn from ``seed``.

    Returns a dict of name -> tensor with *single-model* shapes; linear weights are stored as
    (in, out) so that ``y = x @ W + b``. Keys: ``embed.w (5, d)``, ``embed.b (d,)``,
    ``pe.fixed (L, 16, d)``, ``pe.learn (L, 16, d)``, ``pe.mask ()``,
    ``blocks.{l}.{qkv.w (d, 3d), qkv.b, out.w (d, d), out.b, ln1.w, ln1.b, fc1.w (d, 4d), fc1.b,
    fc2.w (4d, d), fc2.b, ln2.w, ln2.b, rel (2*16-1, d_head)}``, ``head.w (d, 4)``,
    ``head.b (4,)``. Entries the PE's :class:`BlockStructure` lacks are zeros.

    The weights come from a generator seeded by ``seed``; the additive PE and the relative keys
    from a second one seeded by ``seed + PE_STREAM``, so ``learn-0.1`` and ``learn-0.2`` of one
    seed share every weight and the same standard-normal draw Z (their PEs are 0.1 Z, 0.2 Z).
    """
    spec = parse_pe(spec)
    st = block_structure(spec, cfg.n_tokens)
    d, f, L, n = cfg.d_model, cfg.d_model * cfg.mlp_ratio, cfg.n_layers, cfg.n_tokens
    g = torch.Generator().manual_seed(int(seed))
    lin = 1.0 / math.sqrt(d)
    w: dict[str, torch.Tensor] = {
        "embed.w": _uniform((cfg.n_inputs, d), 1 / math.sqrt(cfg.n_inputs), g),
        "embed.b": _uniform((d,), 1 / math.sqrt(cfg.n_inputs), g),
    }
    for i in range(L):
        p = f"blocks.{i}."
        if st.init_law == "mha":
            w[p + "qkv.w"] = _uniform((d, 3 * d), math.sqrt(6.0 / (d + 3 * d)), g)
            w[p + "qkv.b"] = torch.zeros(3 * d)
            w[p + "out.w"] = _uniform((d, d), lin, g)
            w[p + "out.b"] = torch.zeros(d)
        else:
            w[p + "qkv.w"] = _uniform((d, 3 * d), lin, g)
            w[p + "qkv.b"] = _uniform((3 * d,), lin, g) * float(st.qkv_bias)
            w[p + "out.w"] = _uniform((d, d), lin, g) * float(st.out_proj)
            w[p + "out.b"] = _uniform((d,), lin, g) * float(st.out_bias)
        w[p + "ln1.w"], w[p + "ln1.b"] = torch.ones(d), torch.zeros(d)
        w[p + "fc1.w"] = _uniform((d, f), lin, g)
        w[p + "fc1.b"] = _uniform((f,), lin, g)
        w[p + "fc2.w"] = _uniform((f, d), 1 / math.sqrt(f), g)
        w[p + "fc2.b"] = _uniform((d,), 1 / math.sqrt(f), g)
        w[p + "ln2.w"], w[p + "ln2.b"] = torch.ones(d), torch.zeros(d)
    w["head.w"] = _uniform((d, cfg.n_classes), lin, g)
    w["head.b"] = _uniform((cfg.n_classes,), lin, g)
    gp = torch.Generator().manual_seed(int(seed) + PE_STREAM)
    pe = enc.additive_pe(spec, L, n, d, generator=gp)
    learnable = spec.name == "learn"
    w["pe.fixed"] = torch.zeros_like(pe) if learnable else pe
    w["pe.learn"] = pe if learnable else torch.zeros_like(pe)
    w["pe.mask"] = torch.tensor(1.0 if learnable else 0.0)
    rows = rel_mask(st, n)
    for i in range(L):
        rel = torch.zeros(2 * n - 1, cfg.d_head)
        if st.rel_offsets:
            k = int(rows.sum())
            rel[rows.bool()] = torch.randn(k, cfg.d_head, generator=gp)
        w[f"blocks.{i}.rel"] = rel
    return w


BUFFERS = ("pe.fixed", "pe.mask")
"""Entries of :func:`init_weights` that are constants, not parameters."""


def rope_tables(spec: PESpec | str, n_tokens: int, d_head: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A PE's rotary map as ``x' = x * cos + x[..., partner] * sin`` per position.

    Read off :func:`lstpe.nn.encodings.apply_rope` applied to the identity, so the batched model
    rotates exactly as the encodings module defines. PEs without rotation get cos = 1, sin = 0,
    partner = identity.

    Returns:
        cos (n, d_head), sin (n, d_head) (signed), partner (d_head,) long.
    """
    spec = parse_pe(spec)
    n, dh = n_tokens, d_head
    if spec.name not in ("rope", "rope-2d"):
        return torch.ones(n, dh), torch.zeros(n, dh), torch.arange(dh)
    side = math.isqrt(n)
    eye = torch.eye(dh, dtype=torch.float32)[:, None, :].expand(dh, n, dh)
    rot = enc.apply_rope(spec, eye, side, side)  # rot[c, m, j] = R_m[j, c]
    R = rot.permute(1, 2, 0)  # (n, j, c)
    cos = torch.diagonal(R, dim1=1, dim2=2).clone()
    off = R - torch.diag_embed(cos)
    partner = off.abs().sum(0).argmax(-1)  # the one off-diagonal column of row j
    sin = off.gather(2, partner.expand(n, dh)[..., None]).squeeze(-1)
    none = off.abs().sum((0, 2)) == 0
    partner = torch.where(none, torch.arange(dh), partner)
    return cos, sin, partner


def trainable_count(spec: PESpec | str, cfg: ModelConfig) -> int:
    """Trainable parameters of one model of this PE (structural zeros not counted)."""
    spec = parse_pe(spec)
    st = block_structure(spec, cfg.n_tokens)
    d, f, L, n = cfg.d_model, cfg.d_model * cfg.mlp_ratio, cfg.n_layers, cfg.n_tokens
    per_block = d * 3 * d + 3 * d * st.qkv_bias + (d * d) * st.out_proj + d * st.out_bias
    per_block += 4 * d + d * f + f + f * d + d + len(st.rel_offsets) * cfg.d_head
    total = L * per_block + cfg.n_inputs * d + d + d * cfg.n_classes + cfg.n_classes
    return total + (L * n * d if spec.name == "learn" else 0)
