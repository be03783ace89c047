"""The brain task for the training engine: batches, losses and evaluation of stacked models.

:class:`BrainTask` is what :func:`lstpe.training.engine.run_chunk` trains for masked brain
activity, as
:class:`lstpe.training.task.LSTTask` is for the puzzles. The engine iterates *rounds* (its
"epochs"); the brain counts optimizer steps, so round ``r`` is the ``eval_every`` steps
``(r - 1) * eval_every + 1 .. min(r * eval_every, steps)`` (the last round may be shorter) and
the models are evaluated after every round. History rows carry ``step``, the last step of the
round (0 at initialisation), so the evaluations fall on the same steps as
:meth:`lstpe.brain.config.BrainConfig.schedule`.

Every model draws its own training rows and masks from ``(seed, step)`` only
(:func:`lstpe.brain.data.draw_batch`), so every PE sees the same data (common random numbers)
and a model trains the same alone or stacked with others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from lstpe.brain.data import draw_batch, n_masked
from lstpe.brain.model import BatchedBrainTransformer, masked_mse
from lstpe.nn.architecture import ModelConfig
from lstpe.nn.encodings import PESpec
from lstpe.training.engine import autocast

if TYPE_CHECKING:
    from lstpe.brain.config import BrainConfig

BRAIN_HISTORY_COLUMNS = [
    "model", "pe", "pe_name", "sigma", "seed", "train_mask", "step", "split", "mask_ratio", "mse",
]
"""Columns of the brain history table: one row per (model, step, split, mask_ratio).
``train_mask`` is the model's training mask ratio, ``mask_ratio`` the one of the evaluation."""

EvalSets = dict[tuple[str, float], tuple[torch.Tensor, torch.Tensor]]
"""Fixed evaluation sets ``{(split, mask ratio): (x (N, R), mask (N, R) bool)}``."""


# --------------------------------------------------------------------------- evaluation


@torch.no_grad()
def predict_masked(model: BatchedBrainTransformer, x: torch.Tensor, mask: torch.Tensor,
            chunk: int = 256, amp: bool | torch.dtype | None = False) -> torch.Tensor:
    """Predictions (M, N, R) of all models on shared inputs x, mask (N, R), in chunks.

    ``amp``: mixed precision (:func:`lstpe.training.engine.autocast`: the device's choice for True);
    outputs are fp32.
    """
    device = next(model.parameters()).device
    out = []
    for i in range(0, x.shape[0], chunk):
        with autocast(device, amp):
            y = model(x[i:i + chunk].to(device), mask[i:i + chunk].to(device))
        out.append(y.float())
    return torch.cat(out, 1)


def sum_device(device: torch.device) -> torch.device:
    """Where float64 sums are accumulated: on ``device`` where it has float64 (CPU, CUDA),
    else on the CPU (MPS has no float64)."""
    return device if device.type in ("cpu", "cuda") else torch.device("cpu")


@torch.no_grad()
def evaluate(model: BatchedBrainTransformer, x: torch.Tensor, mask: torch.Tensor,
             chunk: int = 256, amp: bool | torch.dtype | None = False) -> np.ndarray:
    """Masked MSE of every model on shared inputs x, mask (N, R): (M,) numpy.

    Each chunk's per-model sums (M,) are float32 on the device and accumulated in float64
    (on the CPU for a device without float64, :func:`sum_device`).
    """
    device = next(model.parameters()).device
    acc = sum_device(device)
    se = torch.zeros(model.n_models, device=acc, dtype=torch.float64)
    count = 0.0
    for i in range(0, x.shape[0], chunk):
        xb, mb = x[i:i + chunk].to(device), mask[i:i + chunk].to(device)
        with autocast(device, amp):
            y = model(xb, mb).float()
        se += (((y - xb) ** 2) * mb).sum((1, 2)).to(acc).double()
        count += float(mb.sum())
    return (se / count).cpu().numpy()


# --------------------------------------------------------------------------- rounds of steps


def round_steps(r: int, steps: int, eval_every: int) -> range:
    """The optimizer steps (1-based) of round ``r`` (1-based); round 0 has none."""
    if r < 1:
        return range(0)
    return range((r - 1) * eval_every + 1, min(r * eval_every, steps) + 1)


