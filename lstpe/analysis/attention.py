r"""Attention-map alignment to the ground-truth ``2d-fixed`` models (paper Fig. 3B-D, Fig. 4,
Table 3, Appendix Fig. 9).

Attention maps come from the training artefacts: ``val_attention`` (after training) and
``val_attention_init`` (at initialisation), both (M, N=108, L, 16, 16) float16, row ``i`` of a
map being the attention distribution of query token ``i`` over the 16 keys.

Our two measures (the ``"ours"`` variant; the ``"paper"`` variant is below), both **per
layer**, over the N validation puzzles:

* **cosine similarity**: the (N, 16, 16) maps of one layer are flattened into one vector of
  N*256 entries per model and the cosine of the two vectors is taken;
* **Jensen-Shannon divergence** (base 2, in [0, 1]): between the two attention distributions of
  each (puzzle, query) row, averaged over the N*16 rows. Rows are renormalised to sum 1 (the
  float16 storage leaves them off by ~1e-3).

A model-level value is the mean over layers (:func:`average_layers`). The paper does not say
how its cosine was aggregated; it reports mean and SD over seeds (Table 3), which is what
:func:`similarity_to_reference` followed by :func:`lstpe.stats.seed_stats.summarize` gives. The
authors' code averages the maps over layers *before* comparing (the ``"paper"`` variant,
:func:`layer_mean_scores`); :func:`table3` gives both.

**Ground truth (our choice, the paper leaves it open).** ``pairing="seed"`` (default) compares
each model with the 2d-fixed model *of the same seed*: in this package the same seed means the
same non-PE initial weights and the same data order, so the PE is the only difference, and each
seed of a learnable PE yields one similarity (mean and SD over seeds as in Table 3).
``pairing="mean"`` compares with the average of the 2d-fixed maps over all its seeds (a
seed-free ground truth; the mean of attention distributions is again a distribution).

**Baseline at initialisation.** ``stage="init"`` compares the maps of the untrained models
(``val_attention_init``, reference at init too). The paper's "baseline cosine similarity"
between schemes (0.72 for 1d-fixed, 0.00 for learn-0.2) is a similarity of the PE tensors
themselves: see :func:`lstpe.analysis.procrustes.pe_alignment` with ``stage="init"``. In this
package models of the same seed share their non-PE initial weights, so at initialisation a
learnable model and the 2d-fixed model differ only in the PE; in the authors' code they do not
(the learnable PE's ``torch.randn`` is drawn before the attention weights of its block,
``learnable_pe.py:15``), so our init baseline is higher than theirs would be.

**Two variants of Table 3** (:data:`TABLE3_VARIANTS`, both in :func:`table3`):

* ``"ours"``: per block as above (:func:`similarity_to_reference`), then the mean over blocks.
* ``"paper"``: the conventions of the authors' public code (``ljhearne/LSTNN_public`` at
  ``d139c51``), :func:`layer_mean_scores`. That repository holds no code for Table 3 or
  Fig. 2A-C (no cosine of attention maps, no Jensen-Shannon divergence, in any commit); what it
  holds is how the authors extract and aggregate attention for their other analyses of the
  same models (``lstnn/compare_rdms.py``), which this variant follows:

  - softmax attention *weights* (not scores), averaged over heads (one head): ``need_weights=
    True`` of ``nn.MultiheadAttention`` (``compare_rdms.py:116-118``), as our stored maps;
  - the 108 validation (human) puzzles in one unshuffled batch (``compare_rdms.py:195-197``),
    kept apart (no average over puzzles), stacked as (seeds, layers, 108, 256), each 16 x 16
    map flattened query-major (``compare_rdms.py:245-246``), as our stored maps;
  - layers **averaged** before anything else: their ``*_avg`` representations
    (``compare_rdms.py:278-281``, ``np.mean(weights, axis=1)``) and the attention analysis
    (``scripts/Analysis 4a: Attention weights.ipynb``, cell 6: ``np.mean(attn[s, :, p, :],
    axis=0)``, "average across layers"); then one cosine over the 108 x 256 entries;
  - the trained checkpoint of epoch 4000 (``epoch = 4000`` in Analyses 3 and 4a);
  - no ``model.eval()`` (``compare_rdms.py:207-233``): the 2d-fixed model's
    ``PositionalEncoding2D`` keeps its ``Dropout(p=0.1)`` active (``transformer_main.py:51-53,
    84``), so their reference maps come from a dropout-perturbed forward pass.

  Differences from the paper's text: the text says "we extracted the attention weights for each
  model (at every layer)" and names neither the layer average nor the puzzle layout; it says
  the models were trained without dropout, while the extraction code evaluates the 2d-fixed
  model with dropout on; it does not say which 2d-fixed seed a learnable model is compared with
  (here ``pairing`` as above). Differences from the authors' code that the stored artefacts
  impose: our maps are from eval mode (no dropout; recomputing the 2d-fixed maps with dropout
  needs the trained 2d-fixed weights, which the artefacts do not hold), after 200 epochs, not
  4000, and stored in float16 (relative error ~1e-3, negligible for a cosine).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import xlogy

from lstpe.analysis.artifacts import (
    ID_COLUMNS,
    as_array,
    check_stage,
    model_table,
    require,
    select_pe,
    unique_labels,
)

__all__ = [
    "METRICS", "PAIRINGS", "TABLE3_VARIANTS", "cosine_similarity", "js_divergence",
    "attention_maps", "layer_scores", "layer_mean_scores", "similarity_to_reference", "table3",
    "pairwise_similarity", "similarity_matrix", "average_layers",
]

METRICS: tuple[str, ...] = ("cosine", "jsd")
PAIRINGS: tuple[str, ...] = ("seed", "mean", "other-seed")
"""How a model meets its reference: ``seed`` the reference of its own seed (in this repo they
share every weight but the PE), ``mean`` the reference's maps averaged over seeds,
``other-seed`` the reference of the next stored seed (cyclically): independent attention
weights, the starting point of the authors' code, where a learnable PE draws from the global
generator before its block's weights and 2d-fixed does not."""
TABLE3_VARIANTS: tuple[str, ...] = ("paper", "ours")
"""Table 3 variants: ``paper`` (the authors' code conventions, :func:`layer_mean_scores`) and
``ours`` (per block, then the mean over blocks)."""
_ROW_TOL = 2e-2  # float16 maps: rows sum to 1 up to rounding


