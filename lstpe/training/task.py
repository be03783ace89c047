"""The LST task for the training engine: batches, losses and evaluation of stacked models.

:class:`LSTTask` is what :func:`lstpe.training.engine.run_chunk` trains for the puzzles: every model
reads its own minibatch (a permutation drawn from ``(seed, epoch)``) from the training puzzles
resident on the device, has its own dropout keys (``(seed, epoch, step)``), and is evaluated in
eval mode on the splits, once more on the validation puzzles with dropout active (the authors'
evaluation), and by the running training metrics of the epoch.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from lstpe.nn import dropout as drop
from lstpe.nn.encodings import PESpec
from lstpe.nn.model import BatchedLSTTransformer
from lstpe.training.engine import autocast

if TYPE_CHECKING:
    from lstpe.training.config import TrainConfig

SPLITS = ("train", "test", "val")
"""Splits evaluated in eval mode (``val_dropout`` and ``train_running`` are added)."""


def epoch_permutation(seed: int, epoch: int, n: int) -> torch.Tensor:
    """The data order of one model in one epoch: a permutation of ``range(n)``.

    Drawn from ``(seed, epoch)`` only, so a model sees the same order whether it is trained
    alone or batched with others, and a resumed run continues the same sequence.
    """
    g = torch.Generator().manual_seed((int(seed) * 1_000_003 + int(epoch)) % (2**62))
    return torch.randperm(n, generator=g)


# --------------------------------------------------------------------------- evaluation


@torch.no_grad()
def predict(model: BatchedLSTTransformer, x: torch.Tensor, chunk: int = 2048,
            return_attention: bool = False, amp: bool | torch.dtype | None = False, **kw: Any):
    """Logits (M, N, 4) [and attention (M, N, L, n, n)] of all models on x (N, 16, 5)."""
    device = next(model.parameters()).device
    outs, maps = [], []
    for i in range(0, x.shape[0], chunk):
        xb = x[i:i + chunk].to(device)
        with autocast(device, amp):
            out = model(xb, return_attention=return_attention, **kw)
        if return_attention:
            outs.append(out[0].float())
            maps.append(out[1].float())
        else:
            outs.append(out.float())
    logits = torch.cat(outs, 1)
    return (logits, torch.cat(maps, 1)) if return_attention else logits


def score(logits: torch.Tensor, y: torch.Tensor, vectors: torch.Tensor) -> dict[str, tuple]:
    """Accuracy and mean cross-entropy per condition.

    Args:
        logits: (M, N, 4); y, vectors: (N,).
    Returns:
        ``{"all"|"1"|"2"|"3": (accuracy (M,), loss (M,))}`` as numpy arrays.
    """
    y, vectors = y.to(logits.device), vectors.to(logits.device)
    M, N, C = logits.shape
    loss = F.cross_entropy(logits.reshape(-1, C), y.repeat(M), reduction="none").view(M, N)
    correct = (logits.argmax(-1) == y).float()
    out = {"all": (correct.mean(1), loss.mean(1))}
    for v in (1, 2, 3):
        sel = vectors == v
        if sel.any():
            out[str(v)] = (correct[:, sel].mean(1), loss[:, sel].mean(1))
    return {k: (a.cpu().numpy(), b.cpu().numpy()) for k, (a, b) in out.items()}


def stratified_subset(vectors: torch.Tensor, n: int | None, seed: int) -> torch.Tensor:
    """Indices of a stratified (by condition) subset of at most n rows, deterministic."""
    from lstpe.lst import stratified_sample

    if n is None or n >= vectors.shape[0]:
        return torch.arange(vectors.shape[0])
    rng = np.random.default_rng(seed)
    return torch.from_numpy(stratified_sample(vectors.numpy(), int(n), rng))


# --------------------------------------------------------------------------- the LST task


@dataclass(frozen=True)
class ModelSlot:
    """One model of a bundle: which config it belongs to and its id within that config."""

    config: int
    local_id: int
    spec: PESpec
    seed: int


class LSTTask:
    """The LST task for one chunk of models (see :class:`lstpe.training.engine.Task`).

    ``eval_chunk``: puzzles per forward call of an evaluation (memory: each call holds the
    activations of ``eval_chunk`` puzzles for every model of the chunk).

    **Models at different epochs.** ``offsets`` (M,): the epoch each model has reached when
    the chunk's loop starts (a model resumed from another chunk's checkpoint; 0: a new one);
    ``targets`` (M,): the epoch each stops at. Model j's loop epoch e is its own epoch
    ``offsets[j] + e``, which sets its data order and dropout keys, so it trains exactly as it
    would alone. With either given, the loop is run for ``max(targets - offsets)`` epochs,
    evaluating every epoch (:meth:`evaluate` keeps, per model, the rows of its own schedule
    and its final evaluation at its target, none before its offset or past its target); a
    model past its target still computes but is retired: nothing of it is recorded, and what
    it was at its target is what a caller keeps. ``total``: the length every model is
    configured for (a long unit's 4000 epochs, trained in legs): the schedule is that
    length's and the final evaluation comes only at it, so a leg's target below it ends with
    the scheduled evaluation a model trained straight through would have there (default:
    each model's target is its end).
    """

    def __init__(self, cfg: TrainConfig, slots: list[ModelSlot], settings: list[str],
                 splits: dict, sub: dict, device: torch.device, eval_chunk: int = 2048,
                 offsets: list[int] | None = None, targets: list[int] | None = None,
                 total: int | None = None) -> None:
        self.cfg, self.slots, self.settings, self.splits, self.sub = cfg, slots, settings, \
            splits, sub
        self.device = device
        self.eval_chunk = int(eval_chunk)
        # built on the host, then moved: the dropout models' seeds are read here once (a host
        # read of the device's drop_idx per step would stall the GPU's queue)
        model = BatchedLSTTransformer([s.spec for s in slots], [s.seed for s in slots],
                                      cfg.model)
        self.dropout_seeds: list[int] = model.dropout_seeds
        self.drop_models = [int(m) for m in model.drop_idx]  # the slot of each dropout model
        self.model = model.to(device)
        self.n_models = len(slots)
        self.mixed = offsets is not None or targets is not None
        self.offsets = [int(o) for o in offsets] if offsets is not None else [0] * len(slots)
        self.targets = [int(t) for t in targets] if targets is not None else \
            [o + cfg.epochs for o in self.offsets]
        if not len(self.offsets) == len(self.targets) == len(slots):
            raise ValueError(f"need one offset and one target per model ({len(slots)})")
        if any(t <= o for o, t in zip(self.offsets, self.targets, strict=True)):
            raise ValueError(f"every target must be past its offset: offsets {self.offsets}, "
                             f"targets {self.targets}")
        if total is not None and max(self.targets) > total:
            raise ValueError(f"targets {self.targets} run past the configured {total} epochs")
        self.ends = [int(total)] * len(slots) if total is not None else self.targets
        # each model's own schedule up to its target is this one's (dense, then sparse)
        self._schedule = set(replace(cfg, epochs=total or max(self.targets)).schedule()) \
            if self.mixed else set()
        tr = splits["train"]
        self.x, self.y = tr.x.to(device), tr.y.to(device)
        self.diverged = np.zeros(self.n_models, dtype=bool)
        self._keys_epoch: int | None = None
        self._keys = torch.zeros(0, dtype=torch.int64)

    @property
    def loop_epochs(self) -> int:
        """The loop epochs the chunk needs: until its last model reaches its target."""
        return max(t - o for o, t in zip(self.offsets, self.targets, strict=True))

    def batches(self, epoch: int) -> Iterator[tuple[int, torch.Tensor]]:
        N, bs = self.x.shape[0], self.cfg.batch_size
        own = [(s.seed, epoch + o) for s, o in zip(self.slots, self.offsets, strict=True)]
        keys = sorted(set(own))  # models of one seed at one epoch share the order
        orders = torch.stack([epoch_permutation(sd, e, N) for sd, e in keys])
        perm = orders[[keys.index(k) for k in own]].to(self.device)
        for step, b in enumerate(range(0, N, bs)):
            yield step, perm[:, b:b + bs]

    def _drop_epochs(self, epoch: int) -> list[int]:
        """Each dropout model's own epoch at loop epoch ``epoch``."""
        return [epoch + self.offsets[m] for m in self.drop_models]

    def dropout_keys(self, epoch: int, step: int) -> torch.Tensor | None:
        """(K,) keys of the dropout models; one host-to-device copy per epoch, not per step."""
        seeds = self.dropout_seeds
        if not seeds:
            return None
        if self._keys_epoch != epoch:
            n_steps = -(-self.x.shape[0] // self.cfg.batch_size)
            self._keys = torch.stack([drop.keys_tensor(seeds, self._drop_epochs(epoch), s)
                                      for s in range(n_steps)]).to(self.device)
            self._keys_epoch = epoch
        return self._keys[step]

    def losses(self, fwd, idx: torch.Tensor, keys: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = fwd(self.x[idx], dropout_keys=keys).float()
        y = self.y[idx]
        M = idx.shape[0]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                               reduction="none").view(M, -1).mean(1)
        acc = (logits.argmax(-1) == y).float().mean(1)
        return loss, acc

    def _rows(self, epoch: int, split: str, scores: dict[str, tuple],
              keep: list[int] | None = None) -> list[dict]:
        """History rows of the models ``keep`` (default: all), each at its own epoch."""
        rows = []
        for cond, (acc, loss) in scores.items():
            for j, s in enumerate(self.slots):
                if keep is not None and j not in keep:
                    continue
                rows.append({
                    "_config": s.config, "model": s.local_id, "pe": s.spec.label,
                    "pe_name": s.spec.name,
                    "sigma": s.spec.sigma if s.spec.sigma is not None else math.nan,
                    "seed": s.seed, "optimizer": self.settings[j],
                    "epoch": epoch + self.offsets[j],
                    "split": split, "condition": cond, "accuracy": float(acc[j]),
                    "loss": float(loss[j]), "diverged": bool(self.diverged[j]),
                })
        return rows

    def evaluate(self, epoch: int, final: bool, running: dict | None) -> list[dict]:
        if not self.mixed:
            return self._evaluate(epoch, final, running, None)
        own = [epoch + o for o in self.offsets]
        live = [j for j in range(self.n_models)
                if (epoch > 0 or self.offsets[j] == 0) and own[j] <= self.targets[j]]
        last = [j for j in live if own[j] == self.ends[j]]
        due = [j for j in live if j not in last and own[j] in self._schedule | {0}]
        rows = self._evaluate(epoch, True, running, last) if last else []
        return rows + (self._evaluate(epoch, False, running, due) if due else [])

    def _evaluate(self, epoch: int, final: bool, running: dict | None,
                  keep: list[int] | None) -> list[dict]:
        """Every split's evaluation of every model; rows of the models ``keep`` (None: all)."""
        model, cfg = self.model, self.cfg
        if running is not None:
            self.diverged |= running["nonfinite"]
        out = []
        evals = [(split, None) for split in SPLITS] + [("val_dropout", "val")]
        for name, source in evals:
            split = source or name
            s = self.splits[split]
            idx = self.sub[split] if (split in self.sub and not final) else torch.arange(len(s))
            keys = None
            if name == "val_dropout":
                seeds = self.dropout_seeds
                keys = drop.keys_tensor(seeds, self._drop_epochs(epoch), drop.EVAL_STEP,
                                        self.device) if seeds else None
            logits = predict(model, s.x[idx], chunk=self.eval_chunk, amp=cfg.amp,
                             dropout_keys=keys)
            self.diverged |= ~torch.isfinite(logits).all(-1).all(-1).cpu().numpy()
            out.append((name, score(logits, s.y[idx], s.vectors[idx])))
        if running is not None:
            out.append(("train_running", {"all": (running["accuracy"], running["loss"])}))
        return [r for name, sc in out for r in self._rows(epoch, name, sc, keep)]




def one_model_chunk(cfgs: list[TrainConfig], device: torch.device, splits: dict | None = None,
                    **task_kw: Any):
    """The task and optimizer of one chunk of one-model configurations ``cfgs`` (each its own
    PE, seed and optimizer settings; the rest of ``cfgs[0]``), with the evaluation subsets of
    ``cfgs[0]``: what the campaign's probe times and a packed chunk trains.
    ``splits``: the data (default: loaded); ``task_kw`` go to :class:`LSTTask` (``eval_chunk``,
    ``offsets``, ``targets``, ``total``). Returns ``(task, opt)``."""
    from lstpe.training.config import load_data
    from lstpe.training.optim import StackedOptimizer

    base = cfgs[0]
    splits = splits if splits is not None else load_data(base)
    sub = {"train": stratified_subset(splits["train"].vectors, base.eval_train_max,
                                       base.split_seed),
           "test": stratified_subset(splits["test"].vectors, base.eval_test_max,
                                      base.split_seed)}
    slots = [ModelSlot(i, 0, c.specs[0], c.seeds[0]) for i, c in enumerate(cfgs)]
    task = LSTTask(base, slots, [c.setting for c in cfgs], splits, sub, device, **task_kw)
    opt = StackedOptimizer(task.model.parameters(), [c.optimizer for c in cfgs],
                           [c.lr for c in cfgs], [c.weight_decay for c in cfgs])
    return task, opt
