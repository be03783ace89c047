"""The tidy history table of a run: its columns, which models diverged, the final table.

A run's history has one row per (model, evaluation, split, condition); :func:`final_table`
cuts it to one row per model at its last evaluation, leaving out the models whose loss or
logits became non-finite (with a warning naming them).
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pandas as pd
import torch

from lstpe.store.storage import DivergedWarning

HISTORY_COLUMNS = [
    "model", "pe", "pe_name", "sigma", "seed", "optimizer", "epoch", "split", "condition",
    "accuracy", "loss", "diverged",
]
"""Columns of the tidy history table. ``condition`` is ``"all"``, ``"1"``, ``"2"`` or ``"3"``
(relational complexity); ``sigma`` is NaN for PEs without one; ``diverged`` is True from the
first evaluation at which the model's loss or logits were non-finite (older runs may lack the
column, or hold it empty: :func:`diverged_models` then reads a non-finite loss as divergence)."""


def nonfinite_models(*tensors: torch.Tensor | None) -> torch.Tensor:
    """Which of M stacked models has a non-finite value in any of ``tensors``.

    Each tensor has the models on its first axis: logits ``(M, N, 4)``, per-model losses
    ``(M,)``, ...; None entries are skipped. Returns a bool tensor ``(M,)`` (on the CPU).
    A training loop keeps a sticky flag per model: ``diverged |= nonfinite_models(logits,
    loss)`` at every evaluation, and writes it into the ``diverged`` column.
    """
    flags: torch.Tensor | None = None
    for t in tensors:
        if t is None:
            continue
        bad = ~torch.isfinite(t.detach().reshape(t.shape[0], -1)).all(1)
        flags = bad if flags is None else flags | bad.to(flags.device)
    if flags is None:
        raise ValueError("nonfinite_models needs at least one tensor")
    return flags.cpu()


def _diverged_rows(history: pd.DataFrame) -> pd.Series:
    """Rows at which the model had diverged: the ``diverged`` column (if any) or a
    non-finite loss."""
    flag = pd.Series(False, index=history.index)
    if "diverged" in history.columns:
        col = history["diverged"]
        if col.dtype == bool:
            flag |= col
        else:
            flag |= col.astype("string").str.strip().str.lower().isin(["true", "1", "1.0"])
    if "loss" in history.columns:
        loss = pd.to_numeric(history["loss"], errors="coerce").to_numpy(dtype=float)
        flag |= ~np.isfinite(loss)
    return flag


def diverged_models(history: pd.DataFrame) -> pd.DataFrame:
    """The models of ``history`` that diverged, one row each: ``model, pe, seed, epoch`` (the
    first evaluation at which the loss or logits were non-finite). Empty if none did."""
    cols = [c for c in ("model", "pe", "seed") if c in history.columns]
    bad = history[_diverged_rows(history)]
    if bad.empty:
        return pd.DataFrame(columns=[*cols, "epoch"])
    step = "epoch" if "epoch" in bad.columns else "step"
    first = bad.sort_values(step).groupby("model", sort=True).head(1)
    return first[[*cols, step]].rename(columns={step: "epoch"}).sort_values("model") \
        .reset_index(drop=True)


def describe_diverged(diverged: pd.DataFrame) -> str:
    """``"model 3 (learn-0.2, seed 29, from epoch 1), ..."`` for messages."""
    parts = []
    for r in diverged.itertuples(index=False):
        what = ", ".join(str(x) for x in (getattr(r, "pe", None),
                                           f"seed {getattr(r, 'seed', '?')}") if x is not None)
        parts.append(f"model {r.model} ({what}, from epoch {r.epoch})")
    return ", ".join(parts)


def final_table(history: pd.DataFrame, split: str = "val", condition: str = "all",
                include_diverged: bool = False) -> pd.DataFrame:
    """Rows of ``history`` at each model's last epoch for one split and condition.

    Models that diverged (:func:`diverged_models`: non-finite loss or logits at any
    evaluation) are left out with a :class:`DivergedWarning` naming them, unless
    ``include_diverged``. The table has a bool ``diverged`` column.

    Raises:
        ValueError: an empty history, no rows for ``split``/``condition``, or every model
            diverged (and ``include_diverged`` is False).
    """
    if history.empty:
        raise ValueError("the history table is empty")
    h = history[(history["split"] == split) & (history["condition"].astype(str) == condition)]
    if h.empty:
        raise ValueError(f"no rows for split={split!r}, condition={condition!r}")
    last = h.groupby("model")["epoch"].transform("max")
    fin = h[h["epoch"] == last].reset_index(drop=True)
    div = diverged_models(history)
    fin["diverged"] = fin["model"].isin(div["model"])
    if include_diverged or div.empty:
        return fin
    if fin["diverged"].all():
        raise ValueError(f"every model diverged (non-finite loss or logits): "
                         f"{describe_diverged(div)}; pass include_diverged=True to see them")
    warnings.warn(f"{len(div)} diverged model(s) left out (non-finite loss or logits): "
                  f"{describe_diverged(div)}; pass include_diverged=True to keep them",
                  DivergedWarning, stacklevel=2)
    return fin[~fin["diverged"]].reset_index(drop=True)




def history_problems(history: pd.DataFrame, epochs: Any = None) -> list[str]:
    """What keeps a finished run's history from being read as its config says, one line per
    model: its last evaluated epoch is not the config's ``epochs`` (None: not checked), or a
    loss or accuracy is non-finite or outside its range (accuracy in [0, 1], loss >= 0) while
    the model is not flagged diverged (:func:`diverged_models` reads a non-finite loss as
    divergence: :func:`nonfinite_problems` names those). [] when none."""
    if history.empty or not {"model", "epoch"} <= set(history.columns):
        return ["the history holds no rows of (model, epoch)"]
    out = []
    if epochs is not None:
        last = pd.to_numeric(history["epoch"], errors="coerce").groupby(history["model"]).max()
        for model, e in last.items():
            if not (isinstance(epochs, int) and not isinstance(epochs, bool) and e == epochs):
                out.append(f"model {model}'s history ends at epoch {e:g}, where its config "
                           f"says {json.dumps(epochs, default=str)[:30]} epochs (cut short, "
                           "or not this run's history)")
    div = set(diverged_models(history)["model"])
    for col, lo, hi in (("accuracy", 0.0, 1.0), ("loss", 0.0, np.inf)):
        if col not in history.columns:
            continue
        v = pd.to_numeric(history[col], errors="coerce").to_numpy(dtype=float)
        bad = ~(np.isfinite(v) & (v >= lo) & (v <= hi)) & ~history["model"].isin(div)
        if bad.any():
            r = history[bad].iloc[0]
            out.append(f"model {r['model']} has {col} {v[bad][0]} at epoch {r['epoch']} "
                       f"({r.get('split', '?')}), outside [{lo:g}, {hi:g}] and not flagged "
                       "diverged")
    return out


def nonfinite_problems(history: pd.DataFrame) -> list[str]:
    """One line per model whose loss or accuracy is non-finite anywhere in ``history``, or
    that is flagged diverged: ``"model 3 (learn-0.2, seed 29): loss nan at epoch 12"``."""
    out = []
    flag = _diverged_rows(history)
    for col in ("accuracy", "loss"):
        if col in history.columns:
            flag |= ~np.isfinite(pd.to_numeric(history[col], errors="coerce")
                                 .to_numpy(dtype=float))
    for model, g in history[flag].groupby("model", sort=True):
        r = g.iloc[0]
        out.append(f"model {model} ({r.get('pe', '?')}, seed {r.get('seed', '?')}): loss "
                   f"{r.get('loss')}, accuracy {r.get('accuracy')} at epoch {r.get('epoch')}")
    return out
