"""The compiled whole step: forward, backward and the optimizer update in one inductor graph.

Step mode ``compiled`` (:class:`CompiledStep`). One function of the flat buffers of the chunk's
:class:`~lstpe.training.optim.StackedOptimizer` does the whole training step:

* the parameters are views cut from the flat parameter buffer ``flat`` (N,) *inside* the
  function and handed to the model with ``torch.func.functional_call``; the gradient is
  ``torch.func.grad`` of the summed per-model losses with respect to ``flat`` itself, so no
  ``backward()`` (a graph break) and no ``cat`` of per-parameter gradients;
* the update is :func:`update`, a pure function: parameters, gradient, Adam moments and
  per-model step counts in, their new values out (the same arithmetic as
  :meth:`StackedOptimizer.step`, every rule, decay and per-model bias correction);
* the new values and the epoch's running metrics are written back into the live buffers with
  ``copy_`` at the end of the function, so the model's parameters (views of ``flat``) see them
  and nothing of the traced function ever touches a view parameter.

``torch.compile(fullgraph=True, dynamic=False)`` compiles it: any graph break raises, and
each batch shape (the full minibatch, the epoch's last smaller one) gets its own static graph.
On CUDA each shape's compiled function is then captured in a CUDA graph and replayed, as
:class:`~lstpe.training.steps.GraphStep` does with the eager step. Equality with the eager
step, graph breaks and the optimizer's place in the graph: ``tests/test_compiled_step.py``.

fp16 (the per-model loss scaler of old GPUs) is not compiled: that chunk keeps step mode
``graph``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lstpe.training.optim import StackedOptimizer
from lstpe.training.steps import (
    Amp,
    LossScaler,
    Running,
    Task,
    amp_dtype,
    autocast,
    capture_graph,
    replay_graph,
)


@dataclass
class UpdateConsts:
    """The per-element constants of one optimizer over N flat elements (for :func:`update`).

    ``lr`` (N,); ``l2`` (N,) or None (L2 decay, 0 where a parameter has no gradient);
    ``keep`` (N,) or None (``1 - lr * decoupled decay``, 1 where no gradient); ``sgd`` (N,)
    bool or None (where a chunk mixes SGD with Adam); ``elem_model`` (N,) int64: the model of
    each element (per-model bias corrections); ``betas`` (2,) and each as a number
    (``beta1``, ``beta2``); ``eps``; ``adam``: any Adam model in the chunk.
    """

    lr: torch.Tensor
    l2: torch.Tensor | None
    keep: torch.Tensor | None
    sgd: torch.Tensor | None
    elem_model: torch.Tensor
    betas: torch.Tensor
    beta1: float
    beta2: float
    eps: float
    adam: bool


def consts_of(opt: StackedOptimizer, missing: tuple[bool, ...]) -> UpdateConsts:
    """:class:`UpdateConsts` of ``opt`` for a pattern of parameters without a gradient
    (``missing``, one flag per parameter): their decay switched off, as
    :meth:`StackedOptimizer.step` does."""
    pat = opt._pattern(missing)
    elem = opt.seg_model.repeat_interleave(opt.seg_len, output_size=opt.flat.numel())
    return UpdateConsts(opt.lr_e, pat["l2"], pat["keep"], opt.sgd_e, elem, opt.betas,
                        float(opt.beta1), float(opt.beta2), float(opt.eps), opt.any_adam)


def update(p: torch.Tensor, g: torch.Tensor, m: torch.Tensor | None, v: torch.Tensor | None,
           steps: torch.Tensor, c: UpdateConsts, uniform: bool
           ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor]:
    """One optimizer step as a pure function (:mod:`lstpe.training.optim`'s rules).

    Args:
        p, g: parameters and their gradient, (N,) each.
        m, v: Adam's moments (N,), or None for a chunk of SGD only.
        steps: (M,) steps each model has taken so far.
        c: the optimizer's constants.
        uniform: every model at the same step (one bias correction for all).
    Returns:
        new (p, m, v, steps).
    """
    steps = steps + 1
    if c.l2 is not None:
        g = g + c.l2 * p
    if c.keep is not None:
        p = p * c.keep
    if c.adam and m is not None and v is not None:
        if uniform:
            bc = 1 - c.betas ** steps[0]  # (2,)
            bc1, bc2 = bc[0], bc[1]
        else:  # (2, M) gathered to every element: (N,) each
            bc = 1 - c.betas[:, None] ** steps
            bc1, bc2 = bc[0][c.elem_model], bc[1][c.elem_model]
        b1, b2 = c.beta1, c.beta2
        m = m + (g - m) * (1 - b1)
        v = v * b2 + g * g * (1 - b2)
        denom = v.sqrt() / bc2.sqrt() + c.eps
        step = c.lr / bc1 * m / denom
        if c.sgd is not None:
            step = torch.where(c.sgd, c.lr * g, step)
    else:
        step = c.lr * g
    return p - step, m, v, steps


class CompiledStep:
    """One optimizer step as one compiled function (module docstring); a CUDA graph of it per
    batch shape on CUDA (``graph`` None: on CUDA only)."""

    def __init__(self, task: Task, opt: StackedOptimizer, running: Running,
                 device: torch.device, amp: Amp, scaler: LossScaler | None = None,
                 graph: bool | None = None) -> None:
        if scaler is not None:
            raise ValueError("step mode 'compiled' does not compile fp16's loss scaler: train "
                             "an fp16 chunk with step mode 'graph' or 'eager'")
        self.task, self.opt, self.running, self.device = task, opt, running, device
        self.amp = amp_dtype(device, amp)
        self.graph = device.type == "cuda" if graph is None else graph
        if self.graph and device.type != "cuda":
            raise ValueError(f"a CUDA graph of the compiled step needs CUDA, got {device}")
        names = {id(p): n for n, p in task.model.named_parameters()}
        self.names = [names[id(p)] for p in opt.params]
        self.shapes = [tuple(p.shape) for p in opt.params]
        self.consts: UpdateConsts | None = None
        self.fn = torch.compile(self._step, backend="inductor", fullgraph=True, dynamic=False)
        self.graphs: dict[tuple[int, ...], tuple[Any, torch.Tensor, torch.Tensor | None]] = {}
        self.compile_s = 0.0
        """Seconds spent in calls that compiled (the first of each batch shape)."""
        self._seen: set[tuple[int, ...]] = set()

    # ------------------------------------------------------------------ the traced function

    def loss_fn(self, flat: torch.Tensor, batch: torch.Tensor, keys: torch.Tensor | None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """The summed per-model loss of parameters ``flat`` (N,), and (loss (M,), acc (M,))."""
        views = [t.view(s) for t, s in zip(flat.split(self.opt.sizes), self.shapes,
                                           strict=True)]
        params = dict(zip(self.names, views, strict=True))
        model = self.task.model

        def fwd(x: torch.Tensor, **kw: Any) -> torch.Tensor:
            return torch.func.functional_call(model, params, (x,), kw)

        with autocast(self.device, self.amp):
            loss, acc = self.task.losses(fwd, batch, keys)
        return loss.sum(), (loss.detach(), acc.detach())

    def _step(self, batch: torch.Tensor, keys: torch.Tensor | None) -> None:
        opt, r, c = self.opt, self.running, self.consts
        assert c is not None
        flat = opt.flat
        g, (loss, acc) = torch.func.grad(self.loss_fn, has_aux=True)(flat, batch, keys)
        p, m, v, steps = update(flat, g, opt.m_flat, opt.v_flat, opt.step_count, c,
                                opt.uniform)
        with torch.no_grad():
            flat.copy_(p)
            if m is not None and v is not None and opt.m_flat is not None \
                    and opt.v_flat is not None:
                opt.m_flat.copy_(m)
                opt.v_flat.copy_(v)
            opt.step_count.copy_(steps)
            r.loss.add_(loss)
            r.acc.add_(acc)
            r.batches.add_(1)
            r.nonfinite.logical_or_(~torch.isfinite(loss))

    # ------------------------------------------------------------------ calling it

    def missing(self, batch: torch.Tensor, keys: torch.Tensor | None) -> tuple[bool, ...]:
        """Which parameters get no gradient (an eager forward and backward; nothing
        changes)."""
        with autocast(self.device, self.amp):
            loss, _ = self.task.losses(self.task.model, batch, keys)
        grads = torch.autograd.grad(loss.sum(), self.opt.params, allow_unused=True)
        return tuple(gr is None for gr in grads)

    def _tensors(self) -> list[torch.Tensor]:
        opt, r = self.opt, self.running
        extra = [opt.m_flat, opt.v_flat] if opt.m_flat is not None else []
        return [opt.flat, *extra, opt.step_count, r.loss, r.acc, r.batches, r.nonfinite]

    def __call__(self, batch: torch.Tensor, keys: torch.Tensor | None) -> None:
        shape = tuple(batch.shape)
        if self.consts is None:
            self.consts = consts_of(self.opt, self.missing(batch, keys))
        if shape not in self._seen:
            t0 = time.perf_counter()
            self._seen.add(shape)
            if self.graph:
                self.graphs[shape] = capture_graph(self.fn, self.fn, self._tensors, batch,
                                                   keys)
            else:
                self.fn(batch, keys)
                self.compile_s += time.perf_counter() - t0
                return
            self.compile_s += time.perf_counter() - t0
        if self.graph:
            replay_graph(self.graphs[shape], batch, keys)
        else:
            self.fn(batch, keys)


def explain(step: CompiledStep, batch: torch.Tensor, keys: torch.Tensor | None) -> Any:
    """``torch._dynamo.explain`` of the step's function on one batch (it runs the step once:
    the state moves by one step)."""
    import torch._dynamo

    if step.consts is None:
        step.consts = consts_of(step.opt, step.missing(batch, keys))
    return torch._dynamo.explain(step._step)(batch, keys)


def folder_bytes(path: Path | None) -> int:
    """Bytes of the files under ``path`` (0 where it is absent)."""
    if path is None or not path.is_dir():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


StepFactory = Callable[..., Callable[[torch.Tensor, torch.Tensor | None], None]]


def wrapper_sources(since: int = 0) -> list[str]:
    """Sources of the wrapper modules inductor has loaded in this process, from the
    ``since``-th on (also the ones a cache hit loads: :class:`PyCodeCache` keeps every one)."""
    from torch._inductor.codecache import PyCodeCache

    out = []
    for mod in PyCodeCache.modules[since:]:
        path = getattr(mod, "__file__", None)
        if path and Path(path).is_file():
            out.append(Path(path).read_text())
    return out


def kernel_calls(source: str) -> dict[str, int]:
    """Kernels one call of an inductor wrapper launches, from its ``call`` function: fused
    kernels it generated (``cpp_fused_*`` on the CPU, ``triton_*`` on CUDA) and library
    kernels (``extern_kernels.*``: matmuls), each call site counted once."""
    import re

    body = source.split("def call(", 1)[-1].split("\ndef ", 1)[0]
    fused = len(re.findall(r"\b(?:cpp_fused_\w+|triton_\w+\.run)\(", body))
    extern = len(re.findall(r"\bextern_kernels\.\w+\(", body))
    return {"fused": fused, "extern": extern, "total": fused + extern}
