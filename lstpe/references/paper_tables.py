"""The paper's Tables 1-6 in long form (vendored ``paper_tables.csv`` and
``attention_similarity_table3.csv``; see ``lstpe/data/PROVENANCE.md``): a mean and an SD over
the authors' 15 seeds per table, optimiser setting, PE and metric."""

from __future__ import annotations

import math
from importlib import resources

import pandas as pd

from lstpe.nn.encodings import parse_pe

__all__ = ["load_paper_tables", "PAPER_N_SEEDS", "PAPER_METRICS", "METRIC_RANGE"]

PAPER_N_SEEDS = 15
"""Seeds behind every mean and SD of the paper's tables."""

PAPER_METRICS: tuple[str, ...] = ("val_acc", "train_acc", "attention_cosine")

METRIC_RANGE: dict[str, tuple[float, float]] = {
    "val_acc": (0.0, 1.0), "train_acc": (0.0, 1.0), "attention_cosine": (0.0, 1.0),
}
"""Range of each paper metric (accuracies; cosine of non-negative attention weights): our
confidence intervals are clipped to it."""


def _read(name: str) -> pd.DataFrame:
    with resources.files("lstpe").joinpath("data", name).open("r") as f:
        return pd.read_csv(f, dtype={"table": str, "setting": str, "pe": str})


def load_paper_tables() -> pd.DataFrame:
    """The paper's Tables 1-6 in long form (vendored ``paper_tables.csv`` and
    ``attention_similarity_table3.csv``).

    Returns:
        ``table`` (``"1"``..``"6"``), ``setting`` (``adam``, ``sgd``, ``adamw-wd0.1``), ``pe``
        (full label, e.g. ``learn-0.2``), ``pe_name``, ``sigma``, ``metric`` (``val_acc``,
        ``train_acc``, ``attention_cosine``), ``mean``, ``sd``, ``n`` (15 seeds).
    """
    t = _read("paper_tables.csv")
    rows = []
    for r in t.itertuples(index=False):
        sigma = None if pd.isna(r.sigma) else float(r.sigma)
        spec = parse_pe(r.pe if r.pe != "learn" else f"learn-{sigma:g}")
        for metric in ("val_acc", "train_acc"):
            mean, sd = getattr(r, metric), getattr(r, metric.replace("acc", "sd"))
            if pd.isna(mean):
                continue
            rows.append({"table": str(r.table), "setting": r.setting, "pe": spec.label,
                         "pe_name": spec.name,
                         "sigma": spec.sigma if spec.sigma is not None else math.nan,
                         "metric": metric, "mean": float(mean), "sd": float(sd)})
    t3 = _read("attention_similarity_table3.csv")
    for r in t3.itertuples(index=False):
        spec = parse_pe(f"learn-{float(r.sigma):g}")
        rows.append({"table": "3", "setting": "adam", "pe": spec.label, "pe_name": spec.name,
                     "sigma": spec.sigma, "metric": "attention_cosine",
                     "mean": float(r.cosine_to_2d_fixed), "sd": float(r.sd)})
    out = pd.DataFrame(rows)
    out["n"] = PAPER_N_SEEDS
    return out
