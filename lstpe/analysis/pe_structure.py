r"""What a learnable PE learns: the trained PE split into its initialisation and the update,
and the 2-D structure of each part, with a permutation p-value (issue 36, item 1).

**Decomposition.** For one block's PE, :math:`P_T = P_0 + \Delta` (``pe_final = pe_init +
dpe``), all (16, d). :func:`decompose` gives the Frobenius norms of :math:`P_0`,
:math:`\Delta`, :math:`P_T` and the **init share**

.. math:: s_0 = \langle P_0, P_T\rangle / \|P_T\|_F^2 ,
   \qquad 1 - s_0 = \langle \Delta, P_T\rangle / \|P_T\|_F^2 .

Chosen over :math:`\|P_0\|^2/\|P_T\|^2` because the two shares split :math:`\|P_T\|^2`
exactly (they sum to 1 whatever the angle between :math:`P_0` and :math:`\Delta`, the cross
term split evenly; when :math:`\Delta \perp P_0` the two definitions agree).
``dpe_common``: the share of :math:`\|\Delta\|^2` in its mean over positions (a shift of
every token alike, which carries no position).

**Grid layout.** Token ``p`` is the cell (row ``p // 4``, column ``p % 4``): the puzzles are
flattened row-major (:mod:`lstpe.lst.puzzles`, "16 digits, row-major", ``reshape(4, 4)``;
:mod:`lstpe.lst.data`, "Token order is row-major") and the 2-D sinusoid is built on
:func:`lstpe.nn.encodings.grid_positions` (``idx // cols, idx % cols``), which this module
uses for its distances.

**Scores** of a (16, d) matrix :math:`P`, both functions of the centred matrix
:math:`C = P - \bar p` (the mean over positions removed: a common shift is no position) and
both unchanged by any rotation of the embedding dimensions (they depend on :math:`CC^\top`
only), so they compare a learned PE with the sinusoid without Procrustes:

* **grid score** (:func:`grid_score`, the headline; the issue's measure): the correlation,
  over the 120 pairs of cells, of the cosine :math:`\cos(c_i, c_j)` with minus their Manhattan
  distance. "Are neighbours coded alike?", as the 2-D sinusoid does (chapter 3): 0.864 for
  ``sinusoid_2d(4, 4, 160)``; mean exactly 0 for rows that are exchangeable (Gaussian), as the
  average over relabellings of the z-scored distance is 0 on every pair.
* **row-column score** (:func:`rowcol_score`): the share of :math:`\|C\|_F^2` explained by a
  row effect plus a column effect, :math:`\operatorname{tr}(HCC^\top)/\|C\|_F^2` with
  :math:`H` the projection onto row- plus column-constant vectors. "Is the code a row code
  plus a column code?", the task's structure (a Latin square constrains rows and columns, not
  neighbours). Exactly 1 for any additive code (the sinusoid); mean 6/15 = 0.4 for a Gaussian
  matrix (6 of the 15 dimensions left by centring).

Both are reported; the grid score heads the tables so that they compare with the issue and
with the Procrustes distance to the sinusoid, which also rewards metric (neighbour) structure.

**Null** (:class:`PermutationNull`): the same matrix with its 16 positions relabelled at
random, ``DRAWS`` = 9999 uniform permutations from ``default_rng(NULL_SEED)``; one-sided
:math:`p = (1 + \#\{\text{null} \ge \text{observed}\}) / (B + 1)` (at least 1e-4). One
matrix product per score covers every unit. It assumes nothing Gaussian (for a Gaussian
matrix it is exact); :func:`gaussian_null` gives the scores of Gaussian matrices themselves.

**Attention** (:func:`attention_structure`): each block's attention map averaged over the 108
validation puzzles, at init and after training: its grid score (of the symmetrised map,
:func:`attention_grid_score`) and its **line share** (:func:`line_share`: the share of a
query's attention to other cells that goes to its own row or column; 0.4 for uniform
attention), with permutation p-values. Cosines to 2d-fixed: :mod:`lstpe.analysis.attention`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lstpe.analysis.artifacts import ID_COLUMNS, as_array, model_table, require
from lstpe.nn.encodings import grid_positions

__all__ = [
    "DRAWS", "NULL_SEED", "grid_distance", "same_line", "centred_kernel", "grid_score",
    "rowcol_score", "attention_grid_score", "line_share", "PermutationNull", "permutation_null",
    "gaussian_null", "decompose", "snapshot_structure", "pe_structure", "attention_structure",
    "stored_structure", "PE_COLUMNS",
    "ATTENTION_COLUMNS",
]

DRAWS = 9999
"""Monte Carlo permutations of the null (smallest p-value 1 / (DRAWS + 1) = 1e-4)."""
NULL_SEED = 0
"""Seed of ``numpy.random.default_rng`` that draws the permutations."""
_TIE = 1e-12  # a null score this close below the observed one counts as a tie (>=)


def _rc(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of each of ``n`` cells of the row-major square grid."""
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"positions must fill a square grid, got {n}")
    return tuple(t.numpy() for t in grid_positions(side, side))


