"""Plumbing behind chapter 5's readable model: moving weights between it and the package.

Chapter 5 writes the learnable PE, one block and one training step as short torch modules in
its cells and checks them against the package's own code (the batched model the engine trains,
:class:`lstpe.nn.model.BatchedLSTTransformer`, and :func:`lstpe.training.train.train`). The
readable modules name their weights as ``torch.nn`` does (``blocks.0.qkv.weight`` of an
``nn.Linear``, ``pe.P``); the package stores one model in the layout of
:func:`lstpe.nn.architecture.init_weights` (``blocks.0.qkv.w`` as (in, out), ``pe.learn``).
The three functions here translate between the two. The one model code here is
:class:`LearnablePE`, chapter 4b's readable learnable PE, kept byte for byte as that chapter
shows it (``tests/test_readable.py`` compares them) so that chapter 5 imports it rather than
writing it a second time.
"""

from __future__ import annotations

import torch
from torch import nn

from lstpe.nn.model import StackedModels


class LearnablePE(nn.Module):
    """One learned matrix P_l of shape (n_tokens, d) per block, entries N(0, sigma^2) at init."""
    def __init__(self, n_layers: int, n_tokens: int, d: int, sigma: float,
                 generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.P = nn.Parameter(sigma * torch.randn(n_layers, n_tokens, d, generator=generator))

    def forward(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """h: (B, n_tokens, d), the stream entering block `layer` -> h + P_layer."""
        return h + self.P[layer]


def package_name(name: str) -> tuple[str, bool]:
    """The package's name of a readable parameter, and whether its tensor is transposed.

    ``"blocks.0.qkv.weight"`` -> ``("blocks.0.qkv.w", True)`` (``nn.Linear`` keeps (out, in),
    the package (in, out)); ``"blocks.0.ln1.weight"`` of a 1-D LayerNorm weight is not
    transposed (the caller decides by the tensor's rank); ``"pe.P"`` -> ``("pe.learn", False)``.
    """
    if name.split(".")[-1] == "P":
        return "pe.learn", False
    stem, kind = name.rsplit(".", 1)
    if kind not in ("weight", "bias"):
        raise ValueError(f"no package name for readable parameter {name!r}")
    return f"{stem}.{kind[0]}", kind == "weight"


def to_package(module: nn.Module, prefix: str = "") -> dict[str, torch.Tensor]:
    """A readable module's parameters under the package's names (detached copies).

    Args:
        module: a readable module (the PE, a block or the whole model of chapter 5).
        prefix: its place in the whole model, e.g. ``"blocks.0."`` for a block alone,
            ``"pe."`` for the PE alone.
    Returns:
        ``{package name: tensor}``; 2-D linear weights (out, in) become (in, out).
    """
    out = {}
    for name, p in module.named_parameters():
        key, transpose = package_name(prefix + name)
        t = p.detach()
        out[key] = (t.T if transpose and t.dim() == 2 else t).clone()
    return out


@torch.no_grad()
def from_package(module: nn.Module, weights: dict[str, torch.Tensor], prefix: str = "") -> None:
    """Load one model's package weights (the :func:`~lstpe.nn.architecture.init_weights`
    layout, e.g. ``single_weights(m)``) into a readable module, in place."""
    for name, p in module.named_parameters():
        key, transpose = package_name(prefix + name)
        t = weights[key]
        p.copy_(t.T if transpose and t.dim() == 2 else t)


@torch.no_grad()
def copy_into(model: StackedModels, module: nn.Module, prefix: str = "", m: int = 0) -> None:
    """Write a readable module's weights into model ``m`` of the package's stacked model.

    Args:
        model: e.g. a :class:`~lstpe.nn.model.BatchedLSTTransformer` (every tensor (M, ...)).
        module, prefix: as for :func:`to_package`.
        m: which of the M models receives them.
    """
    for key, t in to_package(module, prefix).items():
        model.get(key)[m].copy_(t)