def average_layers(table: pd.DataFrame, values: Sequence[str] | None = None) -> pd.DataFrame:
    """Average per-layer rows into one row per model (mean over the ``layer`` column).

    Args:
        table: a per-layer table with the :data:`ID_COLUMNS`, ``layer`` and numeric columns.
        values: columns to average (default: every numeric column except ids and ``layer``).
    Returns:
        One row per model (plus any other non-numeric key columns such as ``stage``), with
        ``n_layers``.
    """
    if table.empty:
        raise ValueError("the table is empty")
    if "layer" not in table:
        raise ValueError(f"the table has no 'layer' column; columns: {', '.join(table.columns)}")
    keys = [c for c in table.columns
            if c in ID_COLUMNS or (c != "layer" and not pd.api.types.is_numeric_dtype(table[c]))]
    if values is None:
        values = [c for c in table.columns if c not in keys and c != "layer"]
    missing = [v for v in values if v not in table]
    if missing:
        raise ValueError(f"unknown columns {missing}; columns: {', '.join(table.columns)}")
    out = (table.groupby(keys, sort=False, dropna=False)
           .agg(**{v: (v, "mean") for v in values}, n_layers=("layer", "size"))
           .reset_index())
    return out


def cosine_similarity(a: Any, b: Any) -> float:
    """Cosine of two arrays of equal shape, flattened: ``<a, b> / (|a| |b|)``.

    Raises:
        ValueError: shapes differ, or one array is all zeros (cosine undefined).
    """
    a, b = as_array(a, "a"), as_array(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch: {a.shape} vs {b.shape}")
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        raise ValueError("cosine similarity is undefined for an all-zero array")
    return float(np.dot(a.ravel(), b.ravel()) / (na * nb))


def _check_distributions(p: np.ndarray, name: str, axis: int) -> np.ndarray:
    if p.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(p)) or (p < 0).any():
        raise ValueError(f"{name} must hold finite non-negative probabilities")
    s = p.sum(axis=axis, keepdims=True)
    if np.abs(s - 1).max() > _ROW_TOL:
        raise ValueError(f"{name} is not a probability distribution along axis {axis}: sums "
                         f"range {s.min():.4g}..{s.max():.4g}")
    return p / s


