"""Models vs humans on the 108 validation puzzles (paper Fig. 6).

Per-puzzle *model* accuracy is the fraction of a PE's seeds that answer the puzzle correctly
(from the stored ``val_logits`` (M, 108, 4) and the validation labels); per-puzzle *human*
accuracy is the fraction of the 40 participants who did (:func:`lstpe.lst.human_accuracy`).
The two 108-vectors are compared with

* **cosine similarity** -- overall agreement, including the mean accuracy;
* **Spearman rank correlation** -- the ordering of puzzles by difficulty, independent of mean;
* **composite** -- their mean, as in the paper.

A PE whose seeds solve every puzzle (or fail the same way everywhere) has a constant accuracy
vector: its rank correlation is undefined and reported as NaN (the paper's "ceiling effect"),
with the reason in words in ``spearman_note``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from lstpe import lst
from lstpe.analysis.artifacts import ID_COLUMNS, as_array, model_table, require
from lstpe.lst import validation_split
from lstpe.stats.seed_stats import check_range

__all__ = ["model_correct", "puzzle_accuracy", "human_similarity", "condition_accuracy"]


def model_correct(artifacts: Mapping[str, Any], split: Any | None = None) -> pd.DataFrame:
    """Whether each model answers each validation puzzle correctly.

    Args:
        artifacts: training artefacts with ``labels``, ``seeds`` and ``val_logits`` (M, N, 4).
        split: the :class:`lstpe.lst.Split` the logits were computed on (default: the 108
            human puzzles, ordered by ``id`` as in training).
    Returns:
        Tidy table ``model, pe, pe_name, sigma, seed, id, vectors, correct`` (correct 0/1).
    Raises:
        ValueError: missing logits, or logits whose puzzle count differs from the split's.
    """
    logits = as_array(require(artifacts, "val_logits"), "val_logits", ndim=3)
    split = split if split is not None else validation_split()
    models = model_table(artifacts, logits.shape[0])
    n = len(split.y)
    if logits.shape[1] != n:
        raise ValueError(f"val_logits hold {logits.shape[1]} puzzles but the split has {n}")
    correct = (logits.argmax(-1) == split.y.numpy()[None]).astype(np.float64)  # (M, N)
    M = len(models)
    out = models.loc[models.index.repeat(n)].reset_index(drop=True)
    out["id"] = np.tile(split.ids.numpy(), M)
    out["vectors"] = np.tile(split.vectors.numpy(), M)
    out["correct"] = correct.ravel()
    return out[[*ID_COLUMNS, "id", "vectors", "correct"]]


def puzzle_accuracy(artifacts: Mapping[str, Any], split: Any | None = None) -> pd.DataFrame:
    """Per-puzzle accuracy of each PE, averaged over its seeds.

    Returns:
        ``pe, pe_name, sigma, id, vectors, accuracy, n_seeds`` (PEs in first-seen order,
        puzzles by ``id``).
    """
    c = model_correct(artifacts, split)
    out = (c.groupby(["pe", "pe_name", "sigma", "id", "vectors"], sort=False, dropna=False)
           .agg(accuracy=("correct", "mean"), n_seeds=("seed", "nunique")).reset_index())
    return out


def _human(humans: pd.DataFrame | None) -> pd.DataFrame:
    h = lst.human_accuracy() if humans is None else humans
    missing = {"id", "accuracy"} - set(h.columns)
    if missing:
        raise ValueError(f"human table lacks columns {sorted(missing)}; needs id, accuracy")
    if h.empty:
        raise ValueError("the human table is empty")
    check_range(h["accuracy"], 0, 1, "people's accuracy",
                [f"puzzle id {i}" for i in h["id"]] if "id" in h else None)
    return h


def _compare(m: np.ndarray, h: np.ndarray) -> dict[str, Any]:
    """Cosine, Spearman (rho, p, and ``spearman_note``: why rho is undefined, else empty) and
    composite of a model's per-puzzle accuracy ``m`` (N,) with people's ``h`` (N,)."""
    nm, nh = np.linalg.norm(m), np.linalg.norm(h)
    cos = float(m @ h / (nm * nh)) if nm > 0 and nh > 0 else math.nan
    note = (f"constant per-puzzle accuracy ({m[0]:.3f} on every puzzle)" if np.ptp(m) == 0
            else "people's per-puzzle accuracy is constant" if np.ptp(h) == 0 else "")
    if note:
        rho, p = math.nan, math.nan
        note += ": rank correlation undefined"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.ConstantInputWarning)
            res = stats.spearmanr(m, h)
        rho, p = float(res.statistic), float(res.pvalue)
    return {"cosine": cos, "spearman": rho, "spearman_p": p, "spearman_note": note,
            "composite": (cos + rho) / 2 if not (math.isnan(cos) or math.isnan(rho)) else math.nan}


def human_similarity(artifacts: Mapping[str, Any], humans: pd.DataFrame | None = None,
                     split: Any | None = None) -> pd.DataFrame:
    """Cosine, Spearman and composite similarity of each PE's per-puzzle accuracy to humans'.

    Args:
        humans: per-puzzle human accuracy with columns ``id``, ``accuracy`` (default:
            :func:`lstpe.lst.human_accuracy`).
    Returns:
        One row per PE: ``pe, pe_name, sigma, n_seeds, n_puzzles, model_accuracy,
        human_accuracy, cosine, spearman, spearman_p, spearman_note, composite``
        (``spearman_note``: why rho is NaN, e.g. a PE that solves every puzzle; else empty).
    Raises:
        ValueError: puzzles of the models missing from the human table (or vice versa), a
            human accuracy outside [0, 1].
    """
    h = _human(humans)[["id", "accuracy"]].rename(columns={"accuracy": "human"})
    pa = puzzle_accuracy(artifacts, split)
    ids_m, ids_h = set(pa["id"]), set(h["id"])
    if ids_m != ids_h:
        raise ValueError(f"model and human puzzle ids differ: {len(ids_m - ids_h)} only in the "
                         f"models, {len(ids_h - ids_m)} only in the human table")
    rows = []
    for (pe, name, sigma), g in pa.groupby(["pe", "pe_name", "sigma"], sort=False,
                                           dropna=False):
        g = g.merge(h, on="id").sort_values("id")
        m, hv = g["accuracy"].to_numpy(float), g["human"].to_numpy(float)
        rows.append({"pe": pe, "pe_name": name, "sigma": sigma,
                     "n_seeds": int(g["n_seeds"].max()), "n_puzzles": len(g),
                     "model_accuracy": float(m.mean()), "human_accuracy": float(hv.mean()),
                     **_compare(m, hv)})
    return pd.DataFrame(rows)


def condition_accuracy(artifacts: Mapping[str, Any], humans: pd.DataFrame | None = None,
                       split: Any | None = None) -> pd.DataFrame:
    """Accuracy per relational complexity (1/2/3 vectors) for every PE and for humans.

    Models: accuracy of each seed on the condition's puzzles, then mean and SD over seeds
    (``n`` = seeds). Humans: mean of the per-puzzle accuracies of the condition (``n`` =
    puzzles; ``sd`` NaN: the per-puzzle table has no participant-level data).

    Returns:
        ``source`` (``"model"`` / ``"human"``), ``pe`` (``"human"`` for humans), ``sigma``,
        ``vectors``, ``accuracy``, ``sd``, ``n``.
    """
    c = model_correct(artifacts, split)
    per_seed = (c.groupby(["pe", "sigma", "seed", "vectors"], sort=False, dropna=False)
                ["correct"].mean().reset_index())
    m = (per_seed.groupby(["pe", "sigma", "vectors"], sort=False, dropna=False)["correct"]
         .agg(accuracy="mean", sd="std", n="size").reset_index())
    m.insert(0, "source", "model")
    h = _human(humans)
    if "vectors" not in h:
        raise ValueError("human table lacks the 'vectors' column")
    hc = h.groupby("vectors")["accuracy"].agg(accuracy="mean", n="size").reset_index()
    hc = hc.assign(source="human", pe="human", sigma=math.nan, sd=math.nan)
    cols = ["source", "pe", "sigma", "vectors", "accuracy", "sd", "n"]
    return pd.concat([m[cols], hc[cols]], ignore_index=True)
