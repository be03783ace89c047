"""Reproduce the paper's training experiments (GPU driver), part by part, resumably.

Parts (each one or more run directories under ``--out``, default ``results/<scale>/``):

==========  ===============================================================================
table1      the 8 paper PEs (learn = learn-0.2) + alibi, rope-2d   -> table1/
table2      2d-fixed + learn-sigma, sigma = 0.1, ..., 2.0, Adam    -> table2/
table4      learn-sigma, sigma = 0.01, 0.05, 0.1, 0.2; Adam, SGD   -> table4/adam/, table4/sgd/
tables56    AdamW (weight decay 0.1): sigma 0.1..2.0 and the 8 PEs -> tables56/
long4000    2d-fixed and learn-0.2 for 20x the preset's epochs     -> long4000/
            (4000 at paper scale: the paper's full schedule)
bench       benchmarks/train_throughput.py --json                  -> bench/bench.json
brain       lstpe.brain.preset(scale): masked prediction (only when   -> brain/
            named in --parts: many GPU hours at paper scale)
==========  ===============================================================================

The PE lists come from :mod:`lstpe.experiments`, which the chapters use too. Every run uses
:func:`lstpe.train.preset` (``--scale paper``: the 15 paper seeds, 200 epochs,
the paper's model; ``--scale preview``: the CPU preview) and :func:`lstpe.train.train`, which
checkpoints every ``checkpoint_every`` epochs: rerun the same command after a cut-off and the
part resumes, losing at most one interval. A run whose ``manifest.json`` exists is finished and
skipped if its configuration is this command's; if it differs (other seeds, epochs, model...)
the command refuses before training anything (exit 2), as ``lstpe train`` does: a finished run
is never overwritten. Every run folder is locked while it trains
(:class:`lstpe.results.RunLock`), so two drivers cannot train into one folder. When a run
finishes, its checkpoints are deleted (the run keeps history.csv, manifest.json and
artifacts.pt with float16 attention maps).

Examples::

    python scripts/reproduce.py                                   # everything, paper scale
    python scripts/reproduce.py --parts table1 table2 --max-models 150
    python scripts/reproduce.py --scale preview --parts table1    # CPU dry run
    python scripts/reproduce.py --scale preview --parts table4 --epochs 1 --seeds 2235 \\
        --d-model 16 --n-layers 1 --n-train 64 --out /tmp/dry       # seconds

Wall time per part is printed and written to ``<out>/reproduce_summary.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lstpe import results as res
from lstpe.cli import build_config, summary_table, warn_diverged
from lstpe.experiments import (
    LONG_FACTOR,
    LONG_PES,
    TABLE4_SIGMAS,
    learn_pes,
    table1_pes,
    table2_pes,
    tables56_pes,
)
from lstpe.train import PAPER_SIGMAS, preset, train

REPO = Path(__file__).resolve().parents[1]
BENCHMARK = REPO / "benchmarks" / "train_throughput.py"

@dataclass(frozen=True)
class Job:
    """One training run of a part: its folder (relative to --out) and preset overrides."""

    name: str
    pes: list[str]
    optimizer: str = "adam"
    epochs_factor: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


PARTS: dict[str, list[Job]] = {
    "table1": [Job("table1", table1_pes())],
    "table2": [Job("table2", table2_pes(PAPER_SIGMAS))],
    "table4": [Job("table4/adam", learn_pes(TABLE4_SIGMAS), "adam"),
               Job("table4/sgd", learn_pes(TABLE4_SIGMAS), "sgd")],
    "tables56": [Job("tables56", tables56_pes(PAPER_SIGMAS), "adamw",
                     extra={"weight_decay": 0.1})],
    "long4000": [Job("long4000", LONG_PES, epochs_factor=LONG_FACTOR)],
    "bench": [],
    "brain": [],
}
"""Every part. ``brain`` (hours of GPU time at paper scale) runs only when named."""

DEFAULT_PARTS: list[str] = [p for p in PARTS if p != "brain"]

BENCH_MODELS = {"paper": [1, 15, 60, 150, 300], "preview": [1, 4, 15]}


def job_config(job: Job, args: argparse.Namespace):
    """The :class:`~lstpe.train.TrainConfig` of a job at ``args.scale`` with the overrides."""
    epochs = args.epochs if args.epochs is not None else preset(args.scale).epochs * \
        job.epochs_factor
    model = {"d_model": args.d_model, "n_layers": args.n_layers}
    return build_config(
        args.scale, model, pes=job.pes, optimizer=job.optimizer, epochs=epochs,
        seeds=args.seeds, device=args.device, amp=args.amp or None,
        compile=args.compile or None, max_models=args.max_models,
        checkpoint_every=args.checkpoint_every, n_train=args.n_train, **job.extra,
    )


def run_job(job: Job, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Train one job into ``out/job.name`` unless finished; delete its checkpoints after.

    Raises:
        lstpe.results.RunDirError: the folder holds another configuration's run, a damaged
            run, is not writable, or another process is training into it.
    """
    cfg = job_config(job, args)
    run_dir = out / job.name
    n = len(cfg.pes) * len(cfg.seeds)
    with res.RunLock(run_dir):
        state = res.check_run_dir(run_dir, cfg.to_dict())
        if state == "finished":
            print(f"  {job.name}: finished run of this configuration exists, skipped")
            return {"status": "skipped"}
        print(f"  {job.name}: {'resuming ' if state == 'resume' else ''}{n} models "
              f"({len(cfg.pes)} PEs x {len(cfg.seeds)} seeds), "
              f"{cfg.epochs} epochs, {cfg.optimizer} lr {cfg.lr:g} wd {cfg.weight_decay:g}, "
              f"d={cfg.model.d_model} L={cfg.model.n_layers}", flush=True)
        t0 = time.perf_counter()
        result = train(cfg, run_dir=run_dir, progress=not args.no_progress)
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    wall = time.perf_counter() - t0
    print(summary_table(result.history, cfg.pes).to_string(
        index=False, float_format=lambda v: f"{v:.3f}"))
    warn_diverged(result.history)
    return {"status": "trained", "wall_s": round(wall, 1), "models": n, "epochs": cfg.epochs,
            "device": result.manifest.get("device"),
            "total_wall_s": result.manifest.get("wall_time_s"),
            "resumed": bool(result.manifest.get("resumed"))}


