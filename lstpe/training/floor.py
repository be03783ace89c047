"""This machine's matmul floor: the matmuls of a training step at the model's own shapes, timed.

:func:`step_gemms` lists the batched matmuls (GEMMs) of one training step of M stacked models,
forward and backward, from the ``ModelConfig`` and the batch size; :func:`measure_floor` times
each with ``torch.bmm`` (best of several repeats) and turns the achieved GFLOP/s into the
*floor* in model-epochs/s: the rate training would reach if it were nothing but these matmuls.
``benchmarks/train_throughput.py`` reports every engine as a fraction of it, and the campaign
(:mod:`lstpe.campaign.scheduler`) records it beside each chunk's measured rate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from lstpe.nn.architecture import ModelConfig
from lstpe.training.cost import flops_per_model_epoch

FLOOR_REPEATS = 5
"""Timings per GEMM shape of the floor; the best (shortest) counts."""

def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


# --------------------------------------------------------------------------- the floor


@dataclass(frozen=True)
class Gemm:
    """One batched matmul of a training step: ``batch`` products (m x k) @ (k x n).

    ``kind`` is ``fwd`` (activation @ weight), ``dgrad`` (grad-output @ weight^T, the
    backward's grad-input) or ``wgrad`` (activation^T @ grad-output, its grad-weight); m, k, n
    are those of the forward product, so every kind has ``2 batch m k n`` FLOPs. ``count``: how
    often the step runs it (once per block for the blocks' GEMMs).
    """

    name: str
    kind: str
    batch: int
    m: int
    k: int
    n: int
    count: int

    @property
    def flops(self) -> int:
        """FLOPs of all ``count`` calls in one step."""
        return 2 * self.batch * self.m * self.k * self.n * self.count


def step_gemms(cfg: ModelConfig, batch_size: int, models: int,
               last_token_only: bool = True) -> list[Gemm]:
    """The matmuls of one training step of ``models`` stacked models on batches of
    ``batch_size`` puzzles, at the shapes of ``cfg``, forward and backward.

    Per block: q/k/v (M, B n, d) @ (d, 3d); scores and mixing (M B H, n, d_h) @ (d_h, n) and
    (M B H, n, n) @ (n, d_h); output projection (d, d), fc1 (d, r d), fc2 (r d, d). Plus the
    embedding (M, B n, n_inputs) @ (n_inputs, d) and the read-out (M, B, d) @ (d, n_classes).
    With ``last_token_only`` (what the engine computes) the last block's output projection and
    MLP take the read-out token alone (M, B, .). Each forward GEMM comes with its grad-input
    and grad-weight GEMMs, so the FLOPs are 3x the forward's, as
    :func:`lstpe.training.cost.flops_per_model_epoch` counts them.
    """
    M, B = models, batch_size
    d, n, H, dh = cfg.d_model, cfg.n_tokens, cfg.n_heads, cfg.d_head
    f, L = cfg.d_model * cfg.mlp_ratio, cfg.n_layers
    tokens = B * n
    last = 1 if last_token_only else 0
    fwd: list[tuple[str, int, int, int, int, int]] = [
        ("embed", M, tokens, cfg.n_inputs, d, 1),
        ("qkv", M, tokens, d, 3 * d, L),
        ("scores", M * B * H, n, dh, n, L),
        ("mix", M * B * H, n, n, dh, L),
        ("out", M, tokens, d, d, L - last),
        ("fc1", M, tokens, d, f, L - last),
        ("fc2", M, tokens, f, d, L - last),
    ]
    if last:
        fwd += [("out last", M, B, d, d, 1), ("fc1 last", M, B, d, f, 1),
                ("fc2 last", M, B, f, d, 1)]
    fwd.append(("head", M, B, d, cfg.n_classes, 1))
    return [Gemm(name, kind, b, m, k, nn, c) for name, b, m, k, nn, c in fwd if c > 0
            for kind in ("fwd", "dgrad", "wgrad")]


def _gemm_fn(g: Gemm, device: torch.device) -> Callable[[], torch.Tensor]:
    """One call of ``g`` with fp32 operands laid out as autograd has them (transposed views)."""
    b, m, k, n = g.batch, g.m, g.k, g.n
    gen = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(device)

    if g.kind == "fwd":
        a, w = rand(b, m, k), rand(b, k, n)
        return lambda: torch.bmm(a, w)
    if g.kind == "dgrad":
        dy, w = rand(b, m, n), rand(b, k, n)
        return lambda: torch.bmm(dy, w.transpose(1, 2))
    if g.kind == "wgrad":
        a, dy = rand(b, m, k), rand(b, m, n)
        return lambda: torch.bmm(a.transpose(1, 2), dy)
    raise ValueError(f"unknown GEMM kind {g.kind!r}")


def _best_seconds(fn: Callable[[], object], device: torch.device, repeats: int,
                  min_block_s: float = 2e-3) -> float:
    """Shortest seconds per call of ``fn`` over ``repeats`` timed blocks, after one untimed
    call; each block repeats the call enough times to last about ``min_block_s``."""
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    inner = max(1, min(1000, math.ceil(min_block_s / max(time.perf_counter() - t0, 1e-7))))
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(device)
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def measure_floor(cfg: ModelConfig, batch_size: int, models: int, n_train: int,
                  device: torch.device, repeats: int = FLOOR_REPEATS) -> dict[str, Any]:
    """Time the GEMMs of one training step of ``models`` models (:func:`step_gemms`) and turn
    the achieved GFLOP/s into the floor in model-epochs/s.

    The FLOPs per model-epoch used are :func:`lstpe.training.cost.flops_per_model_epoch` (the count
    of
    what the engine computes); ``gemm_flops_per_model_epoch`` is the same count summed from the
    timed GEMMs (equal up to rounding), ``all_tokens_flops_per_model_epoch`` the count had the
    last block been computed for every token (as the plain loop does).
    """
    gemms = step_gemms(cfg, batch_size, models)
    rows, total_s, total_flops = [], 0.0, 0
    for g in gemms:
        sec = _best_seconds(_gemm_fn(g, device), device, repeats)
        total_s += sec * g.count
        total_flops += g.flops
        rows.append({**asdict(g), "flops": g.flops, "best_s": sec})
    fpme = flops_per_model_epoch(cfg, n_train)
    gflops = total_flops / total_s / 1e9
    per_epoch = n_train / (batch_size * models)
    full = sum(g.flops for g in step_gemms(cfg, batch_size, models, last_token_only=False))
    return {
        "models": models, "threads": torch.get_num_threads(), "repeats": repeats,
        "precision": _matmul_precision(device),
        "flops_per_step": total_flops, "seconds_per_step": total_s, "gflops": gflops,
        "flops_per_model_epoch": fpme,
        "gemm_flops_per_model_epoch": total_flops * per_epoch,
        "all_tokens_flops_per_model_epoch": full * per_epoch,
        "model_epochs_per_s": gflops / (fpme / 1e9),
        "gemms": rows,
    }


def _matmul_precision(device: torch.device) -> str:
    """What an fp32 matmul computes in on ``device`` under the current torch settings."""
    if device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32:
        return "tf32"
    return "fp32"