def last_step(r: int, steps: int, eval_every: int) -> int:
    """The step after which round ``r`` ends: ``min(r * eval_every, steps)`` (0 for r = 0)."""
    return min(int(r) * int(eval_every), int(steps))


# --------------------------------------------------------------------------- the brain task


class BrainTask:
    """Masked brain activity for one chunk of M models (see :class:`lstpe.training.engine.Task`).

    A batch is a pair ``(idx (M, B) rows of the training split, mask (M, B, R) bool)``; the
    loss of a model is its masked MSE (:func:`~lstpe.brain.model.masked_mse`) and there is no
    accuracy (zeros). The brain model has no dropout, so :meth:`dropout_keys` is always None.

    Args:
        cfg: the run's configuration.
        ids: the chunk's model ids (indices into ``cfg.models``).
        mcfg: model sizes (:func:`lstpe.brain.model.model_config`).
        x_train: (N, R) training activity, on ``device``.
        sets: the fixed evaluation sets (:data:`EvalSets`), on ``device``.
        device: where the models train.
    """

    def __init__(self, cfg: BrainConfig, ids: Sequence[int], mcfg: ModelConfig,
                 x_train: torch.Tensor, sets: EvalSets, device: torch.device) -> None:
        self.cfg, self.ids, self.sets, self.device = cfg, list(ids), sets, device
        self.all_models: list[tuple[PESpec, float, int]] = cfg.models
        chosen = [self.all_models[i] for i in self.ids]
        specs, ratios, seeds = ([m[k] for m in chosen] for k in range(3))
        self.model = BatchedBrainTransformer(specs, seeds, mcfg).to(device)
        self.n_models = len(self.ids)
        self.x = x_train
        R = int(x_train.shape[1])
        # one draw per distinct seed, shared by that seed's models (the same data for every PE)
        self.seeds = sorted(set(seeds))
        self.seed_of = torch.tensor([self.seeds.index(s) for s in seeds], device=device)
        self.k = torch.tensor([n_masked(float(r), R) for r in ratios], device=device)  # (M,)

    def batches(self, epoch: int) -> Iterator[tuple[int, tuple[torch.Tensor, torch.Tensor]]]:
        """(step, (idx (M, B), mask (M, B, R))) for every step of round ``epoch``."""
        N, R = self.x.shape
        B = self.cfg.batch_size
        for step in round_steps(epoch, self.cfg.steps, self.cfg.eval_every):
            draws = [draw_batch(s, step, N, B, R, self.device) for s in self.seeds]
            idx = torch.stack([d[0] for d in draws])[self.seed_of]  # (M, B)
            rank = torch.stack([d[1] for d in draws]).argsort(-1).argsort(-1)[self.seed_of]
            yield step, (idx, rank < self.k[:, None, None])  # mask (M, B, R)

    def dropout_keys(self, epoch: int, step: int) -> None:
        """None: the brain model has no dropout."""
        return None

    def losses(self, fwd: Callable, batch: tuple[torch.Tensor, torch.Tensor],
               keys: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-model masked MSE (M,) of the batch, and zeros (M,) for the accuracy."""
        idx, mask = batch
        x = self.x[idx]  # (M, B, R)
        loss = masked_mse(fwd(x, mask).float(), x, mask)
        return loss, torch.zeros_like(loss)

    def rows(self, step: int, split: str, ratio: float, mse: np.ndarray) -> list[dict]:
        """History rows of one evaluation set: one per model of the chunk."""
        rows = []
        for j, mid in enumerate(self.ids):
            spec, tm, seed = self.all_models[mid]
            rows.append({"model": mid, "pe": spec.label, "pe_name": spec.name,
                         "sigma": spec.sigma if spec.sigma is not None else math.nan,
                         "seed": seed, "train_mask": tm, "step": step, "split": split,
                         "mask_ratio": ratio, "mse": float(mse[j])})
        return rows

    def evaluate(self, epoch: int, final: bool, running: dict[str, Any] | None) -> list[dict]:
        """Masked MSE of every model on every evaluation set after round ``epoch``.

        ``final`` and ``running`` (the round's training loss) are not used: the sets are the
        same at every evaluation and the history keeps evaluation MSEs only.
        """
        step = last_step(epoch, self.cfg.steps, self.cfg.eval_every)
        out = []
        for (split, r), (x, m) in self.sets.items():
            out += self.rows(step, split, r, evaluate(self.model, x, m, amp=self.cfg.amp))
        return out
