r"""The LST transformer, in two forms that compute the same function.

Architecture (the paper's, all sizes configurable through :class:`ModelConfig`)::

    h = x W_emb + b                       x: (B, 16, 5) one-hot puzzle, h: (B, 16, d)
    for each of the L blocks:
        h = h + PE_l                      the block's own additive PE (zeros if none)
        h = LN(h + SelfAttn(h))           one head, bidirectional unless the PE says causal
        h = LN(h + MLP(h))                MLP = Linear(d, 4d) GELU Linear(4d, d) GELU
    logits = h[:, 15] W_out + b           readout from the last token (grid cell 15)

* :class:`LSTTransformer` is the plain, readable single model built from ``nn.Linear`` and
  ``nn.LayerNorm``. It is the reference for tests and the "plain loop" of the benchmark.
* :class:`BatchedLSTTransformer` holds M models with stacked weights (every parameter has a
  leading model axis) and runs them in one forward pass with batched matmuls. Model ``m`` has
  its own PE, seed and init; ``to_single(m)`` / ``from_singles`` convert exactly.

How each PE's block is built and initialised (the authors' code in the ``paper`` variant) is
in :mod:`lstpe.nn.architecture`; the attention math shared by both forms in
:mod:`lstpe.nn.attention`.
Models of *every* PE can share one batched model: a PE's attention modifiers (rotation,
relative keys, ALiBi, causal mask, temperature, dropout, which projections and biases exist)
are per-model tensors, and absent weights are structural zeros that never move.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lstpe.nn import dropout as drop
from lstpe.nn import encodings as enc
from lstpe.nn.architecture import (
    BUFFERS,
    BlockStructure,
    ModelConfig,
    block_structure,
    init_weights,
    rel_mask,
    rope_tables,
    trainable_count,
)
from lstpe.nn.attention import attend, default_scale, score_bias
from lstpe.nn.encodings import PESpec, parse_pe

__all__ = ["BatchedLSTTransformer", "LSTTransformer", "StackedModels", "attention",
           "stacked_affine"]


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spec: PESpec | str,
              rel: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of one model with PE ``spec`` (convenience wrapper of :func:`attend`).

    Args:
        q, k, v: (..., H, n, d_h).
        rel: (2n-1, d_h) relative key table (row ``j - i + n - 1``), for ``relative``.
    Returns:
        output (..., H, n, d_h) and weights (..., H, n, n).
    """
    spec = parse_pe(spec)
    H, n, dh = q.shape[-3:]
    st = block_structure(spec, n)
    cos, sin, partner = (t.to(q.device) for t in rope_tables(spec, n, dh))
    rope = (cos, sin, partner.expand(1, dh)) if spec.name in ("rope", "rope-2d") else None
    if st.rel_offsets and rel is None:
        raise ValueError("relative attention needs its relative key embeddings")
    if rel is not None:
        rel = rel * rel_mask(st, n).to(rel)[:, None]
    return attend(q, k, v, scale=default_scale(st, dh), bias=score_bias(st, n, H).to(q.device),
                  rope=rope, rel=rel)


# --------------------------------------------------------------------------- plain model