def grid_distance(n: int = 16) -> np.ndarray:
    """Manhattan distance between the cells of the row-major square grid: (n, n) float64."""
    r, c = _rc(n)
    return (np.abs(np.subtract.outer(r, r)) + np.abs(np.subtract.outer(c, c))).astype(float)


def same_line(n: int = 16) -> np.ndarray:
    """1 where two different cells share a row or a column, else 0: (n, n) float64."""
    r, c = _rc(n)
    line = (np.equal.outer(r, r) | np.equal.outer(c, c)) & ~np.eye(n, dtype=bool)
    return line.astype(float)


def _rowcol_projection(n: int = 16) -> np.ndarray:
    """(n, n) orthogonal projection onto the vectors that are a row effect plus a column
    effect (the constant included; the scores apply it to centred columns)."""
    r, c = _rc(n)
    same = np.equal.outer(r, r).astype(float) + np.equal.outer(c, c)
    return same / math.isqrt(n) - 1.0 / n


def _upper(x: np.ndarray) -> np.ndarray:
    """The strictly upper-triangular entries of (..., n, n): (..., n(n-1)/2)."""
    i, j = np.triu_indices(x.shape[-1], 1)
    return x[..., i, j]


def _z(x: np.ndarray) -> np.ndarray:
    """Z-scored along the last axis (population SD); NaN where that SD is 0."""
    x = x - x.mean(-1, keepdims=True)
    sd = np.sqrt((x * x).mean(-1, keepdims=True))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sd > 1e-12 * (1 + np.abs(x).max(-1, keepdims=True)), x / sd, np.nan)


def _centre(pe: Any) -> np.ndarray:
    p = as_array(pe, "pe")
    if p.ndim < 2:
        raise ValueError(f"a PE is (..., positions, dims), got shape {p.shape}")
    return p - p.mean(-2, keepdims=True)


def centred_kernel(pe: Any) -> np.ndarray:
    """Cosine of the rows of ``pe`` after removing their mean over positions.

    Args:
        pe: (..., n, d).
    Returns:
        (..., n, n); a row that is all zeros after centring has cosine 0 with every row.
    """
    c = _centre(pe)
    norm = np.linalg.norm(c, axis=-1, keepdims=True)
    c = np.divide(c, norm, out=np.zeros_like(c), where=norm > 0)
    return c @ np.swapaxes(c, -1, -2)


def _grid_corr(sym: np.ndarray) -> np.ndarray:
    """Pearson correlation of the off-diagonal entries of symmetric (..., n, n) with minus the
    grid distance: (...)."""
    t = _z(_upper(-grid_distance(sym.shape[-1])))
    return (_z(_upper(sym)) * t).mean(-1)


def grid_score(pe: Any) -> np.ndarray:
    """The grid score of (..., n, d) PEs (module docstring): (...,) in [-1, 1]; NaN for a PE
    whose centred kernel is constant off the diagonal (all zeros, or all positions alike)."""
    return _grid_corr(centred_kernel(pe))


def _gram(pe: Any) -> tuple[np.ndarray, np.ndarray]:
    """Gram matrix (..., n, n) of the centred PEs and its trace (...,)."""
    c = _centre(pe)
    g = c @ np.swapaxes(c, -1, -2)
    return g, np.trace(g, axis1=-2, axis2=-1)


def rowcol_score(pe: Any) -> np.ndarray:
    """Share of the centred PE's squared norm explained by row + column effects: (...,) in
    [0, 1]; NaN where the centred PE is 0."""
    g, tot = _gram(pe)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, (g * _rowcol_projection(g.shape[-1])).sum((-2, -1)) / tot,
                        np.nan)


