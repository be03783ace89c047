"""What defines a training run: :class:`TrainConfig`, the presets, the sigma grids, the data.

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
* ``cpu``: the paper's model, data and learning rate, trained on a CPU with bf16 autocast for
  :data:`CPU_EPOCHS` epochs and :data:`CPU_SEEDS` seeds, checkpointed every epoch: hours in the
  background. It shows the early ordering of the PEs, not the converged numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lstpe import results as res
from lstpe.encodings import PESpec, parse_pe
from lstpe.model import ModelConfig
from lstpe.runtime import PAPER_SEEDS

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

BUNDLE_KEYS_FREE = ("pes", "seeds", "optimizer", "lr", "weight_decay", "preset",
                    "save_attention")
"""Config keys that may differ between the configurations trained together by
:func:`train_many` (everything else must agree): each model keeps its own PE, seed (init, data
order, dropout masks) and optimizer setting."""


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


CPU_EPOCHS = 12
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
                    amp=True, dense_until=CPU_EPOCHS, eval_train_max=1000, checkpoint_every=1,
                    max_models=15)
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
