"""A lease's tuning minute: time each allowed step variant, check it, train with the fastest.

A *variant* (:class:`Variant`) is a step mode and a precision: today's step (``graph``, a
CUDA graph of the eager step; ``eager`` off CUDA) or the compiled whole step (``compiled``,
:mod:`lstpe.training.compiled`), each in every precision the card has cleared
(:func:`gpu_precisions`: fp32 with TF32 off always, TF32 or bf16
only once a precision pair of that card cleared them).

:func:`tune`, within :data:`TUNE_S` seconds of its clock: per variant, in order (today's step
in fp32 first), :func:`measure` builds the lease's first chunk, runs its first steps in the
variant (compiling and capturing: ``compile_s``), times :data:`TIMED_STEPS` more, and checks
the variant against the eager fp32 step over :data:`CHECK_STEPS` steps from the same weights
and batches: the largest relative difference of the models' summed losses (``max_diff``),
which must stay within the variant's precision's tolerance (:data:`TOLERANCE`). The lease
trains with the fastest variant that ran and passed; a variant that raised, mismatched or was
not reached in time is never chosen, and with none left it is today's step in fp32 (the
fallback). Every row is kept in the lease record (:data:`VARIANT_COLUMNS`).

``measure`` and the clock are arguments, so that ``tests/test_lease_tuning.py`` can fake
time, failures and mismatches; the pre-flight
(:func:`lstpe.experiments.preflight.lease_preflight`) runs the real ones on the
CPU with a tiny model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

TUNE_S = 90.0
"""Seconds of a lease the tuning may take (its first minute and a half)."""

CHECK_STEPS = 3
"""Steps over which a variant is checked against the eager fp32 step."""

TIMED_STEPS = 10
"""Steps timed per variant, after the steps that compile and capture."""

TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "bf16": 3e-2}
"""Largest relative difference of the checked losses each precision may show against the
eager fp32 step (fp32: rounding of reordered sums; TF32: 10-bit mantissas in matmuls; bf16:
8-bit mantissas)."""

VARIANT_COLUMNS = ["variant", "step", "precision", "ms_per_step", "model_epochs_per_s", "max_diff",
           "tolerance", "compile_s", "state", "why"]
"""The columns of the variant table (``state``: chosen, passed, mismatch, failed, skipped)."""


@dataclass(frozen=True)
class Variant:
    """A step mode (``graph``, ``eager``, ``compiled``) in one precision (``fp32``,
    ``tf32``, ``bf16``)."""

    step: str
    precision: str = "fp32"

    @property
    def name(self) -> str:
        return f"{self.step}/{self.precision}"

    @property
    def amp(self) -> bool | torch.dtype:
        return torch.bfloat16 if self.precision == "bf16" else False

    @property
    def tf32(self) -> bool:
        return self.precision == "tf32"


def today(device: torch.device) -> Variant:
    """The step a lease trained with before the tuning: a CUDA graph of the eager step in fp32
    (TF32 off) on CUDA, the eager step elsewhere."""
    return Variant("graph" if device.type == "cuda" else "eager", "fp32")


def variants(device: torch.device, precisions: Sequence[dict[str, Any]]) -> list[Variant]:
    """Today's step and the compiled step, each in every cleared precision (rows of
    :func:`gpu_precisions`), today's fp32 first."""
    cleared = [r["precision"] for r in precisions if r["cleared"]]
    if "fp32" not in cleared:
        cleared.insert(0, "fp32")
    base = today(device).step
    return [Variant(step, p) for p in cleared for step in (base, "compiled")]