def _check_maps(maps: Any) -> np.ndarray:
    a = as_array(maps, "maps")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"attention maps are (..., n, n), got shape {a.shape}")
    return a


def attention_grid_score(maps: Any) -> np.ndarray:
    """Grid score of (..., n, n) attention maps: the correlation of the off-diagonal entries of
    ``(A + A^T) / 2`` with minus the grid distance: (...)."""
    a = _check_maps(maps)
    return _grid_corr((a + np.swapaxes(a, -1, -2)) / 2)


def _off_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each query's attention to the other cells, renormalised to sum 1 (diagonal 0; a row
    with none, the first query of a causal map, all 0), and how many rows have some: (...)."""
    a = a * (1 - np.eye(a.shape[-1]))
    s = a.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        n = (s[..., 0] > 0).sum(-1).astype(float)
        return np.divide(a, s, out=np.zeros_like(a), where=s > 0), np.where(n > 0, n, np.nan)


def line_share(maps: Any) -> np.ndarray:
    """Share of each query's attention to other cells that lands in its own row or column,
    averaged over the queries that attend to other cells: (...,) in [0, 1]; 6/15 = 0.4 for
    uniform attention."""
    a, n = _off_rows(_check_maps(maps))
    return (a * same_line(a.shape[-1])).sum((-2, -1)) / n


@dataclass(frozen=True)
class PermutationNull:
    """``draws`` uniform relabellings of the ``n`` positions (``default_rng(seed)``) and the
    scores under them, as matrix products.

    Attributes:
        perms: (draws, n) int, one permutation per row.
    """

    n: int = 16
    draws: int = DRAWS
    seed: int = NULL_SEED
    perms: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _rc(self.n)
        if self.draws < 1:
            raise ValueError(f"draws must be positive, got {self.draws}")
        rng = np.random.default_rng(self.seed)
        perms = rng.permuted(np.tile(np.arange(self.n), (self.draws, 1)), axis=1)
        object.__setattr__(self, "perms", perms)

    def _relabel(self, m: np.ndarray) -> np.ndarray:
        p = self.perms
        return m[p[:, :, None], p[:, None, :]]  # (draws, n, n)

    @functools.cached_property
    def _targets(self) -> dict[str, np.ndarray]:
        """Per score, the relabelled grid as a (k, draws) matrix: the z-scored pairs of minus
        the distance / their number (grid), the flat projection (rowcol), flat same-line."""
        def flat(m: np.ndarray) -> np.ndarray:
            return self._relabel(m).reshape(self.draws, -1).T

        z = _z(_upper(-self._relabel(grid_distance(self.n)))).T
        out = {"grid": z / len(z), "rowcol": flat(_rowcol_projection(self.n)),
               "line": flat(same_line(self.n))}
        return {k: np.ascontiguousarray(v) for k, v in out.items()}

    @staticmethod
    def _times(x: np.ndarray, t: np.ndarray, lead: int) -> np.ndarray:
        """(..., k) values (``lead`` trailing axes flattened into k) times (k, draws), as one
        2-D product: (..., draws)."""
        shape = x.shape[:x.ndim - lead]
        return (np.ascontiguousarray(x).reshape(-1, t.shape[0]) @ t).reshape(*shape, -1)

    def scores(self, kind: str, x: Any) -> np.ndarray:
        """Null scores of every input: (..., draws).

        Args:
            kind: ``grid`` / ``rowcol`` (x: PEs (..., n, d)), ``attention_grid`` /
                ``line`` (x: attention maps (..., n, n)).
        """
        t = self._targets
        if kind == "grid":
            return self._times(_z(_upper(centred_kernel(x))), t["grid"], 1)
        if kind == "rowcol":
            g, tot = _gram(x)
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(tot[..., None] > 0, self._times(g, t["rowcol"], 2)
                                / tot[..., None], np.nan)
        a = _check_maps(x)
        if kind == "attention_grid":
            return self._times(_z(_upper(a + np.swapaxes(a, -1, -2))), t["grid"], 1)
        if kind == "line":
            rows, n = _off_rows(a)
            return self._times(rows, t["line"], 2) / n[..., None]
        raise ValueError(f"unknown score {kind!r}; valid: grid, rowcol, attention_grid, line")

    def p_value(self, kind: str, x: Any, observed: Any | None = None) -> np.ndarray:
        """One-sided Monte Carlo p-value, (1 + #{null >= observed}) / (draws + 1): (...,);
        NaN where the observed score is NaN."""
        obs = np.asarray(_SCORES[kind](x) if observed is None else observed, dtype=float)
        null = self.scores(kind, x)
        hits = (null >= obs[..., None] - _TIE).sum(-1)
        return np.where(np.isnan(obs), np.nan, (1 + hits) / (self.draws + 1))


_SCORES = {"grid": grid_score, "rowcol": rowcol_score, "attention_grid": attention_grid_score,
           "line": line_share}


@functools.lru_cache(maxsize=4)
def permutation_null(n: int = 16, draws: int = DRAWS, seed: int = NULL_SEED) -> PermutationNull:
    """The shared (cached) :class:`PermutationNull`."""
    return PermutationNull(n, draws, seed)


def gaussian_null(shape: tuple[int, int] = (16, 160), draws: int = 1000, seed: int = NULL_SEED,
                  kind: str = "grid") -> np.ndarray:
    """Scores of ``draws`` i.i.d. standard Gaussian matrices of ``shape``: (draws,).

    Args:
        kind: ``grid`` or ``rowcol`` (PE scores).
    """
    if kind not in ("grid", "rowcol"):
        raise ValueError(f"gaussian_null scores PEs: kind grid or rowcol, got {kind!r}")
    z = np.random.default_rng(seed).standard_normal((draws, *shape))
    return _SCORES[kind](z)


def decompose(pe_init: Any, pe: Any) -> dict[str, np.ndarray]:
    """``pe = pe_init + dpe`` and its norms.

    Args:
        pe_init: (..., n, d) PEs at initialisation; pe: later, (..., n, d) or with extra
            leading axes that broadcast ((E, L, n, d) snapshots against (L, n, d)).
    Returns:
        ``dpe`` (broadcast shape, float64) and, over the leading axes, ``norm_init``,
        ``norm_dpe``, ``norm_final`` (Frobenius), ``init_share`` and ``dpe_common`` (module
        docstring; NaN where pe, or dpe, is 0).
    """
    p0, p1 = as_array(pe_init, "pe_init"), as_array(pe, "pe")
    if p0.ndim < 2 or p0.shape[-2:] != p1.shape[-2:]:
        raise ValueError(f"pe_init {p0.shape} and pe {p1.shape} must end in the same "
                         "(positions, dims)")
    d = p1 - p0
    p0 = np.broadcast_to(p0, d.shape)
    n0, nd, n1 = (np.linalg.norm(x, axis=(-2, -1)) for x in (p0, d, p1))
    common = d.shape[-2] * (d.mean(-2) ** 2).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n1 > 0, (p0 * p1).sum((-2, -1)) / n1**2, np.nan)
        dcom = np.where(nd > 0, common / nd**2, np.nan)
    return {"dpe": d, "norm_init": n0, "norm_dpe": nd, "norm_final": n1, "init_share": share,
            "dpe_common": dcom}


PE_COLUMNS = ["block", "epoch", "norm_init", "norm_dpe", "norm_final", "init_share",
              "dpe_common", "score_init", "p_init", "score_dpe", "p_dpe", "score_final",
              "p_final", "rowcol_init", "p_rowcol_init", "rowcol_dpe", "p_rowcol_dpe",
              "rowcol_final", "p_rowcol_final"]


def _pe_columns(pe_init: np.ndarray, pe: np.ndarray, null: PermutationNull) -> dict:
    """Every PE column over the leading axes of the broadcast of pe_init and pe."""
    dec = decompose(pe_init, pe)
    parts = {"init": np.broadcast_to(pe_init, dec["dpe"].shape), "dpe": dec["dpe"],
             "final": np.broadcast_to(pe, dec["dpe"].shape)}
    out = {k: v for k, v in dec.items() if k != "dpe"}
    for name, x in parts.items():
        for kind, col, pcol in (("grid", "score", "p"), ("rowcol", "rowcol", "p_rowcol")):
            out[f"{col}_{name}"] = s = _SCORES[kind](x)
            out[f"{pcol}_{name}"] = null.p_value(kind, x, s)
    return out


def snapshot_structure(pe_init: Any, pe: Any, epochs: int | Sequence[int] | None = None, *,
                       ids: Mapping[str, Any] | None = None,
                       null: PermutationNull | None = None) -> pd.DataFrame:
    """The decomposition and scores of one model's PE at one or more epochs.

    Serves the stored 200-epoch units (``pe = pe_final``) and the long units' snapshots alike.

    Args:
        pe_init: (L, n, d) the model's PEs at initialisation (one per block).
        pe: (L, n, d) at one epoch, or (E, L, n, d) at E epochs.
        epochs: the epoch of ``pe`` (int), or of each of its E snapshots; None: NaN.
        ids: constant columns put first (``run``, ``pe``, ``sigma``, ``seed``, ...).
        null: default :func:`permutation_null` for n positions.
    Returns:
        One row per (epoch, block): ``ids``, then :data:`PE_COLUMNS`.
    """
    p0, p1 = as_array(pe_init, "pe_init", ndim=3), as_array(pe, "pe")
    if p1.ndim == 3:
        p1 = p1[None]
    if p1.ndim != 4 or p1.shape[1:] != p0.shape:
        raise ValueError(f"pe must be {p0.shape} or (E, *{p0.shape}), got {p1.shape}")
    E, L = p1.shape[:2]
    ep = np.full(E, np.nan) if epochs is None else np.atleast_1d(np.asarray(epochs, float))
    if len(ep) != E:
        raise ValueError(f"{len(ep)} epochs for {E} snapshots")
    cols = _pe_columns(p0, p1, null or permutation_null(p0.shape[1]))
    out = pd.DataFrame({**(ids or {}), "block": np.tile(np.arange(L), E),
                        "epoch": np.repeat(ep, L), **{k: v.ravel() for k, v in cols.items()}})
    return out[[*(ids or {}), *PE_COLUMNS]]


def _rows(artifacts: Mapping[str, Any], M: int, L: int, run: str,
          epoch: int | None) -> pd.DataFrame:
    """One row per (model, block): ``run``, :data:`ID_COLUMNS`, ``block``, ``epoch``."""
    models = model_table(artifacts, M)
    out = models.loc[models.index.repeat(L)].reset_index(drop=True)
    out.insert(0, "run", run)
    out["block"] = np.tile(np.arange(L), M)
    out["epoch"] = np.nan if epoch is None else epoch
    return out


def pe_structure(artifacts: Mapping[str, Any], *, run: str = "", epoch: int | None = None,
                 null: PermutationNull | None = None) -> pd.DataFrame:
    """:func:`snapshot_structure` of every model's final PE in a run's artefacts.

    Args:
        artifacts: with ``labels``, ``seeds``, ``pe_init``, ``pe_final`` (M, L, n, d).
        run, epoch: the ``run`` and ``epoch`` columns (the artefacts hold neither).
    Returns:
        One row per (model, block): ``run``, :data:`ID_COLUMNS`, :data:`PE_COLUMNS`. PEs that
        are zero (nope, rope, ...) have NaN scores; fixed PEs have dpe = 0 (NaN scores).
    """
    p0 = as_array(require(artifacts, "pe_init"), "pe_init", ndim=4)
    p1 = as_array(require(artifacts, "pe_final"), "pe_final", ndim=4)
    if p0.shape != p1.shape:
        raise ValueError(f"pe_init {p0.shape} and pe_final {p1.shape} shapes differ")
    out = _rows(artifacts, *p0.shape[:2], run, epoch)
    cols = _pe_columns(p0, p1, null or permutation_null(p0.shape[2]))
    return out.assign(**{k: v.ravel() for k, v in cols.items()})[["run", *ID_COLUMNS,
                                                                    *PE_COLUMNS]]


ATTENTION_COLUMNS = [f"{p}attn_{k}_{s}" for k in ("grid", "line") for s in ("init", "final")
                     for p in ("", "p_")] + ["attn_cos_init_final"]


def attention_structure(artifacts: Mapping[str, Any], *, run: str = "",
                        epoch: int | None = None,
                        null: PermutationNull | None = None) -> pd.DataFrame:
    """Grid score and line share of each block's mean validation attention map, at
    initialisation and after training, with permutation p-values.

    Args:
        artifacts: with ``labels``, ``seeds``, ``val_attention`` and ``val_attention_init``
            (M, N, L, n, n).
    Returns:
        One row per (model, block): ``run``, :data:`ID_COLUMNS`, ``block``, ``epoch``,
        :data:`ATTENTION_COLUMNS` (``attn_cos_init_final``: cosine of the mean maps at init
        and after training).
    """
    means = {stage: as_array(require(artifacts, key), key, ndim=5).mean(1)  # (M, L, n, n)
             for stage, key in (("init", "val_attention_init"), ("final", "val_attention"))}
    M, L, n = means["final"].shape[:3]
    null = null or permutation_null(n)
    out = _rows(artifacts, M, L, run, epoch)
    for kind, name in (("attention_grid", "grid"), ("line", "line")):
        for stage, m in means.items():
            out[f"attn_{name}_{stage}"] = (s := _SCORES[kind](m)).ravel()
            out[f"p_attn_{name}_{stage}"] = null.p_value(kind, m, s).ravel()
    a, b = means["init"], means["final"]
    out["attn_cos_init_final"] = ((a * b).sum((-2, -1)) / np.sqrt(
        (a * a).sum((-2, -1)) * (b * b).sum((-2, -1)))).ravel()
    return out[["run", *ID_COLUMNS, "block", "epoch", *ATTENTION_COLUMNS]]


def _epoch_of(run: Any) -> int | None:
    cfg = getattr(run, "config", None) or {}
    if cfg.get("epochs") is not None:
        return int(cfg["epochs"])
    h = getattr(run, "history", None)
    return int(h["epoch"].max()) if h is not None and "epoch" in h and len(h) else None


def _stacked(runs: Sequence[Any], keys: Sequence[str]) -> dict[str, Any]:
    """The artefacts of several runs as one (labels, seeds and ``keys`` concatenated)."""
    out: dict[str, Any] = {
        "labels": [lb for r in runs for lb in require(r.artifacts, "labels")],
        "seeds": [int(x) for r in runs for x in require(r.artifacts, "seeds")]}
    return out | {k: np.concatenate([as_array(require(r.artifacts, k), k) for r in runs])
                  for k in keys}


def stored_structure(runs: Iterable[Any], null: PermutationNull | None = None) -> pd.DataFrame:
    """:func:`pe_structure` and :func:`attention_structure` of several runs, side by side,
    scored together (one matrix product per score for all of them).

    Args:
        runs: :class:`lstpe.store.results.Run` objects (a merged run, or one per stored unit:
            ``[fragments.load_fragment(u) for u in fragments.done_units()]``); ``run`` is their
            ``name``, ``epoch`` their config's ``epochs`` (else the history's last epoch).
    Returns:
        One row per (run, model, block), in the order of ``runs``; the attention columns are
        NaN for runs stored without attention maps.
    """
    runs = list(runs)
    if not runs:
        raise ValueError("no runs given")
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        a = r.artifacts
        attn = "val_attention" in a and "val_attention_init" in a
        groups.setdefault((tuple(require(a, "pe_final").shape[1:]), attn), []).append(i)
    tables = []
    for (_, attn), idx in groups.items():
        part = [runs[i] for i in idx]
        t = pe_structure(_stacked(part, ["pe_init", "pe_final"]), null=null)
        if attn:
            at = attention_structure(_stacked(part, ["val_attention", "val_attention_init"]),
                                     null=null)
            t = pd.concat([t, at[ATTENTION_COLUMNS]], axis=1)
        # each model's rows (one per block) back to its run, its number there and its epoch
        per_model = [(i, r.name, _epoch_of(r), m) for i, r in zip(idx, part, strict=True)
                     for m in range(len(r.artifacts["labels"]))]
        L = len(t) // len(per_model)
        for j, col in enumerate(("_order", "run", "epoch", "model")):
            t[col] = np.repeat(np.array([x[j] for x in per_model], dtype=object), L)
        tables.append(t)
    out = pd.concat(tables, ignore_index=True)
    out["epoch"] = pd.to_numeric(out["epoch"])
    out["model"] = out["model"].astype(int)
    out = out.sort_values(["_order", "model", "block"], kind="stable").drop(columns="_order")
    cols = ["run", *ID_COLUMNS, *PE_COLUMNS]
    return out[cols + [c for c in ATTENTION_COLUMNS if c in out]].reset_index(drop=True)

