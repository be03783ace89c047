"""What defines a training run: :class:`TrainConfig`, the presets, the sigma grids, the data.

Presets (:func:`preset`):

* ``paper``: the authors' setup as their code ran it -- d=160, 4 layers, one head, lr 1e-4,
  batch 128, the authors' 15 seeds, their 9000 training puzzles split 8100 / 900 like their
  code (:func:`lstpe.lst.authors_test_rows`), the 108 human puzzles as validation -- for the
  number of epochs each experiment sets (:mod:`lstpe.experiments.registry`): the authors trained
  4000
  epochs; their own logs show learn-sigma settled by epoch 200 but 2d-fixed still rising
  (0.938 at 200, 0.977 at 4000), so Table 1 and the AdamW tables train longer than the sigma
  sweep.
* ``preview``: the same architecture and data at a scale that runs on a laptop CPU in
  minutes (fewer seeds, a stratified subset of the training puzzles, few epochs). Its numbers
  illustrate the pipeline; they are not the paper's.
* ``cpu``: the paper's model, data and learning rate, trained on a CPU for :data:`CPU_EPOCHS`
  epochs and :data:`CPU_SEEDS` seeds, checkpointed every epoch: hours in the background. It
  shows the early ordering of the PEs, not the converged numbers.

Every preset trains in fp32, as the authors did. Mixed precision is asked for explicitly
(``amp=True``, ``--amp``; :func:`lstpe.runtime.choose_amp` says which autocast dtype a device
then uses) or decided by the campaign's precision pair (:func:`lstpe.campaign.precision.decide`,
the one place that turns it on by itself).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from lstpe.nn.architecture import ModelConfig
from lstpe.nn.encodings import PESpec, parse_pe
from lstpe.runtime import PAPER_SEEDS

PAPER_SIGMAS: tuple[float, ...] = tuple(round(0.1 * k, 1) for k in range(1, 21))
"""Table 2's sigmas 0.1, 0.2, ..., 2.0."""

PREVIEW_SIGMAS: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0)
"""The sigmas a preview-scale (and CPU-scale) sweep trains (Table 2's ends and middle)."""

SCALES: tuple[str, ...] = ("preview", "cpu", "paper")
"""The presets, smallest first: ``preview`` (a small model, minutes on a CPU), ``cpu`` (the
paper's model and data on a CPU for :data:`CPU_EPOCHS` epochs: tens of minutes to hours, run
in the background) and
``paper`` (the published setup; on this project's CPUs, :mod:`lstpe.campaign.items`)."""


# --------------------------------------------------------------------------- value checks
#
# The config classes (TrainConfig here, lstpe.brain.config.BrainConfig) check every value by type
# before using it, so the command line, the Python API (lstpe.experiments.registry.run_config,
# lstpe.experiments.runs.get_run) and papermill parameters (a chapter run by ``lstpe batch``) all
# give the
# same ValueError naming the parameter and the bad value. The rules:
#
# * an integer is an ``int`` or a numpy integer; a float with no fraction (``2235.0``, as JSON
#   or YAML may give it) is taken as that integer; ``bool`` (``True`` is not 1 epoch), a float
#   with a fraction (``2235.9``), a non-finite float and a string (``"3"``) are refused;
# * a real number is an ``int``, ``float`` or numpy number (not ``bool``, not a string);
# * a list is a list, tuple, range or 1-D numpy array; a string (``"26"`` is not ``[2, 6]``), a
#   dict, a set (no order) and a single number are refused;
# * a flag is ``True`` or ``False`` (numpy bools too), never 0/1 or a string.


