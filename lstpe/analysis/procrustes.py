r"""PE alignment to the ground-truth 2-D sinusoid (paper Fig. 2D-F / Appendix Fig. 10) and a
lazy-vs-rich diagnostic (not in the paper).

**Procrustes distance.** A learned PE :math:`P \in \mathbb R^{16\times d}` and the target
:math:`T` (``sinusoid_2d(4, 4, d)``, the 2d-fixed PE) index their embedding dimensions
differently, so :math:`P` is first rotated onto :math:`T` by the orthogonal
:math:`R^\star = \arg\min_{R^\top R = I} \|P R - T\|_F`
(``scipy.linalg.orthogonal_procrustes(P, T)``, as the paper did with SciPy 1.11.4) and the
distance is the Frobenius norm :math:`\|P R^\star - T\|_F`.

Choices, following the paper where it speaks:

* **Per layer.** Each block has its own (16, d) PE (as in the authors' model); the Procrustes
  rotation and distance are computed per layer. The paper does not say how layers were combined;
  a model's value is the mean over layers (:func:`lstpe.analysis.attention.average_layers`).
* **No normalisation.** The paper mentions none, so ``distance`` uses the raw PEs (it then also
  grows with the PE's norm). ``distance_normalized`` (not in the paper) scales both matrices to
  unit Frobenius norm first, so it measures shape only and lies in :math:`[0, \sqrt 2]`.
* ``cosine`` is the cosine of the flattened, *unrotated* PE and target: at initialisation it is
  the paper's "baseline similarity" between schemes (0.71 here for 1d-fixed at d = 160, where
  the paper says 0.72; about 0 for learn-sigma).

**Against the authors' code.** The authors' public repository (``ljhearne/LSTNN_public`` at
``d139c51``, every commit searched) holds no Procrustes code (no ``orthogonal_procrustes`` and
no ``scipy.spatial.procrustes``), so only the paper's text constrains this: "an orthogonal
Procrustes transform ... (implemented in SciPy 1.11.4)", "we computed the Frobenius norm to
calculate the distance", "rotate ... the learned PEs". ``distance`` is exactly that; the text
names no centring, no scaling and no normalisation, and does not say which block's PE is
meant. What the code does fix: every block has its own learnable (16, 160) PE
(``transformer_main.py:364-366``, ``learnable_pe.py:15``), so the paper's "learned PE" is one
of four per model (here: each block, then their mean); the 2d-fixed target is their
``PositionalEncoding2D`` buffer (``transformer_main.py:59-76``: column code in dims 0-79, row
code in 80-159), equal to :func:`target_pe` with the two halves swapped, a permutation of
dimensions that the rotation absorbs (distance 0 between the two). The minimum over
orthogonal R depends on the PEs only through their 16 x 16 Gram matrices (positions):
:math:`\|PR^\star - T\|_F^2 = \|P\|_F^2 + \|T\|_F^2 - 2\,\|P^\top T\|_*` (nuclear norm).
``distance_normalized`` is ours, not the paper's.

Caveat: at initialisation a learn-sigma PE is :math:`\sigma Z`, and its raw distance is about
:math:`\sqrt{\sigma^2 \|Z\|_F^2 + \|T\|_F^2}`, so the raw distance grows with sigma before
any training; compare with ``stage="init"`` and with ``distance_normalized``.

**Lazy vs rich** (:func:`pe_movement`): the relative movement
:math:`\|P_T - P_0\|_F / \|P_0\|_F` and the change of the PE kernel :math:`K = P P^\top`
(16 x 16), :math:`\|K_T - K_0\|_F / \|K_0\|_F` and the cosine of :math:`K_T` with :math:`K_0`.
In the lazy (kernel) regime the PE barely moves from its initialisation; in the rich regime it
moves far relative to its initial norm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.linalg import orthogonal_procrustes

from lstpe.analysis.artifacts import ID_COLUMNS, as_array, check_stage, model_table, require
from lstpe.nn import encodings as enc

__all__ = [
    "target_pe", "procrustes_align", "procrustes_distance", "pe_alignment", "pe_movement",
]

_FIXED_TARGETS = ("2d-fixed", "1d-fixed")


def target_pe(name: str = "2d-fixed", n_tokens: int = 16, d: int = 160) -> np.ndarray:
    """A deterministic PE to align onto: (n_tokens, d) float64.

    Args:
        name: ``2d-fixed`` (``sinusoid_2d``, needs a square ``n_tokens``) or ``1d-fixed``.
    Raises:
        ValueError: an unknown PE name, or a PE that is not fixed (learn, random, ...).
    """
    spec = enc.parse_pe(name)
    if spec.name not in _FIXED_TARGETS:
        raise ValueError(f"target PE must be a fixed sinusoid; got {name!r}, valid targets: "
                         f"{', '.join(_FIXED_TARGETS)}")
    if spec.name == "2d-fixed":
        side = math.isqrt(n_tokens)
        if side * side != n_tokens:
            raise ValueError(f"2d-fixed needs a square number of tokens, got {n_tokens}")
        t = enc.sinusoid_2d(side, side, d)
    else:
        t = enc.sinusoid_1d(n_tokens, d)
    return t.to(torch.float64).numpy()


def _pair(pe: Any, target: Any) -> tuple[np.ndarray, np.ndarray]:
    a, b = as_array(pe, "pe", ndim=2), as_array(target, "target", ndim=2)
    if a.shape != b.shape:
        raise ValueError(f"PE and target shapes differ: {a.shape} vs {b.shape}")
    if a.size == 0:
        raise ValueError("PE is empty")
    return a, b


def procrustes_align(pe: Any, target: Any) -> tuple[np.ndarray, float]:
    """Best rotation of ``pe`` onto ``target`` and the remaining distance.

    Args:
        pe, target: (n, d) matrices (tokens x embedding dimensions).
    Returns:
        ``(R, distance)``: R (d, d) orthogonal minimising ``||pe @ R - target||_F``, and that
        minimum.
    Raises:
        ValueError: shape mismatch or non-2-D input.
    """
    a, b = _pair(pe, target)
    R, _ = orthogonal_procrustes(a, b)
    return R, float(np.linalg.norm(a @ R - b))


def procrustes_distance(pe: Any, target: Any, normalize: bool = False) -> float:
    """``min_R ||pe R - target||_F`` over orthogonal R (see :func:`procrustes_align`).

    With fewer tokens n than dimensions d (a PE: 16 x 160) the minimum is computed in the
    n-dimensional row space of ``pe`` instead of from the SVD of the d x d matrix
    ``pe^T target``: with ``pe = U S V^T`` (thin) and ``S U^T target = U_c S_c V_c^T``, the
    best rotation maps ``pe`` to ``U S U_c V_c^T`` (the rows of ``pe`` lie in the span of V,
    so how R completes outside it does not matter), and the distance is that matrix's
    distance to ``target``, formed directly (no cancellation). Two n x d SVDs instead of one
    d x d: the same minimum, many times faster (``tests/test_analysis_procrustes.py`` checks
    it against SciPy's ``orthogonal_procrustes``).

    Args:
        normalize: scale both matrices to unit Frobenius norm first (result in [0, sqrt 2]);
            NaN if either is all zeros.
    """
    a, b = _pair(pe, target)
    if normalize:
        na, nb = np.linalg.norm(a), np.linalg.norm(b)
        if na == 0 or nb == 0:
            return math.nan
        a, b = a / na, b / nb
    n, d = a.shape
    if n >= d:
        return procrustes_align(a, b)[1]
    u, s, _ = np.linalg.svd(a, full_matrices=False)         # a = u diag(s) v^T, u (n, n)
    uc, _, vct = np.linalg.svd(s[:, None] * (u.T @ b), full_matrices=False)  # (n, d)
    return float(np.linalg.norm(u @ (s[:, None] * (uc @ vct)) - b))


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(np.vdot(a, b) / (na * nb)) if na > 0 and nb > 0 else math.nan


def _pes(artifacts: Mapping[str, Any], key: str) -> np.ndarray:
    pe = as_array(require(artifacts, key), key, ndim=4)
    model_table(artifacts, pe.shape[0])
    return pe


def pe_alignment(artifacts: Mapping[str, Any], stage: str = "final",
                 target: str | Any = "2d-fixed") -> pd.DataFrame:
    """Procrustes alignment of every model's additive PE onto the target, per layer.

    Args:
        artifacts: training artefacts (``labels``, ``seeds``, ``pe_final`` / ``pe_init``
            (M, L, 16, d)).
        stage: ``"final"`` (trained PE) or ``"init"`` (PE at initialisation: the baseline).
        target: a fixed PE name (``2d-fixed``, ``1d-fixed``) or an (16, d) array.
    Returns:
        Tidy table, one row per (model, layer): ``model, pe, pe_name, sigma, seed, stage,
        layer, norm, distance, distance_normalized, cosine``. Models without an additive PE
        (nope, rope, relative, ...) hold zeros: their ``distance`` is ``||target||_F`` and
        ``distance_normalized`` / ``cosine`` are NaN.
    Raises:
        ValueError: unknown stage or target PE, missing artefacts, shape mismatch.
    """
    check_stage(stage)
    pe = _pes(artifacts, "pe_final" if stage == "final" else "pe_init")
    models = model_table(artifacts, pe.shape[0])
    M, L, n, d = pe.shape
    t = target_pe(target, n, d) if isinstance(target, str) else as_array(target, "target", 2)
    if t.shape != (n, d):
        raise ValueError(f"target must be ({n}, {d}) to match the PEs, got {t.shape}")
    rows = []
    for r in models.itertuples(index=False):
        for layer in range(L):
            p = pe[r.model, layer]
            rows.append({**r._asdict(), "stage": stage, "layer": layer,
                         "norm": float(np.linalg.norm(p)),
                         "distance": procrustes_distance(p, t),
                         "distance_normalized": procrustes_distance(p, t, normalize=True),
                         "cosine": _cos(p, t)})
    return pd.DataFrame(rows, columns=[*ID_COLUMNS, "stage", "layer", "norm", "distance",
                                       "distance_normalized", "cosine"])


def pe_movement(artifacts: Mapping[str, Any]) -> pd.DataFrame:
    """Lazy-vs-rich diagnostic: how far each model's PE moved from its initialisation.

    Returns:
        Tidy table, one row per (model, layer): ``model, pe, pe_name, sigma, seed, layer,
        norm_init, norm_final, relative_change`` (``||P_T - P_0||_F / ||P_0||_F``),
        ``kernel_change`` (``||K_T - K_0||_F / ||K_0||_F`` with ``K = P P^T``) and
        ``kernel_alignment`` (cosine of ``K_T`` and ``K_0``). Ratios are NaN where the initial
        PE is all zeros (nope and non-additive PEs); fixed PEs have change 0.
    Raises:
        ValueError: missing artefacts or ``pe_init`` / ``pe_final`` shapes that differ.
    """
    p0, p1 = _pes(artifacts, "pe_init"), _pes(artifacts, "pe_final")
    if p0.shape != p1.shape:
        raise ValueError(f"pe_init {p0.shape} and pe_final {p1.shape} shapes differ")
    models = model_table(artifacts, p0.shape[0])
    rows = []
    for r in models.itertuples(index=False):
        for layer in range(p0.shape[1]):
            a, b = p0[r.model, layer], p1[r.model, layer]
            k0, k1 = a @ a.T, b @ b.T
            n0, nk0 = np.linalg.norm(a), np.linalg.norm(k0)
            rows.append({
                **r._asdict(), "layer": layer, "norm_init": float(n0),
                "norm_final": float(np.linalg.norm(b)),
                "relative_change": float(np.linalg.norm(b - a) / n0) if n0 > 0 else math.nan,
                "kernel_change": float(np.linalg.norm(k1 - k0) / nk0) if nk0 > 0 else math.nan,
                "kernel_alignment": _cos(k0, k1),
            })
    return pd.DataFrame(rows, columns=[*ID_COLUMNS, "layer", "norm_init", "norm_final",
                                       "relative_change", "kernel_change", "kernel_alignment"])
