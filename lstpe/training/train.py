"""Training LST transformers: many models trained as one.

A sweep of S seeds x K PEs is M = S*K tiny models. Instead of looping over them, the engine
(:mod:`lstpe.training.engine`) stacks them into one :class:`~lstpe.nn.model.BatchedLSTTransformer`
(models
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

Configurations and presets (``paper``, ``cpu``, ``preview``) live in
:mod:`lstpe.training.config`, the task (``predict``, ``score``) in :mod:`lstpe.training.task`.

The history records, per evaluation, eval-mode accuracy and loss on ``train`` (a fixed
stratified subset at intermediate epochs), ``test`` and ``val``; ``val_dropout``, the same pass
with dropout active as the authors evaluated (differs only for models with dropout: 2d-fixed
and 1d-fixed of the paper variant); and ``train_running``, the running mean over the epoch's
minibatches in train mode (the paper's training-accuracy columns). A model whose loss or logits
became non-finite is flagged ``diverged`` from then on.

Devices: on CUDA without ``max_models`` the models per chunk and the evaluation puzzles per
call follow the free GPU memory (:func:`chunk_sizes`, :func:`lstpe.training.cost.chunk_plan`); mixed
precision follows the device (:func:`lstpe.runtime.choose_amp`, recorded in the manifest as
``precision``); TF32 stays off unless :data:`TF32` is set, and the global TF32 flags are the
same after :func:`train` as before it.

Checkpoints: every ``checkpoint_every`` epochs the state of the chunk in training (weights,
optimizer, history so far) is written atomically to ``<run_dir>/checkpoints/``; rerunning the
same config on the same ``run_dir`` resumes from it and loses at most one interval.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from lstpe.nn.attention import bitwise_on
from lstpe.runtime import choose_amp, pick_device, precision_name, tf32_mode
from lstpe.store import results as res
from lstpe.store.history import HISTORY_COLUMNS
from lstpe.store.storage import read_json_object
from lstpe.training.config import (
    BUNDLE_KEYS_FREE,
    TrainConfig,
    load_data,
)
from lstpe.training.engine import LoopOptions, resolve_mode, run_chunk
from lstpe.training.noise import NOISE_DRAW, noise_robustness
from lstpe.training.optim import StackedOptimizer
from lstpe.training.task import (
    LSTTask,
    ModelSlot,
    predict,
    stratified_subset,
)

__all__ = ["EVAL_CHUNK", "TF32", "check_bundle", "chunk_sizes", "sequential_reference", "train",
           "train_many"]

# --------------------------------------------------------------------------- training

TF32: bool = False
"""TF32 matmuls on CUDA while :func:`train` runs (off: the authors' V100 had no TF32, and fp32
is the reference). Set ``lstpe.training.train.TF32 = True`` to trade precision for speed on Ampere
and
newer; the manifest records it, and the global flags are restored after training."""

EVAL_CHUNK = 2048
"""Evaluation puzzles per forward call off CUDA (and on CUDA with ``eval_chunk`` given)."""


def chunk_sizes(cfg: TrainConfig, n_models: int, device: torch.device, mode: str = "eager",
                n_val: int = 0, free_bytes: float | None = None,
                eval_chunk: int | None = None) -> tuple[int, int]:
    """(models per chunk, evaluation puzzles per call) of a run on ``device``.

    Off CUDA (and with no ``free_bytes``): ``cfg.max_models`` (else all models in one chunk)
    and :data:`EVAL_CHUNK`. On CUDA: :func:`lstpe.training.cost.chunk_plan` from the free memory
    (``torch.cuda.mem_get_info``, or ``free_bytes``), ``cfg.max_models`` overriding the
    models per chunk and ``eval_chunk`` the puzzles per call.
    """
    if device.type != "cuda" and free_bytes is None:
        return cfg.max_models or n_models, eval_chunk or EVAL_CHUNK
    from lstpe.training.cost import chunk_plan

    free = free_bytes if free_bytes is not None else torch.cuda.mem_get_info(device)[0]
    plan = chunk_plan(cfg, n_models, free, graph=mode == "graph", n_val=n_val,
                      max_models=cfg.max_models)
    return plan.models, eval_chunk or plan.eval_chunk


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
          splits: dict | None = None) -> res.Run:
    """Train every (PE, seed) of ``cfg``, batched, and return (and optionally save) the results.

    Args:
        cfg: the run's configuration.
        run_dir: if given, checkpoints go to ``run_dir/checkpoints`` (resumed when present) and
            the finished run is saved there (history.csv, manifest.json, artifacts.pt).
        progress: show tqdm progress bars.
        splits: pre-loaded data (``lstpe.lst.load_split`` output) to skip loading.
    Returns:
        :class:`lstpe.store.results.Run` (with ``models`` and ``cfg``). Model ``i`` of the history
        is PE ``cfg.pes[i // len(seeds)]`` with seed ``cfg.seeds[i % len(seeds)]``.
    """
    return train_many([cfg], [run_dir], progress=progress, splits=splits)[0]


def train_many(cfgs: Sequence[TrainConfig], run_dirs: Sequence[str | Path | None],
               progress: bool = True, splits: dict | None = None,
               work_dir: str | Path | None = None, deadline: float | None = None,
               eval_chunk: int | None = None, stop_at: int | None = None,
               hook: Any = None, on_damaged: str = "restart",
               checkpoint_hint: str | None = None,
               tmp_dir: str | Path | None = None) -> list[res.Run]:
    """Train several configurations as one batch of models; save each to its own folder.

    The configurations must agree on everything but PEs and optimizer settings
    (:func:`check_bundle`); each model keeps its own rule, lr and weight decay. Models are
    split into chunks of at most ``max_models`` (memory), trained one chunk after the other.

    Args:
        cfgs: the configurations.
        run_dirs: one folder (or None) per configuration.
        work_dir: where checkpoints go (default: the first run folder's ``checkpoints/``).
        deadline: a ``time.monotonic()`` time by which to stop: training pauses with a
            checkpoint and :class:`lstpe.training.engine.Paused` when another epoch would not fit
            (rerun to resume).
        eval_chunk: evaluation puzzles per forward call (default: :func:`chunk_sizes`).
        stop_at: stop after this epoch with a checkpoint and
            :class:`lstpe.training.engine.Stopped` (a long unit trained in legs).
        hook: an :class:`lstpe.training.engine.EpochHook` watching every epoch (its state is
            checkpointed). With ``stop_at`` or ``hook`` the models must fit one chunk.
        on_damaged: a checkpoint that fails its digest is moved aside and the chunk restarts
            (``"restart"``), or is refused (``"refuse"``: results published from it depend
            on it); :data:`lstpe.training.checkpoint.ON_DAMAGED`.
        checkpoint_hint: what the error of a damaged checkpoint tells the user to do.
        tmp_dir: where temporary files of the work folder's writes go (default: beside each
            file): a folder git tracks is never left with one by a killed process.
    Returns:
        One :class:`lstpe.store.results.Run` per configuration, in order.
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
                                      "lstpe.store.results.load or delete it to retrain")
        device = pick_device(cfgs[0].device)
        with tf32_mode(device, TF32):
            loop = {"on_damaged": on_damaged, "checkpoint_hint": checkpoint_hint,
                    "tmp_dir": Path(tmp_dir) if tmp_dir is not None else None}
            return _train_many(cfgs, dirs, progress, splits, work_dir, deadline, device,
                               eval_chunk, stop_at, hook, loop)