def _show(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"{text} ({type(value).__name__})"


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def as_int(value: Any, label: str, low: int | None = None, high: int | None = None,
           why: str = "") -> int:
    """``value`` as an ``int`` (rules above), within ``low..high`` if given.

    Raises:
        ValueError: ``"<label> must be an integer, got <value> (<type>)"``, or the bound that
            is broken (``why`` is appended to an upper bound's message).
    """
    v: int | None = None
    if _is_bool(value) or isinstance(value, (str, bytes)):
        pass
    elif isinstance(value, numbers.Integral):
        v = int(value)
    elif isinstance(value, numbers.Real) and math.isfinite(float(value)) \
            and float(value).is_integer():
        v = int(value)
    if v is None:
        raise ValueError(f"{label} must be an integer, got {_show(value)}")
    if low is not None and v < low:
        raise ValueError(f"{label} must be >= {low}, got {v}")
    if high is not None and v > high:
        raise ValueError(f"{label} must be <= {high}{why}, got {v}")
    return v


def as_opt_int(value: Any, label: str, low: int | None = None,
               high: int | None = None) -> int | None:
    """None, or :func:`as_int`."""
    return None if value is None else as_int(value, label, low, high)


def as_real(value: Any, label: str) -> float:
    """``value`` as a ``float``: an int, float or numpy number (not bool, not a string).

    Raises:
        ValueError: ``"<label> must be a real number, got <value> (<type>)"``.
    """
    if _is_bool(value) or isinstance(value, (str, bytes)) or \
            not isinstance(value, numbers.Real):
        raise ValueError(f"{label} must be a real number, got {_show(value)}")
    return float(value)


def as_bool(value: Any, label: str) -> bool:
    """``True`` or ``False`` (numpy bools too).

    Raises:
        ValueError: anything else (0/1, strings), naming the label and the value.
    """
    if not _is_bool(value):
        raise ValueError(f"{label} must be True or False, got {_show(value)}")
    return bool(value)


def as_str(value: Any, label: str) -> str:
    """A string.

    Raises:
        ValueError: anything else, naming the label and the value.
    """
    if not isinstance(value, str):
        raise ValueError(f"{label} must be a string, got {_show(value)}")
    return str(value)


def as_list(value: Any, label: str, what: str) -> list[Any]:
    """``value`` as a list: a list, tuple, range or 1-D numpy array (not a string, dict, set
    or single value); ``what`` names the items for the message (``"integers"``).

    Raises:
        ValueError: ``"<label> must be a list of <what>, got <value> (<type>)"``.
    """
    ok = isinstance(value, (list, tuple, range)) or \
        (isinstance(value, np.ndarray) and value.ndim == 1)
    if not ok or isinstance(value, (str, bytes, Mapping)):
        raise ValueError(f"{label} must be a list of {what}, got {_show(value)}")
    return list(value)


def _items(value: Any, label: str, what: str, convert) -> list[Any]:
    out = []
    for item in as_list(value, label, what):
        try:
            out.append(convert(item))
        except ValueError:
            raise ValueError(f"{label} must be a list of {what}; {_show(item)} is not one "
                             f"(in {_show(value)})") from None
    return out


def as_int_list(value: Any, label: str) -> list[int]:
    """A list of integers (:func:`as_list`, :func:`as_int`): ``[2235, 6312]``."""
    return _items(value, label, "integers", lambda v: as_int(v, label))


def as_real_list(value: Any, label: str) -> list[float]:
    """A list of real numbers (:func:`as_list`, :func:`as_real`): ``[0.1, 0.5]``."""
    return _items(value, label, "real numbers", lambda v: as_real(v, label))


def as_str_list(value: Any, label: str) -> list[str]:
    """A list of strings (:func:`as_list`, :func:`as_str`): ``["learn-0.2", "2d-fixed"]``."""
    return _items(value, label, "strings", lambda v: as_str(v, label))


def check_seeds(seeds: Any, label: str) -> list[int]:
    """A list of integer seeds that fit in a signed 64-bit integer (torch generators).

    Raises:
        ValueError: not a list of integers, or a seed outside 64 bits (naming it).
    """
    seeds = as_int_list(seeds, label)
    big = [s for s in seeds if not -(2**63) <= s < 2**63]
    if big:
        raise ValueError(f"seed {big[0]} does not fit in 64 bits (seeds must be integers in "
                         f"{-(2**63)}..{2**63 - 1})")
    return seeds


def check_overrides(cls: type, overrides: Mapping[str, Any], where: str) -> None:
    """Refuse keys that are not fields of the dataclass ``cls`` (a ValueError listing the
    valid ones, instead of Python's TypeError)."""
    valid = [f.name for f in fields(cls)]
    unknown = [k for k in overrides if k not in valid]
    if unknown:
        raise ValueError(f"unknown {where} setting(s) {', '.join(map(repr, unknown))}; valid: "
                         f"{', '.join(valid)}")


def sigmas_for(scale: str, sigmas: Sequence[float] | None = None) -> list[float]:
    """``sigmas`` if given (validated), else the scale's default (paper: 0.1..2.0).

    Raises:
        ValueError: an unknown scale, ``sigmas`` not a list of real numbers, or a negative /
            non-finite sigma (naming it).
    """
    if sigmas is None:
        if scale not in SCALES:
            raise ValueError(f"unknown scale {scale!r}; valid scales: {', '.join(SCALES)}")
        return list(PAPER_SIGMAS if scale == "paper" else PREVIEW_SIGMAS)
    return [parse_pe("learn", sigma=s).sigma for s in as_real_list(sigmas, "sigmas")]


MAX_EPOCHS = 1_000_000
"""The most epochs a :class:`TrainConfig` accepts. Why a bound: the evaluation schedule
(:meth:`TrainConfig.schedule`, up to one entry per epoch) and the training loop's bookkeeping
are built before the first step, and ``--epochs 100000000000`` asked for ~23 GB before
anything trained. Why 10^6: the paper trained 4000 epochs (the registry's longest run,
``long4000``); 10^6 is 250 times that, years of GPU time at paper scale, so no real run is
refused, while a schedule of 10^6 + 1 epochs takes a few tens of MB."""


OPTIMIZERS: tuple[str, ...] = ("adam", "adamw", "sgd")
DEFAULT_LR = {"adam": 1e-4, "adamw": 1e-4, "sgd": 1e-3}
DEFAULT_WD = {"adam": 0.0, "adamw": 0.1, "sgd": 0.0}

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
            (``torch.compile`` of the model), ``graph`` or ``compiled`` (forward, backward and
            optimizer in one inductor graph, under a CUDA graph on CUDA).
        checkpoint_every: epochs between checkpoints (0 = never).
        max_models: split the models into chunks of at most this many (GPU memory).
        save_attention: keep validation attention maps (init and final) in the artefacts.
        noise_levels: after training, validation accuracy with N(0, x^2) noise on the token
            embeddings for each x (the paper's robustness test), stored as the run's ``noise``
            table (:func:`lstpe.training.noise.noise_robustness`); empty = skip.
        noise_repeats: noise draws per level (averaged).
        preset: the preset this config came from (``paper``, ``preview`` or ``custom``).

    Every value is checked by type and range when the config is made (the rules are
    :func:`as_int`, :func:`as_real`, :func:`as_list`...: ``seeds="26"``, ``seeds=[2235.9]``,
    ``epochs=True``, ``epochs="abc"`` are refused, ``seeds=[2235.0]`` is ``[2235]``):
    a ValueError names the parameter and the bad value. ``epochs`` is at most
    :data:`MAX_EPOCHS`.
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
        L = _train_label
        if isinstance(self.model, dict):
            self.model = ModelConfig(**self.model)
        if not isinstance(self.model, ModelConfig):
            raise ValueError(f"TrainConfig.model must be a ModelConfig or a dict, got "
                             f"{_show(self.model)}")
        for name in ("optimizer", "data", "split", "variant", "device", "step_mode", "preset"):
            setattr(self, name, as_str(getattr(self, name), L(name)))
        for name in ("amp", "save_attention"):
            setattr(self, name, as_bool(getattr(self, name), L(name)))
        pes = as_list(self.pes, L("pes"), "PE names")
        bad = [p for p in pes if not isinstance(p, (str, PESpec))]
        if bad:
            raise ValueError(f"{L('pes')} must be a list of PE names (strings); "
                             f"{_show(bad[0])} is not one")
        self.pes = [parse_pe(p, variant=self.variant).label if isinstance(p, str) else p.label
                    for p in pes]
        self.seeds = check_seeds(self.seeds, L("seeds"))
        if not self.pes:
            raise ValueError("TrainConfig.pes is empty: name at least one PE")
        if not self.seeds:
            raise ValueError("TrainConfig.seeds is empty: give at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"duplicate seeds in {self.seeds}")
        if len(set(self.pes)) != len(self.pes):
            raise ValueError(f"duplicate PEs in {self.pes}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"unknown optimizer {self.optimizer!r}; valid: {', '.join(OPTIMIZERS)}"
            )
        self.lr = DEFAULT_LR[self.optimizer] if self.lr is None else as_real(self.lr, L("lr"))
        self.weight_decay = DEFAULT_WD[self.optimizer] if self.weight_decay is None \
            else as_real(self.weight_decay, L("weight_decay"))
        self.epochs = as_int(self.epochs, L("epochs"), 1, MAX_EPOCHS,
                             " (lstpe.training.config.MAX_EPOCHS, 250x the paper's 4000 epochs)")
        self.batch_size = as_int(self.batch_size, L("batch_size"), 1)
        self.dense_until = as_int(self.dense_until, L("dense_until"), 0)
        self.sparse_every = as_int(self.sparse_every, L("sparse_every"), 1)
        if self.eval_epochs is not None:
            self.eval_epochs = as_int_list(self.eval_epochs, L("eval_epochs"))
        self.eval_train_max = as_int(self.eval_train_max, L("eval_train_max"), 1)
        self.eval_test_max = as_opt_int(self.eval_test_max, L("eval_test_max"), 1)
        self.split_seed = as_int(self.split_seed, L("split_seed"))
        self.n_train = as_opt_int(self.n_train, L("n_train"), 1)
        self.max_models = as_opt_int(self.max_models, L("max_models"), 1)
        if self.checkpoint_every is None:
            raise ValueError("checkpoint_every (--checkpoint-every) must be >= 0 (0 = no "
                             "checkpoints), got None")
        self.checkpoint_every = as_int(self.checkpoint_every, L("checkpoint_every"))
        if self.checkpoint_every < 0:
            raise ValueError("checkpoint_every (--checkpoint-every) must be >= 0 (0 = no "
                             f"checkpoints), got {self.checkpoint_every}")
        self.noise_levels = as_real_list(self.noise_levels, L("noise_levels"))
        if not all(math.isfinite(x) and x >= 0 for x in self.noise_levels):
            raise ValueError(f"TrainConfig.noise_levels must be finite numbers >= 0, got "
                             f"{self.noise_levels}")
        self.noise_repeats = as_int(self.noise_repeats, L("noise_repeats"), 1)
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"the learning rate (--lr) must be a finite number > 0, got "
                             f"{self.lr}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError("the weight decay (--weight-decay) must be a finite number >= 0, "
                             f"got {self.weight_decay}")
        from lstpe.lst import SPLIT_RULES
        from lstpe.training.engine import STEP_MODES

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
        """Epochs at which the models are evaluated (0 = at initialisation), ascending.

        Built from the two ranges directly (no set of every epoch): its length is at most
        ``epochs + 1`` (bounded by :data:`MAX_EPOCHS`)."""
        if self.eval_epochs is not None:
            return sorted({int(e) for e in self.eval_epochs if 0 <= e <= self.epochs}
                          | {self.epochs})
        dense = min(self.dense_until, self.epochs)
        step = max(1, self.sparse_every)
        first_sparse = (dense // step + 1) * step  # the first multiple of step after dense
        ep = [*range(dense + 1), *range(first_sparse, self.epochs + 1, step)]
        if ep[-1] != self.epochs:
            ep.append(self.epochs)
        return ep

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["model"] = self.model.to_dict()
        return d

    def shared_settings(self) -> dict[str, Any]:
        """The settings that configurations trained together must share: everything but
        :data:`BUNDLE_KEYS_FREE`."""
        return {k: v for k, v in self.to_dict().items() if k not in BUNDLE_KEYS_FREE}


_TRAIN_FLAGS = {"seeds": "--seeds", "pes": "--pe", "n_train": "--n-train",
                "max_models": "--max-models", "checkpoint_every": "--checkpoint-every"}


def _train_label(name: str) -> str:
    """How an error message names a TrainConfig field: ``TrainConfig.epochs``, or with its
    command-line flag where the older messages had one (``max_models (--max-models)``)."""
    if name == "lr":
        return "the learning rate (--lr)"
    if name == "weight_decay":
        return "the weight decay (--weight-decay)"
    return f"{name} ({_TRAIN_FLAGS[name]})" if name in _TRAIN_FLAGS else f"TrainConfig.{name}"


CPU_EPOCHS = 12
"""Epochs of the ``cpu`` preset: the paper's model, data and learning rate, trained on a CPU
for as long as a working session allows, checkpointed every epoch."""

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
    check_overrides(TrainConfig, overrides, "TrainConfig")
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
                    dense_until=CPU_EPOCHS, eval_train_max=1000, checkpoint_every=1,
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