def gpu_precisions(gpu_name: str, results_dir: str | Path | None = None
                   ) -> list[dict[str, Any]]:
    """What a lease on the GPU ``gpu_name`` may train in, and why: fp32 with TF32 off always
    (the reference, as the authors' V100 trained), then each of
    :data:`lstpe.experiments.precision.CANDIDATES` cleared only by its own stored pair of this
    model of card (:func:`~lstpe.experiments.precision.candidate_tag`): by the two-precision
    pair (:func:`~lstpe.experiments.precision.pair_decision`) or the lease's stored-unit pair
    (:func:`~lstpe.experiments.lease_pair.stored_pair_decision`); a pair of another card, of the
    other candidate, an incomplete or inconsistent pair, or one whose candidate moves
    accuracy more than the seed spread clears nothing. Rows ``{"precision", "amp", "tf32",
    "cleared", "why", "tag"}`` (``amp``: False or ``torch.bfloat16``)."""
    rows: list[dict[str, Any]] = [
        {"precision": "fp32", "amp": False, "tf32": False, "cleared": True, "tag": None,
         "why": "fp32 with TF32 off: the reference (the authors trained fp32 on a V100)"}]
    from lstpe.experiments import lease_pair as lp
    from lstpe.experiments import precision as pr

    for cand in pr.CANDIDATES:
        tag = pr.candidate_tag(gpu_name, cand)
        pair = pr.load_pair(results_dir, tag)
        if pair is None:
            part = pr.incomplete_pair(pr.pair_dir(results_dir, tag))
            ok, why = False, (f"the precision pair of {tag} is incomplete: {part}" if part
                              else f"no precision pair is stored for {tag}")
        else:
            ok, why = pr.pair_decision(pair, tag)
        if not ok:  # the stored-unit pair of the lease (lstpe.experiments.lease_pair)
            stored_ok, stored_why = lp.stored_pair_decision(results_dir, tag)
            ok, why = (True, stored_why) if stored_ok else (False, f"{why}; {stored_why}")
        rows.append({"precision": cand, "amp": torch.bfloat16 if cand == "bf16" else False,
                     "tf32": cand == "tf32", "cleared": ok, "why": why, "tag": tag})
    return rows


def _run(cfgs: Sequence[Any], device: torch.device, variant: Variant, batches: list,
         keys: list) -> tuple[Any, Any, float, float]:
    """A fresh chunk of ``cfgs`` trained over ``batches`` in ``variant``: (running loss sums,
    optimizer, seconds of the first call, seconds per later step)."""
    from lstpe.runtime import tf32_mode
    from lstpe.training.compiled import CompiledStep
    from lstpe.training.engine import EagerStep, GraphStep, Running
    from lstpe.training.floor import sync
    from lstpe.training.task import one_model_chunk

    with tf32_mode(device, variant.tf32):
        task, opt = one_model_chunk(list(cfgs), device)
        running = Running.zeros(task.n_models, device)
        if variant.step == "compiled":
            step: Any = CompiledStep(task, opt, running, device, variant.amp)
        elif variant.step == "graph":
            step = GraphStep(task, opt, running, device, variant.amp)
        else:
            step = EagerStep(task, opt, task.model, running, device, variant.amp)
        task.model.train()
        t0 = time.perf_counter()
        step(batches[0], keys[0])
        sync(device)
        first = time.perf_counter() - t0
        t1 = time.perf_counter()
        for b, k in zip(batches[1:], keys[1:], strict=True):
            step(b, k)
        sync(device)
        per = (time.perf_counter() - t1) / max(len(batches) - 1, 1)
    return running.loss.detach().clone(), opt, first, per


def measure(cfgs: Sequence[Any], device: torch.device, variant: Variant,
            steps: int = TIMED_STEPS) -> dict[str, float]:
    """``ms_per_step``, ``model_epochs_per_s``, ``compile_s`` (the first call: compile and
    capture) and ``max_diff`` (:func:`check_variant`) of ``variant`` on a chunk of ``cfgs``."""
    from lstpe.training.task import one_model_chunk

    task, _ = one_model_chunk(list(cfgs), device)
    epoch = list(task.batches(1))
    n = min(len(epoch), CHECK_STEPS + steps + 1)
    batches = [b for _, b in epoch[:n]]
    keys = [task.dropout_keys(1, s) for s, _ in epoch[:n]]
    _, _, first, per = _run(cfgs, device, variant, batches, keys)
    diff = check_variant(cfgs, device, variant, batches[:CHECK_STEPS], keys[:CHECK_STEPS])
    return {"ms_per_step": per * 1e3, "model_epochs_per_s": len(cfgs) / (len(epoch) * per),
            "compile_s": first, "max_diff": diff}


def check_variant(cfgs: Sequence[Any], device: torch.device, variant: Variant, batches: list,
          keys: list) -> float:
    """The largest relative difference of the models' summed losses over ``batches`` between
    ``variant`` and the eager fp32 step, each from a fresh chunk (the same weights); inf
    where a loss is not finite."""
    ref = _run(cfgs, device, Variant("eager"), batches, keys)[0]
    got = _run(cfgs, device, variant, batches, keys)[0]
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    return float(((got - ref).abs() / ref.abs().clamp_min(1e-12)).max())


