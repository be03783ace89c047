"""Training LST transformers: configs, presets, and many models trained as one.

A sweep of S seeds x K PEs is M = S*K tiny models. Instead of looping over them, the engine
(:mod:`lstpe.engine`) stacks them into one :class:`~lstpe.model.BatchedLSTTransformer` (models
of *every* PE mix) and trains all M together:

* every model has its own init (its seed), its own data order (a permutation drawn from
  ``(seed, epoch)``), its own dropout masks (from ``(seed, epoch, step)``), its own optimizer
  rule, learning rate, weight decay and optimizer state;
* the loss is the *sum* of the M per-model mean losses, so each model's gradient is exactly
  the gradient of its own loss. Training M models batched therefore equals training them one
  by one (up to float rounding; ``tests/test_train.py`` checks this, in train mode with
  dropout and with mixed optimizers).

:func:`train_many` trains several configurations (e.g. Table 1 with Adam and Tables 5-6 with
AdamW) in one batch when they agree on everything but PEs and optimizer, and writes each to its
own run folder.

Presets (:func:`preset`):

* ``paper``: the authors' setup as their code ran it -- d=160, 4 layers, one head, lr 1e-4,
  batch 128, the authors' 15 seeds, their 9000 training puzzles split 8100 / 900 like their
  code (:func:`lstpe.lst.authors_test_rows`), the 108 human puzzles as validation -- for the
  number of epochs each experiment sets (:mod:`lstpe.experiments`): the authors trained 4000
  epochs; their own logs show learn-sigma settled by epoch 200 but 2d-fixed still rising
  (0.938 at 200, 0.977 at 4000), so Table 1 and the AdamW tables train longer than the sigma
  sweep.
* ``preview``: the same architecture and data at a scale that runs on a laptop CPU in
  minutes (fewer seeds, a stratified subset of the training puzzles, few epochs). Its numbers
  illustrate the pipeline; they are not the paper's.

The history records, per evaluation, eval-mode accuracy and loss on ``train`` (a fixed
stratified subset at intermediate epochs), ``test`` and ``val``; ``val_dropout``, the same pass
with dropout active as the authors evaluated (differs only for models with dropout: 2d-fixed
and 1d-fixed of the paper variant); and ``train_running``, the running mean over the epoch's
minibatches in train mode (the paper's training-accuracy columns). A model whose loss or logits
became non-finite is flagged ``diverged`` from then on.

Checkpoints: every ``checkpoint_every`` epochs the state of the chunk in training (weights,
optimizer, history so far) is written atomically to ``<run_dir>/checkpoints/``; rerunning the
same config on the same ``run_dir`` resumes from it and loses at most one interval.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from lstpe import results as res
from lstpe.encodings import PESpec, parse_pe
from lstpe.engine import LoopOptions, resolve_mode, run_chunk
from lstpe.lst_task import (
    SPLITS,
    LSTTask,
    ModelSlot,
    _stratified_subset,
    epoch_permutation,
    predict,
    score,
)
from lstpe.model import ModelConfig
from lstpe.noise import noise_robustness
from lstpe.optim import StackedOptimizer
from lstpe.runtime import PAPER_SEEDS, pick_device

__all__ = ["DEFAULT_LR", "DEFAULT_WD", "OPTIMIZERS", "PAPER_SEEDS", "PAPER_SIGMAS",
           "PREVIEW_SIGMAS", "SPLITS", "LSTTask", "TrainConfig", "TrainResult",
           "epoch_permutation", "load_data", "predict", "preset", "score", "sigmas_for",
           "train", "train_many"]

PAPER_SIGMAS: tuple[float, ...] = tuple(round(0.1 * k, 1) for k in range(1, 21))
"""Table 2's sigmas 0.1, 0.2, ..., 2.0."""

PREVIEW_SIGMAS: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0)
"""The sigmas a preview-scale (and CPU-scale) sweep trains (Table 2's ends and middle)."""

SCALES: tuple[str, ...] = ("preview", "cpu", "paper")
"""The presets, smallest first: ``preview`` (a small model, minutes on a CPU), ``cpu`` (the
paper's model and data on a CPU for a few dozen epochs, bf16 autocast: hours, run in the
background) and ``paper`` (the published setup: a GPU)."""


