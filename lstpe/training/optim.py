r"""One optimizer for M stacked models with per-model rules: Adam, AdamW or SGD.

Every parameter of a batched model has a leading model axis M. Adam, AdamW and plain SGD are
elementwise, so one update over the stacked tensors is M independent optimizers, and each model
may have its own rule, learning rate and weight decay. Per model m with gradient g:

* ``adam`` (``torch.optim.Adam``, L2 weight decay): :math:`g \leftarrow g + \lambda p`, then
  :math:`m_t = \beta_1 m + (1-\beta_1) g`, :math:`v_t = \beta_2 v + (1-\beta_2) g^2`,
  :math:`p \leftarrow p - \frac{\eta}{1-\beta_1^t}\, m_t / (\sqrt{v_t/(1-\beta_2^t)} + \epsilon)`;
* ``adamw`` (``torch.optim.AdamW``): :math:`p \leftarrow p(1 - \eta\lambda)` first, then the
  Adam update without L2 term;
* ``sgd`` (``torch.optim.SGD``, no momentum): :math:`p \leftarrow p - \eta (g + \lambda p)`.

The parameters, their moments and their gradients live in flat per-chunk buffers, so one step
is a fixed handful of whole-buffer operations (15 for Adam, at most 20 with every rule and
decay mixed) whatever the number of models or parameter tensors: on a GPU, where each
operator is a kernel launch, that is what bounds the step of a small chunk
(:mod:`lstpe.training.opcount` counts them; the loop over 57 parameter tensors it replaces
dispatched 589, with the same arithmetic bit for bit). Each model has its own step count,
so models that have trained different numbers of steps (a model resumed at epoch 2800 beside
one starting at 0) share one optimizer, each with its own Adam bias correction. All state
(moments, the step counts) lives in tensors on the parameters' device and the update uses no
host synchronisation, so :meth:`StackedOptimizer.step` can be captured in a CUDA graph.
A parameter entry whose gradient is always exactly zero and whose value is zero (a structural
zero of :mod:`lstpe.nn.architecture`) stays exactly zero under every rule.
``tests/test_optim.py`` checks each rule against ``torch.optim`` model by model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

RULES: tuple[str, ...] = ("adam", "adamw", "sgd")


class StackedOptimizer:
    """Per-model Adam / AdamW / SGD over parameters with a leading model axis, in flat buffers.

    At construction every trainable parameter is moved into one flat fp32 buffer ``flat``
    (N,) = (sum of the parameters' sizes,), parameter after parameter, and becomes a view of
    it (its shape and values unchanged); the Adam moments live in two more such buffers, and
    ``exp_avg[i]`` / ``exp_avg_sq[i]`` are views shaped like parameter i. One step is then a
    handful of whole-buffer operations whatever the number of models or parameters: the
    gradients gathered by one ``cat``, the moments, the bias corrections and the update, each
    one kernel. The per-model learning rates and decays are expanded once to per-element
    constants (N,).

    Args:
        params: parameters of shape (M, ...); those with ``requires_grad=False`` are skipped.
        rules: (M,) rule names from :data:`RULES`.
        lrs: (M,) learning rates (> 0).
        weight_decays: (M,) weight decays (>= 0): L2 for adam and sgd, decoupled for adamw.
        betas, eps: Adam's constants (PyTorch's defaults).
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], rules: Sequence[str],
                 lrs: Sequence[float], weight_decays: Sequence[float],
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.params = [p for p in params if p.requires_grad]
        M = len(rules)
        if not (len(lrs) == len(weight_decays) == M):
            raise ValueError(f"need one rule, lr and weight decay per model, got {len(rules)}, "
                             f"{len(lrs)}, {len(weight_decays)}")
        bad = [r for r in rules if r not in RULES]
        if bad:
            raise ValueError(f"unknown optimizer rule(s) {bad}; valid: {', '.join(RULES)}")
        for p in self.params:
            if p.shape[0] != M:
                raise ValueError(f"parameter of shape {tuple(p.shape)} has no model axis of {M}")
            if p.dtype != torch.float32:
                raise ValueError(f"parameter of dtype {p.dtype}: the flat buffers are fp32")
        dev = self.params[0].device if self.params else torch.device("cpu")
        f32 = dict(dtype=torch.float32, device=dev)
        self.rules = list(rules)
        self.M = M
        self.sizes = [p.numel() for p in self.params]
        self.flat = torch.cat([p.detach().reshape(-1) for p in self.params]) \
            if self.params else torch.zeros(0, **f32)
        for p, view in zip(self.params, self._views(self.flat), strict=True):
            p.data = view  # the parameter now lives in the flat buffer
        per_model = [n // M for n in self.sizes]

        def expand(values: Sequence[float] | torch.Tensor) -> torch.Tensor:
            v = torch.as_tensor(values, **f32)  # (M,) -> (N,), parameter after parameter
            return torch.cat([v.repeat_interleave(k) for k in per_model]) if per_model \
                else torch.zeros(0, **f32)

        lr = [float(x) for x in lrs]
        wd = [float(x) for x in weight_decays]
        self.lr = torch.tensor(lr, **f32)
        adamw = [r == "adamw" for r in rules]
        self.l2 = torch.tensor([0.0 if a else w for a, w in zip(adamw, wd, strict=True)], **f32)
        self.decoupled = torch.tensor([w if a else 0.0 for a, w in zip(adamw, wd, strict=True)],
                                      **f32)
        self.is_sgd = torch.tensor([r == "sgd" for r in rules], device=dev)
        self.any_adam = not all(r == "sgd" for r in rules)
        self.any_sgd = any(r == "sgd" for r in rules)
        self.any_l2 = bool((self.l2 != 0).any())
        self.any_decoupled = bool((self.decoupled != 0).any())
        self.lr_e = expand(self.lr)
        self.l2_e = expand(self.l2) if self.any_l2 else None
        self.keep_e = expand(1 - self.lr * self.decoupled) if self.any_decoupled else None
        self.sgd_e = expand(self.is_sgd.float()).bool() if self.any_sgd and self.any_adam \
            else None
        self.beta1, self.beta2 = betas
        self.betas = torch.tensor(betas, **f32)
        self.eps = eps
        self._patterns: dict[tuple[bool, ...], dict[str, Any]] = {}
        self.step_count = torch.zeros(M, **f32)  # (M,): each model's steps so far
        # the flat buffer in segments of one (parameter, model) each: the model of each
        # segment and its length, to spread a per-model value over the elements in one op
        self.seg_model = torch.arange(M, device=dev).repeat(len(self.params))
        self.seg_len = torch.tensor([k for k in per_model for _ in range(M)],
                                    dtype=torch.int64, device=dev)
        self.uniform = True  # every model at the same step: one bias correction for all
        self.m_flat = torch.zeros_like(self.flat) if self.any_adam else None
        self.v_flat = torch.zeros_like(self.flat) if self.any_adam else None
        self.exp_avg = self._views(self.m_flat) if self.any_adam else []
        self.exp_avg_sq = self._views(self.v_flat) if self.any_adam else []

    def _views(self, buf: torch.Tensor) -> list[torch.Tensor]:
        """``buf`` (N,) cut into views shaped like the parameters."""
        return [v.view(p.shape) for v, p in zip(buf.split(self.sizes), self.params,
                                                strict=True)]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def _pattern(self, missing: tuple[bool, ...]) -> dict[str, Any]:
        """What a step needs for one pattern of parameters without gradients (built once per
        pattern): a zero buffer per such parameter for the ``cat``, and the L2 and decoupled
        decay constants with those parameters' entries switched off."""
        if missing not in self._patterns:
            live = torch.cat([torch.full((n,), not miss, device=self.flat.device)
                              for n, miss in zip(self.sizes, missing, strict=True)])
            self._patterns[missing] = {
                "zeros": [torch.zeros_like(p) if miss else None
                          for p, miss in zip(self.params, missing, strict=True)],
                "l2": self.l2_e * live if self.any_l2 else None,
                "keep": torch.where(live, self.keep_e, 1.0) if self.any_decoupled else None}
        return self._patterns[missing]

    @torch.no_grad()
    def step(self) -> None:
        """One update of every model by its own rule (no host synchronisation).

        A parameter without a gradient in this step counts as a zero gradient with its weight
        decay switched off: that is ``torch.optim``'s skipping it (neither it nor its moments
        change) as long as it never had a gradient, which is how a parameter no model of the
        chunk uses behaves (the relative-PE tables of a chunk without a relative PE).
        """
        if not self.params:
            return
        missing = tuple(p.grad is None for p in self.params)
        pat = self._pattern(missing)
        g = torch.cat([z.reshape(-1) if z is not None else p.grad.reshape(-1)
                       for p, z in zip(self.params, pat["zeros"], strict=True)])
        self.step_count += 1
        p = self.flat
        if self.any_l2:
            g.add_(pat["l2"] * p)  # not addcmul_: the same rounding as torch.optim's
        if self.any_decoupled:
            p.mul_(pat["keep"])
        if self.any_adam:
            if self.uniform:  # (2,): 1 - beta1^t, 1 - beta2^t
                bc = 1 - self.betas ** self.step_count[0]
            else:  # (2, M) per model, spread over each model's elements: (2, N)
                bc = (1 - self.betas[:, None] ** self.step_count)[:, self.seg_model]
                bc = bc.repeat_interleave(self.seg_len, dim=1, output_size=p.numel())
            m, v = self.m_flat, self.v_flat
            m.lerp_(g, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            denom = v.sqrt().div_(bc[1].sqrt()).add_(self.eps)
            update = (self.lr_e / bc[0]).mul_(m).div_(denom)
            if self.sgd_e is not None:
                update = torch.where(self.sgd_e, self.lr_e * g, update)
        else:
            update = self.lr_e * g
        p.sub_(update)

    def set_steps(self, steps: Sequence[int] | torch.Tensor) -> None:
        """Each model's step count (M,) so far: models resumed at different epochs train on
        in one optimizer, each with its own bias correction (read on the host here, once;
        not inside a captured step)."""
        t = torch.as_tensor(steps, dtype=torch.float32).reshape(-1)
        if t.numel() != self.M:
            raise ValueError(f"{t.numel()} step counts for {self.M} models")
        self.step_count.copy_(t.to(self.step_count.device))
        self.uniform = bool((t == t[0]).all()) if self.M else True

    @torch.no_grad()
    def adopt(self, j: int, other: StackedOptimizer, i: int) -> None:
        """Model ``j`` becomes model ``i`` of ``other`` (another chunk's optimizer over the same
        parameter layout): its parameters, moments and step count, so that it trains on here
        as it would have there (a unit resumed beside others)."""
        if len(other.params) != len(self.params) or any(
                a.shape[1:] != b.shape[1:] for a, b in zip(self.params, other.params,
                                                           strict=True)):
            raise ValueError("the two optimizers' parameters differ in number or shape")
        if other.rules[i] != self.rules[j]:
            raise ValueError(f"model {i} uses {other.rules[i]}, model {j} here "
                             f"{self.rules[j]}")
        for a, b in zip(self.params, other.params, strict=True):
            a[j].copy_(b[i])
        if self.any_adam and other.any_adam:
            for a, b in zip(self.exp_avg + self.exp_avg_sq, other.exp_avg + other.exp_avg_sq,
                            strict=True):
                a[j].copy_(b[i])
        steps = self.step_count.clone().cpu()
        steps[j] = float(other.step_count[i])
        self.set_steps(steps)

    def state_dict(self) -> dict:
        return {"step": self.step_count.clone(), "exp_avg": [t.clone() for t in self.exp_avg],
                "exp_avg_sq": [t.clone() for t in self.exp_avg_sq], "rules": self.rules}

    def load_state_dict(self, state: dict) -> None:
        """Load :meth:`state_dict`'s state; a step count saved as one number (before the
        counts were per model) counts for every model."""
        if state.get("rules") != self.rules:
            raise ValueError("optimizer state was saved for other per-model rules")
        self.set_steps(torch.as_tensor(state["step"]).expand(self.M))
        for dst, src in zip(self.exp_avg + self.exp_avg_sq,
                            state["exp_avg"] + state["exp_avg_sq"], strict=True):
            dst.copy_(src)