def js_divergence(p: Any, q: Any, axis: int = -1) -> np.ndarray:
    r"""Jensen-Shannon divergence (base 2) between distributions along ``axis``.

    .. math:: \mathrm{JSD}(p, q) = \tfrac12 \mathrm{KL}(p\,\|\,m) + \tfrac12 \mathrm{KL}(q\,\|\,m),
              \quad m = \tfrac12 (p + q)

    equal to ``scipy.spatial.distance.jensenshannon(p, q, base=2) ** 2``; 0 for identical
    distributions, 1 for disjoint supports. Each distribution is renormalised to sum 1 (sums must
    be within 0.02 of 1).

    Args:
        p, q: arrays of equal shape, non-negative, summing to 1 along ``axis``.
    Returns:
        array of the shape of ``p`` without ``axis`` (a 0-d array for 1-D inputs).
    Raises:
        ValueError: shape mismatch, negative or non-finite entries, rows not summing to 1.
    """
    p, q = as_array(p, "p"), as_array(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"shape mismatch: {p.shape} vs {q.shape}")
    p, q = _check_distributions(p, "p", axis), _check_distributions(q, "q", axis)
    m = 0.5 * (p + q)
    kl = lambda x: np.sum(xlogy(x, x) - xlogy(x, m), axis=axis)  # noqa: E731
    return np.clip(0.5 * (kl(p) + kl(q)) / np.log(2.0), 0.0, 1.0)


def _raw_maps(artifacts: Mapping[str, Any], stage: str) -> Any:
    """The stored maps unconverted (float16 tensor), validated: (M, N, L, n, n)."""
    check_stage(stage)
    key = "val_attention" if stage == "final" else "val_attention_init"
    maps = require(artifacts, key)
    shape = tuple(maps.shape)
    if len(shape) != 5 or shape[-1] != shape[-2]:
        raise ValueError(f"{key} must be (M, N, L, n, n) attention maps, got shape {shape}")
    model_table(artifacts, shape[0])
    return maps


def attention_maps(artifacts: Mapping[str, Any], stage: str = "final") -> np.ndarray:
    """The stored validation attention maps as float64: (M, N, L, n, n).

    (At paper scale this is a few hundred MB; the table functions convert one model at a time.)

    Args:
        stage: ``"final"`` (``val_attention``) or ``"init"`` (``val_attention_init``).
    Raises:
        ValueError: unknown stage, missing key, wrong shape, or labels not matching M.
    """
    return as_array(_raw_maps(artifacts, stage), "attention maps", ndim=5)


def layer_scores(a: np.ndarray, b: np.ndarray,
                 metrics: Sequence[str] = METRICS) -> dict[str, np.ndarray]:
    """Per-layer similarity of two models' maps.

    Args:
        a, b: (N, L, n, n) attention maps of two models (rows are distributions).
        metrics: any of ``cosine`` and ``jsd``.
    Returns:
        ``{metric: (L,) array}``: cosine of the flattened (N, n, n) maps of each layer; JSD
        averaged over the N*n rows of each layer.
    Raises:
        ValueError: shape mismatch, unknown metric, all-zero maps.
    """
    a, b = as_array(a, "a", ndim=4), as_array(b, "b", ndim=4)
    if a.shape != b.shape:
        raise ValueError(f"attention map shapes differ: {a.shape} vs {b.shape}")
    _check_metrics(metrics)
    out: dict[str, np.ndarray] = {}
    if "cosine" in metrics:
        L = a.shape[1]
        fa = np.moveaxis(a, 1, 0).reshape(L, -1)
        fb = np.moveaxis(b, 1, 0).reshape(L, -1)
        na, nb = np.linalg.norm(fa, axis=1), np.linalg.norm(fb, axis=1)
        if (na == 0).any() or (nb == 0).any():
            raise ValueError("cosine similarity is undefined for all-zero attention maps")
        out["cosine"] = np.einsum("ld,ld->l", fa, fb) / (na * nb)
    if "jsd" in metrics:
        out["jsd"] = js_divergence(a, b, axis=-1).mean(axis=(0, 2))
    return out