def sigmas_for(scale: str, sigmas: Sequence[float] | None = None) -> list[float]:
    """``sigmas`` if given (validated), else the scale's default (paper: 0.1..2.0).

    Raises:
        ValueError: an unknown scale or a negative / non-finite sigma (naming it).
    """
    if sigmas is None:
        if scale not in SCALES:
            raise ValueError(f"unknown scale {scale!r}; valid scales: {', '.join(SCALES)}")
        return list(PAPER_SIGMAS if scale == "paper" else PREVIEW_SIGMAS)
    return [parse_pe("learn", sigma=float(s)).sigma for s in sigmas]


OPTIMIZERS: tuple[str, ...] = ("adam", "adamw", "sgd")
DEFAULT_LR = {"adam": 1e-4, "adamw": 1e-4, "sgd": 1e-3}
DEFAULT_WD = {"adam": 0.0, "adamw": 0.1, "sgd": 0.0}

HISTORY_COLUMNS = [*res.HISTORY_COLUMNS,
                   *[c for c in ("diverged",) if c not in res.HISTORY_COLUMNS]]
"""Columns of a training history (the results module's plus ``diverged``)."""

BUNDLE_KEYS_FREE = ("pes", "optimizer", "lr", "weight_decay", "preset", "save_attention")
"""Config keys that may differ between the configurations trained together by
:func:`train_many` (everything else must agree)."""


