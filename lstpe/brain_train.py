"""Training the brain models: configs, presets, data, and the batched training loop.

:func:`train_brain` trains every (PE, training mask ratio, seed) model of a
:class:`BrainConfig` as one batched model per group of PEs (loss = sum of the per-model mean
losses, one Adam over the stacked tensors = M independent Adams, as in :mod:`lstpe.train`). A
model's batches and masks depend only on its seed and the step, so every PE sees the same data
(common random numbers) and a model trains the same alone or stacked.

Presets (:func:`preset`): ``paper`` (400 parcels, d=64, 4 layers, Adam 1e-4, 50k steps, the 15
seeds, the four training mask ratios; many GPU hours) and ``preview`` (100 parcels, d=64,
2 layers, 200 steps of 16 time points at Adam 3e-3, one seed, 50% masking; CPU, under a
minute). The paper does not give its batch size; we use 128. Preview numbers illustrate the
pipeline; they are not the paper's.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from lstpe import results as res
from lstpe.brain_data import (
    PAPER_MASKS,
    TEST_MASK,
    BrainData,
    check_parcels,
    draw_batch,
    make_surrogate,
    n_masked,
    sample_masks,
    token_order,
)
from lstpe.brain_model import (
    BatchedBrainTransformer,
    brain_spec,
    evaluate,
    linear_baseline_mse,
    masked_mse,
    model_config,
)
from lstpe.encodings import PESpec
from lstpe.notebook import pick_device
from lstpe.train import group_specs

BRAIN_PES: tuple[str, ...] = (
    "1d-fixed", "relative", "rope", "random", "learn-0.1", "learn-0.2", "learn-1", "learn-2",
)
"""The PEs of the paper's brain experiment."""

PAPER_SEEDS: tuple[int, ...] = (
    2235, 6312, 6068, 9742, 8880, 2197, 669, 6256, 3309, 2541, 8643, 7785, 195, 6914, 29,
)
"""The authors' 15 seeds (the same as the LST experiment's)."""

HISTORY_COLUMNS = [
    "model", "pe", "pe_name", "sigma", "seed", "train_mask", "step", "split", "mask_ratio", "mse",
]
"""Columns of the brain history table: one row per (model, step, split, mask_ratio).
``train_mask`` is the model's training mask ratio, ``mask_ratio`` the one of the evaluation."""


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
        checkpoint_every: steps between checkpoints (0 = never).
        max_models: split groups larger than this into chunks (memory).
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

    def __post_init__(self) -> None:
        self.pes = [self.spec(p).label for p in self.pes]
        self.seeds = [int(s) for s in self.seeds]
        self.train_masks = [float(r) for r in self.train_masks]
        if not self.pes or not self.seeds or not self.train_masks:
            raise ValueError("BrainConfig needs at least one PE, one seed and one train mask")
        for name, vals in (("pes", self.pes), ("seeds", self.seeds),
                           ("train_masks", self.train_masks)):
            if len(set(vals)) != len(vals):
                raise ValueError(f"duplicate entries in BrainConfig.{name}: {vals}")
        for r in [*self.train_masks, self.test_mask]:
            n_masked(r, 2)  # validates 0 < r < 1
        for name in ("steps", "batch_size", "n_train", "n_test", "n_eval", "eval_every",
                     "d_model", "n_layers", "n_heads", "mlp_ratio"):
            if getattr(self, name) < 1:
                raise ValueError(f"BrainConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
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
        """Steps at which the models are evaluated (0 = at initialisation)."""
        return sorted(set(range(0, self.steps + 1, self.eval_every)) | {self.steps})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def preset(name: str, **overrides: Any) -> BrainConfig:
    """``paper`` or ``preview`` configuration, with keyword overrides (None values ignored)."""
    if name == "paper":
        base = BrainConfig(train_masks=list(PAPER_MASKS), max_models=15)
    elif name == "preview":
        base = BrainConfig(
            seeds=[PAPER_SEEDS[0]], train_masks=[0.5], steps=200, batch_size=16, lr=3e-3,
            n_parcels=100, n_train=20_000, n_test=5_000, n_eval=96, eval_every=50,
            n_layers=2, checkpoint_every=0,
        )
    else:
        raise ValueError(f"unknown preset {name!r}; valid presets: paper, preview")
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})


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


@dataclass
class BrainResult:
    """What :func:`train_brain` returns."""

    config: BrainConfig
    history: pd.DataFrame
    models: list[BatchedBrainTransformer]
    artifacts: dict[str, Any]
    manifest: dict[str, Any]
    data: BrainData
    run_dir: Path | None = None


def _rows(ids, models, step: int, split: str, ratio: float, mse) -> list[dict]:
    rows = []
    for j, mid in enumerate(ids):
        spec, tm, seed = models[mid]
        rows.append({"model": mid, "pe": spec.label, "pe_name": spec.name,
                     "sigma": spec.sigma if spec.sigma is not None else math.nan, "seed": seed,
                     "train_mask": tm, "step": step, "split": split, "mask_ratio": ratio,
                     "mse": float(mse[j])})
    return rows


