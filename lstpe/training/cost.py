"""What one model costs: matmul FLOPs per model-epoch, bytes per model, and the chunks of
models and evaluation puzzles that fit a memory budget.

Below training (:mod:`lstpe.training.train` sizes its chunks with :func:`chunk_plan` on CUDA) and
below
the planner (:mod:`lstpe.experiments.plan` prints what named runs cost). The memory estimate counts
what one
model keeps for its backward pass, measured by running one forward pass of a single model at the
run's size on the CPU with a saved-tensors hook (exact for this code in fp32; bf16 autocast
stores some of it at half size), plus weights, gradients and Adam's two moments, times a safety
factor for temporaries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from lstpe.nn.architecture import ModelConfig
from lstpe.nn.model import BatchedLSTTransformer

if TYPE_CHECKING:
    from lstpe.training.config import TrainConfig

SAFETY = 1.5
"""Peak memory / (saved activations + weights + gradients + optimizer state)."""


def flops_per_model_epoch(cfg: ModelConfig, n_train: int) -> float:
    """Matmul FLOPs of one model-epoch, forward + backward (3x forward), the last block
    computing only the read-out token as the engine does. Paper size, 8000 puzzles: 7.9e11
    (about 9.6e11 if the last block were computed for all 16 tokens)."""
    d, f, n, L = cfg.d_model, cfg.d_model * cfg.mlp_ratio, cfg.n_tokens, cfg.n_layers
    full = n * (2 * d * 3 * d + 2 * 2 * n * d + 2 * d * d + 2 * 2 * d * f)
    last = n * (2 * d * 3 * d + 2 * 2 * n * d) + (2 * d * d + 2 * 2 * d * f)
    per_puzzle = (L - 1) * full + last + n * 2 * cfg.n_inputs * d + 2 * d * cfg.n_classes
    return 3.0 * per_puzzle * n_train


def saved_bytes_per_model(cfg: ModelConfig, batch_size: int, pe: str = "2d-fixed") -> int:
    """Bytes one model saves for backward in one training step (fp32), measured."""
    model = BatchedLSTTransformer([pe], [0], cfg)
    x = torch.zeros(batch_size, cfg.n_tokens, cfg.n_inputs)
    seen: dict[tuple, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = (t.untyped_storage().data_ptr(), t.dtype)
        seen[key] = max(seen.get(key, 0), t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x).sum()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(v for (ptr, _), v in seen.items() if ptr not in params)


def bytes_per_model(cfg: TrainConfig) -> float:
    """Estimated peak bytes of one model in a training chunk (see the module docstring)."""
    n_params = sum(p[0].numel() for p in BatchedLSTTransformer(["learn-0.2"], [0], cfg.model)
                   .parameters())
    act = saved_bytes_per_model(cfg.model, cfg.batch_size)
    return SAFETY * (act + 4 * 4 * n_params)


HEADROOM = 0.85
"""Fraction of the free GPU memory a chunk plans to use (the rest: the CUDA context growing,
the allocator's fragmentation, cuBLAS workspaces)."""

GRAPH_FACTOR = 2.5
"""Training memory of a chunk in step mode ``graph`` over ``eager``: the captured step's
private memory pool stays allocated beside what the eager warm-up steps left cached (2), and
the epoch's last, smaller minibatch has a captured step and pool of its own (8100 = 63 x 128
+ 36 puzzles: about 0.3 of a full step's, rounded up to 0.5)."""

EVAL_MIN, EVAL_MAX = 128, 2048
"""Evaluation puzzles per forward call: at least EVAL_MIN (smaller calls waste the GPU), at
most EVAL_MAX (the default of :func:`lstpe.training.task.predict`)."""


def eval_bytes_per_puzzle(cfg: ModelConfig) -> float:
    """Peak bytes of one model's no-grad forward pass per puzzle (fp32), times
    :data:`SAFETY`: within a block the hidden states, q/k/v, the attention scores and the
    MLP's hidden layer (before and after its activation) are alive at once. Paper size: 218 kB
    (the measured epoch-0 evaluation: about 150 kB per model and puzzle)."""
    d, n, H = cfg.d_model, cfg.n_tokens, cfg.n_heads
    f = d * cfg.mlp_ratio
    return SAFETY * 4 * n * (6 * d + 2 * f + 2 * H * n)


def resident_bytes_per_model(cfg: TrainConfig, n_val: int) -> float:
    """Bytes per model that stay on the device beside the training step: the validation
    attention maps when the run saves them (L maps of n x n per puzzle, held twice while they
    are concatenated) and the validation logits."""
    m = cfg.model
    attn = 2 * 4 * n_val * m.n_layers * m.n_tokens ** 2 if cfg.save_attention else 0
    return float(attn + 4 * n_val * m.n_classes)


@dataclass(frozen=True)
class ChunkPlan:
    """How M models fit a device: ``models`` per chunk, ``chunks`` of them, ``eval_chunk``
    puzzles per evaluation call; the bytes per model it assumed and the free bytes."""

    models: int
    chunks: int
    eval_chunk: int
    train_bytes: float
    eval_bytes: float
    free_bytes: float

    def describe(self) -> str:
        """One line for the log."""
        return (f"{self.chunks} chunk(s) of <= {self.models} models, {self.eval_chunk} "
                f"evaluation puzzles per call ({self.train_bytes / 2**20:.0f} MiB per model "
                f"training, {self.eval_bytes / 2**10:.0f} kB per model and puzzle evaluating, "
                f"{self.free_bytes / 2**30:.1f} GiB free)")


def chunk_plan(cfg: TrainConfig, n_models: int, free_bytes: float, graph: bool = True,
               n_val: int = 0, max_models: int | None = None) -> ChunkPlan:
    """Models per chunk and evaluation puzzles per call that fit ``free_bytes`` of GPU memory.

    A chunk of k models needs ``k * train`` (:func:`bytes_per_model`, times
    :data:`GRAPH_FACTOR` for CUDA graphs, plus :func:`resident_bytes_per_model`) and, while it
    is evaluated, ``k * E * eval`` for E puzzles per call (:func:`eval_bytes_per_puzzle`); both
    within :data:`HEADROOM` of the free memory, with E at least :data:`EVAL_MIN`. The chunks
    are made equal (315 models that fit 100 at a time: 4 chunks of 79).

    Args:
        n_models: models to train.
        free_bytes: free device memory (``torch.cuda.mem_get_info()[0]``).
        graph: step mode ``graph`` (else ``eager`` or ``compile``).
        n_val: validation puzzles (attention maps and logits kept per model).
        max_models: a fixed chunk size (the config's ``max_models``): only E is planned.
    Raises:
        MemoryError: not even one model with :data:`EVAL_MIN` puzzles per call fits.
    """
    train = bytes_per_model(cfg) * (GRAPH_FACTOR if graph else 1.0) \
        + resident_bytes_per_model(cfg, n_val)
    per_puzzle = eval_bytes_per_puzzle(cfg.model)
    budget = HEADROOM * float(free_bytes)
    fit = int(budget // (train + EVAL_MIN * per_puzzle))
    if max_models:
        fit = int(max_models)
    elif fit < 1:
        raise MemoryError(f"one model needs about {(train + EVAL_MIN * per_puzzle) / 2**30:.2f} "
                          f"GiB and {free_bytes / 2**30:.2f} GiB are free: use a smaller model "
                          "or another device")
    n_models = max(1, int(n_models))
    chunks = math.ceil(n_models / min(fit, n_models))
    size = math.ceil(n_models / chunks)
    room = (budget - size * train) // (size * per_puzzle)
    eval_chunk = int(min(EVAL_MAX, max(EVAL_MIN, room)))
    return ChunkPlan(size, chunks, eval_chunk, train, per_puzzle, float(free_bytes))
