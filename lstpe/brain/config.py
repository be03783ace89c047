"""The brain experiment's configuration: :class:`BrainConfig`, its presets and checks.

Below the brain task and trainer (:mod:`lstpe.brain.task`, :mod:`lstpe.brain.train`), which
both read it. Presets (:func:`brain_preset`): ``paper`` (400 parcels, d=64, 4 layers, Adam 1e-4, 50k
steps, the 15 seeds, the four training mask ratios; many GPU hours), ``preview`` (100 parcels,
d=64, 2 layers, 200 steps of 16 time points at Adam 3e-3, one seed, 50% masking; CPU, minutes)
and ``cpu`` (the preview with 3 seeds and 5x the steps). The paper does not give its batch size;
we use 128.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from lstpe.brain.data import (
    PAPER_MASKS,
    TEST_MASK,
    check_parcels,
    n_masked,
    token_order,
)
from lstpe.brain.model import brain_spec
from lstpe.nn.encodings import PESpec
from lstpe.runtime import PAPER_SEEDS
from lstpe.training.config import (
    as_bool,
    as_int,
    as_opt_int,
    as_real,
    as_real_list,
    as_str,
    as_str_list,
    check_overrides,
    check_seeds,
)

BRAIN_PES: tuple[str, ...] = (
    "1d-fixed", "relative", "rope", "random", "learn-0.1", "learn-0.2", "learn-1", "learn-2",
)
"""The PEs of the paper's brain experiment."""

MAX_STEPS = 10_000_000
"""The most optimizer steps a :class:`BrainConfig` accepts: 200 times the paper's 50k, so no
real run is refused, while ``steps=10**11`` is refused before the schedule (one entry per
evaluation) and the loop's bookkeeping are built."""

MAX_ROUNDS = 1_000_000
"""The most evaluations (rounds of ``eval_every`` steps) of a :class:`BrainConfig`; each one
adds rows to the history kept in memory (the paper's setup has 100)."""

MAX_TIME_POINTS = 2_000_000
"""The most surrogate time points per split (``n_train``, ``n_test``, ``n_eval``): the data
are made in memory as float32 (time points x regions), so at 400 regions this bound is 3.2 GB
per split, about six times the paper's 336k training time points."""