class Block(nn.Module):
    """One post-LN block of the plain model, with exactly the parameters its PE has."""

    def __init__(self, cfg: ModelConfig, spec: PESpec) -> None:
        super().__init__()
        d, n = cfg.d_model, cfg.n_tokens
        self.cfg, self.spec = cfg, spec
        self.st = st = block_structure(spec, n)
        self.qkv = nn.Linear(d, 3 * d, bias=st.qkv_bias)
        self.out = nn.Linear(d, d, bias=st.out_bias) if st.out_proj else None
        self.ln1 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, d * cfg.mlp_ratio)
        self.fc2 = nn.Linear(d * cfg.mlp_ratio, d)
        self.ln2 = nn.LayerNorm(d)
        self.drop = nn.Dropout(st.dropout) if st.dropout > 0 else None
        self.rel = nn.Parameter(torch.zeros(len(st.rel_offsets), cfg.d_head)) \
            if st.rel_offsets else None
        self.register_buffer("rel_rows", rel_mask(st, n).bool(), persistent=False)
        self.register_buffer("bias", score_bias(st, n, cfg.n_heads), persistent=False)
        cos, sin, partner = rope_tables(spec, n, cfg.d_head)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("partner", partner[None], persistent=False)
        self.rotary = spec.name in ("rope", "rope-2d")

    def rel_table(self) -> torch.Tensor | None:
        """The (2n-1, d_h) relative key table (zeros at unused offsets), or None."""
        if self.rel is None:
            return None
        full = self.rel.new_zeros(self.rel_rows.shape[0], self.rel.shape[1])
        return full.index_put((self.rel_rows.nonzero()[:, 0],), self.rel)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h: (B, n, d) (embedding + this block's PE) -> (B, n, d), attention (B, H, n, n)."""
        if self.drop is not None:
            h = self.drop(h)
        B, n, d = h.shape
        H = self.cfg.n_heads
        q, k, v = self.qkv(h).view(B, n, 3, H, d // H).permute(2, 0, 3, 1, 4)
        rope = (self.cos, self.sin, self.partner) if self.rotary else None
        a, weights = attend(q, k, v, scale=default_scale(self.st, d // H), bias=self.bias,
                            rope=rope, rel=self.rel_table())
        a = a.transpose(1, 2).reshape(B, n, d)
        h = self.ln1(h + (self.out(a) if self.out is not None else a))
        h = self.ln2(h + F.gelu(self.fc2(F.gelu(self.fc1(h)))))
        return h, weights


class LSTTransformer(nn.Module):
    """The plain single-model LST transformer (reference implementation).

    Its parameters are exactly those of the PE's block (no structural zeros), so
    ``sum(p.numel() for p in m.parameters() if p.requires_grad)`` is the authors' count.

    Args:
        spec: positional encoding (name or :class:`~lstpe.nn.encodings.PESpec`).
        seed: init seed (same draws as model ``m`` of a batched model with that seed).
        cfg: sizes.
    """

    def __init__(self, spec: PESpec | str, seed: int = 0, cfg: ModelConfig | None = None):
        super().__init__()
        self.cfg = cfg or ModelConfig()
        self.spec = parse_pe(spec)
        self.seed = seed
        d = self.cfg.d_model
        self.embed = nn.Linear(self.cfg.n_inputs, d)
        self.blocks = nn.ModuleList(Block(self.cfg, self.spec) for _ in range(self.cfg.n_layers))
        self.head = nn.Linear(d, self.cfg.n_classes)
        self.pe = nn.Parameter(torch.zeros(self.cfg.n_layers, self.cfg.n_tokens, d),
                               requires_grad=self.spec.name == "learn")
        self.load_weights(init_weights(self.spec, seed, self.cfg))

    def load_weights(self, w: dict[str, torch.Tensor]) -> None:
        """Copy a dict in the full :func:`init_weights` layout into this module."""
        with torch.no_grad():
            for name, mod in [("embed", self.embed), ("head", self.head)]:
                mod.weight.copy_(w[name + ".w"].T)
                mod.bias.copy_(w[name + ".b"])
            for i, blk in enumerate(self.blocks):
                p = f"blocks.{i}."
                for lin in ("qkv", "out", "fc1", "fc2"):
                    mod = getattr(blk, lin)
                    if mod is None:
                        continue
                    mod.weight.copy_(w[p + lin + ".w"].T)
                    if mod.bias is not None:
                        mod.bias.copy_(w[p + lin + ".b"])
                for ln in ("ln1", "ln2"):
                    getattr(blk, ln).weight.copy_(w[p + ln + ".w"])
                    getattr(blk, ln).bias.copy_(w[p + ln + ".b"])
                if blk.rel is not None:
                    blk.rel.copy_(w[p + "rel"][blk.rel_rows])
            self.pe.copy_(w["pe.fixed"] + w["pe.learn"] * w["pe.mask"])

    def forward(
        self, x: torch.Tensor, return_attention: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """x: (B, 16, 5) -> logits (B, 4) [and attention (B, L, n, n), averaged over heads]."""
        h = self.embed(x)
        maps = []
        for i, blk in enumerate(self.blocks):
            h, a = blk(h + self.pe[i])
            maps.append(a.mean(1))
        logits = self.head(h[:, -1])
        return (logits, torch.stack(maps, 1)) if return_attention else logits


# --------------------------------------------------------------------------- batched model


def stacked_affine(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-model affine map: x (M, ..., i), w (M, i, o), b (M, o) -> (M, ..., o)."""
    M, *mid, i = x.shape
    y = torch.baddbmm(b[:, None, :], x.reshape(M, -1, i), w)
    return y.view(M, *mid, w.shape[-1])


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-model LayerNorm: x (M, ..., d), w, b (M, d)."""
    shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],)
    return F.layer_norm(x, x.shape[-1:]) * w.view(shape) + b.view(shape)


class StackedModels(nn.Module):
    """M models of one architecture held as stacked weights, any mix of PEs.

    Every tensor that ``init`` returns for one model (``init(spec, seed, cfg) -> {name:
    tensor}``, the full layout of :func:`~lstpe.nn.architecture.init_weights`) gets a leading
    model axis M and becomes a parameter (a buffer for the names in :data:`BUFFERS`). Each
    model's :class:`~lstpe.nn.architecture.BlockStructure` becomes per-model buffers: masks of the
    q/k/v bias, output projection and its bias, the relative key rows; the score scale
    (temperature), score bias (ALiBi, causal mask), rotary tables and dropout probability.

    Shared by :class:`BatchedLSTTransformer` and :class:`lstpe.brain.BatchedBrainTransformer`.
    """

    def __init__(self, specs: Sequence[PESpec | str], seeds: Sequence[int], cfg: ModelConfig,
                 init: Callable[[PESpec, int, ModelConfig], dict[str, torch.Tensor]]) -> None:
        super().__init__()
        self.cfg = cfg
        self.specs = [parse_pe(s) for s in specs]
        self.seeds = [int(s) for s in seeds]
        if len(self.specs) != len(self.seeds):
            raise ValueError(f"got {len(self.specs)} PEs but {len(self.seeds)} seeds")
        if not self.specs:
            raise ValueError("a batched model needs at least one model")
        pairs = zip(self.specs, self.seeds, strict=True)
        singles = [init(s, seed, self.cfg) for s, seed in pairs]
        self._names = list(singles[0])
        for name in self._names:
            t = torch.stack([w[name] for w in singles])
            if name in BUFFERS:
                self.register_buffer(name.replace(".", "_"), t)
            else:
                self.register_parameter(name.replace(".", "_"), nn.Parameter(t))
        self._register_structure()

    def _register_structure(self) -> None:
        n, H, dh = self.cfg.n_tokens, self.cfg.n_heads, self.cfg.d_head
        sts: list[BlockStructure] = [block_structure(s, n) for s in self.specs]
        self.structures = sts

        def buf(name: str, t: torch.Tensor) -> None:
            self.register_buffer(name, t, persistent=False)

        buf("s_qkv_b", torch.tensor([float(s.qkv_bias) for s in sts])[:, None])
        buf("s_out_w", torch.tensor([float(s.out_proj) for s in sts])[:, None, None])
        buf("s_out_b", torch.tensor([float(s.out_bias) for s in sts])[:, None])
        buf("s_rel", torch.stack([rel_mask(s, n) for s in sts])[:, :, None])
        buf("score_scale", torch.tensor([default_scale(s, dh) for s in sts]).view(-1, 1, 1, 1, 1))
        buf("score_bias", torch.stack([score_bias(s, n, H) for s in sts])[:, None])
        tables = [rope_tables(s, n, dh) for s in self.specs]
        buf("rope_cos", torch.stack([t[0] for t in tables])[:, None, None])
        buf("rope_sin", torch.stack([t[1] for t in tables])[:, None, None])
        buf("rope_partner", torch.stack([t[2] for t in tables])[:, None, None, None])
        buf("eye", torch.eye(self.cfg.d_model)[None])
        buf("rel_index", enc.relative_index(n))
        drop_idx = [m for m, s in enumerate(sts) if s.dropout > 0]
        buf("drop_idx", torch.tensor(drop_idx, dtype=torch.long))
        buf("drop_p", torch.tensor([sts[m].dropout for m in drop_idx], dtype=torch.float32))
        self.any_rope = any(s.name in ("rope", "rope-2d") for s in self.specs)
        self.any_rel = any(s.rel_offsets for s in sts)
        self.any_bias = any(s.causal or s.alibi_slope for s in sts)
        self.mask_qkv_b = not all(s.qkv_bias for s in sts)
        self.mask_out_w = not all(s.out_proj for s in sts)
        self.mask_out_b = not all(s.out_bias for s in sts)

    @property
    def n_models(self) -> int:
        return len(self.specs)

    @property
    def dropout_seeds(self) -> list[int]:
        """Seeds of the models that use dropout (the order of the keys ``blocks`` expects)."""
        return [self.seeds[int(m)] for m in self.drop_idx]

    def get(self, name: str) -> torch.Tensor:
        """Stacked tensor by its init name, e.g. ``get("blocks.0.qkv.w")``."""
        return getattr(self, name.replace(".", "_"))

    def pe(self) -> torch.Tensor:
        """The additive PEs in use: (M, L, n, d) (zeros for PEs acting inside attention)."""
        return self.pe_fixed + self.pe_mask[:, None, None, None] * self.pe_learn

    def single_weights(self, m: int) -> dict[str, torch.Tensor]:
        """Model m's tensors in the full init layout (detached copies)."""
        return {name: self.get(name)[m].detach().clone() for name in self._names}

    def labels(self) -> list[str]:
        """PE label of each model (``learn-0.2``, ``2d-fixed``, ...)."""
        return [s.label for s in self.specs]

    def trainable_counts(self) -> list[int]:
        """Trainable parameters of each model, structural zeros not counted."""
        return [trainable_count(s, self.cfg) for s in self.specs]

    def _dropout(self, h: torch.Tensor, keys: torch.Tensor, block: int) -> torch.Tensor:
        """Apply each dropout model's own mask (keys (K,), one per ``drop_idx`` model)."""
        M, B, n, d = h.shape
        keep = drop.keep_mask(keys, (B, n, d), self.drop_p, offset=block * B * n * d)
        mult = torch.ones(M, B, n, d, device=h.device, dtype=h.dtype)
        mult[self.drop_idx] = keep.to(h.dtype)
        return h * mult

    def blocks(self, h: torch.Tensor, return_attention: bool = False,
               last_token_only: bool = False, dropout_keys: torch.Tensor | None = None,
               ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Run the L post-LN blocks of all M models.

        Per block: ``h = h + PE_l`` (then dropout, for the models that have it, when
        ``dropout_keys`` is given); ``h = LN(h + Attn(h))``; ``h = LN(h + MLP(h))``.

        Args:
            h: (M, B, n, d) token embeddings.
            return_attention: collect every block's attention, averaged over heads.
            last_token_only: compute the last block's output projection, LayerNorms and MLP
                for the last token alone (all a last-token read-out needs; same values).
            dropout_keys: (K,) int64 keys of the K = ``len(drop_idx)`` dropout models
                (:func:`lstpe.nn.dropout.keys_tensor` of :attr:`dropout_seeds`); None = no
                dropout (evaluation).
        Returns:
            h: (M, B, n, d), or (M, B, 1, d) with ``last_token_only``; and the list of L
            attention maps (M, B, n, n) (empty unless ``return_attention``).
        """
        M, B, n, d = h.shape
        H, L = self.cfg.n_heads, self.cfg.n_layers
        pe = self.pe()
        rope = (self.rope_cos, self.rope_sin, self.rope_partner) if self.any_rope else None
        bias = self.score_bias if self.any_bias else None
        use_drop = dropout_keys is not None and len(self.drop_idx) > 0
        maps = []
        for i in range(L):
            g = lambda name, i=i: self.get(f"blocks.{i}.{name}")  # noqa: E731
            h = h + pe[:, i, None]
            if use_drop:
                h = self._dropout(h, dropout_keys, i)
            qkv_b = g("qkv.b") * self.s_qkv_b if self.mask_qkv_b else g("qkv.b")
            qkv = stacked_affine(h, g("qkv.w"), qkv_b).view(M, B, n, 3, H, d // H)
            q, k, v = qkv.permute(3, 0, 1, 4, 2, 5)  # each (M, B, H, n, d_h)
            rel = g("rel") * self.s_rel if self.any_rel else None
            a, w = attend(q, k, v, scale=self.score_scale, bias=bias, rope=rope, rel=rel,
                          rel_index=self.rel_index)
            a = a.transpose(2, 3).reshape(M, B, n, d)
            if last_token_only and i == L - 1:
                a, h = a[:, :, -1:], h[:, :, -1:]
            out_w = g("out.w")
            if self.mask_out_w:  # no output projection = identity, its weight a fixed zero
                out_w = out_w * self.s_out_w + self.eye * (1 - self.s_out_w)
            out_b = g("out.b") * self.s_out_b if self.mask_out_b else g("out.b")
            h = _layer_norm(h + stacked_affine(a, out_w, out_b), g("ln1.w"), g("ln1.b"))
            hid = F.gelu(stacked_affine(h, g("fc1.w"), g("fc1.b")))
            mlp = F.gelu(stacked_affine(hid, g("fc2.w"), g("fc2.b")))
            h = _layer_norm(h + mlp, g("ln2.w"), g("ln2.b"))
            if return_attention:
                maps.append(w.mean(2))
        return h, maps


class BatchedLSTTransformer(StackedModels):
    """M LST transformers with stacked weights, run as one model; any mix of PEs.

    Every parameter has a leading model axis M (see :func:`init_weights` for the per-model
    shapes). The additive PE of model m is ``pe_fixed[m] + pe_mask[m] * pe_learn[m]``: fixed
    PEs live in a buffer and receive no update (also not from decoupled weight decay).
    """

    def __init__(
        self,
        specs: Sequence[PESpec | str],
        seeds: Sequence[int],
        cfg: ModelConfig | None = None,
    ) -> None:
        super().__init__(specs, seeds, cfg or ModelConfig(), init_weights)

    def forward(
        self,
        x: torch.Tensor,
        return_attention: bool = False,
        embed_noise_std: float = 0.0,
        generator: torch.Generator | Sequence[torch.Generator] | None = None,
        dropout_keys: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Run all M models.

        Args:
            x: (M, B, n, 5) a different batch per model, or (B, n, 5) the same batch for all.
            return_attention: also return attention weights.
            embed_noise_std: std of Gaussian noise added to the token embeddings (robustness).
            generator: for that noise: one generator for the whole (M, B, n, d) draw, or one
                per model, each drawing its model's (B, n, d) noise, so that a model's noise
                does not depend on the other models of the batch.
            dropout_keys: see :meth:`StackedModels.blocks` (None: no dropout).
        Returns:
            logits (M, B, 4) [and attention (M, B, L, n, n), averaged over heads].
        """
        M, cfg = self.n_models, self.cfg
        shape_in = tuple(x.shape)
        if x.dim() == 3:
            x = x.unsqueeze(0).expand(M, *x.shape)
        if x.dim() != 4 or x.shape[0] != M or x.shape[-2:] != (cfg.n_tokens, cfg.n_inputs):
            raise ValueError(
                f"expected input (M={M}, B, {cfg.n_tokens}, {cfg.n_inputs}) or "
                f"(B, {cfg.n_tokens}, {cfg.n_inputs}), got {shape_in}"
            )
        h = stacked_affine(x, self.embed_w, self.embed_b)
        if embed_noise_std < 0:
            raise ValueError(f"embed_noise_std must be >= 0, got {embed_noise_std}")
        if embed_noise_std > 0:
            if isinstance(generator, Sequence):
                if len(generator) != M:
                    raise ValueError(f"{len(generator)} noise generators for {M} models")
                noise = torch.stack([torch.randn(h.shape[1:], generator=g, device="cpu")
                                     for g in generator])
            else:
                noise = torch.randn(h.shape, generator=generator, device="cpu")
            h = h + embed_noise_std * noise.to(h.device)
        # Only the last token is read out: without attention maps to return, the last block is
        # computed for it alone (same logits, ~1/4 fewer FLOPs at L=4).
        h, maps = self.blocks(h, return_attention, last_token_only=not return_attention,
                              dropout_keys=dropout_keys)
        logits = stacked_affine(h[:, :, -1], self.head_w, self.head_b)
        return (logits, torch.stack(maps, 2)) if return_attention else logits

    def to_single(self, m: int) -> LSTTransformer:
        """Model m as a plain :class:`LSTTransformer` (same function)."""
        single = LSTTransformer(self.specs[m], self.seeds[m], self.cfg)
        single.load_weights({k: v.cpu() for k, v in self.single_weights(m).items()})
        return single