def layer_mean_scores(a: np.ndarray, b: np.ndarray,
                      metrics: Sequence[str] = METRICS) -> dict[str, float]:
    """Similarity of two models' maps as the authors' code aggregates attention (the
    ``"paper"`` variant of Table 3; module docstring).

    Each model's maps are first averaged over the L blocks (their ``*_avg`` convention), giving
    one (N, n, n) array of attention distributions per model; then

    * ``cosine``: the cosine of the two flattened (N * n * n) vectors (no average over puzzles);
    * ``jsd``: the Jensen-Shannon divergence (base 2) of each (puzzle, query) row of the
      layer-averaged maps, averaged over the N * n rows.

    Args:
        a, b: (N, L, n, n) attention maps of two models (rows are distributions).
        metrics: any of ``cosine`` and ``jsd``.
    Returns:
        ``{metric: float}``.
    Raises:
        ValueError: shape mismatch, unknown metric, all-zero maps.
    """
    a, b = as_array(a, "a", ndim=4), as_array(b, "b", ndim=4)
    if a.shape != b.shape:  # before averaging the blocks away
        raise ValueError(f"attention map shapes differ: {a.shape} vs {b.shape}")
    # (N, 1, n, n): the mean of distributions over blocks, scored as one block
    one = layer_scores(a.mean(axis=1, keepdims=True), b.mean(axis=1, keepdims=True), metrics)
    return {k: float(v[0]) for k, v in one.items()}


def _check_metrics(metrics: Sequence[str]) -> None:
    bad = [m for m in metrics if m not in METRICS]
    if bad or not metrics:
        raise ValueError(f"unknown metrics {list(metrics)}; valid metrics: {', '.join(METRICS)}")


def _check_pairing(pairing: str) -> None:
    if pairing not in PAIRINGS:
        raise ValueError(f"unknown pairing {pairing!r}; valid pairings: {', '.join(PAIRINGS)}")


