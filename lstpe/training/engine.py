"""The one training loop: M stacked models, any task, eager or CUDA-graph steps, resumable.

A *task* (the LST puzzles in :mod:`lstpe.training.train`, masked brain activity in
:mod:`lstpe.brain.train`) supplies the batches, the per-model loss and the evaluation; this
module supplies everything else:

* one :class:`~lstpe.training.optim.StackedOptimizer` with each model's own rule, lr and weight
  decay;
* the step: ``eager`` (the CPU path and the correctness reference), ``compile``
  (``torch.compile`` of the model) or ``graph`` (forward, backward and optimizer captured in
  one CUDA graph per batch shape with static input buffers and replayed every step; CUDA
  only) or ``compiled`` (forward, backward and optimizer compiled as one inductor graph, under
  a CUDA graph on CUDA: :mod:`lstpe.training.compiled`);
* running training metrics accumulated on the device (no host synchronisation inside an
  epoch): mean loss and mean minibatch accuracy per model in train mode (the authors'
  training-accuracy measure), and a per-model flag for a non-finite loss (divergence);
* checkpoints every ``checkpoint_every`` epochs, written atomically, resumed exactly (their
  digest and loading: :mod:`lstpe.training.checkpoint`);
* mixed precision when asked, by device (:func:`lstpe.runtime.choose_amp`): bf16 autocast on
  CUDA capability >= 8.0 and on CPUs with bf16 instructions, fp16 autocast with per-model
  dynamic loss scaling (:class:`LossScaler`) on older CUDA GPUs (T4, V100), fp32 elsewhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from lstpe.store import results as res
from lstpe.training.checkpoint import DIGEST_KEY, _load_checkpoint, _meta_key, state_digest
from lstpe.training.compiled import CompiledStep
from lstpe.training.optim import StackedOptimizer
from lstpe.training.steps import (  # noqa: F401 (the engine's names, re-exported)
    Amp,
    EagerStep,
    GraphStep,
    LossScaler,
    Running,
    Task,
    amp_dtype,
    autocast,
    backward_and_step,
)

STEP_MODES: tuple[str, ...] = ("auto", "eager", "compile", "graph", "compiled")
"""``auto`` = ``graph`` on CUDA, ``eager`` elsewhere; ``compiled``: the whole step (forward,
backward, optimizer) compiled by inductor, under a CUDA graph on CUDA
(:class:`lstpe.training.compiled.CompiledStep`)."""



def resolve_mode(mode: str, device: torch.device) -> str:
    """The step mode actually used on ``device`` (``auto`` -> graph on CUDA, else eager)."""
    if mode not in STEP_MODES:
        raise ValueError(f"unknown step mode {mode!r}; valid: {', '.join(STEP_MODES)}")
    if mode == "auto":
        return "graph" if device.type == "cuda" else "eager"
    if mode == "graph" and device.type != "cuda":
        raise ValueError(f"step mode 'graph' needs CUDA; device is {device}")
    return mode


def epoch_s(first_s: float, longest: float) -> float:
    """The seconds a deadline must leave for one more epoch: the longest epoch timed after the
    first this process trained, or that first one while it is the only one. The first holds
    one-time costs (a CUDA graph's captures, a ``torch.compile``, the allocator's first
    allocations) that no later epoch pays, so it would end a short run early."""
    return longest if longest > 0 else first_s


class Paused(RuntimeError):
    """Training stopped before its time budget ran out; the checkpoint holds the progress."""


class Stopped(Paused):
    """Training stopped where it was asked to (``LoopOptions.stop_at``), short of its
    ``epochs``; the checkpoint holds the progress and a later call with a later ``stop_at``
    (or none) continues the same trajectory."""


class EpochHook(Protocol):
    """Something that watches training (e.g. PE snapshots of a long unit): called after each
    epoch's evaluation with the model in eval mode; its state is checkpointed with the run's.

    It must not touch a random generator or the model's weights: the trajectory is the same
    with or without it.
    """

    def after_epoch(self, epoch: int, model: Any, history: list[dict]) -> None: ...

    def state(self) -> dict[str, Any]: ...

    def load(self, state: dict[str, Any]) -> None: ...


@dataclass
class LoopOptions:
    """How a chunk is trained (the parts of a config the loop reads).

    ``deadline`` (a ``time.monotonic()`` value): stop with :class:`Paused` after the epoch
    that would leave too little time for another one, writing a checkpoint first (needs
    ``checkpoint``), so a command with a hard time limit ends cleanly and the next resumes.
    """

    epochs: int
    schedule: set[int]
    device: torch.device
    amp: Amp = False
    mode: str = "eager"
    checkpoint: Path | None = None
    checkpoint_every: int = 0
    checkpoint_meta: dict[str, Any] = field(default_factory=dict)
    progress: bool = False
    desc: str = ""
    deadline: float | None = None
    stop_at: int | None = None
    """Stop after this epoch (< ``epochs``) with a checkpoint and :class:`Stopped`."""
    hook: EpochHook | None = None
    on_damaged: str = "restart"
    """A checkpoint that fails its digest: one of
    :data:`lstpe.training.checkpoint.ON_DAMAGED`."""
    checkpoint_hint: str | None = None
    """What to do about a damaged checkpoint (default: delete it to restart the run)."""
    tmp_dir: Path | None = None
    """Where the checkpoint's temporary file is written before its rename (default: beside
    it; a folder git tracks wants one a killed write cannot litter)."""


def run_chunk(task: Task, opt: StackedOptimizer, opts: LoopOptions,
              init_state: Callable[[], dict[str, Any]]) -> tuple[list[dict], dict[str, Any],
                                                                  list[dict]]:
    """Train one chunk of models for ``opts.epochs`` epochs (resuming from its checkpoint).

    Args:
        task: batches, losses and evaluation of the chunk's models.
        opt: their optimizer.
        opts: epochs, evaluation schedule, device, step mode, checkpointing, progress.
        init_state: called once before the first step (not on resume): what to remember of
            the models at initialisation (e.g. their PEs); it is checkpointed.
    Returns:
        history rows, the init state, and the training segments of earlier (interrupted)
        sessions of this chunk (``{"wall_s", "device", "git_commit", "host",
        "checkpointed_at"}`` each: :func:`lstpe.store.results.process_record`; ``wall_s``
        alone from checkpoints written before those were recorded).
    """
    model, device = task.model, opts.device
    running = Running.zeros(task.n_models, device)
    scaler = LossScaler(task.n_models, device) \
        if amp_dtype(device, opts.amp) == torch.float16 else None
    history: list[dict] = []
    start, state0, segments = 0, {}, []
    ckpt = opts.checkpoint
    state = _load_checkpoint(ckpt, device, opts.on_damaged, opts.checkpoint_hint) \
        if ckpt is not None and ckpt.exists() else None
    if state is not None:
        if _meta_key(state.get("meta")) != _meta_key(opts.checkpoint_meta):
            raise ValueError(f"checkpoint {ckpt} was written by a different configuration; "
                             "use a new run folder or delete the checkpoint to restart")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        running.nonfinite.copy_(state["nonfinite"].to(device))
        if scaler is not None and "scaler" in state:
            for t, v in zip(scaler.tensors(), state["scaler"], strict=True):
                t.copy_(v.to(device))
        history, start, state0 = state["history"], state["epoch"], state["init"]
        if opts.hook is not None:
            opts.hook.load(state.get("hook", {}))
        segments = [*state.get("segments", []), {"wall_s": float(state.get("wall_s", 0.0)),
                                                 **state.get("process", {})}]
    if start == 0:
        state0 = init_state()
        model.eval()
        history += task.evaluate(0, opts.epochs == 0, None)
        if opts.hook is not None:
            opts.hook.after_epoch(0, model, history)
    t0, process = time.perf_counter(), res.process_record(device) if ckpt is not None else {}
    fwd = torch.compile(model) if opts.mode == "compile" else model
    step: Callable[[torch.Tensor, torch.Tensor | None], None]
    if opts.mode == "compiled":
        step = CompiledStep(task, opt, running, device, opts.amp, scaler)
    elif opts.mode == "graph":
        step = GraphStep(task, opt, running, device, opts.amp, scaler)
    else:
        step = EagerStep(task, opt, fwd, running, device, opts.amp, scaler)
    epochs: Any = range(start + 1, opts.epochs + 1)
    if opts.progress:
        from tqdm.auto import tqdm

        epochs = tqdm(epochs, desc=opts.desc, initial=start, total=opts.epochs, leave=False)
    first_s, longest = 0.0, 0.0  # the first epoch timed here; the longest of the others
    for epoch in epochs:
        t_epoch = time.monotonic()
        model.train()
        running.reset()
        for s, batch in task.batches(epoch):
            step(batch, task.dropout_keys(epoch, s))
        if epoch in opts.schedule:
            model.eval()
            history += task.evaluate(epoch, epoch == opts.epochs, running.means())
        if opts.hook is not None:
            model.eval()
            opts.hook.after_epoch(epoch, model, history)
        if epoch == start + 1:
            first_s = time.monotonic() - t_epoch
        else:
            longest = max(longest, time.monotonic() - t_epoch)
        stop = opts.stop_at is not None and epoch == opts.stop_at < opts.epochs
        pause = stop or (opts.deadline is not None and epoch < opts.epochs
                         and time.monotonic() + 1.5 * epoch_s(first_s, longest) > opts.deadline)
        if ckpt is not None and (pause or opts.checkpoint_every and (
                epoch % opts.checkpoint_every == 0 or epoch == opts.epochs)):
            state = {"meta": opts.checkpoint_meta, "epoch": epoch,
                     "model": model.state_dict(), "opt": opt.state_dict(),
                     "nonfinite": running.nonfinite.cpu(), "history": history,
                     "init": state0, "segments": segments, "wall_s": time.perf_counter() - t0,
                     "process": res.checkpoint_record(process)}
            if scaler is not None:
                state["scaler"] = [t.cpu() for t in scaler.tensors()]
            if opts.hook is not None:
                state["hook"] = opts.hook.state()
            res.save_torch({**state, DIGEST_KEY: state_digest(state)}, ckpt, opts.tmp_dir)
        if pause:
            if ckpt is None:
                raise ValueError("a deadline needs a checkpoint path to resume from")
            if stop:
                raise Stopped(f"stopped after epoch {epoch} of {opts.epochs} as asked "
                              f"({opts.desc}); rerun with a later stop to continue from {ckpt}")
            raise Paused(f"paused after epoch {epoch} of {opts.epochs} ({opts.desc}): the time "
                         f"budget ends before another epoch; rerun to resume from {ckpt}")
    model.eval()
    opt.zero_grad(set_to_none=True)  # the last step's gradients: not needed any more
    return history, state0, segments
