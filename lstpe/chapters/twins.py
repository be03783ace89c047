"""One model trained twice: the same seed and recipe on two machines (chapter 11).

Several long runs (:data:`lstpe.experiments.long_units.LONG_PLAN`) start from epoch 0 with a
seed and recipe that a stored 200-epoch model already has (its fragment under
``results/paper/``), often on another machine (a GPU, or a CPU of another kind). Their first
segment (epochs 0-200) is therefore the same model trained again. :func:`machine_twins` sets
each such pair side by side: the first logged epoch at which their running training accuracy
differs, and their validation accuracy (as the authors evaluated it) at epoch 200.
Floating-point sums in another order on another machine are enough to part two runs of one
model; how far they part is what the table measures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lstpe.analysis.long_runs import split_accuracy
from lstpe.experiments import long_units as lu
from lstpe.experiments.units import IGNORED_KEYS, plan
from lstpe.store import model as mf
from lstpe.store import results as res

__all__ = ["TWIN_COLUMNS", "machine_twins", "twin_facts", "twin_table"]

TWIN_COLUMNS = ("model", "stored_on", "again_on", "precisions", "first_apart", "val_stored",
                "val_again", "gap")
"""``model`` (``run/pe/seed`` of the long run), ``stored_on`` / ``again_on`` (each one's
machine: its device, and its CPU's flags where recorded), ``precisions`` (both runs'
arithmetic, e.g. ``fp32/fp32``; ``?`` where not recorded), ``first_apart`` (the first logged
epoch whose running training accuracy differs; NaN: none up to 200), ``val_stored`` /
``val_again`` (validation accuracy with dropout on at epoch 200), ``gap`` (their absolute
difference)."""

_SAME_RECIPE_IGNORES = (*IGNORED_KEYS, "epochs", "noise_levels")
"""What a long run's config may differ in from its fragment twin: how it runs, how long (its
learning rate does not depend on the length) and what it evaluates at the end."""


def _machine(manifest: dict[str, Any]) -> str:
    """A manifest's machine in words: its device, with the CPU's flags where recorded."""
    flags = ((manifest.get("long") or {}).get("cpu_flags")
             or ((manifest.get("campaign") or {}).get("machine") or {}).get("cpu_flags"))
    device = str(manifest.get("device", "?"))
    if device.startswith("cuda"):
        return device.split(":", 1)[-1].strip()
    return f"CPU ({' '.join(flags)})" if flags else "CPU (flags not recorded)"


def _precision(manifest: dict[str, Any]) -> str:
    """A manifest's arithmetic (``fp32``, ``bf16``), ``?`` where it records none."""
    return str((manifest.get("long") or {}).get("precision")
               or (manifest.get("campaign") or {}).get("precision") or "?")


def machine_twins(results_dir: str | Path | None = None, at: int = 200) -> pd.DataFrame:
    """Every long run whose first segment retrains a stored model of the same recipe and seed.

    Returns:
        :data:`TWIN_COLUMNS`, one row per pair in the plan's order; empty when none is stored.
    """
    rows, seen = [], set()
    for chunk in lu.LONG_PLAN:
        for u in chunk.units:
            segs = mf.segments(u.path(results_dir))
            if u.key in seen or not segs or segs[0].epoch != at:
                continue
            seen.add(u.key)
            again = lu.segment_run(segs[0])
            if (again.manifest.get("long") or {}).get("from_epoch") != 0:
                continue
            for f in (f for f in plan() if (f.pe, f.seed) == (u.pe, u.seed)):
                home = f.path(results_dir)
                if not (home / "manifest.json").is_file() or res.config_diff(
                        u.config().to_dict(), f.config().to_dict(), ignore=_SAME_RECIPE_IGNORES):
                    continue
                stored = res.load(home, artifacts=False)
                ta, tb = (split_accuracy(r.history, "train_running") for r in (stored, again))
                both = ta.index.intersection(tb.index)
                apart = both[(ta[both] - tb[both]).abs().to_numpy() > 0]
                va, vb = (split_accuracy(r.history, "val_dropout").get(at, np.nan)
                          for r in (stored, again))
                rows.append({"model": u.key, "stored_on": _machine(stored.manifest),
                             "again_on": _machine(again.manifest),
                             "precisions": f"{_precision(stored.manifest)}/"
                                           f"{_precision(again.manifest)}",
                             "first_apart": int(apart.min()) if len(apart) else np.nan,
                             "val_stored": va, "val_again": vb, "gap": abs(va - vb)})
                break
    return pd.DataFrame(rows, columns=list(TWIN_COLUMNS))


