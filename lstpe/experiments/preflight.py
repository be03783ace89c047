"""The lease's pre-flight on the CPU: ``lstpe campaign preflight`` (:func:`lease_preflight`).

Before a GPU lease is spent, on any CPU, with a tiny model (d=16, one layer, 64 puzzles):

1. **the tuning** (:func:`lstpe.experiments.lease_tune.tune` with the real measurement): the
   eager and the compiled step, timed and checked against the eager fp32 step;
2. **the compiled step end to end**: a chunk of a learnable PE and a dropout PE trained in
   step mode ``compiled``, stopped after epoch 2 with its checkpoint (the deadline's pause),
   resumed in the same variant to epoch 4, and compared with the same chunk trained straight
   to 4: weights and history bit for bit;
3. **the pack**: that checkpoint and the variant table packed as a lease packs
   (:func:`lstpe.experiments.lease_store.pack_results`) within 4 pieces of 15 MiB;
4. **per variant, what the next lease trains and why**: the variants a card may use
   (:func:`lstpe.experiments.lease_tune.variants` of the precisions it has cleared), each
   with the plan of a ``minutes`` lease (:func:`lstpe.experiments.lease.lease_plan`). A
   variant measured on that card (the newest lease record's variant table, or its step-time
   fit for today's step) is planned from its measurement; one never measured there is an
   **estimate**, planned at today's measured rate (a CPU says nothing of a GPU's speed-up;
   the CPU's compiled-to-eager ratio of step 1 is printed beside it), labelled so, never a
   promised rate; with it, the line of the stored-unit precision pair the lease runs first
   (or why it is skipped), whose time the plan takes from the chunks.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from lstpe.experiments import lease_tune as lt


def tiny_configs(n: int = 2) -> list[Any]:
    """``n`` one-model configurations of a tiny model (learnable PEs and 2d-fixed, which
    carries dropout), on the CPU in fp32."""
    from lstpe.experiments.registry import run_config
    from lstpe.nn.architecture import ModelConfig

    pes = ["learn-0.2", "2d-fixed", "learn-2", "rope"]
    return [run_config("table2", "preview", pes=[pes[i % len(pes)]], seeds=[2235 + i],
                       model=ModelConfig(d_model=16, n_layers=1), n_train=64, batch_size=16,
                       eval_train_max=32, eval_test_max=32, epochs=4, device="cpu",
                       amp=False, noise_levels=[], checkpoint_every=0)
            for i in range(n)]


def _train(cfgs: list[Any], ckpt: Path, epochs: int, stop_at: int | None) -> tuple[Any, Any]:
    """The chunk of ``cfgs`` trained in step mode ``compiled`` to ``epochs`` (resuming from
    ``ckpt``), stopping after ``stop_at``: (history, flat weights)."""
    from lstpe.training.engine import LoopOptions, Stopped, run_chunk
    from lstpe.training.task import one_model_chunk

    task, opt = one_model_chunk(cfgs, torch.device("cpu"))
    opts = LoopOptions(epochs=epochs, schedule=set(range(1, epochs + 1)),
                       device=torch.device("cpu"), mode="compiled", checkpoint=ckpt,
                       checkpoint_meta={"configs": [c.to_dict() for c in cfgs]},
                       stop_at=stop_at)
    try:
        history = run_chunk(task, opt, opts, lambda: {})[0]
    except Stopped:
        return None, opt.flat.clone()
    return history, opt.flat.clone()


def resume_check(work: Path) -> dict[str, Any]:
    """Step 2: stopped at 2 and resumed to 4 against straight to 4, in step mode compiled."""
    cfgs = tiny_configs()
    straight, w_straight = _train(cfgs, work / "straight.pt", 4, None)
    ckpt = work / "paused.pt"
    _train(cfgs, ckpt, 4, 2)
    paused_bytes = ckpt.stat().st_size
    shutil.copy(ckpt, work / "paused_at_2.pt")  # what a paused lease brings back
    resumed, w_resumed = _train(cfgs, ckpt, 4, None)
    same_w = bool(torch.equal(w_straight, w_resumed))
    key = ("epoch", "split", "condition", "pe", "seed", "accuracy", "loss")
    same_h = sorted(tuple(r[k] for k in key) for r in straight) == \
        sorted(tuple(r[k] for k in key) for r in resumed)
    return {"bit_equal": same_w and same_h, "weights_equal": same_w, "history_equal": same_h,
            "checkpoint_bytes": paused_bytes}


def variant_plans(minutes: float, results_dir: str | Path | None, ratio: float | None,
                  record: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Step 4: per variant a card may use, what a ``minutes`` lease trains and why."""
    from lstpe.experiments import lease as ls

    if record is None:
        return [{"variant": "-", "basis": "none", "model_epochs": None, "trains": [],
                 "why": "no lease record: no step time measured on a card yet"}]
    gpu = str(record.get("gpu") or "unknown")
    measured = {r.get("variant"): r for r in record.get("variants") or []
                if r.get("state") in ("chosen", "passed") and r.get("ms_per_step")}
    cuda = torch.device("cuda")
    base = lt.today(cuda)
    out = []
    for v in lt.variants(cuda, lt.gpu_precisions(gpu, results_dir)):
        if v == base:
            scale, basis = 1.0, f"measured on {gpu} (the record's step-time fit)"
        elif v.name in measured and base.name in measured:
            scale = measured[v.name]["ms_per_step"] / measured[base.name]["ms_per_step"]
            basis = f"measured on {gpu} (the record's variant table)"
        else:  # never measured on this card: no faster than today's, until a card says
            scale, basis = 1.0, "estimate"
        fit = {**record["fit"], "a": record["fit"]["a"] * scale,
               "b": record["fit"]["b"] * scale}
        plan = ls.lease_plan(minutes, results_dir, record={**record, "fit": fit},
                             log=lambda m: None)
        trains = list(plan[plan["state"] == "trains"]["chunk"])
        cpu = f"; on this CPU its step took {ratio:.2f} x the eager one's" \
            if ratio is not None and v.step == "compiled" else ""
        why = (f"never measured on {gpu}: planned at today's measured rate, an estimate, not "
               f"a promised rate (the tuning measures it on the card){cpu}"
               if basis == "estimate" else f"step time {scale:.2f} x today's")
        if v.precision != "fp32":
            why += f"; {v.precision} cleared by its precision pair on {gpu}"
        pair = plan.attrs.get("pair")
        out.append({"variant": v.name, "basis": basis,
                    "model_epochs": int(plan.attrs.get("model_epochs", 0)), "trains": trains,
                    "why": why, "pair": ls.pair_text(pair) if pair else
                    "no stored-unit precision pair: every candidate is decided on this card"})
    return out


