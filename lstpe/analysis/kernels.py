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
    labels, seeds = list(artifacts["labels"]), [int(s) for s in artifacts["seeds"]]
    seed = seeds[0] if seed is None else int(seed)
    if seed not in seeds:
        raise ValueError(f"no model with seed {seed}; seeds: {sorted(set(seeds))}")
    pe = artifacts[f"pe_{stage}"]
    idx = {lab: i for i, (lab, s) in enumerate(zip(labels, seeds, strict=True)) if s == seed}
    want = list(pes) if pes is not None else list(idx)
    missing = [p for p in want if p not in idx]
    if missing:
        raise ValueError(f"no model {missing} with seed {seed}; labels: {', '.join(idx)}")
    out = {}
    for lab in want:
        x = pe[idx[lab], block]
        x = x.float().numpy() if hasattr(x, "float") else np.asarray(x)
        out[lab] = pe_kernel(x)
    return out


def learned_kernels(artifacts: Mapping[str, Any], pes: Sequence[str], seed: int | None = None,
                    block: int = 0) -> dict[str, np.ndarray]:
    """For each PE of ``pes`` (one seed): the (n, n) kernel of its block-``block`` PE after
    training and the kernel of the learned part ``P_final - P_init``, keyed
    ``"<pe>: after training"`` and ``"<pe>: learned part"`` in that order.

    Args:
        artifacts: with ``labels``, ``seeds``, ``pe_init`` and ``pe_final`` (M, L, n, d).
        seed: default the first model's seed.
    Raises:
        ValueError: an unknown seed or PE (as :func:`pe_kernels`).
    """
    final = pe_kernels(artifacts, seed=seed, block=block, pes=pes)
    labels, seeds = list(artifacts["labels"]), [int(s) for s in artifacts["seeds"]]
    seed = seeds[0] if seed is None else int(seed)
    out = {}
    for lab in pes:
        i = next(j for j, (la, s) in enumerate(zip(labels, seeds, strict=True))
                 if la == lab and s == seed)
        diff = [artifacts[k][i, block] for k in ("pe_final", "pe_init")]
        diff = [x.double().numpy() if hasattr(x, "double") else np.asarray(x, float)
                for x in diff]
        out[f"{lab}: after training"] = final[lab]
        out[f"{lab}: learned part"] = pe_kernel(diff[0] - diff[1])
    return out