def train_brain(cfg: BrainConfig, run_dir: str | Path | None = None,
                data: BrainData | None = None, progress: bool = True) -> BrainResult:
    """Train every (PE, train mask, seed) model of ``cfg``, batched by attention kind.

    Args:
        cfg: the run's configuration.
        run_dir: if given, checkpoints go to ``run_dir/checkpoints`` (resumed when present)
            and the finished run is saved there (history.csv, manifest.json, artifacts.pt).
        data: real data from :func:`load_timeseries` (default: the config's surrogate).
        progress: tqdm progress bars.
    Returns:
        :class:`BrainResult`; model ``i`` is ``cfg.models[i]``.
    """
    t0 = time.perf_counter()
    device = pick_device(cfg.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    data = data if data is not None else make_data(cfg)
    R = data.n_regions
    mcfg = model_config(R, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.mlp_ratio)
    models = cfg.models
    chunks = []
    for grp in group_specs([m[0] for m in models]):
        step = cfg.max_models or len(grp)
        chunks += [grp[i:i + step] for i in range(0, len(grp), step)]
    sets = {k: (x.to(device), m.to(device)) for k, (x, m) in eval_sets(cfg, data).items()}
    x_train = data.train.to(device)
    run_dir = Path(run_dir) if run_dir else None
    history: list[dict] = []
    trained, pes = [], []
    for ci, ids in enumerate(chunks):
        model, h = _train_chunk(cfg, ci, ids, mcfg, x_train, sets, data, device, run_dir,
                                progress, len(chunks))
        history += h
        trained.append(model)
        pes.append(model.pe().detach().cpu())
    hist = pd.DataFrame(history, columns=HISTORY_COLUMNS)
    hist = hist.sort_values(["model", "step", "split", "mask_ratio"]).reset_index(drop=True)
    order = [i for ids in chunks for i in ids]
    inv = torch.as_tensor(np.argsort(order))
    cov = np.cov(data.train.numpy(), rowvar=False)
    baseline = {f"{s}@{r:g}": linear_baseline_mse(cov, x.cpu(), m.cpu())
                for (s, r), (x, m) in sets.items()}
    artifacts = {
        "labels": [m[0].label for m in models], "seeds": [m[2] for m in models],
        "train_masks": [m[1] for m in models], "pe_final": torch.cat(pes, 0)[inv],
        "networks": data.networks, "network_names": list(data.network_names),
        "order": data.order, "linear_baseline": baseline, "model_config": mcfg.to_dict(),
    }
    manifest = res.make_manifest(cfg.to_dict(), device, time.perf_counter() - t0,
                                 n_models=len(models), kind="brain-train", data=data.info,
                                 data_source=data.source, data_fingerprint=data.fingerprint(),
                                 linear_baseline=baseline)
    if run_dir is not None:
        res.save_run(run_dir, hist, manifest, artifacts)
    return BrainResult(cfg, hist, trained, artifacts, manifest, data, run_dir)


def _train_chunk(cfg, ci, ids, mcfg, x_train, sets, data, device, run_dir, progress, n_chunks):
    models = cfg.models
    specs = [models[i][0] for i in ids]
    seeds = [models[i][2] for i in ids]
    ratios = [models[i][1] for i in ids]
    model = BatchedBrainTransformer(specs, seeds, mcfg).to(device)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
    fwd = torch.compile(model) if cfg.compile else model
    uniq = sorted(set(seeds))
    sidx = torch.tensor([uniq.index(s) for s in seeds], device=device)
    k = torch.tensor([n_masked(float(r), data.n_regions) for r in ratios], device=device)
    ckpt = run_dir / "checkpoints" / f"chunk{ci}.pt" if run_dir else None
    fingerprint = data.fingerprint()
    history: list[dict] = []
    start = 0
    if ckpt is not None and ckpt.exists():
        state = torch.load(ckpt, map_location=device, weights_only=False)
        if (state["config"] != cfg.to_dict() or state["ids"] != list(ids)
                or state.get("data") != fingerprint):
            raise ValueError(f"checkpoint {ckpt} was written by a different configuration or "
                             "data; use a new run_dir or delete the checkpoint")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        history, start = state["history"], state["step"]
    schedule = set(cfg.schedule())

    def run_eval(step: int) -> None:
        model.eval()
        for (split, r), (x, m) in sets.items():
            history.extend(_rows(ids, models, step, split, r, evaluate(model, x, m, amp=cfg.amp)))
        model.train()

    if start == 0:
        run_eval(0)
    use_amp = cfg.amp and device.type == "cuda"
    bar = range(start + 1, cfg.steps + 1)
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(bar, desc=f"group {ci + 1}/{n_chunks} ({len(ids)} models: "
                   f"{specs[0].label}...)", initial=start, total=cfg.steps, leave=False)
    model.train()
    N, B, R = x_train.shape[0], cfg.batch_size, data.n_regions
    for step in bar:
        draws = [draw_batch(s, step, N, B, R, device) for s in uniq]
        idx = torch.stack([d[0] for d in draws])[sidx]  # (M, B)
        rank = torch.stack([d[1] for d in draws]).argsort(-1).argsort(-1)[sidx]  # (M, B, R)
        mask = rank < k[:, None, None]
        x = x_train[idx]
        with torch.autocast(device.type, torch.bfloat16, enabled=use_amp):
            pred = fwd(x, mask)
        loss = masked_mse(pred.float(), x, mask).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step in schedule:
            run_eval(step)
        if ckpt is not None and cfg.checkpoint_every and (
            step % cfg.checkpoint_every == 0 or step == cfg.steps
        ):
            res.save_torch({"config": cfg.to_dict(), "ids": list(ids), "step": step,
                            "data": fingerprint, "model": model.state_dict(),
                            "opt": opt.state_dict(), "history": history}, ckpt)
    model.eval()
    return model, history
