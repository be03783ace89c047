"""Training the brain models: configs, presets, data, and every model trained by the engine.

:func:`train_brain` trains every (PE, training mask ratio, seed) model of a
:class:`BrainConfig` with the package's one training loop (:func:`lstpe.engine.run_chunk`)
and the brain adapter (:class:`lstpe.brain_task.BrainTask`). The models of *every* PE are
stacked into one batched model (split into chunks of at most ``max_models``); the loss is the
sum of the per-model mean losses and the :class:`~lstpe.optim.StackedOptimizer` runs one Adam
per model, so a model trains the same alone or stacked. A model's batches and masks depend
only on its seed and the step, so every PE sees the same data (common random numbers).

Steps and rounds: the engine counts rounds of ``eval_every`` steps (see
:mod:`lstpe.brain_task`); the models are evaluated after every round, and a checkpoint is
written every ``max(1, checkpoint_every // eval_every)`` rounds (``checkpoint_every`` steps
rounded down to whole rounds, at least one) and after the last round; an interrupted run
resumes from its last checkpoint and gives the same history as an uninterrupted one.

Presets (:func:`preset`): ``paper`` (400 parcels, d=64, 4 layers, Adam 1e-4, 50k steps, the 15
seeds, the four training mask ratios; many GPU hours) and ``preview`` (100 parcels, d=64,
2 layers, 200 steps of 16 time points at Adam 3e-3, one seed, 50% masking; CPU, minutes).
The paper does not give its batch size; we use 128. Preview numbers illustrate the pipeline;
they are not the paper's.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from lstpe import engine
from lstpe import results as res
from lstpe.brain_data import (
    PAPER_MASKS,
    TEST_MASK,
    BrainData,
    check_parcels,
    make_surrogate,
    n_masked,
    sample_masks,
    token_order,
)
from lstpe.brain_model import brain_spec, linear_baseline_mse, model_config
from lstpe.brain_task import HISTORY_COLUMNS, BrainTask, EvalSets, n_rounds
from lstpe.encodings import PESpec
from lstpe.optim import StackedOptimizer
from lstpe.runtime import PAPER_SEEDS, choose_amp, pick_device, precision_name, tf32_mode
from lstpe.train_config import (
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
        variant: PE variant (``paper`` or ``textbook``; :func:`lstpe.encodings.parse_pe`).
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
    :class:`lstpe.train_config.TrainConfig` (:func:`lstpe.train_config.as_int`...): a
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
                            " (lstpe.brain_train.MAX_STEPS, 200x the paper's 50k)")
        for name in ("n_train", "n_test", "n_eval"):
            setattr(self, name, as_int(getattr(self, name), L(name), 1, MAX_TIME_POINTS,
                                       " (lstpe.brain_train.MAX_TIME_POINTS)"))
        for name in ("batch_size", "eval_every", "d_model", "n_layers", "n_heads",
                     "mlp_ratio", "n_parcels"):
            setattr(self, name, as_int(getattr(self, name), L(name), 1))
        if n_rounds(self.steps, self.eval_every) > MAX_ROUNDS:
            raise ValueError(f"BrainConfig.steps / eval_every must be <= {MAX_ROUNDS} "
                             "evaluations (lstpe.brain_train.MAX_ROUNDS), got "
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


def preset(name: str, **overrides: Any) -> BrainConfig:
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
    own = preset(scale).train_masks
    return None if any(abs(train_mask - m) < 1e-9 for m in own) \
        else sorted({*own, float(train_mask)})


def describe(cfg: BrainConfig) -> str:
    """One line: regions, PEs, seeds, masks, steps, model size and number of models."""
    return (f"{cfg.n_parcels} regions, PEs {cfg.pes}, {len(cfg.seeds)} seed(s), training masks "
            f"{cfg.train_masks}, test mask {cfg.test_mask}, {cfg.steps} steps of "
            f"{cfg.batch_size} time points, d={cfg.d_model}, {cfg.n_layers} layers -> "
            f"{len(cfg.models)} models")


def make_data(cfg: BrainConfig) -> BrainData:
    """The surrogate data of a config."""
    return make_surrogate(cfg.n_parcels, cfg.n_train, cfg.n_test, cfg.data_seed, cfg.order,
                          cfg.order_seed)


def eval_sets(cfg: BrainConfig, data: BrainData) -> dict[tuple[str, float], tuple]:
    """Fixed evaluation sets ``{(split, ratio): (x (n, R), mask (n, R))}``, shared by all models.

    Train split at every training ratio and the test ratio; test split at the test ratio.
    """
    out = {}
    ratios = {"train": sorted(set(cfg.train_masks) | {cfg.test_mask}), "test": [cfg.test_mask]}
    for si, split in enumerate(("train", "test")):
        x = getattr(data, split)
        g = torch.Generator().manual_seed(cfg.data_seed * 31 + si)
        rows = torch.randperm(len(x), generator=g)[:cfg.n_eval].sort().values
        for r in ratios[split]:
            seed = cfg.data_seed * 1009 + si * 101 + int(round(r * 1000))
            out[(split, r)] = (x[rows], sample_masks(len(rows), data.n_regions, r, seed))
    return out


def train_brain(cfg: BrainConfig, run_dir: str | Path | None = None,
                data: BrainData | None = None, progress: bool = True) -> res.Run:
    """Train every (PE, train mask, seed) model of ``cfg``, batched, with the training engine.

    Args:
        cfg: the run's configuration.
        run_dir: if given, the folder is locked (:class:`lstpe.results.RunLock`) and checked
            (:func:`lstpe.results.check_run_dir`) first; checkpoints go to
            ``run_dir/checkpoints`` (resumed when present) and the finished run is saved there
            (history.csv, manifest.json, artifacts.pt).
        data: real data from :func:`lstpe.brain_data.load_timeseries` (default: the config's
            surrogate).
        progress: tqdm progress bars (one tick per round of ``eval_every`` steps).
    Returns:
        :class:`lstpe.results.Run` (with ``models``, ``cfg`` and ``data``); model ``i`` is
        ``cfg.models[i]``.
    Raises:
        lstpe.results.RunDirError: ``run_dir`` already holds this finished run (read it with
            :func:`lstpe.results.load`), or holds another configuration's run or checkpoints,
            or is locked by another process.
        ValueError: a checkpoint of the folder was written by another configuration or data.
    """
    from lstpe import train as lst_train

    device = pick_device(cfg.device)
    with tf32_mode(device, lst_train.TF32):  # the global flags are restored afterwards
        if run_dir is None:
            return _train_brain(cfg, None, data, progress, device)
        run_dir = Path(run_dir)
        with res.RunLock(run_dir):
            if res.check_run_dir(run_dir, cfg.to_dict()) == "finished":
                raise res.RunDirError(f"{run_dir} already holds this finished run; read it "
                                      "with lstpe.results.load or delete it to retrain")
            return _train_brain(cfg, run_dir, data, progress, device)


def _train_brain(cfg: BrainConfig, run_dir: Path | None, data: BrainData | None,
                 progress: bool, device: torch.device) -> res.Run:
    from lstpe import train as lst_train

    t0 = time.perf_counter()
    amp, precision_why = choose_amp(device, asked=cfg.amp)
    data = data if data is not None else make_data(cfg)
    mcfg = model_config(data.n_regions, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.mlp_ratio)
    models = cfg.models
    size = cfg.max_models or len(models)
    chunks = [list(range(i, min(i + size, len(models)))) for i in range(0, len(models), size)]
    sets: EvalSets = {k: (x.to(device), m.to(device)) for k, (x, m) in eval_sets(cfg, data).items()}
    x_train = data.train.to(device)
    ckdir = run_dir / "checkpoints" if run_dir is not None else None
    if ckdir is not None and cfg.checkpoint_every:
        res.save_json(cfg.to_dict(), ckdir / "config.json")
    rounds = n_rounds(cfg.steps, cfg.eval_every)
    fingerprint = data.fingerprint()
    mode = "compile" if cfg.compile else "eager"
    history: list[dict] = []
    trained, pes, earlier = [], [], 0.0
    for ci, ids in enumerate(chunks):
        task = BrainTask(cfg, ids, mcfg, x_train, sets, device)
        opt = StackedOptimizer(task.model.parameters(), ["adam"] * len(ids), [cfg.lr] * len(ids),
                               [0.0] * len(ids))
        opts = engine.LoopOptions(
            epochs=rounds, schedule=set(range(1, rounds + 1)), device=device, amp=cfg.amp,
            mode=mode, checkpoint=ckdir / f"chunk{ci}.pt" if ckdir is not None else None,
            checkpoint_every=max(1, cfg.checkpoint_every // cfg.eval_every)
            if cfg.checkpoint_every else 0,
            checkpoint_meta={"config": cfg.to_dict(), "ids": ids, "data": fingerprint},
            progress=progress, desc=f"chunk {ci + 1}/{len(chunks)} ({len(ids)} models)")
        h, _, segments = engine.run_chunk(task, opt, opts, dict)
        history += h
        earlier += sum(seg["wall_s"] for seg in segments)
        trained.append(task.model)
        pes.append(task.model.pe().detach().cpu())
    hist = pd.DataFrame(history, columns=HISTORY_COLUMNS)
    hist = hist.sort_values(["model", "step", "split", "mask_ratio"]).reset_index(drop=True)
    cov = np.cov(data.train.numpy(), rowvar=False)
    baseline = {f"{s}@{r:g}": linear_baseline_mse(cov, x.cpu(), m.cpu())
                for (s, r), (x, m) in sets.items()}
    artifacts = {
        "labels": [m[0].label for m in models], "seeds": [m[2] for m in models],
        "train_masks": [m[1] for m in models], "pe_final": torch.cat(pes, 0),
        "networks": data.networks, "network_names": list(data.network_names),
        "order": data.order, "linear_baseline": baseline, "model_config": mcfg.to_dict(),
    }
    manifest = res.make_manifest(
        cfg.to_dict(), device, time.perf_counter() - t0,
        previous_segments=[{"wall_s": round(earlier, 3)}] if earlier > 0 else None,
        n_models=len(models), kind="brain-train", step_mode=mode, data=data.info,
        data_source=data.source, data_fingerprint=fingerprint, linear_baseline=baseline,
        precision=precision_name(amp), precision_reason=precision_why,
        tf32=bool(lst_train.TF32) if device.type == "cuda" else None)
    if run_dir is not None:
        res.save_run(run_dir, hist, manifest, artifacts)
    return res.Run(hist, manifest, artifacts, path=run_dir, name="brain", source="live",
                   models=trained, cfg=cfg, data=data)