@dataclass
class TrainConfig:
    """Everything that defines a training run (saved in the manifest).

    Attributes:
        pes: PE names, e.g. ``["learn-0.2", "2d-fixed"]``; each is trained with every seed.
        seeds: model seeds (init, data order and dropout masks).
        optimizer: ``adam``, ``adamw`` or ``sgd``; ``lr`` and ``weight_decay`` default per
            optimizer (1e-4 / 1e-4 / 1e-3 and 0 / 0.1 / 0: the paper's settings).
        epochs: passes over the training split.
        eval_epochs: epochs at which to evaluate; None = every epoch up to ``dense_until``,
            then every ``sparse_every``, and always the last (epoch 0 = initialisation).
        eval_train_max: evaluate the training split on a fixed stratified subset of at most
            this many puzzles at intermediate epochs (all of it at the last epoch).
        eval_test_max: the same for the test split (None: all of it at every evaluation).
        data: ``paper`` (the authors' puzzles) or ``generated`` (our generator).
        split: ``code`` (the authors' code: 8100 train / 900 test) or ``text`` (the paper's
            text: 8000 / 1000, drawn with ``split_seed``).
        n_train: optional stratified subsample of the training split (preview scale).
        variant: PE variant, ``paper`` (the authors' code) or ``textbook``.
        device: ``auto`` (cuda > mps > cpu), ``cpu``, ``cuda``...
        amp: bf16 autocast (mixed precision: fp32 weights, optimizer and loss) on CUDA and on
            the CPU. Off by default: the presets train in fp32. TF32 matmuls are on for CUDA.
        step_mode: ``auto`` (a CUDA graph on CUDA, eager elsewhere), ``eager``, ``compile``
            (``torch.compile`` of the model) or ``graph``.
        checkpoint_every: epochs between checkpoints (0 = never).
        max_models: split the models into chunks of at most this many (GPU memory).
        save_attention: keep validation attention maps (init and final) in the artefacts.
        noise_levels: after training, validation accuracy with N(0, x^2) noise on the token
            embeddings for each x (the paper's robustness test), stored as the run's ``noise``
            table (:func:`lstpe.noise.noise_robustness`); empty = skip.
        noise_repeats: noise draws per level (averaged).
        preset: the preset this config came from (``paper``, ``preview`` or ``custom``).
    """

    pes: list[str]
    seeds: list[int]
    optimizer: str = "adam"
    lr: float | None = None
    weight_decay: float | None = None
    batch_size: int = 128
    epochs: int = 200
    eval_epochs: list[int] | None = None
    dense_until: int = 50
    sparse_every: int = 10
    eval_train_max: int = 2000
    eval_test_max: int | None = None
    data: str = "paper"
    split: str = "code"
    split_seed: int = 0
    n_train: int | None = None
    variant: str = "paper"
    model: ModelConfig = field(default_factory=ModelConfig)
    device: str = "auto"
    amp: bool = False
    step_mode: str = "auto"
    checkpoint_every: int = 10
    max_models: int | None = None
    save_attention: bool = True
    noise_levels: list[float] = field(default_factory=lambda: [0.02, 0.04, 0.06, 0.08, 0.1])
    noise_repeats: int = 1
    preset: str = "custom"

    def __post_init__(self) -> None:
        if isinstance(self.model, dict):
            self.model = ModelConfig(**self.model)
        self.pes = [parse_pe(p, variant=self.variant).label if isinstance(p, str) else p.label
                    for p in self.pes]
        self.seeds = [int(s) for s in self.seeds]
        if not self.pes:
            raise ValueError("TrainConfig.pes is empty: name at least one PE")
        if not self.seeds:
            raise ValueError("TrainConfig.seeds is empty: give at least one seed")
        big = [s for s in self.seeds if not -(2**63) <= s < 2**63]
        if big:
            raise ValueError(f"seed {big[0]} does not fit in 64 bits (seeds must be integers in "
                             f"{-(2**63)}..{2**63 - 1})")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"duplicate seeds in {self.seeds}")
        if len(set(self.pes)) != len(self.pes):
            raise ValueError(f"duplicate PEs in {self.pes}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"unknown optimizer {self.optimizer!r}; valid: {', '.join(OPTIMIZERS)}"
            )
        if self.lr is None:
            self.lr = DEFAULT_LR[self.optimizer]
        if self.weight_decay is None:
            self.weight_decay = DEFAULT_WD[self.optimizer]
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"the learning rate (--lr) must be a finite number > 0, got "
                             f"{self.lr}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError("the weight decay (--weight-decay) must be a finite number >= 0, "
                             f"got {self.weight_decay}")
        if self.n_train is not None and (isinstance(self.n_train, bool) or self.n_train < 1):
            raise ValueError(f"n_train (--n-train) must be >= 1, got {self.n_train!r}")
        if self.max_models is not None and self.max_models < 1:
            raise ValueError(f"max_models (--max-models) must be >= 1, got {self.max_models}")
        if self.checkpoint_every is None or self.checkpoint_every < 0:
            raise ValueError("checkpoint_every (--checkpoint-every) must be >= 0 (0 = no "
                             f"checkpoints), got {self.checkpoint_every}")
        from lstpe.engine import STEP_MODES
        from lstpe.lst import SPLIT_RULES

        if self.split not in SPLIT_RULES:
            raise ValueError(f"unknown split {self.split!r}; valid: {', '.join(SPLIT_RULES)}")
        if self.step_mode not in STEP_MODES:
            raise ValueError(f"unknown step_mode {self.step_mode!r}; valid: "
                             f"{', '.join(STEP_MODES)}")

    @property
    def specs(self) -> list[PESpec]:
        return [parse_pe(p, variant=self.variant) for p in self.pes]

    @property
    def setting(self) -> str:
        """The optimizer setting as the paper's tables name it: ``adam``, ``sgd``,
        ``adamw-wd0.1`` (weight decay appended when it is not 0)."""
        wd = f"-wd{self.weight_decay:g}" if self.weight_decay else ""
        return f"{self.optimizer}{wd}"

    def schedule(self) -> list[int]:
        """Epochs at which the models are evaluated (0 = at initialisation)."""
        if self.eval_epochs is not None:
            ep = {int(e) for e in self.eval_epochs if 0 <= int(e) <= self.epochs}
        else:
            ep = set(range(0, min(self.dense_until, self.epochs) + 1))
            ep |= set(range(0, self.epochs + 1, max(1, self.sparse_every)))
        ep.add(self.epochs)
        return sorted(ep)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["model"] = self.model.to_dict()
        return d

    def shared_settings(self) -> dict[str, Any]:
        """The settings that configurations trained together must share: everything but
        :data:`BUNDLE_KEYS_FREE`."""
        return {k: v for k, v in self.to_dict().items() if k not in BUNDLE_KEYS_FREE}


CPU_EPOCHS = 16
"""Epochs of the ``cpu`` preset: the paper's model, data and learning rate, trained on a CPU
(bf16 autocast) for as long as a working session allows, checkpointed every epoch."""

CPU_SEEDS = 3
"""Seeds of the ``cpu`` preset (the first paper seeds)."""

PREVIEW_LR_FACTOR = 10.0
"""The preview preset trains ``PREVIEW_LR_FACTOR`` times the optimizer's paper learning rate
(few epochs on a small model need larger steps)."""