def run_bench(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Run the throughput benchmark into ``out/bench/bench.json`` unless it exists."""
    target = out / "bench" / "bench.json"
    if target.exists():
        print(f"  bench: {target} exists, skipped")
        return {"status": "skipped"}
    cmd = [sys.executable, str(BENCHMARK), "--size", args.scale, "--json", str(target),
           "--epochs", "2" if args.scale == "paper" else "0.5",
           "--models", *map(str, BENCH_MODELS[args.scale])]
    if args.device:
        cmd += ["--device", args.device]
    cmd += ["--amp"] if args.amp else []
    cmd += ["--compile"] if args.compile else []
    print("  bench: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return {"status": "trained"}


def brain_config(args: argparse.Namespace):
    """The brain experiment's config at ``args.scale`` (:func:`lstpe.brain.preset`)."""
    from lstpe import brain

    return brain.preset(args.scale, seeds=args.seeds, device=args.device,
                        max_models=args.max_models)


def run_brain(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Train the brain experiment (:func:`lstpe.brain.train_brain`) into ``out/brain``."""
    from lstpe import brain

    run_dir = out / "brain"
    cfg = brain_config(args)
    with res.RunLock(run_dir):
        if res.check_run_dir(run_dir, cfg.to_dict()) == "finished":
            print("  brain: finished run of this configuration exists, skipped")
            return {"status": "skipped"}
        t0 = time.perf_counter()
        brain.train_brain(cfg, run_dir=run_dir, progress=not args.no_progress)
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    return {"status": "trained", "wall_s": round(time.perf_counter() - t0, 1)}


def _save_summary(out: Path, part: str, entry: dict[str, Any]) -> None:
    path = out / "reproduce_summary.json"
    summary: dict[str, Any] = {}
    if path.exists():
        try:
            summary = json.loads(path.read_text())
        except json.JSONDecodeError:
            print(f"  warning: {path} is not valid JSON; starting it again", file=sys.stderr)
        summary = summary if isinstance(summary, dict) else {}
    summary[part] = entry
    res.save_json(summary, path)


def preflight(args: argparse.Namespace, out: Path) -> None:
    """Check everything before hours of training: every job's config, the device, and every
    run folder (writable; a finished run there must be of the same configuration).

    Raises:
        ValueError: the first problem found, naming the value, folder or file.
    """
    from lstpe.notebook import pick_device

    pick_device(args.device or "auto")
    for part in args.parts:
        for job in PARTS[part]:
            res.check_run_dir(out / job.name, job_config(job, args).to_dict())
        if part == "brain":
            res.check_run_dir(out / "brain", brain_config(args).to_dict())
        if part == "bench":
            res.ensure_writable_dir(out / "bench")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Parts: " + ", ".join(PARTS))
    p.add_argument("--parts", nargs="+", default=DEFAULT_PARTS, metavar="PART",
                   help=f"parts to run, in order (default: {' '.join(DEFAULT_PARTS)})")
    p.add_argument("--scale", default="paper", help="paper (GPU) or preview (CPU dry run)")
    p.add_argument("--out", help="results folder (default: results/<scale> of the repository)")
    p.add_argument("--epochs", type=int, help="override every part's epochs (dry runs)")
    p.add_argument("--seeds", type=int, nargs="+", help="override the seeds (dry runs)")
    p.add_argument("--d-model", type=int, help="override the model width (dry runs)")
    p.add_argument("--n-layers", type=int, help="override the number of blocks (dry runs)")
    p.add_argument("--n-train", type=int, help="stratified training subset (dry runs)")
    p.add_argument("--device", help="auto (default), cuda, cpu, ...")
    p.add_argument("--amp", action="store_true", help="bf16 autocast (CUDA or CPU)")
    p.add_argument("--compile", action="store_true", help="torch.compile the batched models")
    p.add_argument("--max-models", type=int,
                   help="models per batch at most (lower it if the GPU runs out of memory)")
    p.add_argument("--checkpoint-every", type=int, help="epochs between checkpoints")
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the selected parts; 0 if all finished, 1 if one failed, 2 on bad arguments or a
    run folder that cannot be used (another configuration's finished run, damaged, locked,
    not writable)."""
    args = build_parser().parse_args(argv)
    try:
        bad = [p for p in args.parts if p not in PARTS]
        if bad:
            raise ValueError(f"unknown part(s) {', '.join(map(repr, bad))}; valid parts: "
                             f"{', '.join(PARTS)}")
        from lstpe.notebook import default_results_dir

        out = Path(args.out) if args.out else default_results_dir() / args.scale
        preflight(args, out)  # validate everything before hours of training
    except (ValueError, OSError) as e:
        print(f"reproduce: error: {e}", file=sys.stderr)
        return 2
    print(f"reproduce: scale {args.scale}, parts {' '.join(args.parts)} -> {out}")
    failed = []
    for part in args.parts:
        print(f"[{part}]", flush=True)
        t0 = time.perf_counter()
        try:
            if part in ("bench", "brain"):
                jobs = [(run_bench if part == "bench" else run_brain)(args, out)]
            else:
                jobs = [run_job(j, args, out) for j in PARTS[part]]
            status = "ok"
        except Exception as e:  # noqa: BLE001 - keep going with the other parts
            jobs, status = [], f"failed: {type(e).__name__}: {e}"
            failed.append(part)
            print(f"  {status}", file=sys.stderr, flush=True)
        wall = time.perf_counter() - t0
        print(f"[{part}] {status}, wall time {wall:.1f} s ({wall / 3600:.2f} h)", flush=True)
        _save_summary(out, part, {"status": status, "wall_s": round(wall, 1), "jobs": jobs,
                                  "scale": args.scale})
    if failed:
        print(f"reproduce: failed parts: {' '.join(failed)} (rerun to resume them)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