def twin_facts(twins: pd.DataFrame, final: pd.DataFrame | None = None, n_val: int = 108
               ) -> dict[str, str] | None:
    """Chapter 11's sentence on :func:`machine_twins`: ``n`` (pairs), ``apart`` (where their
    logs first differ: ``between epoch 1 and 60``), ``same`` (pairs never apart up to 200),
    ``median`` and ``largest`` (the gap at 200 in validation puzzles of ``n_val`` and as
    accuracy; the largest with its models), ``over`` (the pairs whose gap exceeds the SD
    between the stored seeds of their PE in ``final``: ``pe, seed, accuracy``, one row per
    model; "–" without it), ``n_over``, ``precision`` (``both in fp32``, or the kinds);
    None when there is no pair."""
    if twins.empty:
        return None
    apart = twins["first_apart"].dropna()
    top = twins["gap"].max()

    def name(m: str) -> str:
        return f"`{m.split('/')[1]}` at seed {m.split('/')[2]}"

    def puzzles(gap: float) -> str:
        k = round(gap * n_val, 1)  # a median of two can fall between whole puzzles
        return f"{k:g} puzzle{'' if k == 1 else 's'} of {n_val} ({gap:.3f})"

    over, n_over = "–", "–"
    if final is not None and len(final):
        sd = final.groupby("pe")["accuracy"].std(ddof=1)
        pe_sd = twins["model"].map(lambda m: sd.get(m.split("/")[1], np.nan))
        big = twins[twins["gap"] > pe_sd]
        n_over = str(len(big))
        over = "; ".join(f"{name(m)}: {g:.3f} against {s:.3f}"
                         for m, g, s in zip(big["model"], big["gap"], pe_sd[big.index],
                                            strict=True)) or "none"
    kinds = sorted({p for pair in twins["precisions"] for p in pair.split("/")})
    return {"n": str(len(twins)),
            "precision": (f"both in {kinds[0]}" if len(kinds) == 1
                          else "in " + ", ".join(kinds) + " (the table says which)"),
            "apart": ("at no logged epoch" if not len(apart)
                      else f"at epoch {int(apart.min())}" if apart.min() == apart.max()
                      else f"between epoch {int(apart.min())} and {int(apart.max())}"),
            "same": str(int(twins["first_apart"].isna().sum())),
            "median": puzzles(float(twins["gap"].median())),
            "largest": (puzzles(float(top)) + ", "
                        + " and ".join(name(m) for m in
                                       twins.loc[np.isclose(twins["gap"], top), "model"])),
            "n_over": n_over, "over": over}


def _short(machine: str) -> str:
    """A machine of :func:`_machine` in a table cell: ``H100``, ``CPU avx512``, ``CPU avx2``."""
    if not machine.startswith("CPU"):
        return next((w for w in machine.split() if w[:1] in "HATLV" and w[1:2].isdigit()),
                    machine)
    return ("CPU avx512" if "avx512f" in machine else "CPU avx2" if "avx2" in machine
            else "CPU")


def twin_table(twins: pd.DataFrame) -> str:
    """:func:`machine_twins` as a Markdown table narrow enough for a phone (the model: PE and
    seed; the two machines; the epoch they part; validation accuracy at 200 of each)."""
    head = ("| model | machines | first differ at epoch | val. acc. at 200 |\n"
            "|---|---|---|---|\n")
    body = "".join(
        f"| `{m.split('/')[1]}`, {m.split('/')[2]} | "
        f"{_short(r.stored_on)} → {_short(r.again_on)} | "
        f"{'–' if np.isnan(r.first_apart) else int(r.first_apart)} | "
        f"{r.val_stored:.3f} → {r.val_again:.3f} |\n"
        for m, r in zip(twins["model"], twins.itertuples(), strict=True))
    return head + body
