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

All state (moments, the step count) lives in tensors on the parameters' device and the update
uses no host synchronisation, so :meth:`StackedOptimizer.step` can be captured in a CUDA graph.
A parameter entry whose gradient is always exactly zero and whose value is zero (a structural
zero of :mod:`lstpe.nn.architecture`) stays exactly zero under every rule.
``tests/test_optim.py`` checks each rule against ``torch.optim`` model by model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

RULES: tuple[str, ...] = ("adam", "adamw", "sgd")


class StackedOptimizer:
    """Per-model Adam / AdamW / SGD over parameters with a leading model axis.

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
        dev = self.params[0].device if self.params else torch.device("cpu")
        f32 = dict(dtype=torch.float32, device=dev)
        self.rules = list(rules)
        self.lr = torch.tensor([float(x) for x in lrs], **f32)
        wd = torch.tensor([float(x) for x in weight_decays], **f32)
        is_sgd = torch.tensor([r == "sgd" for r in rules], device=dev)
        is_adamw = torch.tensor([r == "adamw" for r in rules], device=dev)
        self.l2 = torch.where(is_adamw, torch.zeros_like(wd), wd)
        self.decoupled = torch.where(is_adamw, wd, torch.zeros_like(wd))
        self.is_sgd = is_sgd
        self.any_adam = not all(r == "sgd" for r in rules)
        self.any_sgd = any(r == "sgd" for r in rules)
        self.any_l2 = bool((self.l2 != 0).any())
        self.any_decoupled = bool((self.decoupled != 0).any())
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.step_count = torch.zeros((), **f32)
        self.exp_avg = [torch.zeros_like(p) for p in self.params] if self.any_adam else []
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params] if self.any_adam else []

    @staticmethod
    def _per_model(t: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return t.view(-1, *([1] * (p.dim() - 1)))

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One update of every model by its own rule (no host synchronisation)."""
        self.step_count += 1
        b1, b2 = self.beta1, self.beta2
        bc1 = 1 - b1 ** self.step_count
        bc2_sqrt = (1 - b2 ** self.step_count).sqrt()
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad
            pm = lambda t, p=p: self._per_model(t, p)  # noqa: E731
            if self.any_l2:
                g = g + pm(self.l2) * p
            if self.any_decoupled:
                p.mul_(1 - pm(self.lr * self.decoupled))
            update = torch.zeros_like(p)
            if self.any_adam:
                m, v = self.exp_avg[i], self.exp_avg_sq[i]
                m.lerp_(g, 1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = v.sqrt() / bc2_sqrt + self.eps
                update = pm(self.lr / bc1) * m / denom
            if self.any_sgd:
                sgd = pm(self.lr) * g
                update = torch.where(pm(self.is_sgd), sgd, update) if self.any_adam else sgd
            p.sub_(update)

    def state_dict(self) -> dict:
        return {"step": self.step_count.clone(), "exp_avg": [t.clone() for t in self.exp_avg],
                "exp_avg_sq": [t.clone() for t in self.exp_avg_sq], "rules": self.rules}

    def load_state_dict(self, state: dict) -> None:
        if state.get("rules") != self.rules:
            raise ValueError("optimizer state was saved for other per-model rules")
        self.step_count.copy_(state["step"])
        for dst, src in zip(self.exp_avg + self.exp_avg_sq,
                            state["exp_avg"] + state["exp_avg_sq"], strict=True):
            dst.copy_(src)
