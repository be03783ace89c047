"""The position x position cosine kernel of a PE: which positions a PE codes alike.

* :func:`pe_kernel`: of one (n, d) PE; :func:`pe_kernels`: of one block's PE of every model
  of a seed, by PE label (:mod:`lstpe.analysis.pe_structure` scores the centred kernel's 2-D
  structure); :func:`learned_kernels`: the kernel of the PE after training beside the kernel
  of what training added to it, ``P_final - P_init`` (chapter 6 draws them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["pe_kernel", "pe_kernels", "learned_kernels"]


def pe_kernel(pe: Any) -> np.ndarray:
    """Position x position cosine of a (n, d) PE (rows normalised; zero rows stay zero)."""
    p = np.asarray(pe, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"a PE is (positions, dims), got shape {p.shape}")
    norm = np.linalg.norm(p, axis=-1, keepdims=True)
    p = np.divide(p, norm, out=np.zeros_like(p), where=norm > 0)
    return p @ p.T

def _models(artifacts: Mapping[str, Any], seed: int | None,
            pes: Sequence[str] | None) -> dict[str, int]:
    """``{label: model index}`` of the models of one seed (default the first model's), in the
    order of ``pes`` (default: every label of that seed).

    Raises:
        ValueError: unknown seed or PE.
    """
    labels, seeds = list(artifacts["labels"]), [int(s) for s in artifacts["seeds"]]
    seed = seeds[0] if seed is None else int(seed)
    if seed not in seeds:
        raise ValueError(f"no model with seed {seed}; seeds: {sorted(set(seeds))}")
    idx = {lab: i for i, (lab, s) in enumerate(zip(labels, seeds, strict=True)) if s == seed}
    want = list(pes) if pes is not None else list(idx)
    missing = [p for p in want if p not in idx]
    if missing:
        raise ValueError(f"no model {missing} with seed {seed}; labels: {', '.join(idx)}")
    return {lab: idx[lab] for lab in want}


def _pe(artifacts: Mapping[str, Any], key: str, model: int, block: int) -> np.ndarray:
    """One model's block-``block`` PE (n, d) from ``artifacts[key]`` (M, L, n, d), as an array
    (a tensor as float32, as it is stored)."""
    x = artifacts[key][model, block]
    return x.float().numpy() if hasattr(x, "float") else np.asarray(x)


def pe_kernels(artifacts: Mapping[str, Any], seed: int | None = None, block: int = 0,
               stage: str = "final", pes: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """:func:`pe_kernel` of block ``block``'s PE for every model of one seed, by PE label.

    Args:
        artifacts: with ``labels``, ``seeds`` and ``pe_final`` / ``pe_init`` (M, L, n, d).
        seed: default the first model's seed.
        stage: ``final`` or ``init``.
        pes: only these labels (in this order).
    Raises:
        ValueError: unknown stage, seed or PE.
    """
    if stage not in ("final", "init"):
        raise ValueError(f"unknown stage {stage!r}; valid: final, init")
    return {lab: pe_kernel(_pe(artifacts, f"pe_{stage}", i, block))
            for lab, i in _models(artifacts, seed, pes).items()}


def learned_kernels(artifacts: Mapping[str, Any], pes: Sequence[str], seed: int | None = None,
                    block: int = 0) -> dict[str, np.ndarray]:
    """For each PE of ``pes`` (one seed): the (n, n) kernel of its block-``block`` PE after
    training and the kernel of the learned part ``P_final - P_init``, keyed
    ``"<pe>: after training"`` and ``"<pe>: learned part"`` in that order.

    Args:
        artifacts: with ``labels``, ``seeds``, ``pe_init`` and ``pe_final`` (M, L, n, d).
        seed: default the first model's seed.
    Raises:
        ValueError: an unknown seed or PE.
    """
    out = {}
    for lab, i in _models(artifacts, seed, pes).items():
        final = _pe(artifacts, "pe_final", i, block)
        out[f"{lab}: after training"] = pe_kernel(final)
        out[f"{lab}: learned part"] = pe_kernel(final - _pe(artifacts, "pe_init", i, block))
    return out
