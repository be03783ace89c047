r"""Network measures of learned positional encodings (the paper's appendix A.3).

The brain experiment asks whether the PEs a transformer learns for brain regions (tokens)
reflect the brain's functional networks. Three steps, as in the paper:

1. **Distance matrix.** Token ``i``'s PE is the matrix :math:`A_i \in \mathbb R^{L\times d}` of
   its additive PE at each of the ``L`` blocks. By default (``align="none"``) the distance is
   the Frobenius (Euclidean) distance of those matrices,

   .. math::
       D_{ij} = \lVert A_i - A_j \rVert_F ,

   i.e. the Euclidean distance of the flattened ``L*d`` vectors. All tokens of one model live
   in the same embedding space (their PEs are added to the same residual stream and read by the
   same weights), so there is no arbitrary basis to match between them; any single rotation
   applied to every token of the model leaves these distances unchanged.

   ``align="pair"`` instead matches the embedding dimensions of every pair of tokens by an
   orthogonal Procrustes rotation before taking the distance (the literal reading of the
   paper's main text, Sec. 3.4 and Fig. 4B):

   .. math::
       D_{ij} = \min_{R \in O(d)} \lVert A_i R - A_j \rVert_F,\qquad
       D_{ij}^2 = \lVert A_i\rVert_F^2 + \lVert A_j\rVert_F^2 - 2\,\lVert A_i^\top A_j\rVert_*

   (:math:`\lVert\cdot\rVert_*` the nuclear norm, the sum of singular values). Because the
   rotation is chosen per pair over all of :math:`\mathbb R^d`, this :math:`D_{ij}` only sees
   what is invariant to rotating one token's PE: the Gram matrix :math:`A_iA_i^\top` (the norm
   of the PE at each block and the angles between blocks). With a single block (``L = 1``) it
   reduces to :math:`\lvert\,\lVert a_i\rVert - \lVert a_j\rVert\,\rvert`, and for
   ``1d-fixed`` (the same unit-norm-per-frequency sinusoid at every block) all aligned
   distances are 0, so the similarity of step 2 is undefined. Aligned squared distances below
   the float32 resolution of the PEs (:data:`RESOLUTION`) are set to 0.
2. **Similarity.** Off-diagonal distances are min-max scaled to [0, 1] and complemented,
   :math:`W = 1 - D_{\text{scaled}}`, so closer PEs have larger weights; the diagonal is set
   to 0 (no self-loops).
3. **Measures against a fixed partition** (e.g. the Yeo-7 networks):

   * weighted modularity (Newman; Rubinov and Sporns 2010)

     .. math::
         Q^W = \frac{1}{l^W}\sum_{i,j}\Big[W_{ij} - \frac{k_i^W k_j^W}{l^W}\Big]
               \delta_{m_i m_j},\qquad l^W = \sum_{ij} W_{ij},\ k_i^W = \sum_j W_{ij};

   * network clustering (segregation)

     .. math::
         C = \frac{1}{|M|}\sum_{m\in M}
             \frac{\bar W_{m,\text{in}} - \bar W_{m,\text{out}}}{\bar W_{m,\text{in}}}

     with :math:`\bar W_{m,\text{in}}` the mean weight between distinct members of module
     ``m`` and :math:`\bar W_{m,\text{out}}` the mean weight between members of ``m`` and
     all other tokens. Modules with a single member have no within-module pair and are left
     out of the average (the paper does not say; with the Yeo-7 partitions there are none).

A null distribution comes from shuffling the partition labels over tokens (module sizes kept):
:func:`shuffled_null`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ALIGNMENTS = ("none", "pair")
"""Ways of comparing two tokens' PEs: plain distance (the default), or per-pair orthogonal
Procrustes alignment first."""

DEFAULT_ALIGN = "none"
"""The default of every function here and in :mod:`lstpe.brain`: plain distances."""

RESOLUTION = 8 * float(np.finfo(np.float32).eps)
"""With ``align="pair"``, squared distances below ``RESOLUTION * max squared norm`` are treated
as 0 (float32 noise)."""


def _as_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def _token_matrices(pe) -> np.ndarray:
    """PE (L, n, d) or (n, d) -> per-token matrices (n, L, d) as float64."""
    a = _as_numpy(pe)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3:
        raise ValueError(f"PE must have shape (L, n, d) or (n, d), got {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("PE contains NaN or infinite values")
    return np.ascontiguousarray(a.transpose(1, 0, 2))


def token_procrustes_distance(a, b) -> float:
    r"""Frobenius distance after the best orthogonal rotation of ``a`` onto ``b`` for one pair of
    tokens (:func:`lstpe.analysis.procrustes.procrustes_distance` of the token PEs).

    :math:`\min_{R\in O(d)} \lVert aR - b\rVert_F` for one pair of token PEs.

    Args:
        a, b: (L, d) or (d,) arrays of the same shape.
    """
    from lstpe.analysis.procrustes import procrustes_distance as distance

    a, b = np.atleast_2d(_as_numpy(a)), np.atleast_2d(_as_numpy(b))
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    return distance(a, b)  # one implementation: lstpe.analysis.procrustes


def pe_distance_matrix(pe, align: str = DEFAULT_ALIGN, chunk: int = 64) -> np.ndarray:
    """Distance between the PEs of every pair of tokens.

    Args:
        pe: (L, n, d) additive PE of one model (``L`` blocks, ``n`` tokens), or (n, d).
        align: ``"none"`` (default: Euclidean distance of the flattened (L*d) per-token PEs,
            computed directly, not via the Gram expansion) or ``"pair"`` (per-pair orthogonal
            Procrustes, see the module docstring; keeps only per-token norms and inter-block
            angles).
        chunk: rows of the matrix computed at once (memory, ``align="pair"``).
    Returns:
        (n, n) symmetric float64 matrix with zero diagonal.
    Raises:
        ValueError: unknown ``align``, a PE of another rank, or non-finite values.
    """
    if align not in ALIGNMENTS:
        raise ValueError(f"unknown alignment {align!r}; valid: {', '.join(ALIGNMENTS)}")
    a = _token_matrices(pe)  # (n, L, d)
    n = a.shape[0]
    if align == "none":
        from scipy.spatial.distance import cdist

        f = a.reshape(n, -1)
        d = cdist(f, f)
    else:
        # A_i = U_i S_i V_i^T; the singular values of A_i^T A_j are those of C_i^T C_j with
        # C_i = U_i S_i (L x k), k = min(L, d): only small k x k SVDs are needed.
        u, s, _ = np.linalg.svd(a, full_matrices=False)
        c = u * s[:, None, :]  # (n, L, k)
        sq = (s * s).sum(1)
        d2 = np.empty((n, n))
        for i in range(0, n, chunk):
            m = np.einsum("ilk,jlm->ijkm", c[i:i + chunk], c)
            nuc = np.linalg.svd(m, compute_uv=False).sum(-1)
            d2[i:i + chunk] = sq[i:i + chunk, None] + sq[None, :] - 2 * nuc
        # Squared distances below the float32 resolution of the PEs' squared norms are
        # rounding noise (e.g. 1d-fixed: every token has the same norm at every block, so all
        # aligned distances are 0 up to rounding): set them to 0.
        d2[d2 < RESOLUTION * sq.max()] = 0.0
        d = np.sqrt(np.clip(d2, 0.0, None))
    d = (d + d.T) / 2
    np.fill_diagonal(d, 0.0)
    return d


def scale_complement(dist) -> np.ndarray:
    """Similarity ``1 - (D - min) / (max - min)`` over the off-diagonal entries; diagonal 0.

    Args:
        dist: (n, n) symmetric distance matrix, n >= 2.
    Returns:
        (n, n) weights in [0, 1]: 1 for the closest pair, 0 for the farthest.
    Raises:
        ValueError: not square, or all off-diagonal distances equal (nothing to scale).
    """
    d = _as_numpy(dist)
    if d.ndim != 2 or d.shape[0] != d.shape[1] or d.shape[0] < 2:
        raise ValueError(f"distance matrix must be square with n >= 2, got shape {d.shape}")
    off = ~np.eye(d.shape[0], dtype=bool)
    lo, hi = d[off].min(), d[off].max()
    if not hi > lo:
        raise ValueError(
            f"all off-diagonal distances are equal ({lo:g}); the scaled complement is undefined"
        )
    w = 1.0 - (d - lo) / (hi - lo)
    np.fill_diagonal(w, 0.0)
    return w


def pe_similarity(pe, align: str = DEFAULT_ALIGN) -> np.ndarray:
    """:func:`pe_distance_matrix` then :func:`scale_complement`: the weights W of A.3.

    Args:
        pe: (L, n, d) or (n, d) additive PE of one model.
        align: ``"none"`` (plain distances, default) or ``"pair"`` (per-pair Procrustes).
    Returns:
        (n, n) weights in [0, 1], zero diagonal.
    Raises:
        ValueError: all off-diagonal distances equal (e.g. ``1d-fixed`` with ``align="pair"``).
    """
    return scale_complement(pe_distance_matrix(pe, align))


# --------------------------------------------------------------------------- partitions


def encode_partition(partition: Sequence, n: int | None = None) -> tuple[np.ndarray, list]:
    """Integer codes 0..K-1 for a partition given by labels (strings or ints).

    Returns:
        codes (n,) int array and the list of K distinct labels in first-seen order.
    """
    labels = list(np.asarray(partition).tolist())
    if n is not None and len(labels) != n:
        raise ValueError(f"partition has {len(labels)} labels but the matrix has {n} nodes")
    names: dict = {}
    codes = np.array([names.setdefault(x, len(names)) for x in labels], dtype=np.int64)
    return codes, list(names)


def _check_weights(w) -> np.ndarray:
    w = _as_numpy(w)
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"weight matrix must be square, got shape {w.shape}")
    if not np.isfinite(w).all():
        raise ValueError("weight matrix contains NaN or infinite values")
    if not np.allclose(w, w.T, atol=1e-10):
        raise ValueError("weight matrix must be symmetric (an undirected graph)")
    if (w < 0).any():
        raise ValueError(
            f"weights must be >= 0 for modularity (min {w.min():g}); use scale_complement"
        )
    return w


def _onehot(codes: np.ndarray) -> np.ndarray:
    """(..., n) codes -> (..., n, K) one-hot."""
    k = int(codes.max()) + 1
    return (codes[..., None] == np.arange(k)).astype(np.float64)


def _w_times(w: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``w @ p[i]`` for every partition i as one matrix product: p (P, n, K) -> (P, n, K)."""
    P, n, K = p.shape
    out = w @ p.transpose(1, 0, 2).reshape(n, P * K)
    return out.reshape(n, P, K).transpose(1, 0, 2)