def tune(candidates: Sequence[Variant], measure_fn: Callable[[Variant], dict[str, float]],
         fallback: Variant, budget_s: float = TUNE_S,
         clock: Callable[[], float] = time.monotonic, log: Callable[[str], None] = print
         ) -> tuple[Variant, list[dict[str, Any]]]:
    """(the variant to train with, the variant table: one row per candidate,
    :data:`VARIANT_COLUMNS`).

    Each candidate in order while the clock is within ``budget_s`` of its first reading:
    ``measure_fn(variant)`` (an exception marks it failed, with its message), then its
    ``max_diff`` against :data:`TOLERANCE` of its precision (above: mismatch). The fastest
    passed one (least ``ms_per_step``) is chosen; with none, ``fallback``."""
    start = clock()
    rows: list[dict[str, Any]] = []
    for v in candidates:
        row: dict[str, Any] = {"variant": v.name, "step": v.step, "precision": v.precision,
                               "ms_per_step": None, "model_epochs_per_s": None,
                               "max_diff": None, "tolerance": TOLERANCE[v.precision],
                               "compile_s": None}
        if clock() - start > budget_s:
            rows.append({**row, "state": "skipped",
                         "why": f"the tuning's {budget_s:.0f} s ran out before it"})
            continue
        try:
            m = measure_fn(v)
        except Exception as e:  # noqa: BLE001 (any failure of a variant: fall back)
            rows.append({**row, "state": "failed", "why": f"{type(e).__name__}: {e}"[:300]})
            log(f"lease: variant {v.name} failed ({type(e).__name__}: {e})")
            continue
        row.update({k: m.get(k) for k in ("ms_per_step", "model_epochs_per_s", "max_diff",
                                          "compile_s")})
        diff = m.get("max_diff")
        if diff is None or not diff <= TOLERANCE[v.precision]:
            rows.append({**row, "state": "mismatch",
                         "why": f"its losses differ from the eager fp32 step's by {diff:.3g} "
                         f"(relative), more than {TOLERANCE[v.precision]:g}"
                         if diff is not None else "no check"})
            log(f"lease: variant {v.name} mismatches the eager step ({diff})")
            continue
        rows.append({**row, "state": "passed", "why": "checked against the eager fp32 step"})
    ok = [r for r in rows if r["state"] == "passed"]
    if ok:
        best = min(ok, key=lambda r: r["ms_per_step"])
        best["state"], best["why"] = "chosen", "the fastest variant that passed its check"
        chosen = next(v for v in candidates if v.name == best["variant"])
    else:
        chosen = fallback
        log(f"lease: no variant passed; training with {fallback.name}")
    return chosen, rows


def choose_variant(dev: torch.device, cfgs: Sequence[Any], results: Path,
                   summary: dict[str, Any], log: Any, enabled: bool, measure_fn: Any,
                   clock: Any) -> Variant:
    """The step variant the lease trains with (:mod:`lstpe.experiments.lease_tune`), recorded
    in ``summary``: the precisions the card has cleared (``precisions``), the variant table
    (``variants``), the choice (``variant``) and inductor's cache (``inductor_cache``)."""
    from lstpe.training.compiled import folder_bytes, set_cache_dir

    precs = gpu_precisions(summary["gpu"], results) if dev.type == "cuda" else \
        gpu_precisions("none", results)[:1]
    summary["precisions"] = [{k: r[k] for k in ("precision", "cleared", "why", "tag")}
                             for r in precs]
    fallback = today(dev)
    if not enabled:
        summary["variant"] = fallback.name
        return fallback
    cache = set_cache_dir(results.parent / INDUCTOR_CACHE)
    summary["inductor_cache"] = {"dir": str(cache), "bytes_before": folder_bytes(cache)}
    cands = variants(dev, precs)
    kept = [v for v in cands if v.precision != "bf16"]  # a packed chunk trains fp32 only
    fn = measure_fn or (lambda v: measure(cfgs, dev, v))
    variant, rows = tune(kept, fn, fallback, clock=clock, log=log)
    rows += [{"variant": v.name, "step": v.step, "precision": v.precision, "state": "skipped",
              "why": "cleared, but a packed chunk of long units trains in fp32 (each chunk "
              "keeps its precision)"} for v in cands if v not in kept]
    summary.update({"variants": rows, "variant": variant.name})
    summary["inductor_cache"]["bytes_after"] = folder_bytes(cache)
    log(f"lease: training with {variant.name} ("
        + "; ".join(f"{r['variant']} {r['state']}" for r in rows) + ")")
    return variant


INDUCTOR_CACHE = ".inductor_cache"
"""Inductor's cache folder in the lease's tree (beside ``results/``): set as
``TORCHINDUCTOR_CACHE_DIR`` unless that is set, so a cache carried with the tree (it travels
when it fits the tree's 64 MiB) saves the compilation's minutes."""