def similarity_to_reference(
    artifacts: Mapping[str, Any],
    reference: str = "2d-fixed",
    pairing: str = "seed",
    stage: str = "final",
    metrics: Sequence[str] = METRICS,
    pes: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Similarity of every model's attention maps to the reference (ground-truth) models.

    Args:
        artifacts: training artefacts (``labels``, ``seeds``, ``val_attention[_init]``).
        reference: PE label of the ground truth (``2d-fixed`` in the paper).
        pairing: ``"seed"`` -- the reference model with the same seed (every compared seed must
            have one); ``"mean"`` -- the reference maps averaged over the reference's seeds.
        stage: ``"final"`` (trained) or ``"init"`` (both at initialisation: the baseline).
        metrics: ``cosine`` and/or ``jsd``.
        pes: restrict to these PE labels (default: every model, the reference included -- with
            ``pairing="seed"`` its own rows are trivially cosine 1, JSD 0).
    Returns:
        Tidy table, one row per (model, layer): ``model, pe, pe_name, sigma, seed, stage,
        reference, pairing, layer`` and one column per metric. :func:`average_layers` gives one
        row per model.
    Raises:
        ValueError: unknown PE / pairing / stage / metric, a reference absent from the run, or
            (``pairing="seed"``) a seed without a reference model.
    """
    _check_metrics(metrics)
    ref_label, pairs = _reference_pairs(artifacts, reference, pairing, stage, pes)
    rows = []
    for r, maps, ref in pairs:
        scores = layer_scores(maps, ref, metrics)
        for layer in range(maps.shape[1]):
            rows.append({**r, "stage": stage, "reference": ref_label, "pairing": pairing,
                         "layer": layer, **{k: float(v[layer]) for k, v in scores.items()}})
    return pd.DataFrame(rows, columns=[*ID_COLUMNS, "stage", "reference", "pairing", "layer",
                                       *[m for m in METRICS if m in metrics]])


def _reference_pairs(artifacts: Mapping[str, Any], reference: str, pairing: str, stage: str,
                     pes: Sequence[str] | None) -> tuple[str, Iterator[tuple[dict, Any, Any]]]:
    """The reference's label and, per compared model, ``(id row, its maps (N, L, n, n), the
    reference maps)`` (validated as in :func:`similarity_to_reference`)."""
    _check_pairing(pairing)
    maps = _raw_maps(artifacts, stage)
    models = model_table(artifacts, maps.shape[0])
    ref_rows = select_pe(models, reference)
    if pes is not None:
        models = pd.concat([select_pe(models, p) for p in pes]).drop_duplicates("model")
    ref_by_seed = dict(zip(ref_rows["seed"], ref_rows["model"], strict=True))
    if pairing == "other-seed":
        seeds = sorted(ref_by_seed)
        if len(seeds) < 2:
            raise ValueError(f"pairing='other-seed' needs {reference} models of two seeds or "
                             f"more; stored: {seeds}")
        ref_by_seed = {s: ref_by_seed[seeds[(i + 1) % len(seeds)]] for i, s in enumerate(seeds)}
    if pairing in ("seed", "other-seed"):
        missing = sorted(set(models["seed"]) - set(ref_by_seed))
        if missing:
            raise ValueError(
                f"pairing='seed' needs a {reference} model for every seed; missing seeds "
                f"{missing} (reference seeds: {sorted(ref_by_seed)}); use pairing='mean'"
            )
        mean_ref = None
    else:
        mean_ref = sum(as_array(maps[i], "map") for i in ref_rows["model"]) / len(ref_rows)

    def pairs() -> Iterator[tuple[dict, Any, Any]]:
        for r in models.itertuples(index=False):
            ref = maps[ref_by_seed[r.seed]] if mean_ref is None else mean_ref
            yield r._asdict(), maps[r.model], ref

    return str(ref_rows["pe"].iloc[0]), pairs()


def table3(
    artifacts: Mapping[str, Any],
    stage: str = "final",
    reference: str = "2d-fixed",
    pairing: str = "seed",
    pes: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The paper's Table 3 (attention similarity to the reference) in both :data:`TABLE3_VARIANTS`.

    Args:
        artifacts, reference, pairing, stage, pes: as in :func:`similarity_to_reference`.
    Returns:
        One row per model: ``model, pe, pe_name, sigma, seed, stage, reference, pairing``,
        ``cosine_paper``, ``jsd_paper`` (:func:`layer_mean_scores`: blocks averaged first, the
        authors' convention) and ``cosine_ours``, ``jsd_ours`` (:func:`layer_scores` per block,
        then the mean over blocks, as ``average_layers(similarity_to_reference(...))``).
    Raises:
        ValueError: as :func:`similarity_to_reference`.
    """
    ref_label, pairs = _reference_pairs(artifacts, reference, pairing, stage, pes)
    rows = []
    for r, maps, ref in pairs:
        a, b = as_array(maps, "maps", ndim=4), as_array(ref, "reference maps", ndim=4)
        paper = layer_mean_scores(a, b)
        ours = {k: float(v.mean()) for k, v in layer_scores(a, b).items()}
        rows.append({**r, "stage": stage, "reference": ref_label, "pairing": pairing,
                     **{f"{k}_paper": v for k, v in paper.items()},
                     **{f"{k}_ours": v for k, v in ours.items()}})
    return pd.DataFrame(rows, columns=[*ID_COLUMNS, "stage", "reference", "pairing",
                                       "cosine_paper", "jsd_paper", "cosine_ours", "jsd_ours"])


def table3_stages(artifacts: Mapping[str, Any], reference: str = "2d-fixed",
                  pes: Sequence[str] | None = None, mean_too: bool = False) -> pd.DataFrame:
    """:func:`table3` after training and at initialisation, one table (``stage`` tells them
    apart): every model against the ``reference`` model of its seed; with ``mean_too``, also
    the trained models against the reference's maps averaged over its seeds (``pairing ==
    "mean"``: the paper leaves the pairing open)."""
    parts = [table3(artifacts, stage=s, reference=reference, pes=pes) for s in ("final", "init")]
    if mean_too:
        parts.append(table3(artifacts, stage="final", reference=reference, pes=pes,
                            pairing="mean"))
    return pd.concat(parts, ignore_index=True)


