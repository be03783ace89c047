r"""The long units (models trained past 200 epochs) as tables over epochs, their check against
the stored 200-epoch unit of the same PE and seed, and their figure.

A long unit's published segments, joined (``lstpe.experiments.long_units.load_long``), are a
dict of plain arrays and tables: ``history`` (the tidy history), ``pe_epochs`` and ``pe``
(k, L, n, d) snapshots, ``attention_epochs`` and ``val_attention`` (k', N, L, n, n). This
module reads that dict (it imports nothing from ``lstpe.experiments``):

* :func:`snapshot_table`: the decomposition and grid scores of every snapshot
  (:func:`lstpe.analysis.pe_structure.snapshot_structure`, the init being the epoch-0 snapshot);
* :func:`alignment_table`: the Procrustes distance to the 2-D sinusoid per snapshot and block;
* :func:`attention_table`: Table 3's cosine to a ``2d-fixed`` reference per attention snapshot
  (both variants of :mod:`lstpe.analysis.attention`). The reference is the stored 2d-fixed
  unit of the same seed: its maps at initialisation for epoch 0, after its 200 epochs for every
  later epoch (no longer-trained 2d-fixed model is stored);
* :func:`over_epochs`: the three joined, one row per epoch, for :func:`plot_long`;
* :func:`long_summary`: each unit at epoch 200 beside its last snapshot, and how far its PE
  moved in between;
* :func:`fragment_match`: epochs 0-200 of a long unit against the stored 200-epoch unit.

**What "reproduces" can mean at the last epoch.** A run's last epoch evaluates the training and
test splits on all their puzzles (:mod:`lstpe.training.train`, ``evaluate(final=True)``); a
long unit at epoch 200 is mid-run and evaluates the subsets every other epoch uses. So the
``train`` and ``test`` rows of the fragment's last epoch are not like for like whenever the
recipe subsamples them (the paper's recipe subsamples train: ``eval_train_max``):
:func:`fragment_match` reports that epoch apart (``diff_last``) from the epochs before it
(``diff_before``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from lstpe.analysis.artifacts import as_array, require
from lstpe.analysis.attention import layer_mean_scores, layer_scores
from lstpe.analysis.pe_structure import PermutationNull, snapshot_structure
from lstpe.analysis.procrustes import procrustes_distance, target_pe
from lstpe.rendering import style

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MATCH_COLUMNS", "SUMMARY_COLUMNS", "split_accuracy", "snapshot_table",
           "alignment_table", "attention_table", "over_epochs", "long_summary", "fragment_match",
           "plot_long"]

MATCH_COLUMNS = ("quantity", "epochs", "long_at", "stored_at", "diff_before", "diff_last",
                 "scale")
"""Columns of :func:`fragment_match`."""


def _snapshots(long: Mapping[str, Any]) -> tuple[list[int], np.ndarray]:
    eps = [int(e) for e in require(long, "pe_epochs")]
    pe = as_array(require(long, "pe"), "pe", ndim=4)
    if len(eps) != pe.shape[0]:
        raise ValueError(f"{len(eps)} pe_epochs for {pe.shape[0]} PE snapshots")
    if 0 not in eps:
        raise ValueError("the snapshots hold no epoch 0 (the initial PE)")
    return eps, pe


def snapshot_table(long: Mapping[str, Any], ids: Mapping[str, Any] | None = None,
                   null: PermutationNull | None = None) -> pd.DataFrame:
    """Decomposition and grid scores of each PE snapshot against the epoch-0 snapshot.

    Args:
        long: ``pe_epochs`` and ``pe`` (k, L, n, d) (``load_long``'s dict).
        ids: constant columns put first (``pe``, ``sigma``, ``seed``).
    Returns:
        One row per (epoch, block): ``ids``, then
        :data:`lstpe.analysis.pe_structure.PE_COLUMNS`.
    """
    eps, pe = _snapshots(long)
    return snapshot_structure(pe[eps.index(0)], pe, eps, ids=ids, null=null)


def alignment_table(long: Mapping[str, Any], target: str = "2d-fixed") -> pd.DataFrame:
    """Procrustes distance (raw and normalised) of each snapshot's PE to ``target``.

    Returns:
        One row per (epoch, block): ``epoch, block, distance, distance_normalized``.
    """
    eps, pe = _snapshots(long)
    t = target_pe(target, pe.shape[2], pe.shape[3])
    rows = [{"epoch": e, "block": b, "distance": procrustes_distance(pe[i, b], t),
             "distance_normalized": procrustes_distance(pe[i, b], t, normalize=True)}
            for i, e in enumerate(eps) for b in range(pe.shape[1])]
    return pd.DataFrame(rows, columns=["epoch", "block", "distance", "distance_normalized"])


def attention_table(long: Mapping[str, Any], reference: Any,
                    reference_init: Any | None = None) -> pd.DataFrame:
    """Table 3's cosine (both variants) of each attention snapshot to a reference model's maps.

    Args:
        long: ``attention_epochs`` and ``val_attention`` (k', N, L, n, n).
        reference: (N, L, n, n) the reference's maps for every epoch > 0.
        reference_init: (N, L, n, n) its maps at initialisation, for epoch 0 (None: use
            ``reference`` there too).
    Returns:
        One row per attention snapshot: ``epoch, cosine_paper, cosine_ours``; empty when the
        unit stored no maps.
    """
    cols = ["epoch", "cosine_paper", "cosine_ours"]
    maps = long.get("val_attention")
    if maps is None or not len(long.get("attention_epochs") or []):
        return pd.DataFrame(columns=cols)
    eps = [int(e) for e in long["attention_epochs"]]
    ref = as_array(reference, "reference", ndim=4)
    ref0 = ref if reference_init is None else as_array(reference_init, "reference_init", ndim=4)
    rows = []
    for i, e in enumerate(eps):
        a, b = as_array(maps[i], "val_attention", ndim=4), ref0 if e == 0 else ref
        rows.append({"epoch": e, "cosine_paper": layer_mean_scores(a, b, ["cosine"])["cosine"],
                     "cosine_ours": float(layer_scores(a, b, ["cosine"])["cosine"].mean())})
    return pd.DataFrame(rows, columns=cols)


def over_epochs(long: Mapping[str, Any], ids: Mapping[str, Any] | None = None,
                reference: Any | None = None, reference_init: Any | None = None,
                block: int = 0, null: PermutationNull | None = None) -> pd.DataFrame:
    """One long unit over its snapshots, one row per PE snapshot epoch.

    Returns:
        ``ids``, ``epoch``, block ``block``'s ``score_dpe, p_dpe, score_final, p_final,
        init_share``, the mean over blocks of the Procrustes ``distance``, and
        ``cosine_paper`` / ``cosine_ours`` (NaN at epochs without attention maps, or without
        ``reference``).
    """
    s = snapshot_table(long, null=null)
    s = s[s["block"] == block][["epoch", "score_dpe", "p_dpe", "score_final", "p_final",
                                "init_share"]]
    al = alignment_table(long).groupby("epoch", as_index=False)["distance"].mean()
    out = s.merge(al, on="epoch", how="left")
    if reference is not None:
        out = out.merge(attention_table(long, reference, reference_init), on="epoch",
                        how="left")
    else:
        out["cosine_paper"] = out["cosine_ours"] = np.nan
    for k, v in reversed(list((ids or {}).items())):
        out.insert(0, k, v)
    out["epoch"] = out["epoch"].astype(int)
    return out.reset_index(drop=True)


SUMMARY_COLUMNS = ("pe", "sigma", "seed", "epoch", "fit_epoch", "val_at", "val_last",
                   "score_dpe_at", "score_dpe", "p_dpe", "score_final_at", "score_final",
                   "p_final", "init_share_at", "init_share", "moved_at", "moved_after",
                   "cosine_at", "cosine")
"""Columns of :func:`long_summary`."""


def split_accuracy(history: pd.DataFrame, split: str) -> pd.Series:
    """Accuracy over all conditions of ``split``, indexed by epoch."""
    h = history[(history["split"] == split) & (history["condition"].astype(str) == "all")]
    return h.groupby("epoch")["accuracy"].mean()


def long_summary(over: pd.DataFrame, longs: Mapping[str, Mapping[str, Any]], at: int = 200,
                 block: int = 0, fit: float = 0.99) -> pd.DataFrame:
    r"""Each long unit at epoch ``at`` beside its last PE snapshot.

    Args:
        over: :func:`over_epochs` rows of the units (``pe``, ``sigma``, ``seed`` among the ids).
        longs: each unit's ``load_long`` dict (``history``, ``pe_epochs``, ``pe`` (k, L, n, d)),
            keyed by its ``pe``.
        at: the epoch compared with the last (the stored units' 200).
        block: the block whose PE is measured.
        fit: the training accuracy that counts as fitting the training split.
    Returns:
        :data:`SUMMARY_COLUMNS`, one row per unit in order of sigma: ``epoch`` its last
        snapshot; ``fit_epoch`` the first epoch whose training accuracy (split ``train``, all
        conditions) reaches ``fit`` (NaN: never); ``val_at`` / ``val_last`` validation
        accuracy (all conditions); the grid scores, p values and init share of
        :func:`over_epochs` at ``at`` (``*_at``) and at the last snapshot; ``moved_at`` =
        :math:`\|P_{at}-P_0\|_F/\|P_0\|_F` and ``moved_after`` =
        :math:`\|P_{last}-P_{at}\|_F/\|P_0\|_F`: how far the PE moved by ``at`` and after it,
        in units of its initial norm; ``cosine_at`` / ``cosine`` Table 3's cosine (paper
        variant) at ``at`` and at the last snapshot (NaN without attention maps there).
    Raises:
        ValueError: a unit without a snapshot at ``at`` or without its ``longs`` entry.
    """
    rows = []
    for pe_name, g in over.groupby("pe", sort=False):
        if pe_name not in longs:
            raise ValueError(f"no long unit {pe_name!r} among {sorted(longs)}")
        eps, pe = _snapshots(longs[pe_name])
        if at not in eps:
            raise ValueError(f"{pe_name}: no PE snapshot at epoch {at}; snapshots: {eps}")
        p0, pa, pl = (pe[eps.index(e), block] for e in (0, at, max(eps)))
        g = g.set_index("epoch")
        a, z = g.loc[at], g.loc[max(eps)]
        h = require(longs[pe_name], "history")
        train, val = split_accuracy(h, "train"), split_accuracy(h, "val")
        fitted = train[train >= fit]
        n0 = float(np.linalg.norm(p0))
        rows.append({"pe": pe_name, "sigma": a["sigma"], "seed": a["seed"],
                     "epoch": int(max(eps)),
                     "fit_epoch": int(fitted.index[0]) if len(fitted) else np.nan,
                     "val_at": float(val.get(at, np.nan)),
                     "val_last": float(val.get(max(eps), np.nan)),
                     **{f"{c}_at": float(a[c]) for c in ("score_dpe", "score_final",
                                                          "init_share")},
                     **{c: float(z[c]) for c in ("score_dpe", "p_dpe", "score_final",
                                                 "p_final", "init_share")},
                     "moved_at": float(np.linalg.norm(pa - p0)) / n0,
                     "moved_after": float(np.linalg.norm(pl - pa)) / n0,
                     "cosine_at": float(a.get("cosine_paper", np.nan)),
                     "cosine": float(z.get("cosine_paper", np.nan))})
    out = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    return out.sort_values("sigma", kind="stable").reset_index(drop=True)


def fragment_match(long: Mapping[str, Any], fragment_history: pd.DataFrame,
                   fragment_pe_init: Any, fragment_pe_final: Any,
                   epoch: int = 200) -> pd.DataFrame:
    """Epochs 0 to ``epoch`` of a long unit against the stored unit of the same PE and seed.

    Args:
        long: ``history``, ``pe_epochs``, ``pe`` (k, L, n, d) of the long unit; its snapshots
            must include epochs 0 and ``epoch``.
        fragment_history: the stored unit's history (``epoch``, ``split``, ``condition``,
            ``accuracy``), that one model's rows.
        fragment_pe_init, fragment_pe_final: (L, n, d) its PE at 0 and at ``epoch``.
    Returns:
        :data:`MATCH_COLUMNS`, one row per split (``accuracy: <split>``, over every puzzle:
        condition ``all``) and two PE rows (``PE at 0``, ``PE at <epoch>``): ``epochs``
        compared, ``long_at`` and ``stored_at`` the two units' accuracy at ``epoch`` (PE rows:
        NaN), ``diff_before`` the largest absolute difference before ``epoch`` (PE rows: NaN),
        ``diff_last`` at ``epoch``, ``long_at - stored_at`` (PE rows: the largest absolute
        entry difference), ``scale`` the largest absolute value of the stored side (1 for
        accuracies), so ``diff / scale`` is relative.
    Raises:
        ValueError: missing snapshots, shapes that differ, or no common history row.
    """
    eps, pe = _snapshots(long)
    if epoch not in eps:
        raise ValueError(f"no PE snapshot at epoch {epoch}; snapshots: {eps}")
    h = require(long, "history")
    key = ["epoch", "split", "condition"]
    a = h[h["epoch"] <= epoch][[*key, "accuracy"]].astype({"condition": str})
    b = fragment_history[fragment_history["epoch"] <= epoch][[*key, "accuracy"]]
    m = a.merge(b.astype({"condition": str}), on=key, suffixes=("", "_stored"))
    if m.empty:
        raise ValueError("the long unit and the stored unit share no history row")
    m = m[m["condition"] == "all"]
    m["d"] = m["accuracy"] - m["accuracy_stored"]
    rows = []
    for split, g in m.groupby("split", sort=True):
        before, last = g[g["epoch"] < epoch], g[g["epoch"] == epoch]
        rows.append({"quantity": f"accuracy: {split}", "epochs": int(g["epoch"].nunique()),
                     "long_at": float(last["accuracy"].iloc[0]) if len(last) else np.nan,
                     "stored_at": float(last["accuracy_stored"].iloc[0]) if len(last)
                     else np.nan,
                     "diff_before": float(before["d"].abs().max()) if len(before) else np.nan,
                     "diff_last": float(last["d"].iloc[0]) if len(last) else np.nan,
                     "scale": 1.0})
    for e, ref in ((0, fragment_pe_init), (epoch, fragment_pe_final)):
        r = as_array(ref, "fragment PE", ndim=3)
        if r.shape != pe.shape[1:]:
            raise ValueError(f"stored PE {r.shape} and snapshots {pe.shape[1:]} differ")
        rows.append({"quantity": f"PE at {e}", "epochs": 1, "long_at": np.nan,
                     "stored_at": np.nan, "diff_before": np.nan,
                     "diff_last": float(np.abs(pe[eps.index(e)] - r).max()),
                     "scale": float(np.abs(r).max())})
    return pd.DataFrame(rows, columns=list(MATCH_COLUMNS))


def plot_long(table: pd.DataFrame, paper: Mapping[float, float] | None = None,
              stored: pd.DataFrame | None = None, width: float = 7.0) -> Figure:
    """Long units over epochs, one colour per sigma: grid score of dPE (solid) and of the final
    PE (dashed), Table 3's cosine (paper variant) with the paper's value at epoch 4000 (open
    square), and the Procrustes distance.

    Args:
        table: :func:`over_epochs` rows of several units (``sigma`` among the ids).
        paper: the paper's Table 3 cosine per sigma.
        stored: the stored 200-epoch units at epoch 200, per sigma (``sigma``,
            ``cos_trained``, ``procrustes_trained``: :func:`lstpe.analysis.mechanism.
            mechanism_table`), drawn as crosses at epoch 200.
    Returns:
        A Figure of three panels over epoch (symmetric-log axis, linear below epoch 1).
    """
    import matplotlib.pyplot as plt

    if table.empty:
        raise ValueError("no long-unit rows to draw")
    fig, axes = plt.subplots(1, 3, figsize=(width, 3.2), layout="constrained")
    for i, (sigma, g) in enumerate(table.groupby("sigma", sort=True)):
        c, lab = f"C{i}", f"σ = {sigma:g}"
        axes[0].plot(g["epoch"], g["score_dpe"], "-", color=c, label=lab)
        axes[0].plot(g["epoch"], g["score_final"], "--", color=c)
        at = g.dropna(subset=["cosine_paper"])
        axes[1].plot(at["epoch"], at["cosine_paper"], "o-", color=c, ms=3)
        axes[2].plot(g["epoch"], g["distance"], "-", color=c)
        if paper and sigma in paper:
            axes[1].plot([4000], [paper[sigma]], "s", mfc="none", color=c)
        if stored is not None and (s := stored[stored["sigma"] == sigma]).size:
            axes[1].plot([200], s["cos_trained"], "x", color=c)
            axes[2].plot([200], s["procrustes_trained"], "x", color=c)
    for ax, yl in zip(axes, ("grid score (— dPE, -- final)", "Table 3 cosine (paper var.)",
                             "Procrustes distance"), strict=True):
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("epoch", fontsize=9)
        ax.set_ylabel(yl, fontsize=9)
        ax.tick_params(labelsize=9)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=4,
               fontsize=9, title="x: stored units at 200; □: the paper at 4000",
               title_fontsize=9)
    return fig


def decay_factor(epochs: Any, lr: float, weight_decay: float, steps_per_epoch: int) -> Any:
    """What AdamW's decoupled weight decay alone leaves of a weight after ``epochs``:
    ``(1 - lr * weight_decay) ** (steps_per_epoch * epochs)`` (torch's ``AdamW`` multiplies
    every parameter by ``1 - lr * weight_decay`` before each step). Scalar or array in, same out.
    """
    if not 0 <= lr * weight_decay < 1:
        raise ValueError(f"lr * weight_decay = {lr * weight_decay} is not in [0, 1)")
    return (1.0 - lr * weight_decay) ** (steps_per_epoch * np.asarray(epochs, dtype=float))


def norm_over_epochs(long: Mapping[str, Any], split: str = "val") -> pd.DataFrame:
    """The PE's size over a long unit's snapshots, beside its accuracy.

    Args:
        long: ``pe_epochs``, ``pe`` (k, L, n, d) and ``history`` (``load_long``'s dict).
        split: the history split whose accuracy (all conditions) is put beside it.
    Returns:
        One row per PE snapshot: ``epoch``, ``norm_ratio`` (the Frobenius norm of each block's
        PE over its norm at epoch 0, mean over blocks) and ``accuracy`` (NaN at an epoch the
        history does not hold).
    """
    eps, pe = _snapshots(long)
    flat = pe.reshape(pe.shape[0], pe.shape[1], -1).astype(np.float64)
    norms = np.linalg.norm(flat, axis=2)  # (k, L)
    ratio = (norms / norms[eps.index(0)]).mean(axis=1)
    acc = split_accuracy(require(long, "history"), split)
    return pd.DataFrame({"epoch": eps, "norm_ratio": ratio,
                         "accuracy": [float(acc.get(e, np.nan)) for e in eps]})


def decay_epochs(target: float, lr: float, weight_decay: float, steps_per_epoch: int) -> float:
    """The epochs after which :func:`decay_factor` reaches ``target`` (0 < target <= 1)."""
    if not 0 < target <= 1:
        raise ValueError(f"target {target} is not in (0, 1]")
    return math.log(target) / math.log(float(decay_factor(1, lr, weight_decay, steps_per_epoch)))


def plot_witness(table: pd.DataFrame) -> Figure:
    """Weight decay's witness (``lstpe.chapters.long_mechanism.weight_decay_witness``): per PE,
    the PE's norm over its norm at epoch 0, AdamW solid, Adam dashed, what the decay alone
    leaves dotted (accuracy against the paper: ``lstpe.chapters.long_optimizers``)."""
    import matplotlib.pyplot as plt

    fig, ax0 = plt.subplots(figsize=style.figsize(0.8, 3.6), layout="constrained")
    for i, (pe, g) in enumerate(table.groupby("pe", sort=False)):
        for opt, ls in (("adamw", "-"), ("adam", "--")):
            h = g[g["optimizer"] == opt]
            ax0.plot(h["epoch"], h["norm_ratio"], ls, color=f"C{i}", label=f"{pe}, {opt}")
    w = table[table["optimizer"] == "adamw"].drop_duplicates("epoch").sort_values("epoch")
    ax0.plot(w["epoch"], w["decay_only"], ":", color="k", label="the decay alone")
    ax0.set(xlabel="epoch", ylabel="PE norm / its norm at epoch 0")
    fig.legend(*ax0.get_legend_handles_labels(), loc="outside lower center", ncols=2,
               fontsize=9, frameon=False)
    return style.readable(fig)


ACCURACY_AT_COLUMNS: tuple[str, ...] = ("epoch", "split", "accuracy")


def accuracy_at(long: Mapping[str, Any], epochs: Sequence[int],
                splits: Sequence[str] = ("val_dropout", "train_running")) -> pd.DataFrame:
    """A long unit's accuracy (all conditions) at ``epochs`` (those it has evaluated) for each
    of ``splits``: :data:`ACCURACY_AT_COLUMNS`, one row per (epoch, split)."""
    h = require(long, "history")
    rows = []
    for split in splits:
        acc = split_accuracy(h, split)
        rows += [{"epoch": int(e), "split": split, "accuracy": float(acc[e])}
                 for e in epochs if e in acc.index]
    return pd.DataFrame(rows, columns=list(ACCURACY_AT_COLUMNS))
