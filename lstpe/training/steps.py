"""The training steps of the engine (:mod:`lstpe.training.engine`): what one optimizer step of
M stacked models is, eager or captured in CUDA graphs, and what it needs.

* :class:`Task`: what the loop needs from a task (batches, per-model losses, evaluation);
* :class:`Running`: the epoch's per-model training metrics, on the device;
* :func:`autocast` and :func:`amp_dtype`: mixed precision by device; :class:`LossScaler`:
  per-model dynamic loss scaling for fp16;
* :class:`EagerStep` (the CPU path and the correctness reference) and :class:`GraphStep` (the
  whole step captured in one CUDA graph per batch shape). The compiled whole step,
  :class:`lstpe.training.compiled.CompiledStep`, builds on these.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from lstpe.runtime import autocast_supported, choose_amp
from lstpe.training.optim import StackedOptimizer

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


GraphEntry = tuple[Any, torch.Tensor, torch.Tensor | None]
"""A captured step: (the ``torch.cuda.CUDAGraph``, its static batch, its static keys)."""


def capture_graph(warm: Callable[[torch.Tensor, torch.Tensor | None], None],
                  body: Callable[[torch.Tensor, torch.Tensor | None], None],
                  state: Callable[[], list[torch.Tensor]], batch: torch.Tensor,
                  keys: torch.Tensor | None, before: Callable[[], None] | None = None
                  ) -> GraphEntry:
    """One training step captured as a CUDA graph (:class:`GraphStep` and the compiled step).

    ``warm`` runs 3 times on a side stream (library handles, compiled kernels), then
    ``before``, then ``body`` is captured on that same stream, so that the cuBLAS/cuBLASLt
    handles created while warming up are the capture stream's own and none is created
    mid-capture; every tensor of ``state()`` is then restored to its value before the warm-up.
    ``batch`` (B, 16, 5) and ``keys`` are copied into the static inputs the graph reads;
    :func:`replay_graph` fills them and replays it."""
    static_batch = batch.clone()
    static_keys = keys.clone() if keys is not None else None
    snapshot = [t.detach().clone() for t in state()]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            warm(static_batch, static_keys)
    torch.cuda.current_stream().wait_stream(side)
    if before is not None:
        before()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        body(static_batch, static_keys)
    with torch.no_grad():
        for t, s in zip(state(), snapshot, strict=True):
            t.copy_(s)
    return graph, static_batch, static_keys


def replay_graph(entry: GraphEntry, batch: torch.Tensor, keys: torch.Tensor | None) -> None:
    """One step of a captured graph on ``batch`` and ``keys`` (:func:`capture_graph`)."""
    graph, static_batch, static_keys = entry
    static_batch.copy_(batch, non_blocking=True)
    if static_keys is not None and keys is not None:
        static_keys.copy_(keys, non_blocking=True)
    graph.replay()


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

    def _captured(self, batch: torch.Tensor, keys: torch.Tensor | None) -> None:
        """The step the graph records: forward, backward and the update, no ``zero_grad``."""
        with autocast(self.device, self.amp):
            loss, acc = self.task.losses(self.task.model, batch, keys)
        backward_and_step(loss, self.opt, self.scaler)
        self.running.add(loss, acc)

    def _capture(self, batch: torch.Tensor, keys: torch.Tensor | None) -> None:
        self.graphs[tuple(batch.shape)] = capture_graph(
            self.eager, self._captured, self._tensors, batch, keys,
            before=lambda: self.opt.zero_grad(set_to_none=True))

    def __call__(self, batch: torch.Tensor, keys: torch.Tensor | None) -> None:
        if tuple(batch.shape) not in self.graphs:
            self._capture(batch, keys)
        replay_graph(self.graphs[tuple(batch.shape)], batch, keys)
