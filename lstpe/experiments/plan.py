"""What a set of named runs costs, before a GPU is asked for: models, steps, FLOPs, memory, time.

``lstpe reproduce plan`` prints :func:`plan_table`: for each batch of runs that
trains together (:func:`lstpe.experiments.registry.bundles`), the number of models, epochs,
optimizer
steps, matmul FLOPs, the chunks the memory budget allows, an estimate of each chunk's peak
memory, and the wall time at a stated throughput (model-epochs per second). Nothing is trained.

The memory estimate counts what one model keeps for its backward pass, measured by running one
forward pass of a single model at the run's size on the CPU with a saved-tensors hook (exact for
this code in fp32; bf16 autocast stores some of it at half size), plus weights, gradients and
Adam's two moments, times a safety factor for temporaries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from lstpe.experiments.registry import bundles, run_config
from lstpe.training.cost import (
    bytes_per_model,
    flops_per_model_epoch,
)

TARGET_RATE = 52.0
"""Model-epochs per second of the engine on one Hopper GPU (paper size, bf16 autocast, CUDA
graph, 48 models per chunk), measured on an H200 lease (2026-11-26,
``results/benchmarks/lease_NVIDIA_H200_*.csv``; fp32 with TF32 off: 26): the rate at which
the Table-2 sweep (63,000 model-epochs) takes about 20 minutes."""


def plan_table(names: Sequence[str], scale: str = "paper", rate: float = TARGET_RATE,
               memory_gib: float = 70.0, full_train: int = 8100, **overrides: Any
               ) -> pd.DataFrame:
    """One row per batch of runs: what training it costs.

    Args:
        names: run names of :data:`lstpe.experiments.registry.REGISTRY`.
        rate: assumed throughput in model-epochs per second.
        memory_gib: GPU memory budget for one chunk.
        full_train: training puzzles per epoch without ``n_train`` (8100: the code's split).

    Raises:
        ValueError: a rate or memory budget that is not a positive finite number, or a
            budget too small for one model (naming the value).
    """
    if not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"rate must be a positive number of model-epochs/s, got {rate}")
    if not math.isfinite(memory_gib) or memory_gib <= 0:
        raise ValueError("memory budget (--memory-gib) must be a positive number of GiB, got "
                         f"{memory_gib}")
    rows = []
    for group in bundles(names, scale, **overrides):
        cfgs = [run_config(n, scale, **overrides) for n in group]
        base = cfgs[0]
        n_train_eff = base.n_train or full_train
        models = sum(len(c.pes) * len(c.seeds) for c in cfgs)
        per_model = bytes_per_model(base)
        fit = int(memory_gib * 2**30 // per_model)
        if fit < 1:
            raise ValueError(f"a memory budget of {memory_gib} GiB holds no model of "
                             f"{' + '.join(group)}: one needs {per_model / 2**30:.3g} GiB")
        chunk = min(models, base.max_models or fit, fit)
        steps = base.epochs * math.ceil(n_train_eff / base.batch_size)
        model_epochs = models * base.epochs
        rows.append({
            "runs": " + ".join(group), "models": models, "epochs": base.epochs,
            "optimizer_steps": steps, "model_epochs": model_epochs,
            "pflop": model_epochs * flops_per_model_epoch(base.model, n_train_eff) / 1e15,
            "chunks": math.ceil(models / chunk), "models_per_chunk": chunk,
            "peak_gib_per_chunk": round(chunk * per_model / 2**30, 1),
            "minutes_at_rate": round(model_epochs / rate / 60, 1),
        })
    return pd.DataFrame(rows)
