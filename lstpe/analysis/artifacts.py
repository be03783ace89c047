"""Shared helpers of the analysis modules: reading training artefacts and the validation split.

The artefacts are the dict of :class:`lstpe.store.results.Run`:
``labels`` (list[str], one PE label per model), ``seeds`` (list[int]), ``pe_init`` /
``pe_final`` (M, L, 16, d), ``val_logits`` (M, 108, 4), ``val_attention`` /
``val_attention_init`` (M, 108, L, 16, 16) float16. Model ``m`` of the artefacts is model ``m``
of the history table (its ``model`` column).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from lstpe.nn.encodings import parse_pe

ID_COLUMNS = ["model", "pe", "pe_name", "sigma", "seed"]
"""Columns identifying a model in every per-model table (as in the history table)."""

STAGES = ("final", "init")


def require(artifacts: Mapping[str, Any], key: str) -> Any:
    """``artifacts[key]``, or a ValueError naming the key and the keys that exist."""
    if not isinstance(artifacts, Mapping):
        raise ValueError(f"artifacts must be a dict (Run.artifacts), "
                         f"got {type(artifacts).__name__}")
    if key not in artifacts:
        raise ValueError(
            f"artifacts have no {key!r}; available keys: {', '.join(sorted(artifacts)) or 'none'}"
            " (attention maps exist only for runs trained with save_attention=True)"
        )
    return artifacts[key]


def as_array(x: Any, name: str, ndim: int | None = None) -> np.ndarray:
    """A float64 numpy copy of a tensor/array, checking its number of dimensions."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        # numpy converts float16 -> float64 far faster than torch on CPU; bfloat16 has no numpy
        x = x.float().numpy() if x.dtype == torch.bfloat16 else x.numpy()
    a = np.asarray(x, dtype=np.float64)
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {a.shape}")
    return a


def model_table(artifacts: Mapping[str, Any], n_models: int | None = None) -> pd.DataFrame:
    """One row per model: ``model, pe, pe_name, sigma, seed`` (sigma NaN for non-learn PEs).

    Raises:
        ValueError: missing labels/seeds, different lengths, or a count other than ``n_models``.
    """
    labels = list(require(artifacts, "labels"))
    seeds = [int(s) for s in require(artifacts, "seeds")]
    if len(labels) != len(seeds):
        raise ValueError(f"artifacts have {len(labels)} labels but {len(seeds)} seeds")
    if not labels:
        raise ValueError("artifacts hold no models (empty labels)")
    if n_models is not None and n_models != len(labels):
        raise ValueError(f"artifact tensors have {n_models} models but there are {len(labels)} "
                         "labels")
    specs = [parse_pe(lb) for lb in labels]
    return pd.DataFrame({
        "model": np.arange(len(labels)),
        "pe": [s.label for s in specs],
        "pe_name": [s.name for s in specs],
        "sigma": [s.sigma if s.sigma is not None else math.nan for s in specs],
        "seed": seeds,
    })


def select_pe(models: pd.DataFrame, pe: str) -> pd.DataFrame:
    """Rows of a model table whose PE label is ``pe``; ValueError listing the labels if none."""
    label = parse_pe(pe).label
    rows = models[models["pe"] == label]
    if rows.empty:
        raise ValueError(f"no models with PE {pe!r}; PEs present: "
                         f"{', '.join(dict.fromkeys(models['pe']))}")
    return rows


def check_stage(stage: str) -> None:
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; valid stages: {', '.join(STAGES)}")


def unique_labels(labels: Sequence[str]) -> list[str]:
    """Labels in first-seen order without repeats."""
    return list(dict.fromkeys(labels))
