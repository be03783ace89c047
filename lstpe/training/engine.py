"""The one training loop: M stacked models, any task, eager or CUDA-graph steps, resumable.

A *task* (the LST puzzles in :mod:`lstpe.training.train`, masked brain activity in
:mod:`lstpe.brain.train`) supplies the batches, the per-model loss and the evaluation; this
module supplies everything else:

* one :class:`~lstpe.training.optim.StackedOptimizer` with each model's own rule, lr and weight
  decay;
* the step: ``eager`` (the CPU path and the correctness reference), ``compile``
  (``torch.compile`` of the model) or ``graph`` (forward, backward and optimizer captured in
  one CUDA graph per batch shape with static input buffers and replayed every step; CUDA
  only);
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

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from lstpe.runtime import autocast_supported, choose_amp
from lstpe.store import results as res
from lstpe.training.checkpoint import DIGEST_KEY, _load_checkpoint, _meta_key, state_digest
from lstpe.training.optim import StackedOptimizer

STEP_MODES: tuple[str, ...] = ("auto", "eager", "compile", "graph")
"""``auto`` = ``graph`` on CUDA, ``eager`` elsewhere."""


Amp = bool | torch.dtype | None
"""What a run asks of mixed precision: ``True`` (the device's choice,
:func:`lstpe.runtime.choose_amp`), ``False``/None (fp32) or an autocast dtype."""


def amp_dtype(device: torch.device, amp: Amp) -> torch.dtype | None:
    """The autocast dtype of ``amp`` on ``device`` (None: fp32, no autocast)."""
    if amp is None or amp is False:
        return None
    dtype = choose_amp(device)[0] if amp is True else amp
    return dtype if dtype is not None and autocast_supported(device) else None


def autocast(device: torch.device, amp: Amp):
    """Autocast to :func:`amp_dtype` of ``amp`` (a no-op context for fp32, and on devices
    whose torch has no autocast, such as MPS on torch 2.3, which rejects even a disabled one).

    The cast-weight cache is off: CUDA-graph capture requires it (PyTorch's CUDA graphs notes),
    and each weight is used once per forward pass here, so the cache would save nothing.
    """
    dtype = amp_dtype(device, amp)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype, cache_enabled=False)


class LossScaler:
    """Per-model dynamic loss scaling for fp16 autocast, with no host synchronisation.

    ``torch.amp.GradScaler`` keeps one scale and skips the step of *every* model when any
    gradient overflows; with M stacked models one diverged model would stop them all. Here
    model m's loss is multiplied by its own ``scale[m]`` (M,); after backward its gradients
    are divided by it, and a model with a non-finite gradient keeps its weights and Adam
    moments (restored after the joint update; the shared step count still advances) while
    its scale halves; a scale that saw ``growth_interval`` good steps doubles. Everything is
    tensor arithmetic on the device, so a :class:`GraphStep` captures it.
    """

    def __init__(self, n_models: int, device: torch.device, init_scale: float = 2.0**16,
                 growth_interval: int = 2000, min_scale: float = 2.0**-14) -> None:
        self.scale = torch.full((n_models,), float(init_scale), device=device)
        self.good = torch.zeros(n_models, device=device)
        self.growth_interval, self.min_scale = float(growth_interval), float(min_scale)

    def tensors(self) -> list[torch.Tensor]:
        """The scaler's state (M,) tensors: scale and count of good steps."""
        return [self.scale, self.good]

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of the scaled sum of the per-model losses (M,)."""
        (loss.float() * self.scale).sum().backward()

    @torch.no_grad()
    def step(self, opt: StackedOptimizer) -> None:
        """Unscale the gradients, update the models whose gradients are finite, adapt."""
        def pm(t: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
            return t.view(-1, *([1] * (p.dim() - 1)))

        inv = 1.0 / self.scale
        ok = torch.ones_like(self.scale, dtype=torch.bool)
        for p in opt.params:
            if p.grad is not None:
                p.grad.mul_(pm(inv, p))
                ok &= torch.isfinite(p.grad).flatten(1).all(1)
        state = [*opt.params, *opt.exp_avg, *opt.exp_avg_sq]
        saved = [t.clone() for t in state]
        opt.step()
        for t, old in zip(state, saved, strict=True):
            t.copy_(torch.where(pm(ok, t), t, old))
        grow = ok & (self.good + 1 >= self.growth_interval)
        self.good.copy_(torch.where(ok & ~grow, self.good + 1, torch.zeros_like(self.good)))
        self.scale.copy_(torch.where(ok, torch.where(grow, self.scale * 2, self.scale),
                                     (self.scale * 0.5).clamp_min(self.min_scale)))


class Task(Protocol):
    """What the loop needs from a task, for one chunk of M models."""

    model: torch.nn.Module
    n_models: int

    def batches(self, epoch: int) -> Iterator[tuple[int, Any]]:
        """(step, batch) for every optimizer step of an epoch: the LST's batch is an index
        tensor (M, B) on the device, the brain's a pair (indices, masks); only a tensor batch
        can be captured by :class:`GraphStep`."""

    def dropout_keys(self, epoch: int, step: int) -> torch.Tensor | None:
        """(K,) int64 keys of the dropout models, or None."""

    def losses(self, fwd: Callable, batch: Any, keys: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-model mean loss (M,) and per-model minibatch accuracy (M,) (zeros if none)."""

    def evaluate(self, epoch: int, final: bool, running: dict[str, Any] | None
                 ) -> list[dict]:
        """History rows of an evaluation (``running``: the epoch's training metrics)."""


@dataclass
class Running:
    """Per-model training metrics of the current epoch, on the device."""

    loss: torch.Tensor
    acc: torch.Tensor
    batches: torch.Tensor
    nonfinite: torch.Tensor

    @classmethod
    def zeros(cls, M: int, device: torch.device) -> Running:
        z = torch.zeros(M, device=device)
        return cls(z.clone(), z.clone(), torch.zeros((), device=device),
                   torch.zeros(M, dtype=torch.bool, device=device))

    def reset(self) -> None:
        self.loss.zero_()
        self.acc.zero_()
        self.batches.zero_()

    def add(self, loss: torch.Tensor, acc: torch.Tensor) -> None:
        self.loss.add_(loss.detach())
        self.acc.add_(acc.detach())
        self.batches.add_(1)
        self.nonfinite.logical_or_(~torch.isfinite(loss.detach()))

    def means(self) -> dict[str, Any]:
        """Host copies: mean loss, mean minibatch accuracy, non-finite flag per model."""
        n = max(float(self.batches), 1.0)
        return {"loss": (self.loss / n).cpu().numpy(), "accuracy": (self.acc / n).cpu().numpy(),
                "nonfinite": self.nonfinite.cpu().numpy()}


def backward_and_step(loss: torch.Tensor, opt: StackedOptimizer,
                      scaler: LossScaler | None) -> None:
    """Backward of the summed per-model losses (M,) and one optimizer step, through the loss
    scaler when there is one (fp16)."""
    if scaler is None:
        loss.sum().backward()
        opt.step()
    else:
        scaler.backward(loss)
        scaler.step(opt)


class EagerStep:
    """One optimizer step in plain PyTorch (``fwd`` may be a ``torch.compile`` wrapper)."""

    def __init__(self, task: Task, opt: StackedOptimizer, fwd: Callable, running: Running,
                 device: torch.device, amp: Amp,
                 scaler: LossScaler | None = None) -> None:
        self.task, self.opt, self.fwd, self.running = task, opt, fwd, running
        self.device, self.amp = device, amp_dtype(device, amp)
        self.scaler = scaler

    def __call__(self, batch: torch.Tensor, keys: torch.Tensor | None) -> None:
        with autocast(self.device, self.amp):
            loss, acc = self.task.losses(self.fwd, batch, keys)
        self.opt.zero_grad(set_to_none=True)
        backward_and_step(loss, self.opt, self.scaler)
        self.running.add(loss, acc)


class GraphStep:
    """The whole step captured in a CUDA graph per batch shape and replayed.

    Each shape (the full minibatch, and the epoch's last, smaller one: 8100 = 63 x 128 + 36
    puzzles) has its own graph, private memory pool and static buffers for the batch indices
    and dropout keys; each call copies the new ones in and replays that shape's graph. The
    first call of a shape warms up on a side stream and captures; the models and optimizer are
    restored from a snapshot afterwards, so warm-up steps leave no trace. Both captures happen
    in the first epoch a process trains, which :func:`run_chunk` leaves out of its deadline
    estimate.
    """

    def __init__(self, task: Task, opt: StackedOptimizer, running: Running,
                 device: torch.device, amp: Amp, scaler: LossScaler | None = None) -> None:
        if device.type != "cuda":
            raise ValueError(f"step mode 'graph' needs a CUDA device, got {device}")
        self.eager = EagerStep(task, opt, task.model, running, device, amp, scaler)
        self.task, self.opt, self.running, self.device, self.amp = task, opt, running, \
            device, self.eager.amp
        self.scaler = scaler
        self.graphs: dict[tuple[int, ...], tuple[torch.cuda.CUDAGraph, torch.Tensor,
                                                 torch.Tensor | None]] = {}

    def _tensors(self) -> list[torch.Tensor]:
        r = self.running
        extra = self.scaler.tensors() if self.scaler is not None else []
        return [*self.task.model.parameters(), *self.opt.exp_avg, *self.opt.exp_avg_sq,
                self.opt.step_count, r.loss, r.acc, r.batches, r.nonfinite, *extra]

    def _capture(self, batch: torch.Tensor, keys: torch.Tensor | None) -> None:
        static_batch = batch.clone()
        static_keys = keys.clone() if keys is not None else None
        snapshot = [t.detach().clone() for t in self._tensors()]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.eager(static_batch, static_keys)
        torch.cuda.current_stream().wait_stream(side)
        self.opt.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        # capture on the warm-up stream: library handles (cuBLAS/cuBLASLt) created while warming
        # up are then the capture stream's own, and none is created mid-capture
        with torch.cuda.graph(graph, stream=side):
            with autocast(self.device, self.amp):
                loss, acc = self.task.losses(self.task.model, static_batch, static_keys)
            backward_and_step(loss, self.opt, self.scaler)
            self.running.add(loss, acc)
        with torch.no_grad():
            for t, s in zip(self._tensors(), snapshot, strict=True):
                t.copy_(s)
        self.graphs[tuple(batch.shape)] = (graph, static_batch, static_keys)

    def __call__(self, batch: torch.Tensor, keys: torch.Tensor | None) -> None:
        if tuple(batch.shape) not in self.graphs:
            self._capture(batch, keys)
        graph, static_batch, static_keys = self.graphs[tuple(batch.shape)]
        static_batch.copy_(batch, non_blocking=True)
        if static_keys is not None and keys is not None:
            static_keys.copy_(keys, non_blocking=True)
        graph.replay()


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
    allocations) that no later epoch pays, so it would end a lease early."""
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
    step = GraphStep(task, opt, running, device, opts.amp, scaler) if opts.mode == "graph" \
        else EagerStep(task, opt, fwd, running, device, opts.amp, scaler)
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