def other_seed_baseline(artifacts: Mapping[str, Any], pes: Sequence[str] | None = None,
                        reference: str = "2d-fixed") -> pd.DataFrame | None:
    """:func:`table3` at initialisation against the ``reference`` model of *another* seed
    (independent attention weights, as in the authors' code); None where the reference has
    fewer than two seeds (a run of one seed has no other)."""
    models = model_table(artifacts, _raw_maps(artifacts, "init").shape[0])
    if select_pe(models, reference)["seed"].nunique() < 2:
        return None
    return table3(artifacts, stage="init", reference=reference, pairing="other-seed", pes=pes)


def pairwise_similarity(
    artifacts: Mapping[str, Any],
    stage: str = "final",
    metrics: Sequence[str] = METRICS,
    pes: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Similarity between every pair of PEs (paper Fig. 3B), models paired by seed.

    For PEs ``a`` and ``b`` the maps of the two models with the same seed are compared (per
    layer, as in :func:`layer_scores`), then averaged over layers and over the seeds both PEs
    have. The diagonal (a == b) is therefore cosine 1, JSD 0.

    Args:
        stage: ``"final"`` or ``"init"`` (similarity at initialisation: the baseline matrix).
        pes: PE labels to include, in this order (default: all, in first-seen order).
    Returns:
        Tidy table ``pe_a, pe_b, stage, n_seeds`` + one column per metric (mean over seeds and
        layers) + ``<metric>_sd`` (SD over seeds of the layer-averaged value; NaN for 1 seed).
        :func:`similarity_matrix` pivots it into a square matrix.
    Raises:
        ValueError: unknown PE / stage / metric, or two PEs without a common seed.
    """
    _check_metrics(metrics)
    maps = _raw_maps(artifacts, stage)
    models = model_table(artifacts, maps.shape[0])
    labels = [select_pe(models, p)["pe"].iloc[0] for p in pes] if pes is not None \
        else unique_labels(models["pe"])
    by_pe = {lb: dict(zip(g["seed"], g["model"], strict=True)) for lb, g in models.groupby("pe")}
    cache: dict[tuple[int, int], dict[str, float]] = {}
    rows = []
    for a in labels:
        for b in labels:
            seeds = sorted(set(by_pe[a]) & set(by_pe[b]))
            if not seeds:
                raise ValueError(f"PEs {a!r} and {b!r} share no seed: cannot pair by seed")
            per_seed = []
            for s in seeds:
                i, j = by_pe[a][s], by_pe[b][s]
                key = (min(i, j), max(i, j))
                if key not in cache:
                    cache[key] = {k: float(v.mean())
                                  for k, v in layer_scores(maps[i], maps[j], metrics).items()}
                per_seed.append(cache[key])
            row: dict[str, Any] = {"pe_a": a, "pe_b": b, "stage": stage, "n_seeds": len(seeds)}
            for m in (m for m in METRICS if m in metrics):
                vals = np.array([d[m] for d in per_seed])
                row[m] = float(vals.mean())
                row[m + "_sd"] = float(vals.std(ddof=1)) if len(vals) > 1 else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def similarity_matrix(pairwise: pd.DataFrame, metric: str = "cosine") -> pd.DataFrame:
    """Pivot :func:`pairwise_similarity` into a square PE x PE matrix (rows ``pe_a``, columns
    ``pe_b``, in first-seen order).

    Raises:
        ValueError: empty table or a metric the table does not hold.
    """
    if pairwise.empty:
        raise ValueError("the pairwise table is empty")
    if metric not in pairwise:
        raise ValueError(f"the table has no {metric!r} column; valid metrics: "
                         f"{', '.join(m for m in METRICS if m in pairwise)}")
    order = unique_labels(pairwise["pe_a"])
    mat = pairwise.pivot(index="pe_a", columns="pe_b", values=metric)
    return mat.loc[order, order].rename_axis(index=None, columns=None)