def lease_preflight(minutes: float = 9.0, results_dir: str | Path | None = None,
              work: str | Path | None = None, log=print) -> dict[str, Any]:
    """The pre-flight (module docstring); prints as it goes through ``log`` and returns
    ``{"variants", "resume", "pieces", "plans", "ok"}``."""
    from lstpe.experiments import lease as ls
    from lstpe.experiments import lease_store as lc

    own = tempfile.TemporaryDirectory() if work is None else None
    root = Path(own.name if own is not None else work)  # type: ignore[arg-type]
    try:
        cpu = torch.device("cpu")
        cfgs = tiny_configs()
        cands = lt.variants(cpu, [{"precision": "fp32", "cleared": True}])
        chosen, rows = lt.tune(cands, lambda v: lt.measure(cfgs, cpu, v, steps=6),
                               lt.today(cpu), budget_s=600, log=log)
        for r in rows:
            log(f"preflight: {r['variant']}: {r['state']} ({r['why']}); "
                + (f"{r['ms_per_step']:.1f} ms/step, compile {r['compile_s']:.1f} s, "
                   f"largest difference {r['max_diff']:.2g}" if r["ms_per_step"] else "-"))
        ms = {r["variant"]: r["ms_per_step"] for r in rows if r["ms_per_step"]}
        ratio = ms["compiled/fp32"] / ms["eager/fp32"] if len(ms) == 2 else None
        (root / "work").mkdir(parents=True, exist_ok=True)
        resume = resume_check(root / "work")
        log(f"preflight: compiled step stopped at epoch 2 and resumed to 4: "
            f"{'bit for bit equal' if resume['bit_equal'] else 'NOT equal'} to straight to 4")
        results, out = root / "results", root / "out"
        (results / "benchmarks").mkdir(parents=True, exist_ok=True)
        since = time.time() - 1.0
        (results / "benchmarks" / "preflight.json").write_text(json.dumps(rows, default=str))
        (results / "long" / "_resume" / "preflight").mkdir(parents=True, exist_ok=True)
        shutil.copy(root / "work" / "paused_at_2.pt",
                    results / "long" / "_resume" / "preflight" / "chunk0.pt")
        out.mkdir(exist_ok=True)
        pieces = lc.pack_results(results, out, since=since)
        fits = 1 <= len(pieces) <= 4 and all(p.stat().st_size <= lc.PIECE_BYTES
                                             for p in pieces)
        log(f"preflight: packed {len(pieces)} piece(s) of at most "
            f"{lc.PIECE_BYTES // 2**20} MiB: {'within' if fits else 'NOT within'} the limits")
        rec = ls.last_record(results_dir, log=log)
        plans = variant_plans(minutes, results_dir, ratio, rec)
        for p in plans:
            log(f"preflight: next {minutes:g}-minute lease in {p['variant']} ({p['basis']}): "
                f"{p['model_epochs']} model-epochs; trains {', '.join(p['trains']) or 'nothing'}"
                f"; {p['why']}")
            if "pair" in p:
                log(f"preflight:   {p['pair']}")
        ok = resume["bit_equal"] and fits and "compiled/fp32" in ms
        return {"variants": rows, "chosen": chosen.name, "resume": resume,
                "pieces": [str(p) for p in pieces], "plans": plans, "ok": ok}
    finally:
        if own is not None:
            own.cleanup()