def preset(name: str, **overrides: Any) -> TrainConfig:
    """A named configuration, with keyword overrides (e.g. ``preset("paper", pes=[...])``).

    Overrides that are None are ignored. Learning rate and weight decay, unless overridden,
    follow the (possibly overridden) optimizer: ``preset("paper", optimizer="sgd")`` trains SGD
    at the paper's lr 1e-3, ``optimizer="adamw"`` gets weight decay 0.1.

    Raises:
        ValueError: unknown preset name (or any invalid override, from :class:`TrainConfig`).
    """
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if name == "paper":
        base: dict[str, Any] = dict(pes=["learn-0.2"], seeds=list(PAPER_SEEDS), epochs=200)
        factor = 1.0
    elif name == "preview":
        base = dict(pes=["learn-0.2"], seeds=list(PAPER_SEEDS[:2]), epochs=8, n_train=1000,
                    dense_until=0, sparse_every=2, eval_train_max=300, eval_test_max=300,
                    checkpoint_every=0, model=ModelConfig(d_model=64, n_layers=2))
        factor = PREVIEW_LR_FACTOR
    elif name == "cpu":
        base = dict(pes=["learn-0.2"], seeds=list(PAPER_SEEDS[:CPU_SEEDS]), epochs=CPU_EPOCHS,
                    amp=True, dense_until=CPU_EPOCHS, eval_train_max=1000, checkpoint_every=1)
        factor = 1.0
    else:
        raise ValueError(f"unknown preset {name!r}; valid presets: {', '.join(SCALES)}")
    kw = {**base, **overrides, "preset": name}
    opt = kw.get("optimizer", "adam")
    if "lr" not in overrides and opt in DEFAULT_LR:
        kw["lr"] = DEFAULT_LR[opt] * factor
    return TrainConfig(**kw)


def load_data(cfg: TrainConfig):
    """The splits of the config (train possibly subsampled)."""
    from lstpe import lst

    return lst.load_split(cfg.data, seed=cfg.split_seed, n_train=cfg.n_train, rule=cfg.split)


# --------------------------------------------------------------------------- training


TrainResult = res.Run
"""What :func:`train` returns: a :class:`lstpe.results.Run` (the package's one result type)
with ``models`` and ``cfg`` set."""


def check_bundle(cfgs: Sequence[TrainConfig]) -> None:
    """Raise unless the configs may train in one batch (equal but for PEs and optimizer)."""
    if not cfgs:
        raise ValueError("no configurations to train")
    first = cfgs[0].shared_settings()
    for i, c in enumerate(cfgs[1:], 1):
        other = c.shared_settings()
        diff = sorted(k for k in first if first[k] != other.get(k))
        if diff:
            raise ValueError(f"configuration {i} cannot train with configuration 0: they differ "
                             f"in {', '.join(diff)} (only {', '.join(BUNDLE_KEYS_FREE)} may)")


def train(cfg: TrainConfig, run_dir: str | Path | None = None, progress: bool = True,
          splits: dict | None = None) -> TrainResult:
    """Train every (PE, seed) of ``cfg``, batched, and return (and optionally save) the results.

    Args:
        cfg: the run's configuration.
        run_dir: if given, checkpoints go to ``run_dir/checkpoints`` (resumed when present) and
            the finished run is saved there (history.csv, manifest.json, artifacts.pt).
        progress: show tqdm progress bars.
        splits: pre-loaded data (``lstpe.lst.load_split`` output) to skip loading.
    Returns:
        :class:`TrainResult`. Model ``i`` of the history is PE ``cfg.pes[i // len(seeds)]``
        with seed ``cfg.seeds[i % len(seeds)]``.
    """
    return train_many([cfg], [run_dir], progress=progress, splits=splits)[0]


