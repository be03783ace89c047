"""Search for a CPU scale at which the paper's effects show (:mod:`lstpe.experiments.scale_search`).

Trains each configuration of :data:`lstpe.experiments.scale_search.CONFIGS` (every PE of the
criteria, 3
seeds, one batched model on the CPU) and appends its results to ``results/cpu_scale/``
(``search.csv``: mean and SD of the final validation accuracy per PE; ``configs.csv``: wall
time, gaps and criteria met). A configuration already in ``configs.csv`` is skipped, so the
search resumes.

    python scripts/cpu_scale_search.py [--threads 2] [--only 0 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict

import pandas as pd
import torch

from lstpe.experiments import scale_search as ss
from lstpe.nn.architecture import ModelConfig
from lstpe.store import results as res
from lstpe.training.config import TrainConfig
from lstpe.training.train import train


def run_one(c: ss.ScaleConfig) -> tuple[pd.DataFrame, dict]:
    """Train one configuration; return its per-PE rows and its summary row."""
    cfg = TrainConfig(pes=ss.PES, seeds=ss.SEEDS, epochs=c.epochs, lr=c.lr, n_train=c.n_train,
                      model=ModelConfig(d_model=c.d_model, n_layers=c.n_layers), device="cpu",
                      amp=c.amp, checkpoint_every=0, save_attention=False, noise_levels=[],
                      eval_epochs=[c.epochs], preset="custom")
    t0 = time.perf_counter()
    fin = train(cfg, progress=False).final("val")
    wall = time.perf_counter() - t0
    rows = fin.groupby("pe", sort=False)["accuracy"].agg(["mean", "std"]).reset_index()
    rows.insert(0, "config", c.key)
    summary = {"config": c.key, **asdict(c), "seeds": len(ss.SEEDS), "threads":
               torch.get_num_threads(), "wall_s": round(wall, 1),
               **ss.criteria(rows.set_index("pe")["mean"])}
    return rows, summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", type=int, nargs="+", help="indices into CONFIGS")
    p.add_argument("--results-dir", help="results folder (default: the repository's)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = ss.folder(args.results_dir)
    for i, c in enumerate(ss.CONFIGS):
        done = ss.table(args.results_dir)
        if (args.only and i not in args.only) or (done is not None
                                                  and c.key in set(done["config"])):
            continue
        rows, summary = run_one(c)
        prev = ss.per_pe_rows(args.results_dir)
        res.save_table(pd.concat([prev, rows]) if prev is not None else rows,
                       out / "search.csv")
        row = pd.DataFrame([summary])
        res.save_table(pd.concat([done, row]) if done is not None else row, out / "configs.csv")
        print(f"{c.key}: {summary['wall_s']:.0f} s, gaps {summary['gap_a']:+.3f} / "
              f"{summary['gap_b']:+.3f}, criteria met: {summary['all']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