def _layout(ckdir: Path | None, n_models: int, planned: int,
            tmp_dir: Path | None = None) -> int:
    """The models per chunk of a run whose chunks were planned from free memory: the size
    stored in its checkpoint folder if it has one (a resumed run keeps its chunks whatever
    memory is free now), else ``planned`` (stored for the next session).

    Raises:
        lstpe.store.storage.DamagedFileError: ``chunk_layout.json`` is not JSON, not an
            object, or its ``models_per_chunk`` is no whole number from 1 to its ``n_models``
            (naming the file; it is left as it is).
    """
    if ckdir is None:
        return planned
    path = ckdir / "chunk_layout.json"
    if path.exists():
        hint = (f"restore it as it was written (git checkout -- {path}); it must hold "
                '{"n_models": N, "models_per_chunk": K} with 1 <= K <= N')
        stored = read_json_object(path, hint, res.DamagedFileError)
        if stored.get("n_models") == n_models:
            k = stored.get("models_per_chunk")
            if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= n_models:
                raise res.DamagedFileError(f"{path} holds models_per_chunk {json.dumps(k)}, "
                                           f"not a whole number from 1 to {n_models}; {hint}")
            return k
    res.save_json({"n_models": n_models, "models_per_chunk": planned}, path, tmp_dir)
    return planned