def n_rounds(steps: int, eval_every: int) -> int:
    """Rounds of ``eval_every`` steps that cover ``steps`` steps: ``ceil(steps / eval_every)``."""
    return -(-int(steps) // int(eval_every))


@dataclass
class BrainConfig:
    """Everything that defines a brain run (saved in the manifest).

    Attributes:
        pes: PE names; each is trained with every training mask ratio and seed.
        seeds: model seeds (init, batches and masks).
        train_masks: training mask ratios.
        test_mask: mask ratio of the evaluations on the test split (the paper's 0.9).
        steps: optimizer steps; ``batch_size`` time points per step and model.
        lr: Adam learning rate (no weight decay, no dropout, as in the paper).
        n_parcels: Schaefer parcellation of the surrogate data (100 or 400).
        n_train, n_test: surrogate time points per split.
        n_eval: time points of each fixed evaluation set.
        eval_every: steps between evaluations (plus step 0 and the last).
        data_seed: seed of the surrogate data and the evaluation masks.
        order, order_seed: token order (:func:`token_order`).
        relative_causal: use the authors' causal ``relative`` (default: bidirectional).
        d_model, n_layers, n_heads, mlp_ratio: model sizes.
        variant: PE variant (``paper`` or ``textbook``; :func:`lstpe.nn.encodings.parse_pe`).
        device: ``auto`` (cuda > mps > cpu), ``cpu``, ``cuda``...
        amp: mixed precision in training and evaluation, by device
            (:func:`lstpe.runtime.choose_amp`: bf16 on CUDA >= 8.0 and on CPUs with bf16
            instructions, fp16 with loss scaling on older CUDA, else fp32; fp32 weights,
            optimizer and loss; recorded as ``precision`` in the manifest).
        compile: ``torch.compile`` the model for the training steps (step mode ``compile``;
            otherwise ``eager``).
        checkpoint_every: steps between checkpoints (0 = never), rounded down to whole rounds
            of ``eval_every`` steps (at least one round).
        max_models: train the models in chunks of at most this many (memory).
        preset: the preset this config came from (``paper``, ``cpu``, ``preview`` or
            ``custom``).

    Every value is checked by type and range when the config is made, with the rules of
    :class:`lstpe.training.config.TrainConfig` (:func:`lstpe.training.config.as_int`...): a
    ValueError names the parameter and the bad value. ``steps``, the number of evaluations and
    the data sizes are bounded (:data:`MAX_STEPS`, :data:`MAX_ROUNDS`,
    :data:`MAX_TIME_POINTS`).
    """

    pes: list[str] = field(default_factory=lambda: list(BRAIN_PES))
    seeds: list[int] = field(default_factory=lambda: list(PAPER_SEEDS))
    train_masks: list[float] = field(default_factory=lambda: [0.5])
    test_mask: float = TEST_MASK
    steps: int = 50_000
    batch_size: int = 128
    lr: float = 1e-4
    n_parcels: int = 400
    n_train: int = 70 * 4800
    n_test: int = 30 * 4800
    n_eval: int = 2048
    eval_every: int = 500
    data_seed: int = 0
    order: str = "shuffled"
    order_seed: int = 0
    relative_causal: bool = False
    variant: str = "paper"
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 1
    mlp_ratio: int = 4
    device: str = "auto"
    amp: bool = False
    compile: bool = False
    checkpoint_every: int = 1000
    max_models: int | None = None
    preset: str = "custom"

    def __post_init__(self) -> None:
        L = "BrainConfig.{}".format
        for name in ("order", "variant", "device", "preset"):
            setattr(self, name, as_str(getattr(self, name), L(name)))
        for name in ("relative_causal", "amp", "compile"):
            setattr(self, name, as_bool(getattr(self, name), L(name)))
        self.pes = [self.spec(p).label for p in as_str_list(self.pes, L("pes"))]
        self.seeds = check_seeds(self.seeds, L("seeds"))
        self.train_masks = as_real_list(self.train_masks, L("train_masks"))
        self.test_mask = as_real(self.test_mask, L("test_mask"))
        if not self.pes or not self.seeds or not self.train_masks:
            raise ValueError("BrainConfig needs at least one PE, one seed and one train mask")
        for name, vals in (("pes", self.pes), ("seeds", self.seeds),
                           ("train_masks", self.train_masks)):
            if len(set(vals)) != len(vals):
                raise ValueError(f"duplicate entries in BrainConfig.{name}: {vals}")
        for r in [*self.train_masks, self.test_mask]:
            n_masked(r, 2)  # validates 0 < r < 1
        self.steps = as_int(self.steps, L("steps"), 1, MAX_STEPS,
                            " (lstpe.brain.config.MAX_STEPS, 200x the paper's 50k)")
        for name in ("n_train", "n_test", "n_eval"):
            setattr(self, name, as_int(getattr(self, name), L(name), 1, MAX_TIME_POINTS,
                                       " (lstpe.brain.config.MAX_TIME_POINTS)"))
        for name in ("batch_size", "eval_every", "d_model", "n_layers", "n_heads",
                     "mlp_ratio", "n_parcels"):
            setattr(self, name, as_int(getattr(self, name), L(name), 1))
        if n_rounds(self.steps, self.eval_every) > MAX_ROUNDS:
            raise ValueError(f"BrainConfig.steps / eval_every must be <= {MAX_ROUNDS} "
                             "evaluations (lstpe.brain.config.MAX_ROUNDS), got "
                             f"{self.steps} / {self.eval_every}: raise eval_every")
        for name in ("data_seed", "order_seed"):
            setattr(self, name, as_int(getattr(self, name), L(name), 0, 2**31 - 1))
        self.lr = as_real(self.lr, L("lr"))
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"BrainConfig.lr must be a finite number > 0, got {self.lr}")
        self.max_models = as_opt_int(self.max_models, L("max_models"), 1)
        self.checkpoint_every = as_int(self.checkpoint_every, L("checkpoint_every"))
        if self.checkpoint_every < 0:
            raise ValueError("BrainConfig.checkpoint_every must be >= 0 (0 = no checkpoints), "
                             f"got {self.checkpoint_every}")
        check_parcels(self.n_parcels)
        token_order(2, self.order)  # validates the order name

    def spec(self, pe: str) -> PESpec:
        return brain_spec(pe, self.variant, self.relative_causal)

    @property
    def models(self) -> list[tuple[PESpec, float, int]]:
        """(spec, train mask, seed) of every model, in model-id order."""
        return [(self.spec(p), r, s) for p in self.pes for r in self.train_masks
                for s in self.seeds]

    def schedule(self) -> list[int]:
        """Steps at which the models are evaluated (0 = at initialisation), ascending (at most
        :data:`MAX_ROUNDS` + 1)."""
        ep = list(range(0, self.steps + 1, self.eval_every))
        return ep if ep[-1] == self.steps else [*ep, self.steps]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def brain_preset(name: str, **overrides: Any) -> BrainConfig:
    """A named configuration, with keyword overrides (None values ignored).

    ``paper``: the published setup (400 regions, 50k steps, 15 seeds, four mask ratios; a
    GPU). ``preview``: 100 regions, a 2-block model, 200 steps, one seed (minutes on a CPU).
    ``cpu``: the preview's data and model with 3 seeds and 5x the steps (15x its training).

    Raises:
        ValueError: an unknown preset (or an invalid override, from :class:`BrainConfig`).
    """
    preview = dict(seeds=[PAPER_SEEDS[0]], train_masks=[0.5], steps=200, batch_size=16,
                   lr=3e-3, n_parcels=100, n_train=20_000, n_test=5_000, n_eval=96,
                   eval_every=50, n_layers=2, checkpoint_every=0)
    if name == "paper":
        base: dict[str, Any] = dict(train_masks=list(PAPER_MASKS), max_models=15)
    elif name == "preview":
        base = preview
    elif name == "cpu":
        base = {**preview, "seeds": list(PAPER_SEEDS[:3]), "steps": 1000, "eval_every": 100,
                "checkpoint_every": 500}
    else:
        raise ValueError(f"unknown preset {name!r}; valid presets: preview, cpu, paper")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    check_overrides(BrainConfig, overrides, "BrainConfig")
    return BrainConfig(**{**base, **overrides, "preset": name})


def masks_for(scale: str, train_mask: float) -> list[float] | None:
    """The training mask ratios a chapter needs: None (the scale's own) when they include
    ``train_mask``, else the scale's plus ``train_mask``."""
    train_mask = as_real(train_mask, "train_mask")
    own = brain_preset(scale).train_masks
    return None if any(abs(train_mask - m) < 1e-9 for m in own) \
        else sorted({*own, float(train_mask)})


def describe(cfg: BrainConfig) -> str:
    """One line: regions, PEs, seeds, masks, steps, model size and number of models."""
    return (f"{cfg.n_parcels} regions, PEs {cfg.pes}, {len(cfg.seeds)} seed(s), training masks "
            f"{cfg.train_masks}, test mask {cfg.test_mask}, {cfg.steps} steps of "
            f"{cfg.batch_size} time points, d={cfg.d_model}, {cfg.n_layers} layers -> "
            f"{len(cfg.models)} models")