def train_many(cfgs: Sequence[TrainConfig], run_dirs: Sequence[str | Path | None],
               progress: bool = True, splits: dict | None = None,
               work_dir: str | Path | None = None, deadline: float | None = None
               ) -> list[TrainResult]:
    """Train several configurations as one batch of models; save each to its own folder.

    The configurations must agree on everything but PEs and optimizer settings
    (:func:`check_bundle`); each model keeps its own rule, lr and weight decay. Models are
    split into chunks of at most ``max_models`` (memory), trained one chunk after the other.

    Args:
        cfgs: the configurations.
        run_dirs: one folder (or None) per configuration.
        work_dir: where checkpoints go (default: the first run folder's ``checkpoints/``).
        deadline: a ``time.monotonic()`` time by which to stop: training pauses with a
            checkpoint and :class:`lstpe.engine.Paused` when another epoch would not fit
            (rerun to resume).
    Returns:
        One :class:`TrainResult` per configuration, in order.
    """
    cfgs = list(cfgs)
    check_bundle(cfgs)
    if len(run_dirs) != len(cfgs):
        raise ValueError(f"got {len(cfgs)} configurations but {len(run_dirs)} run folders")
    dirs = [Path(d) if d else None for d in run_dirs]
    with contextlib.ExitStack() as locks:
        for c, d in zip(cfgs, dirs, strict=True):
            if d is None:
                continue
            locks.enter_context(res.RunLock(d))
            if res.check_run_dir(d, c.to_dict()) == "finished":
                raise res.RunDirError(f"{d} already holds this finished run; read it with "
                                      "lstpe.results.load or delete it to retrain")
        return _train_many(cfgs, dirs, progress, splits, work_dir, deadline)


