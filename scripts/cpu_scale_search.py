"""Search for a CPU scale at which the paper's effects show: which small config is enough?

For each configuration (model width and depth, training puzzles, epochs, learning rate) this
trains every PE the criteria need, with 3 seeds, in one batched model on the CPU, and records
the mean validation accuracy per PE and the wall time. The criteria (the book-quality issue):

(a) learn-sigma with sigma <= 0.2 beats sigma = 2.0 by at least 0.15,
(b) 2d-fixed beats nope and c-nope by at least 0.3,
(c) the other PEs fall between.

Results are appended to ``results/cpu_scale/search.csv`` (one row per config and PE) and
``results/cpu_scale/configs.csv`` (one row per config: wall time, criteria met); a config
already in the CSV is skipped, so the search resumes. The book's training chapter shows the
table, negative results included.

    python scripts/cpu_scale_search.py [--threads 2] [--only N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from lstpe import results as res
from lstpe.encodings import parse_pe
from lstpe.model import ModelConfig
from lstpe.train import PAPER_SEEDS, TrainConfig, train

PES = [parse_pe(p).label for p in ("learn-0.1", "learn-0.2", "learn-2.0", "2d-fixed",
                                   "1d-fixed", "random", "relative", "rope", "nope", "c-nope")]
SMALL, LARGE = parse_pe("learn-0.2").label, parse_pe("learn-2.0").label

CONFIGS = [  # (d_model, n_layers, n_train, epochs, lr, amp)
    (64, 2, 2000, 40, 1e-3, True),
    (64, 2, 8100, 10, 1e-3, True),
    (64, 2, 8100, 20, 3e-4, True),
    (96, 3, 8100, 10, 1e-3, True),
    (128, 4, 8100, 10, 3e-4, True),
]


def criteria(acc: pd.Series) -> dict[str, float | bool]:
    """The three criteria from mean validation accuracy per PE."""
    small = max(acc[parse_pe("learn-0.1").label], acc[SMALL])
    a = small - acc[LARGE]
    b = acc["2d-fixed"] - max(acc["nope"], acc["c-nope"])
    lo, hi = max(acc["nope"], acc["c-nope"]), acc["2d-fixed"]
    others = [p for p in acc.index if p not in ("2d-fixed", "nope", "c-nope")]
    c = all(lo - 0.02 <= acc[p] <= hi + 0.02 for p in others)
    return {"gap_a": round(a, 3), "gap_b": round(b, 3), "a": a >= 0.15, "b": b >= 0.3,
            "c": bool(c), "all": a >= 0.15 and b >= 0.3 and bool(c)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", type=int, nargs="+", help="config indices to run")
    p.add_argument("--out", default="results/cpu_scale")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    done = pd.read_csv(out / "configs.csv") if (out / "configs.csv").exists() else None
    for i, (d, L, n, ep, lr, amp) in enumerate(CONFIGS):
        if args.only and i not in args.only:
            continue
        key = f"d{d}-L{L}-n{n}-e{ep}-lr{lr:g}-{'bf16' if amp else 'fp32'}"
        if done is not None and key in set(done["config"]):
            print(f"{key}: done, skipped")
            continue
        cfg = TrainConfig(pes=PES, seeds=list(PAPER_SEEDS[:3]), epochs=ep, lr=lr, n_train=n,
                          model=ModelConfig(d_model=d, n_layers=L), device="cpu", amp=amp,
                          checkpoint_every=0, save_attention=False, noise_levels=[],
                          eval_epochs=[], preset="custom")
        t0 = time.perf_counter()
        r = train(cfg, progress=False)
        wall = time.perf_counter() - t0
        fin = r.final("val")
        acc = fin.groupby("pe")["accuracy"].mean()
        crit = criteria(acc)
        rows = fin.groupby("pe")["accuracy"].agg(["mean", "std"]).reset_index()
        rows.insert(0, "config", key)
        prev = pd.read_csv(out / "search.csv") if (out / "search.csv").exists() else None
        res.save_table(pd.concat([prev, rows]) if prev is not None else rows,
                       out / "search.csv")
        row = pd.DataFrame([{"config": key, "d_model": d, "n_layers": L, "n_train": n,
                             "epochs": ep, "lr": lr, "amp": amp, "seeds": 3,
                             "wall_s": round(wall, 1), **crit}])
        done = pd.concat([done, row]) if done is not None else row
        res.save_table(done, out / "configs.csv")
        print(f"{key}: {wall:.0f} s, {crit}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
