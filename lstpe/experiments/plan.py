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

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
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
               memory_gib: float = 70.0, full_train: int = 8100,
               stored: Mapping[str, int] | None = None,
               rate_at: Callable[[int], float] | None = None, **overrides: Any
               ) -> pd.DataFrame:
    """One row per batch of runs: what training it costs, and what is left of it.

    Args:
        names: run names of :data:`lstpe.experiments.registry.REGISTRY`.
        rate: assumed throughput in model-epochs per second.
        memory_gib: GPU memory budget for one chunk.
        full_train: training puzzles per epoch without ``n_train`` (8100: the code's split).
        stored: run name -> its models already finished (``to_train`` and the minutes count
            the rest).
        rate_at: the throughput at a chunk of that many models (a measurement), instead of
            ``rate``.

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
        left = models - sum((stored or {}).get(n, 0) for n in group)
        r = rate_at(chunk) if rate_at is not None else rate
        rows.append({
            "runs": " + ".join(group), "models": models, "epochs": base.epochs,
            "optimizer_steps": steps, "model_epochs": model_epochs,
            "pflop": model_epochs * flops_per_model_epoch(base.model, n_train_eff) / 1e15,
            "chunks": math.ceil(models / chunk), "models_per_chunk": chunk,
            "peak_gib_per_chunk": round(chunk * per_model / 2**30, 1),
            "to_train": left, "rate": round(r, 3),
            "minutes_at_rate": round(left * base.epochs / r / 60, 1),
        })
    return pd.DataFrame(rows)


BENCHMARKS = "results/benchmarks"
"""Where the throughput measurements at the paper's size are stored (under the repository)."""


def device_kind(name: str) -> str:
    """A device's kind as the measurements name it: ``"NVIDIA H100 80GB HBM3"`` -> ``h100``,
    ``"Tesla T4"`` -> ``t4``, ``"cpu"`` (or a CPU's description) -> ``cpu``; else the name in
    lower case without spaces."""
    low = name.lower()
    if low.startswith("cpu"):
        return "cpu"
    for kind in ("h200", "h100", "a100", "l40s", "l4", "t4", "v100", "a10g"):
        if kind in low.replace("-", " ").split() or kind in low.split("-"):
            return kind
    return low.replace(" ", "")


def measured_rates(root: str | Path) -> pd.DataFrame:
    """Every stored training throughput at the paper's size (``<root>/results/benchmarks``):
    each GPU lease's chunks (``lease_*.csv``, the GPU named in its ``.json``) and the CPU
    benchmark (``cpu_paper*.json``, its batched engine). Columns ``device`` (its kind,
    :func:`device_kind`), ``name``, ``precision`` (fp32 / bf16), ``models`` (per chunk),
    ``model_epochs_per_s``, ``source`` (the file, relative to ``root``), ``when``."""
    rows = []
    bench = Path(root) / BENCHMARKS
    for csv in sorted(bench.glob("lease_*.csv")):
        meta = json.loads(csv.with_suffix(".json").read_text())
        for r in pd.read_csv(csv).itertuples():
            rows.append({"device": device_kind(meta["gpu"]), "name": meta["gpu"],
                         "precision": r.precision, "models": int(r.models),
                         "model_epochs_per_s": float(r.model_epochs_per_s),
                         "source": str(csv.relative_to(root)), "when": meta["started"][:10]})
    for js in sorted(bench.glob("cpu_paper*.json")):
        meta = json.loads(js.read_text())
        if meta.get("size") != "paper" or "floor" in js.name:
            continue
        for r in meta["rows"]:
            if r["engine"] == "batched":
                rows.append({"device": "cpu", "name": meta["device"],
                             "precision": "bf16" if meta.get("amp") else "fp32",
                             "models": int(r["models"]),
                             "model_epochs_per_s": float(r["model_epochs_per_s"]),
                             "source": str(js.relative_to(root)),
                             "when": meta["finished_at"][:10]})
    return pd.DataFrame(rows, columns=["device", "name", "precision", "models",
                                       "model_epochs_per_s", "source", "when"])


def rate_on(kind: str, precision: str, rates: pd.DataFrame
            ) -> tuple[Callable[[int], float], str] | None:
    """The measured throughput of ``kind`` at ``precision`` for a chunk of M models: the
    measurement at the largest chunk not above M (else the smallest measured), and a line
    naming what was measured; None when that kind and precision were never measured."""
    m = rates[(rates["device"] == kind) & (rates["precision"] == precision)]
    if m.empty:
        return None
    m = m.sort_values("models")

    def at(models: int) -> float:
        below = m[m["models"] <= models]
        return float((below if len(below) else m.head(1))["model_epochs_per_s"].iloc[-1])

    what = "; ".join(f"{g.iloc[0]['name']} on {g.iloc[0]['when']} ({src}: "
                     + ", ".join(f"{r.model_epochs_per_s:.3g} at {r.models}" for r in
                                 g.itertuples()) + " models)"
                     for src, g in m.groupby("source"))
    return at, f"measured {precision} model-epochs/s per chunk size: {what}"


PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "fp32": {"t4": 8.1, "v100": 15.7, "a100": 19.5, "a10g": 31.2, "l4": 30.3, "l40s": 91.6,
             "h100": 67.0, "h200": 67.0},
    "bf16": {"t4": 65.0, "v100": 125.0, "a100": 312.0, "a10g": 125.0, "l4": 121.0,
             "l40s": 362.0, "h100": 989.0, "h200": 989.0},
}
"""Peak dense throughput of each GPU kind, from NVIDIA's datasheets: fp32 on the CUDA cores
(the recipe's fp32, TF32 off), and for ``--amp`` bf16 on the tensor cores (fp16 on a T4 or a
V100, which have no bf16 and train fp16 with loss scaling)."""


def scaled_rate(kind: str, precision: str, rates: pd.DataFrame, ref: str = "h100"
                ) -> tuple[Callable[[int], float], str] | None:
    """An estimate for a GPU kind never measured: ``ref``'s measured rate per chunk size
    (:func:`rate_on`) times the ratio of the two kinds' :data:`PEAK_TFLOPS`, and a line
    saying so; None without a peak for both or a measurement of ``ref``."""
    peaks, got = PEAK_TFLOPS.get(precision, {}), rate_on(ref, precision, rates)
    if kind not in peaks or ref not in peaks or got is None:
        return None
    at, f = got[0], peaks[kind] / peaks[ref]
    return (lambda m: at(m) * f), (
        f"an estimate, never measured on {kind} in {precision}: the {ref.upper()}'s measured "
        f"rate per chunk size times the two GPUs' peak {precision} throughput, "
        f"{peaks[kind]:g} / {peaks[ref]:g} TFLOP/s (datasheets)")


def rate_for(kind: str, precision: str, rates: pd.DataFrame
             ) -> tuple[Callable[[int], float], str] | None:
    """:func:`rate_on` where ``kind`` was measured, else :func:`scaled_rate`."""
    return rate_on(kind, precision, rates) or scaled_rate(kind, precision, rates)