def _train_many(cfgs: list[TrainConfig], dirs: list[Path | None], progress: bool,
                splits: dict | None, work_dir: str | Path | None,
                deadline: float | None, device: torch.device,
                eval_chunk: int | None = None, stop_at: int | None = None,
                hook: Any = None, loop: dict[str, Any] | None = None) -> list[res.Run]:
    t0 = time.perf_counter()
    loop = loop or {}
    base = replace(cfgs[0], save_attention=any(c.save_attention for c in cfgs))
    mode = resolve_mode(base.step_mode, device)
    amp, precision_why = choose_amp(device, asked=base.amp)
    splits = splits or load_data(base)
    ckdir = Path(work_dir) if work_dir else (dirs[0] / "checkpoints" if dirs[0] else None)
    if ckdir is not None and base.checkpoint_every:
        res.save_json(cfgs[0].to_dict(), ckdir / "config.json", loop.get("tmp_dir"))
    slots, settings = [], []
    for ci, c in enumerate(cfgs):
        for k, (spec, seed) in enumerate((sp, sd) for sp in c.specs for sd in c.seeds):
            slots.append(ModelSlot(ci, k, spec, seed))
            settings.append(c.setting)
    step, evals = chunk_sizes(base, len(slots), device, mode, len(splits["val"]),
                              eval_chunk=eval_chunk)
    if device.type == "cuda" and not base.max_models:
        step = _layout(ckdir if base.checkpoint_every else None, len(slots), step,
                       loop.get("tmp_dir"))
    chunks = [list(range(i, min(i + step, len(slots)))) for i in range(0, len(slots), step)]
    if (stop_at is not None or hook is not None) and len(chunks) > 1:
        raise ValueError(f"{len(slots)} models need {len(chunks)} chunks here; a run with a "
                         "stop or a hook must fit one (set max_models or train fewer models)")
    sub = {"train": stratified_subset(splits["train"].vectors, base.eval_train_max,
                                       base.split_seed),
           "test": stratified_subset(splits["test"].vectors, base.eval_test_max,
                                      base.split_seed)}
    history: list[dict] = []
    models, arts, earlier = [], [], []
    bar = None
    if progress and len(chunks) > 1:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(chunks), desc=f"{len(slots)} models", unit="chunk")
    for ci, ids in enumerate(chunks):
        task = LSTTask(base, [slots[i] for i in ids], [settings[i] for i in ids], splits, sub,
                       device, eval_chunk=evals)
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
                           f"({len(ids)} models)", deadline=deadline, stop_at=stop_at,
                           hook=hook, **loop)

        def init_state(task=task) -> dict[str, Any]:
            st = {"pe": task.model.pe().detach().cpu()}
            if base.save_attention:
                _, attn0 = predict(task.model, splits["val"].x, return_attention=True)
                st["val_attention"] = attn0.to(torch.float16).cpu()
            return st

        h, state0, segs = run_chunk(task, opt, opts, init_state)
        history += h
        earlier += segs  # the processes that trained this chunk before this one
        models.append(task.model)
        arts.append(_chunk_artifacts(task, state0, splits, base))
        del task, opt, opts, init_state  # the chunk's data, optimizer state and graph pool
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    noise = None
    if base.noise_levels:
        noise = noise_robustness(models, splits["val"], base.noise_levels,
                                 repeats=base.noise_repeats)
    wall = time.perf_counter() - t0
    run_info = {"precision": precision_name(amp), "precision_reason": precision_why,
                "noise_draw": NOISE_DRAW if noise is not None else None,
                "bitwise": dict(zip(("ok", "why"), bitwise_on(device, [s.spec.label
                                                                     for s in slots]),
                                    strict=True)),
                "tf32": bool(TF32) if device.type == "cuda" else None,
                "eval_chunk": evals}
    done = _Bundle(history, models, arts, chunks, slots, splits, device, wall, earlier, mode,
                   noise, run_info)
    return [_finish(done, c, c_i, dirs[c_i]) for c_i, c in enumerate(cfgs)]


def _chunk_artifacts(task: LSTTask, state0: dict, splits: dict, cfg: TrainConfig) -> dict:
    art: dict[str, Any] = {"pe_init": state0["pe"], "pe_final": task.model.pe().detach().cpu()}
    logits, attn = predict(task.model, splits["val"].x, chunk=task.eval_chunk,
                           return_attention=True, amp=cfg.amp)
    art["val_logits"] = logits.cpu()
    if cfg.save_attention:
        art["val_attention"] = attn.to(torch.float16).cpu()
        art["val_attention_init"] = state0["val_attention"]
    return art


@dataclass
class _Bundle:
    """What one batched training of several configurations produced, before it is cut per
    configuration by :func:`_finish`."""

    history: list[dict]
    """Every model's history rows; ``_config`` says whose."""
    models: list
    """The trained batched model of each chunk."""
    arts: list[dict]
    """Per chunk, its artefacts (each a tensor with the chunk's models first)."""
    chunks: list[list[int]]
    """Per chunk, the indices into ``slots`` of its models."""
    slots: list[ModelSlot]
    splits: dict
    device: torch.device
    wall: float
    """Seconds this call took."""
    earlier: list[dict]
    """The segments of earlier processes (a resumed run): ``wall_s`` and, where the checkpoint
    recorded it, the ``git_commit``, ``device`` and ``host`` that trained them."""
    mode: str
    noise: pd.DataFrame | None
    run_info: dict[str, Any]
    """Manifest entries of the whole bundle (precision and why, TF32, evaluation chunk)."""


def _finish(done: _Bundle, cfg: TrainConfig, c_i: int, run_dir: Path | None) -> res.Run:
    """Cut configuration ``c_i``'s rows, artefacts and noise table out of a bundle and save it."""
    history, models, arts, chunks, slots = (done.history, done.models, done.arts, done.chunks,
                                            done.slots)
    splits, noise, earlier = done.splits, done.noise, done.earlier
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
        cfg.to_dict(), done.device, done.wall,
        previous_segments=res.earlier_segments(earlier),
        n_models=len(cfg.pes) * len(cfg.seeds), n_train=len(splits["train"]),
        kind="lst-train", step_mode=done.mode, diverged_models=diverged,
        bundle_models=sum(len(c) for c in chunks), models_per_chunk=max(map(len, chunks)),
        **done.run_info)
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
