r"""Noise robustness (paper Fig. 5 / Appendix Fig. A9).

Gaussian noise :math:`\mathcal N(0, x^2)` (std ``x``) is added to every token embedding
(after the linear embedding, before the first PE) and validation accuracy is re-evaluated, for
:math:`x \in \{0.02, 0.04, 0.06, 0.08, 0.1\}` as in the paper, plus ``x = 0`` (the noiseless
accuracy) by default. Every model gets its own noise draw, from its own ``torch.Generator``
seeded by (``seed``, the noise level, the repeat, the model's seed) (:func:`noise_seed`): the
draw does not depend on which other models share its batch, and models of one seed (different
PEs) see the same noise, so their losses are paired. Accuracies are averaged over ``repeats``.
Units trained before this scheme drew one tensor for their whole chunk (their manifests lack
``noise_draw``); both are independent Gaussian draws, so the statistics read them alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from lstpe.lst import validation_split
from lstpe.nn.model import BatchedLSTTransformer
from lstpe.training.task import score

__all__ = ["NOISE_LEVELS", "NOISE_DRAW", "noise_robustness", "noise_seed"]

NOISE_LEVELS: tuple[float, ...] = (0.02, 0.04, 0.06, 0.08, 0.1)
"""The paper's noise standard deviations."""

NOISE_DRAW = "per-model"
"""How the noise is drawn (recorded in every manifest as ``noise_draw``)."""

COLUMNS = ["noise", "model", "pe", "pe_name", "sigma", "seed", "condition", "accuracy",
           "repeats"]


def _model_ids(models: list[BatchedLSTTransformer],
               artifacts: Mapping[str, Any] | None) -> list[list[int]]:
    """Global model index of every model of every batched model."""
    if artifacts is None:
        out, k = [], 0
        for m in models:
            out.append(list(range(k, k + m.n_models)))
            k += m.n_models
        return out
    labels, seeds = list(artifacts["labels"]), [int(s) for s in artifacts["seeds"]]
    index = {(p, s): i for i, (p, s) in enumerate(zip(labels, seeds, strict=True))}
    out = []
    for m in models:
        ids = []
        for label, seed in zip(m.labels(), m.seeds, strict=True):
            if (label, seed) not in index:
                raise ValueError(f"model ({label}, seed {seed}) is not in the artifacts; "
                                 f"they hold {sorted(index)}")
            ids.append(index[(label, seed)])
        out.append(ids)
    return out


def noise_seed(seed: int, noise: float, repeat: int, model_seed: int) -> int:
    """The seed of one model's noise generator at one level and repeat: a function of those
    four alone (the level in millionths), below 2**63."""
    key = (int(seed), round(float(noise) * 1e6), int(repeat), int(model_seed))
    h = 0
    for k in key:
        h = (h * 1_000_003 + k) % (2**61 - 1)
    return h


@torch.no_grad()
def noise_robustness(
    models: BatchedLSTTransformer | Sequence[BatchedLSTTransformer],
    split: Any | None = None,
    noise_levels: Sequence[float] = NOISE_LEVELS,
    include_zero: bool = True,
    repeats: int = 1,
    seed: int = 0,
    artifacts: Mapping[str, Any] | None = None,
    chunk: int = 2048,
) -> pd.DataFrame:
    """Accuracy of every model with noisy token embeddings, per noise level and condition.

    Args:
        models: a batched model or a list of them (``Run.models``).
        split: an :class:`lstpe.lst.Split` (default: the 108 validation puzzles).
        noise_levels: noise standard deviations (each >= 0).
        include_zero: also evaluate ``noise = 0`` (exactly the noiseless forward pass).
        repeats: noise draws per level; accuracies are averaged over them.
        seed: base seed of the noise generators.
        artifacts: if given, the ``model`` column is looked up by (PE label, seed) in the
            artefacts' ``labels`` / ``seeds`` (the history's model ids); otherwise models are
            numbered in the order given.
        chunk: puzzles per forward pass (memory); results do not depend on it for noise 0.
    Returns:
        Tidy table ``noise, model, pe, pe_name, sigma, seed, condition, accuracy, repeats``;
        ``condition`` is ``"all"``, ``"1"``, ``"2"``, ``"3"`` as in the history table.
    Raises:
        ValueError: no models, negative noise, ``repeats < 1``, or a model absent from the
            artefacts.
    """
    if isinstance(models, BatchedLSTTransformer):
        models = [models]
    models = list(models)
    if not models:
        raise ValueError("no models given")
    for m in models:
        if not isinstance(m, BatchedLSTTransformer):
            raise ValueError(f"models must be BatchedLSTTransformer, got {type(m).__name__}")
    levels = sorted({0.0, *map(float, noise_levels)} if include_zero
                    else set(map(float, noise_levels)))
    if not levels:
        raise ValueError("no noise levels given")
    bad = [x for x in levels if not math.isfinite(x) or x < 0]
    if bad:
        raise ValueError(f"noise levels must be finite and >= 0, got {bad}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    split = split if split is not None else validation_split()
    ids = _model_ids(models, artifacts)
    rows = []
    for model, mids in zip(models, ids, strict=True):
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        x = split.x.to(device)
        specs = model.specs
        try:
            for noise in levels:
                n_rep = 1 if noise == 0 else repeats
                acc: dict[str, torch.Tensor] = {}
                for rep in range(n_rep):
                    g = [torch.Generator().manual_seed(noise_seed(seed, noise, rep, s))
                         for s in model.seeds]
                    logits = torch.cat([
                        model(x[i:i + chunk], embed_noise_std=noise, generator=g).float()
                        for i in range(0, x.shape[0], chunk)], 1)
                    for cond, (a, _) in score(logits, split.y, split.vectors).items():
                        acc[cond] = acc.get(cond, 0) + torch.as_tensor(a, dtype=torch.float64)
                for cond, total in acc.items():
                    for j, mid in enumerate(mids):
                        s = specs[j]
                        rows.append({
                            "noise": noise, "model": mid, "pe": s.label, "pe_name": s.name,
                            "sigma": s.sigma if s.sigma is not None else math.nan,
                            "seed": model.seeds[j], "condition": cond,
                            "accuracy": float(total[j]) / n_rep, "repeats": n_rep,
                        })
        finally:
            model.train(was_training)
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.sort_values(["noise", "model", "condition"], kind="stable").reset_index(drop=True)
