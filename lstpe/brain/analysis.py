"""Analysis of brain runs: final and mean MSEs, learning curves, network measures of the PEs.

The tables come from a run's history (:data:`lstpe.brain.task.BRAIN_HISTORY_COLUMNS`) and artefacts
(:func:`lstpe.brain.train.train_brain`); the network measures are those of
:mod:`lstpe.analysis.networks` against the run's partition of the regions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lstpe.brain.data import TEST_MASK
from lstpe.brain.model import initial_pe
from lstpe.nn.architecture import ModelConfig
from lstpe.nn.encodings import parse_pe


def final_mse(history: pd.DataFrame, split: str = "test", mask_ratio: float = TEST_MASK,
              train_mask: float | None = None) -> pd.DataFrame:
    """Rows of the history at the last step for one split and evaluation mask ratio.

    Args:
        train_mask: keep only models trained at this ratio (default: all).
    """
    h = history[(history["split"] == split) & np.isclose(history["mask_ratio"], mask_ratio)]
    if train_mask is not None:
        h = h[np.isclose(h["train_mask"], train_mask)]
    if h.empty:
        raise ValueError(f"no history rows for split={split!r}, mask_ratio={mask_ratio}, "
                         f"train_mask={train_mask}; available splits "
                         f"{sorted(history['split'].unique())}, ratios "
                         f"{sorted(history['mask_ratio'].unique())}")
    return h[h["step"] == h["step"].max()].reset_index(drop=True)


def mse_summary(history: pd.DataFrame, train_mask: float, test_mask: float = TEST_MASK
                ) -> pd.DataFrame:
    """Mean and SD over seeds of the final train and test MSE per PE (at ``test_mask``),
    sorted from highest to lowest test MSE as in the paper's Fig. 3D."""
    parts = []
    for split in ("train", "test"):
        f = final_mse(history, split, test_mask, train_mask)
        g = f.groupby("pe")["mse"].agg(["mean", "std", "count"])
        parts.append(g.add_prefix(f"{split}_"))
    out = pd.concat(parts, axis=1).sort_values("test_mean", ascending=False)
    return out.reset_index()


def mse_table(summary: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """:func:`mse_summary` as the chapter shows it: per PE (same order) the seeds ``n`` and
    ``train MSE``, ``test MSE`` as ``mean ± SD`` over seeds; the mean alone with one seed,
    where an SD does not exist (not NaN)."""
    def pm(m: float, sd: float, n: int) -> str:
        return f"{m:.{digits}f}" if n < 2 or not math.isfinite(sd) else \
            f"{m:.{digits}f} ± {sd:.{digits}f}"

    out = pd.DataFrame({"n": summary["test_count"].astype(int).to_numpy()},
                       index=pd.Index(summary["pe"].to_numpy(), name="pe"))
    for split in ("train", "test"):
        out[f"{split} MSE"] = [pm(m, sd, int(n)) for m, sd, n in zip(
            summary[f"{split}_mean"], summary[f"{split}_std"], summary[f"{split}_count"],
            strict=True)]
    return out


def network_table(artifacts: dict, model_cfg: ModelConfig | dict | None = None,
                  align: str = "none", n_perm: int = 0, seed: int = 0,
                  stages: Sequence[str] = ("final",), models: Sequence[int] | None = None
                  ) -> pd.DataFrame:
    """Modularity and network clustering of every model's PE against the run's partition.

    Args:
        artifacts: a run's artefacts (``pe_final``, ``labels``, ``seeds``, ``networks``...).
        model_cfg: for ``stage="init"`` (regenerates the initial PEs); default: the run's.
        align: ``"none"`` (default: plain Frobenius distances between the tokens' PEs) or
            ``"pair"`` (an orthogonal Procrustes rotation fitted per pair of tokens, the
            literal reading of the paper's Sec. 3.4); see
            :func:`lstpe.analysis.networks.pe_distance_matrix`.
        n_perm: shuffled-partition null size (0 = no null).
        stages: ``"final"`` and/or ``"init"``.
        models: model indices to measure (default: all).
    Returns:
        one row per (model, stage): model, pe, seed, train_mask, stage, modularity, clustering
        (+ z and p with ``n_perm``) and ``note``. Measures are NaN, with the reason in
        ``note``, for PEs without a per-region vector (rope, relative, nope) and for PEs whose
        tokens are all at the same distance (1d-fixed with ``align="pair"``; not reached with
        plain distances unless two tokens' PEs are all equal).
    """
    from lstpe.analysis import networks as nw

    bad = sorted(set(stages) - {"final", "init"})
    if bad:
        raise ValueError(f"unknown stages {bad}; valid: 'final', 'init'")
    mc = model_cfg or artifacts.get("model_config")
    mc = ModelConfig(**mc) if isinstance(mc, dict) else mc
    names = artifacts["network_names"]
    part = [names[c] for c in np.asarray(artifacts["networks"])]
    rows = []
    keep = set(range(len(artifacts["labels"]))) if models is None else set(models)
    for m, (pe, mseed, tm) in enumerate(zip(artifacts["labels"], artifacts["seeds"],
                                            artifacts["train_masks"], strict=True)):
        if m not in keep:
            continue
        spec = parse_pe(pe)
        done: dict[str, dict] = {}
        for stage in stages:
            row = {"model": m, "pe": pe, "seed": mseed, "train_mask": tm, "stage": stage,
                   "note": ""}
            if not spec.additive or spec.name == "nope":
                row.update(modularity=math.nan, clustering=math.nan,
                           note="no per-region PE vector")
            elif spec.name != "learn" and done:  # a fixed PE: init == final
                row.update(next(iter(done.values())))
            else:
                p = artifacts["pe_final"][m] if stage == "final" else initial_pe(spec, mseed, mc)
                try:
                    done[stage] = nw.network_measures(p, part, align, n_perm, seed)
                except ValueError as e:
                    if "distances are equal" not in str(e):
                        raise
                    done[stage] = {"modularity": math.nan, "clustering": math.nan,
                                   "note": f"all tokens equidistant (align={align!r})"}
                row.update(done[stage])
            rows.append(row)
    return pd.DataFrame(rows)


def curves(history: pd.DataFrame, split: str = "test", mask_ratio: float = TEST_MASK,
           train_mask: float | None = None) -> pd.DataFrame:
    """Mean MSE over seeds per step (rows) and PE (columns) for one split and mask ratio."""
    h = history[(history["split"] == split) & np.isclose(history["mask_ratio"], mask_ratio)]
    if train_mask is not None:
        h = h[np.isclose(h["train_mask"], train_mask)]
    if h.empty:
        raise ValueError(f"no history rows for split={split!r}, mask_ratio={mask_ratio}, "
                         f"train_mask={train_mask}")
    return h.pivot_table(index="step", columns="pe", values="mse", aggfunc="mean")
