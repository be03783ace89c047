"""Which CPU scale shows the paper's effects? The criteria, the configurations tried, the table.

For each configuration (model width and depth, training puzzles, epochs, learning rate) the
search trains every PE the criteria need, with 3 seeds, as one batched model on the CPU
(``scripts/cpu_scale_search.py``), and records the mean validation accuracy per PE and the wall
time. The criteria (a reader's question: at which cost does a CPU show the paper?):

(a) learn-sigma with sigma <= 0.2 beats sigma = 2.0 by at least :data:`GAP_A`;
(b) 2d-fixed beats nope and c-nope by at least :data:`GAP_B`;
(c) the other PEs fall between (within :data:`SLACK`).

The results live in ``results/cpu_scale/``: ``search.csv`` (one row per configuration and PE)
and ``configs.csv`` (one row per configuration: wall time, gaps, criteria met). A stored CPU run
(``results/cpu/``) is one more row (:func:`stored_row`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from lstpe.nn.encodings import parse_pe
from lstpe.runtime import PAPER_SEEDS
from lstpe.store.results import results_root

if TYPE_CHECKING:
    from lstpe.store.results import Run

GAP_A = 0.15
"""Criterion (a): small sigma over sigma 2.0, in mean validation accuracy."""
GAP_B = 0.3
"""Criterion (b): 2d-fixed over the better of nope and c-nope."""
SLACK = 0.02
"""Criterion (c): how far outside [best of nope/c-nope, 2d-fixed] another PE may fall."""

PES: list[str] = [parse_pe(p).label for p in (
    "learn-0.1", "learn-0.2", "learn-2.0", "2d-fixed", "1d-fixed", "random", "relative", "rope",
    "nope", "c-nope")]
"""The PEs every configuration trains."""

SEEDS: list[int] = list(PAPER_SEEDS[:3])


@dataclass(frozen=True)
class ScaleConfig:
    """One configuration of the search."""

    d_model: int
    n_layers: int
    n_train: int
    epochs: int
    lr: float
    amp: bool = True

    @property
    def key(self) -> str:
        return (f"d{self.d_model}-L{self.n_layers}-n{self.n_train}-e{self.epochs}-"
                f"lr{self.lr:g}-{'bf16' if self.amp else 'fp32'}")


CONFIGS: tuple[ScaleConfig, ...] = (
    ScaleConfig(64, 2, 8100, 10, 1e-3),
    ScaleConfig(64, 2, 2000, 40, 1e-3),
    ScaleConfig(64, 2, 8100, 20, 3e-4),
    ScaleConfig(96, 3, 8100, 10, 1e-3),
    ScaleConfig(128, 4, 8100, 10, 3e-4),
)
"""The configurations tried, cheapest first (the preview is d=64, 2 blocks, 1000 puzzles, 8
epochs, lr 1e-3)."""


def criteria(acc: pd.Series) -> dict[str, float | bool]:
    """The three criteria from the mean validation accuracy per PE (indexed by label).

    Returns:
        ``gap_a``, ``gap_b`` (the two gaps) and ``a``, ``b``, ``c``, ``all`` (met or not).
    Raises:
        KeyError: a PE the criteria need is missing (naming it).
    """
    missing = [p for p in ("learn-0.1", "learn-0.2", "learn-2", "2d-fixed", "nope", "c-nope")
               if p not in acc.index]
    if missing:
        raise KeyError(f"the criteria need mean accuracies of {', '.join(missing)}")
    a = float(max(acc["learn-0.1"], acc["learn-0.2"]) - acc["learn-2"])
    lo, hi = float(max(acc["nope"], acc["c-nope"])), float(acc["2d-fixed"])
    b = hi - lo
    others = [p for p in acc.index if p not in ("2d-fixed", "nope", "c-nope")]
    c = all(lo - SLACK <= float(acc[p]) <= hi + SLACK for p in others)
    return {"gap_a": round(a, 3), "gap_b": round(b, 3), "a": a >= GAP_A, "b": b >= GAP_B,
            "c": c, "all": a >= GAP_A and b >= GAP_B and c}


def folder(results_dir: str | Path | None = None) -> Path:
    """``<results>/cpu_scale``."""
    return results_root(results_dir) / "cpu_scale"


def table(results_dir: str | Path | None = None) -> pd.DataFrame | None:
    """The configurations tried (``configs.csv``), or None when the search has not run."""
    path = folder(results_dir) / "configs.csv"
    return pd.read_csv(path) if path.exists() else None


def per_pe(results_dir: str | Path | None = None) -> pd.DataFrame | None:
    """Mean validation accuracy per configuration (rows) and PE (columns), or None."""
    t = per_pe_rows(results_dir)
    if t is None:
        return None
    return t.pivot_table(index="config", columns="pe", values="mean", sort=False)[
        [p for p in PES if p in set(t["pe"])]]


def per_pe_rows(results_dir: str | Path | None = None) -> pd.DataFrame | None:
    """``search.csv`` as stored (config, pe, mean, std), or None."""
    path = folder(results_dir) / "search.csv"
    return pd.read_csv(path) if path.exists() else None


def run_row(runs: Sequence[Run], label: str) -> dict:
    """The row of stored runs (e.g. the ``cpu`` runs): their configuration, wall time and the
    criteria on their mean validation accuracy per PE (a PE in several runs counts once per
    seed). A criterion whose PEs the runs lack is left empty (None)."""
    fin = pd.concat([r.final("val") for r in runs]).drop_duplicates(["pe", "seed"])
    acc = fin.groupby("pe")["accuracy"].mean()
    cfg, man = runs[0].config, runs[0].manifest
    model = cfg.get("model") or {}
    row = {"config": label, "d_model": model.get("d_model"), "n_layers": model.get("n_layers"),
           "n_train": cfg.get("n_train") or man.get("n_train"), "epochs": cfg.get("epochs"),
           "lr": cfg.get("lr"), "amp": cfg.get("amp"), "seeds": len(cfg.get("seeds", [])),
           "wall_s": man.get("wall_time_s")}
    try:
        return {**row, **criteria(acc)}
    except KeyError:
        pass
    part: dict = dict.fromkeys(("gap_a", "gap_b", "a", "b", "c", "all"))
    have = set(acc.index)
    if "learn-2" in have and have & {"learn-0.1", "learn-0.2"}:
        small = max(acc.get("learn-0.1", -1.0), acc.get("learn-0.2", -1.0))
        part["gap_a"] = round(float(small - acc["learn-2"]), 3)
        part["a"] = part["gap_a"] >= GAP_A
    return {**row, **part}


def stored_cpu_runs(results_dir: str | Path | None = None) -> list[Run]:
    """The stored ``cpu`` runs of Table 1 and Table 2 that exist (read without artefacts:
    only their histories and manifests are needed here)."""
    from lstpe.store.results import load

    base = results_root(results_dir)
    return [load(base / "cpu" / n, artifacts=False) for n in ("table1", "table2")
            if all((base / "cpu" / n / f).exists() for f in ("manifest.json", "history.csv"))]


def tried(results_dir: str | Path | None = None) -> pd.DataFrame | None:
    """Every configuration tried: the search's, plus the stored ``cpu`` runs of Table 1 and
    Table 2 as one row (the paper's model trained on a CPU) when they exist; None if neither."""
    rows = [] if (t := table(results_dir)) is None else t.to_dict("records")
    cpu = stored_cpu_runs(results_dir)
    if cpu:
        rows.append(run_row(cpu, "cpu run (results/cpu): the paper's model, " +
                            " + ".join(r.name for r in cpu)))
    if not rows:
        return None
    cols = ["config", "d_model", "n_layers", "n_train", "epochs", "lr", "seeds", "wall_s",
            "gap_a", "gap_b", "a", "b", "c", "all"]
    return pd.DataFrame(rows)[cols]


def stored_cpu_accuracy(results_dir: str | Path | None = None) -> pd.DataFrame | None:
    """Final mean accuracy per PE of the stored ``cpu`` runs: validation (the 108 human
    puzzles) and training puzzles (eval mode), or None when there is none."""
    cpu = stored_cpu_runs(results_dir)
    if not cpu:
        return None
    cols = {}
    for split in ("val", "train"):
        fin = pd.concat([r.final(split) for r in cpu]).drop_duplicates(["pe", "seed"])
        cols[split] = fin.groupby("pe", sort=False)["accuracy"].mean()
    return pd.DataFrame(cols).rename_axis("pe").sort_values("train", ascending=False)