def modularity(w, partition: Sequence) -> float:
    r"""Weighted modularity :math:`Q^W` of a fixed partition (paper's A.3, resolution 1).

    Equals ``networkx.algorithms.community.modularity`` of the weighted undirected graph.

    Args:
        w: (n, n) symmetric non-negative weights (self-loops allowed, counted once in
            :math:`\sum_{ij}`).
        partition: (n,) module label of each node.
    """
    w = _check_weights(w)
    codes, _ = encode_partition(partition, w.shape[0])
    return float(_modularity_batch(w, codes[None])[0])


def _modularity_batch(w: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Modularity for P partitions at once: codes (P, n) -> (P,)."""
    total = w.sum()
    if not total > 0:
        raise ValueError("the weight matrix sums to 0: modularity is undefined")
    k = w.sum(1)
    p = _onehot(codes)  # (P, n, K)
    within = (p * _w_times(w, p)).sum((1, 2))
    deg = np.einsum("pik,i->pk", p, k)
    return (within - (deg**2).sum(1) / total) / total


def _clustering_terms(w: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-module (W_in - W_out) / W_in for P partitions: codes (P, n) -> (P, K), valid (P, K)."""
    p = _onehot(codes)  # (P, n, K)
    size = p.sum(1)  # (P, K)
    n = w.shape[0]
    diag = np.einsum("ii,pik->pk", w, p)
    within = (p * _w_times(w, p)).sum(1) - diag  # sum over distinct pairs (both ways)
    row = np.einsum("pik,i->pk", p, w.sum(1)) - diag  # all weights leaving module members
    out = row - within
    valid = (size >= 2) & (size <= n - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        w_in = within / (size * (size - 1))
        w_out = out / (size * (n - size))
        term = (w_in - w_out) / w_in
    return term, valid


def network_clustering(w, partition: Sequence, per_module: bool = False):
    """Network clustering C of the paper's A.3 (mean over modules of (in - out) / in).

    Args:
        w: (n, n) symmetric non-negative weights; the diagonal is ignored.
        partition: (n,) module label of each node.
        per_module: also return a dict label -> term (NaN for single-member modules).
    Returns:
        C (float), or (C, {label: term}) with ``per_module``.
    Raises:
        ValueError: fewer than two modules, no module with two members, or a module whose
            mean within-module weight is 0 (the ratio is undefined).
    """
    w = _check_weights(w)
    codes, names = encode_partition(partition, w.shape[0])
    if len(names) < 2:
        raise ValueError("network clustering needs at least two modules in the partition")
    term, valid = _clustering_terms(w, codes[None])
    term, valid = term[0], valid[0]
    if not valid.any():
        raise ValueError("no module has two or more members: within-module weight undefined")
    bad = valid & ~np.isfinite(term)
    if bad.any():
        raise ValueError(
            f"mean within-module weight is 0 for modules {[names[i] for i in np.flatnonzero(bad)]}"
            "; C is undefined"
        )
    c = float(term[valid].mean())
    if per_module:
        return c, {nm: (float(term[i]) if valid[i] else float("nan"))
                    for i, nm in enumerate(names)}
    return c


# --------------------------------------------------------------------------- null model


@dataclass
class NullTest:
    """An observed statistic against its shuffled-partition null.

    Attributes:
        observed: the statistic for the true partition.
        null: (n_perm,) the statistic for shuffled partitions.
        p_value: one-sided ``(1 + #{null >= observed}) / (1 + n_perm)``.
    """

    observed: float
    null: np.ndarray

    @property
    def null_mean(self) -> float:
        return float(self.null.mean())

    @property
    def null_std(self) -> float:
        return float(self.null.std(ddof=1)) if self.null.size > 1 else float("nan")

    @property
    def z(self) -> float:
        """(observed - null mean) / null std."""
        s = self.null_std
        return (self.observed - self.null_mean) / s if s > 0 else float("nan")

    @property
    def p_value(self) -> float:
        return float((1 + (self.null >= self.observed).sum()) / (1 + self.null.size))


MEASURES = ("modularity", "clustering")


def shuffled_null(w, partition: Sequence, measure: str = "modularity", n_perm: int = 1000,
                  seed: int = 0) -> NullTest:
    """Compare a measure with its value under randomly shuffled partitions (sizes kept).

    Args:
        w: (n, n) weights (e.g. :func:`pe_similarity`).
        partition: (n,) module labels.
        measure: ``"modularity"`` or ``"clustering"``.
        n_perm: number of shuffles.
        seed: of the shuffles.
    """
    if measure not in MEASURES:
        raise ValueError(f"unknown measure {measure!r}; valid: {', '.join(MEASURES)}")
    if n_perm < 1:
        raise ValueError(f"n_perm must be >= 1, got {n_perm}")
    w = _check_weights(w)
    codes, _ = encode_partition(partition, w.shape[0])
    rng = np.random.default_rng(seed)
    perms = np.stack([rng.permutation(codes) for _ in range(n_perm)])
    if measure == "modularity":
        observed = modularity(w, codes)
        null = np.concatenate([_modularity_batch(w, perms[i:i + 100])
                               for i in range(0, n_perm, 100)])
    else:
        observed = network_clustering(w, codes)
        null = []
        for i in range(0, n_perm, 100):
            term, valid = _clustering_terms(w, perms[i:i + 100])
            null.append(np.where(valid, term, 0.0).sum(1) / valid.sum(1))
        null = np.concatenate(null)
    return NullTest(float(observed), null)


def network_measures(pe, partition: Sequence, align: str = DEFAULT_ALIGN, n_perm: int = 0,
                     seed: int = 0) -> dict[str, float]:
    """Modularity and clustering of one model's PE against a partition (with optional null).

    Args:
        pe: (L, n, d) additive PE.
        partition: (n,) module labels of the tokens.
        align: ``"none"`` (plain distances, default) or ``"pair"``; see
            :func:`pe_distance_matrix`.
        n_perm: if > 0, also the shuffled-partition z-scores and p-values.
    Returns:
        ``{"modularity", "clustering"}`` and, with ``n_perm``, ``modularity_z``,
        ``modularity_p``, ``clustering_z``, ``clustering_p``, ``modularity_null_mean``,
        ``clustering_null_mean``.
    """
    w = pe_similarity(pe, align)
    out = {"modularity": modularity(w, partition),
           "clustering": network_clustering(w, partition)}
    if n_perm > 0:
        for m in MEASURES:
            t = shuffled_null(w, partition, m, n_perm, seed)
            out[f"{m}_z"], out[f"{m}_p"], out[f"{m}_null_mean"] = t.z, t.p_value, t.null_mean
    return out


def network_order(partition: Sequence, names: Sequence | None = None) -> np.ndarray:
    """Token indices sorted by module (stable; module order ``names`` or first-seen), for plots."""
    labels = np.asarray(partition)
    if names is None:
        _, names = encode_partition(labels)
    missing = sorted(set(labels.tolist()) - set(names), key=str)
    if missing:
        raise ValueError(f"labels {missing} are not in names {list(names)}")
    rank = {nm: i for i, nm in enumerate(names)}
    return np.argsort([rank[x] for x in labels.tolist()], kind="stable")
