r"""The brain model: M masked-activity transformers with stacked weights, and its loss.

A region's scalar activity is embedded to ``d`` (``x w + b``), masked regions get a learned
mask embedding instead; then the LST model's post-LN blocks (the block's additive PE, one head,
bidirectional attention -- ``relative`` too, unlike the authors' causal LST version) and a
per-token linear readout of the activity (:class:`BatchedBrainTransformer`). Weights and PEs
are drawn by :func:`lstpe.nn.architecture.init_weights` (``n_inputs = n_classes = 1``), so
``learn-0.1`` and ``learn-0.2`` of a seed share every weight and the same normal draw of the PE.

The objective is the MSE on the masked regions (:func:`masked_mse`); the best linear
predictor of Gaussian data (:func:`linear_baseline_mse`) is the reference it is compared to.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from lstpe.nn import encodings as enc
from lstpe.nn.architecture import ModelConfig, init_weights
from lstpe.nn.encodings import PESpec, parse_pe
from lstpe.nn.model import StackedModels, stacked_affine

MASK_STREAM = 2_000_003
"""Offset added to a model's seed for the generator of its mask embedding."""


def model_config(n_regions: int, d_model: int = 64, n_layers: int = 4, n_heads: int = 1,
                 mlp_ratio: int = 4) -> ModelConfig:
    """A :class:`~lstpe.nn.architecture.ModelConfig` for R region tokens with scalar input and
    output."""
    return ModelConfig(d_model=d_model, n_layers=n_layers, n_heads=n_heads, mlp_ratio=mlp_ratio,
                       n_tokens=n_regions, n_inputs=1, n_classes=1)


def brain_spec(pe: str | PESpec, variant: str = "paper", relative_causal: bool = False) -> PESpec:
    """The PE spec used in the brain model.

    The brain model is bidirectional, so ``relative`` uses Shaw's bidirectional form (the
    ``textbook`` variant) unless ``relative_causal`` asks for the authors' causal LST version.
    Causal PEs (``c-nope``) are rejected.
    """
    spec = parse_pe(pe, variant=variant)
    if spec.name == "relative" and spec.causal and not relative_causal:
        spec = PESpec("relative", None, "textbook")
    if spec.causal and spec.name != "relative":
        raise ValueError(f"PE {spec.label!r} is causal; the brain model is bidirectional. "
                         f"Valid PEs: {', '.join(n for n in enc.PE_NAMES if n != 'c-nope')}")
    return spec


def init_brain_weights(spec: PESpec, seed: int, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """:func:`lstpe.nn.architecture.init_weights` plus ``mask.emb (d,)`` (U(-1, 1), own
    generator)."""
    w = init_weights(spec, seed, cfg)
    g = torch.Generator().manual_seed(int(seed) + MASK_STREAM)
    w["mask.emb"] = torch.rand(cfg.d_model, generator=g) * 2 - 1
    return w


def initial_pe(pe: str | PESpec, seed: int, cfg: ModelConfig) -> torch.Tensor:
    """The additive PE of a model at initialisation, (L, R, d) (regenerated from its seed)."""
    w = init_brain_weights(parse_pe(pe), seed, cfg)
    return w["pe.fixed"] + w["pe.learn"] * w["pe.mask"]


class BatchedBrainTransformer(StackedModels):
    """M masked-activity transformers with stacked weights, run as one model.

    Per model::

        h_r = x_r w_emb + b_emb   (observed region r)    or   e_mask   (masked region)
        for each block l:  h = h + PE_l ; h = LN(h + Attn(h)) ; h = LN(h + MLP(h))
        y_r = h_r w_out + b_out   predicted activity of every region

    Args:
        specs: one PE per model (any mix).
        seeds: one seed per model.
        cfg: sizes; ``n_tokens`` = number of regions, ``n_inputs = n_classes = 1``.
    """

    def __init__(self, specs: Sequence[PESpec | str], seeds: Sequence[int],
                 cfg: ModelConfig) -> None:
        if cfg.n_inputs != 1 or cfg.n_classes != 1:
            raise ValueError("the brain model needs n_inputs=1 and n_classes=1; use "
                             "lstpe.brain.model_config")
        super().__init__(specs, seeds, cfg, init_brain_weights)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, return_attention: bool = False):
        """Predict every region's activity.

        Args:
            x: (M, B, R) activity per model, or (B, R) shared by all models.
            mask: bool, same shape rules as x; True = masked (its value in x is ignored).
            return_attention: also return attention weights (M, B, L, R, R), head-averaged.
        Returns:
            predictions (M, B, R) [and attention].
        """
        M, cfg = self.n_models, self.cfg
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(M, *x.shape)
        if mask.dim() == 2:
            mask = mask.unsqueeze(0).expand(M, *mask.shape)
        R = cfg.n_tokens
        if x.dim() != 3 or x.shape[0] != M or x.shape[-1] != R or mask.shape != x.shape:
            raise ValueError(f"expected x and mask of shape (M={M}, B, R={R}) or (B, {R}), got "
                             f"{tuple(x.shape)} and {tuple(mask.shape)}")
        x = x.masked_fill(mask, 0.0)
        h = x[..., None] * self.embed_w[:, None] + self.embed_b[:, None, None]
        h = torch.where(mask[..., None], self.mask_emb[:, None, None], h)
        h, maps = self.blocks(h, return_attention)
        y = stacked_affine(h, self.head_w, self.head_b).squeeze(-1)
        return (y, torch.stack(maps, 2)) if return_attention else y


def masked_mse(pred: torch.Tensor, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean squared error over the masked entries, per model: (M, B, R) x3 -> (M,)."""
    m = mask.to(pred.dtype)
    return ((pred - x) ** 2 * m).sum((1, 2)) / m.sum((1, 2))



def linear_baseline_mse(cov: np.ndarray | torch.Tensor, x: torch.Tensor, mask: torch.Tensor,
                        chunk: int = 256) -> float:
    r"""MSE of the best linear predictor for a Gaussian with covariance ``cov``.

    Each masked region is predicted by the conditional mean
    :math:`\hat x_m = \Sigma_{mo}\Sigma_{oo}^{-1} x_o` from the observed ones. For Gaussian
    data with covariance ``cov`` no predictor does better on average, whatever the
    architecture; with ``cov`` estimated on the training split it is a strong reference for
    the test split too.

    Args:
        cov: (R, R) covariance (e.g. of the training split).
        x, mask: (N, R) data and masks; every row must hide the same number of regions.
    """
    cov = torch.as_tensor(np.asarray(cov), dtype=torch.float64)
    x, mask = x.double().cpu(), mask.cpu()
    k = mask.sum(1)
    if not (k == k[0]).all():
        raise ValueError("every row of the mask must hide the same number of regions")
    se, n = 0.0, 0
    for i in range(0, x.shape[0], chunk):
        xb, mb = x[i:i + chunk], mask[i:i + chunk]
        order = mb.to(torch.int8).argsort(dim=1, stable=True)  # observed first, then masked
        n_obs = int((~mb[0]).sum())
        o, m = order[:, :n_obs], order[:, n_obs:]
        s_oo = cov[o[:, :, None], o[:, None, :]]
        s_mo = cov[m[:, :, None], o[:, None, :]]
        xo, xm = xb.gather(1, o), xb.gather(1, m)
        pred = (s_mo @ torch.linalg.solve(s_oo, xo[..., None]))[..., 0]
        se += float(((pred - xm) ** 2).sum())
        n += xm.numel()
    return se / n
