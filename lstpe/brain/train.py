"""Training the brain models: data, evaluation sets, and every model trained by the engine.

:func:`train_brain` trains every (PE, training mask ratio, seed) model of a
:class:`BrainConfig` with the package's one training loop (:func:`lstpe.training.engine.run_chunk`)
and the brain adapter (:class:`lstpe.brain.task.BrainTask`). The models of *every* PE are
stacked into one batched model (split into chunks of at most ``max_models``); the loss is the
sum of the per-model mean losses and the :class:`~lstpe.training.optim.StackedOptimizer` runs one
Adam
per model, so a model trains the same alone or stacked. A model's batches and masks depend
only on its seed and the step, so every PE sees the same data (common random numbers).

Steps and rounds: the engine counts rounds of ``eval_every`` steps (see
:mod:`lstpe.brain.task`); the models are evaluated after every round, and a checkpoint is
written every ``max(1, checkpoint_every // eval_every)`` rounds (``checkpoint_every`` steps
rounded down to whole rounds, at least one) and after the last round; an interrupted run
resumes from its last checkpoint and gives the same history as an uninterrupted one.

The configuration and its presets are :mod:`lstpe.brain.config`. Preview numbers illustrate
the pipeline; they are not the paper's.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lstpe.brain.config import BrainConfig, n_rounds
from lstpe.brain.data import (
    BrainData,
    make_surrogate,
    sample_masks,
)
from lstpe.brain.model import linear_baseline_mse, model_config
from lstpe.brain.task import BRAIN_HISTORY_COLUMNS, BrainTask, EvalSets
from lstpe.runtime import choose_amp, pick_device, precision_name, tf32_mode
from lstpe.store import results as res
from lstpe.training import engine
from lstpe.training.optim import StackedOptimizer


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
        run_dir: if given, the folder is locked (:class:`lstpe.store.results.RunLock`) and checked
            (:func:`lstpe.store.results.check_run_dir`) first; checkpoints go to
            ``run_dir/checkpoints`` (resumed when present) and the finished run is saved there
            (history.csv, manifest.json, artifacts.pt).
        data: real data from :func:`lstpe.brain.data.load_timeseries` (default: the config's
            surrogate).
        progress: tqdm progress bars (one tick per round of ``eval_every`` steps).
    Returns:
        :class:`lstpe.store.results.Run` (with ``models``, ``cfg`` and ``data``); model ``i`` is
        ``cfg.models[i]``.
    Raises:
        lstpe.store.results.RunDirError: ``run_dir`` already holds this finished run (read it with
            :func:`lstpe.store.results.load`), or holds another configuration's run or checkpoints,
            or is locked by another process.
        ValueError: a checkpoint of the folder was written by another configuration or data.
    """
    from lstpe.training import train as lst_train

    device = pick_device(cfg.device)
    with tf32_mode(device, lst_train.TF32):  # the global flags are restored afterwards
        if run_dir is None:
            return _train_brain(cfg, None, data, progress, device)
        run_dir = Path(run_dir)
        with res.RunLock(run_dir):
            if res.check_run_dir(run_dir, cfg.to_dict()) == "finished":
                raise res.RunDirError(f"{run_dir} already holds this finished run; read it "
                                      "with lstpe.store.results.load or delete it to retrain")
            return _train_brain(cfg, run_dir, data, progress, device)


def _train_brain(cfg: BrainConfig, run_dir: Path | None, data: BrainData | None,
                 progress: bool, device: torch.device) -> res.Run:
    from lstpe.training import train as lst_train

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
    trained, pes, earlier = [], [], []
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
        earlier += segments  # the processes that trained this chunk before this one
        trained.append(task.model)
        pes.append(task.model.pe().detach().cpu())
    hist = pd.DataFrame(history, columns=BRAIN_HISTORY_COLUMNS)
    hist = hist.sort_values(["model", "step", "split", "mask_ratio"]).reset_index(drop=True)
    cov = np.cov(data.train.numpy(), rowvar=False)
    baseline = {f"{s}@{r:g}": float(linear_baseline_mse(cov, x.cpu(), m.cpu()))
                for (s, r), (x, m) in sets.items()}
    artifacts = {
        "labels": [m[0].label for m in models], "seeds": [m[2] for m in models],
        "train_masks": [m[1] for m in models], "pe_final": torch.cat(pes, 0),
        # tensors and plain types only: artifacts load with torch's weights_only=True
        "networks": torch.as_tensor(np.asarray(data.networks), dtype=torch.int64),
        "network_names": [str(n) for n in data.network_names],
        "order": torch.as_tensor(np.asarray(data.order), dtype=torch.int64),
        "linear_baseline": baseline, "model_config": mcfg.to_dict(),
    }
    manifest = res.make_manifest(
        cfg.to_dict(), device, time.perf_counter() - t0,
        previous_segments=res.earlier_segments(earlier),
        n_models=len(models), kind="brain-train", step_mode=mode, data=data.info,
        data_source=data.source, data_fingerprint=fingerprint, linear_baseline=baseline,
        precision=precision_name(amp), precision_reason=precision_why,
        tf32=bool(lst_train.TF32) if device.type == "cuda" else None)
    if run_dir is not None:
        res.save_run(run_dir, hist, manifest, artifacts)
    return res.Run(hist, manifest, artifacts, path=run_dir, name="brain", source="live",
                   models=trained, cfg=cfg, data=data)