def _train_many(cfgs: list[TrainConfig], dirs: list[Path | None], progress: bool,
                splits: dict | None, work_dir: str | Path | None,
                deadline: float | None) -> list[TrainResult]:
    t0 = time.perf_counter()
    base = replace(cfgs[0], save_attention=any(c.save_attention for c in cfgs))
    device = pick_device(base.device)
    mode = resolve_mode(base.step_mode, device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    splits = splits or load_data(base)
    ckdir = Path(work_dir) if work_dir else (dirs[0] / "checkpoints" if dirs[0] else None)
    if ckdir is not None and base.checkpoint_every:
        res.save_json(cfgs[0].to_dict(), ckdir / "config.json")
    slots, settings = [], []
    for ci, c in enumerate(cfgs):
        for k, (spec, seed) in enumerate((sp, sd) for sp in c.specs for sd in c.seeds):
            slots.append(ModelSlot(ci, k, spec, seed))
            settings.append(c.setting)
    step = base.max_models or len(slots)
    chunks = [list(range(i, min(i + step, len(slots)))) for i in range(0, len(slots), step)]
    sub = {"train": _stratified_subset(splits["train"].vectors, base.eval_train_max,
                                       base.split_seed),
           "test": _stratified_subset(splits["test"].vectors, base.eval_test_max,
                                      base.split_seed)}
    history: list[dict] = []
    models, arts, segments = [], [], []
    for ci, ids in enumerate(chunks):
        task = LSTTask(base, [slots[i] for i in ids], [settings[i] for i in ids], splits, sub,
                       device)
        opt = StackedOptimizer(task.model.parameters(), [cfgs[slots[i].config].optimizer
                                                         for i in ids],
                               [cfgs[slots[i].config].lr for i in ids],
                               [cfgs[slots[i].config].weight_decay for i in ids])
        meta = {"configs": [c.to_dict() for c in cfgs], "ids": ids}
        opts = LoopOptions(epochs=base.epochs, schedule=set(base.schedule()), device=device,
                           amp=base.amp, mode=mode,
                           checkpoint=ckdir / f"chunk{ci}.pt" if ckdir else None,
                           checkpoint_every=base.checkpoint_every, checkpoint_meta=meta,
                           progress=progress, desc=f"chunk {ci + 1}/{len(chunks)} "
                           f"({len(ids)} models)", deadline=deadline)

        def init_state(task=task) -> dict[str, Any]:
            st = {"pe": task.model.pe().detach().cpu()}
            if base.save_attention:
                _, attn0 = predict(task.model, splits["val"].x, return_attention=True)
                st["val_attention"] = attn0.to(torch.float16).cpu()
            return st

        h, state0, segs = run_chunk(task, opt, opts, init_state)
        history += h
        segments.append(sum(seg["wall_s"] for seg in segs))
        models.append(task.model)
        arts.append(_chunk_artifacts(task, state0, splits, base))
    noise = None
    if base.noise_levels:
        noise = noise_robustness(models, splits["val"], base.noise_levels,
                                 repeats=base.noise_repeats)
    wall = time.perf_counter() - t0
    return [_finish(c, c_i, history, models, arts, chunks, slots, splits, device, wall,
                    sum(segments), mode, noise, dirs[c_i]) for c_i, c in enumerate(cfgs)]


def _chunk_artifacts(task: LSTTask, state0: dict, splits: dict, cfg: TrainConfig) -> dict:
    art: dict[str, Any] = {"pe_init": state0["pe"], "pe_final": task.model.pe().detach().cpu()}
    logits, attn = predict(task.model, splits["val"].x, return_attention=True, amp=cfg.amp)
    art["val_logits"] = logits.cpu()
    if cfg.save_attention:
        art["val_attention"] = attn.to(torch.float16).cpu()
        art["val_attention_init"] = state0["val_attention"]
    return art


def _finish(cfg: TrainConfig, c_i: int, history: list[dict], models: list, arts: list[dict],
            chunks: list[list[int]], slots: list[ModelSlot], splits: dict,
            device: torch.device, wall: float, earlier: float, mode: str,
            noise: pd.DataFrame | None, run_dir: Path | None) -> TrainResult:
    """Cut one configuration's rows, artefacts and noise table out of a bundle and save it."""
    rows = [{k: v for k, v in r.items() if k != "_config"} for r in history
            if r["_config"] == c_i]
    hist = pd.DataFrame(rows, columns=HISTORY_COLUMNS)
    hist = hist.sort_values(["model", "epoch", "split", "condition"]).reset_index(drop=True)
    # (chunk, position) of each of this config's models, in its local order
    where = {slots[i].local_id: (k, j) for k, ids in enumerate(chunks)
             for j, i in enumerate(ids) if slots[i].config == c_i}
    order = [where[m] for m in range(len(where))]
    artifacts: dict[str, Any] = {"labels": [s.label for s in cfg.specs for _ in cfg.seeds],
                                 "seeds": [sd for _ in cfg.specs for sd in cfg.seeds]}
    for key in arts[0]:
        if key.startswith("val_attention") and not cfg.save_attention:
            continue
        artifacts[key] = torch.stack([arts[k][key][j] for k, j in order])
    mine = [(models[k], [j for j, i in enumerate(ids) if slots[i].config == c_i])
            for k, ids in enumerate(chunks)]
    tables = {} if noise is None else {"noise": _noise_for(noise, slots, chunks, c_i)}
    diverged = sorted(hist.loc[hist["diverged"].astype(bool), "model"].unique().tolist())
    manifest = res.make_manifest(
        cfg.to_dict(), device, wall,
        previous_segments=[{"wall_s": round(earlier, 3)}] if earlier > 0 else None,
        n_models=len(cfg.pes) * len(cfg.seeds), n_train=len(splits["train"]),
        kind="lst-train", step_mode=mode, diverged_models=diverged,
        bundle_models=sum(len(c) for c in chunks))
    if run_dir is not None:
        res.save_run(run_dir, hist, manifest, artifacts, tables)
    return res.Run(hist, manifest, artifacts, tables, path=run_dir, source="live",
                   models=[m for m, _ in mine], cfg=cfg)


def _noise_for(noise: pd.DataFrame, slots: list[ModelSlot], chunks: list[list[int]],
               c_i: int) -> pd.DataFrame:
    """The rows of one configuration in a bundle's noise table, with its model ids."""
    # noise_robustness numbers the models of the chunks 0, 1, ... in chunk order
    gid = [(slots[i].config, slots[i].local_id) for ids in chunks for i in ids]
    keep = noise["model"].map(lambda m: gid[m][0] == c_i)
    out = noise[keep].copy()
    out["model"] = out["model"].map(lambda m: gid[m][1])
    return out.reset_index(drop=True)


def sequential_reference(cfg: TrainConfig, splits: dict | None = None) -> list[dict]:
    """Train each (PE, seed) of ``cfg`` alone (M=1), one after the other, and return their
    final weights. Used by the tests to check that batched training is the same computation."""
    out = []
    splits = splits or load_data(cfg)
    for pe in cfg.pes:
        for sd in cfg.seeds:
            one = replace(cfg, pes=[pe], seeds=[sd], eval_epochs=[cfg.epochs],
                          save_attention=False, noise_levels=[])
            r = train(one, progress=False, splits=splits)
            out.append(r.models[0].single_weights(0))
    return out
