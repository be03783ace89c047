"""The campaign's one decision on precision, and the pair of runs that earns bf16 its place.

Precision is decided here and only here (:func:`decide`), with one reason string:

* a CUDA device: fp32 with TF32 off, as the authors' V100 trained (no precision pair has
  been run on a GPU, and a stored result earns bf16 only through one); a GPU lease trains
  long units, which then continue on CPUs in fp32 without a change of precision;
* a CPU without bf16 instructions (AMD EPYC, avx2 only): fp32 -- bf16 is emulated there,
  about 50x slower;
* a CPU with bf16 instructions (Intel Xeon with ``avx512_bf16`` / ``amx_bf16``): bf16 autocast
  only once the **precision pair** stored for that kind of CPU (:func:`pair_dir`) shows that
  bf16 leaves validation accuracy within the seed-to-seed spread (:func:`pair_verdict`);
  fp32 until then.

The precision pair (:func:`run_pair`, ``lstpe campaign pair``): :data:`PAIR_PES` x
:data:`PAIR_SEEDS`, the paper's recipe for :data:`PAIR_EPOCHS` epochs, once in fp32 and once
with bf16 autocast (fp32 weights, optimizer and loss), evaluated every epoch. Both runs are
stored under ``results/precision_pair/<cpu>/{fp32,bf16}/`` and compared per epoch
(:func:`pair_table`): the bf16-minus-fp32 difference of each seed's validation accuracy beside
the difference between the two seeds of one precision (the seed spread).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from lstpe.runtime import PAPER_SEEDS, cpu_flags, default_results_dir, has_bf16
from lstpe.store import results as res

PAIR_PES: tuple[tuple[str, str], ...] = (("table2", "2d-fixed"), ("table2", "learn-0.2"),
                                         ("table2", "learn-2"), ("table1", "c-nope"))
"""(registry run, PE) of the pair: the fixed 2-D reference, a small and a large sigma, and a
PE at chance (where bf16 rounding could tip a model that has not started to learn)."""

PAIR_SEEDS: tuple[int, ...] = PAPER_SEEDS[:2]
"""Two seeds: their difference is the seed spread that bf16 is measured against."""

PAIR_EPOCHS = 30
"""Epochs of each run of the pair: long enough for 2d-fixed and learn-0.2 to leave chance,
short enough (about 40 minutes of a 2-core Xeon for both runs) to run before a campaign."""

PAIR_METRIC = ("val_dropout", "all")
"""The compared accuracy: validation accuracy as the authors evaluated it."""


def cpu_tag(flags: list[str] | None = None) -> str:
    """The kind of CPU a pair holds for: ``bf16-<flags>`` where the CPU has bf16 instructions
    (``bf16-avx512_bf16-amx_bf16``), else ``fp32-only``."""
    flags = cpu_flags() if flags is None else flags
    bf = [f for f in flags if f in ("avx512_bf16", "amx_bf16")]
    return "bf16-" + "-".join(bf) if bf else "fp32-only"


def gpu_tag(name: str, tf32: bool = False, autocast: str = "bf16") -> str:
    """The kind of GPU setting a pair holds for: ``gpu-<model>-tf32<on|off>-<autocast>``
    (``gpu-NVIDIA-H200-tf32off-bf16``). It never equals a :func:`cpu_tag`, so a GPU's pair
    cannot decide a CPU's precision, nor the reverse."""
    model = "-".join(name.replace("_", " ").split())
    return f"gpu-{model}-tf32{'on' if tf32 else 'off'}-{autocast}"


def device_tag(device: torch.device | str = "cpu", gpu_name: str | None = None) -> str:
    """:func:`cpu_tag` on a CPU, :func:`gpu_tag` on CUDA (its name read from the device
    unless ``gpu_name`` is given; TF32 as the engine runs it: off)."""
    device = torch.device(device)
    if device.type != "cuda":
        return cpu_tag()
    from lstpe.training.train import TF32

    if gpu_name is None:  # "unknown" where CUDA is not there to ask (a CPU-only test)
        gpu_name = torch.cuda.get_device_name(device) if torch.cuda.is_available() else "unknown"
    return gpu_tag(gpu_name, tf32=bool(TF32))


def pair_dir(results_dir: str | Path | None = None, tag: str | None = None,
             device: torch.device | str = "cpu") -> Path:
    """``<results>/precision_pair/<tag>/``, by default the tag of ``device``
    (:func:`device_tag`)."""
    base = Path(results_dir) if results_dir is not None else default_results_dir()
    return base / "precision_pair" / (tag or device_tag(device))


def pair_configs(device: str = "cpu", **overrides: Any) -> dict[str, list]:
    """The pair's configurations: ``{"fp32": [...], "bf16": [...]}``, one per (PE, seed)."""
    from lstpe.experiments.campaign import Unit

    out: dict[str, list] = {}
    for name, amp in (("fp32", False), ("bf16", True)):
        kw = dict(epochs=PAIR_EPOCHS, amp=amp, noise_levels=[], dense_until=PAIR_EPOCHS,
                  save_attention=False)
        kw.update(overrides)
        out[name] = [Unit(run, pe, s).config(device=device, **kw)
                     for run, pe in PAIR_PES for s in PAIR_SEEDS]
    return out


def run_pair(results_dir: str | Path | None = None, device: str = "cpu", log=print,
             **overrides: Any) -> dict[str, list[res.Run]]:
    """Train (or read, where stored) both runs of the pair; resumable (checkpoints per run).

    Raises:
        ValueError: the CPU has no bf16 instructions (the pair would measure emulation).
    """
    from lstpe.training.train import train_many

    if torch.device(device).type == "cpu" and not has_bf16():
        raise ValueError("this CPU has no bf16 instructions (flags: "
                         f"{' '.join(cpu_flags()) or 'unknown'}): no precision pair to run")
    base = pair_dir(results_dir, device=device)
    out: dict[str, list[res.Run]] = {}
    for name, cfgs in pair_configs(device, **overrides).items():
        dirs = [base / name / f"{c.pes[0]}__{c.seeds[0]}" for c in cfgs]
        if all((d / "manifest.json").exists() for d in dirs):
            out[name] = [res.load(d, artifacts=False) for d in dirs]
            continue
        log(f"precision pair: training {name} ({len(cfgs)} models, {PAIR_EPOCHS} epochs)")
        out[name] = train_many(cfgs, dirs, progress=False, work_dir=base / name / "checkpoints")
    return out


def load_pair(results_dir: str | Path | None = None, tag: str | None = None
              ) -> dict[str, list[res.Run]] | None:
    """The stored pair of this kind of CPU (verified on load), or None if it is not stored."""
    base = pair_dir(results_dir, tag)
    out = {}
    for name in ("fp32", "bf16"):
        dirs = sorted(p for p in (base / name).glob("*__*") if (p / "manifest.json").exists())
        if len(dirs) != len(PAIR_PES) * len(PAIR_SEEDS):
            return None
        out[name] = [res.load(d, artifacts=False) for d in dirs]
    return out


def stored_pairs(results_dir: str | Path | None = None) -> dict[str, dict[str, list[res.Run]]]:
    """Every stored precision pair, by CPU tag (chapter 11 shows them wherever they ran)."""
    base = pair_dir(results_dir, "x").parent
    tags = sorted(p.name for p in base.glob("*") if p.is_dir()) if base.is_dir() else []
    return {t: pr for t in tags if (pr := load_pair(results_dir, t)) is not None}


def pair_table(pair: dict[str, list[res.Run]]) -> pd.DataFrame:
    """Per PE and epoch: ``pe, epoch, fp32_<seed>, bf16_<seed>`` (validation accuracy as the
    authors evaluated it), ``diff`` (bf16 minus fp32, the mean over seeds), ``max_abs_diff``
    (over seeds) and ``seed_spread`` (|seed 1 - seed 2| in fp32)."""
    split, cond = PAIR_METRIC
    rows = []
    for name, runs in pair.items():
        for r in runs:
            h = r.history
            h = h[(h["split"] == split) & (h["condition"].astype(str) == cond)]
            for _, x in h.iterrows():
                rows.append({"precision": name, "pe": x["pe"], "seed": int(x["seed"]),
                             "epoch": int(x["epoch"]), "accuracy": float(x["accuracy"])})
    t = pd.DataFrame(rows).pivot_table(index=["pe", "epoch"], columns=["precision", "seed"],
                                       values="accuracy")
    seeds = sorted({s for _, s in t.columns})
    out = pd.DataFrame(index=t.index)
    for p in ("fp32", "bf16"):
        for s in seeds:
            out[f"{p}_{s}"] = t[(p, s)]
    d = np.stack([t[("bf16", s)] - t[("fp32", s)] for s in seeds], axis=1)
    out["diff"] = d.mean(axis=1)
    out["max_abs_diff"] = np.abs(d).max(axis=1)
    out["seed_spread"] = (t[("fp32", seeds[0])] - t[("fp32", seeds[-1])]).abs()
    return out.reset_index()


def pair_verdict(table: pd.DataFrame, last: int = 10) -> dict[str, Any]:
    """Whether bf16 stays within the seed spread, over the last ``last`` epochs of the pair.

    Per PE: the mean over those epochs of |bf16 - fp32| (per seed) against the mean of the
    fp32 seed spread over the same epochs. ``ok`` when, for every PE, the precision
    difference is no larger than the seed spread (bf16 then moves a model less than a change
    of seed does). Returns ``{"ok", "per_pe": DataFrame(pe, precision_diff, seed_spread),
    "epochs": (first, last)}``.
    """
    top = int(table["epoch"].max())
    t = table[table["epoch"] > top - last]
    seeds = [c for c in t.columns if c.startswith("fp32_")]
    per = []
    for pe, g in t.groupby("pe"):
        dif = np.mean([np.abs(g[f"bf16_{c[5:]}"] - g[c]).mean() for c in seeds])
        per.append({"pe": pe, "precision_diff": float(dif),
                    "seed_spread": float(g["seed_spread"].mean())})
    per_pe = pd.DataFrame(per)
    ok = bool((per_pe["precision_diff"] <= per_pe["seed_spread"]).all())
    return {"ok": ok, "per_pe": per_pe, "epochs": (top - last + 1, top)}


def no_pair_line(cpu_flags_of_units: pd.Series) -> str:
    """The sentence a report gives while no precision pair is stored, from the ``cpu flags``
    column of :func:`lstpe.experiments.campaign_status.stored_units` (one string per unit):
    every unit trained in fp32, and how many of them on a CPU with bf16 instructions."""
    bf = cpu_flags_of_units.fillna("").str.split().map(
        lambda f: any(x in ("avx512_bf16", "amx_bf16") for x in f))
    line = "No precision pair is stored: every unit trained in fp32."
    if bf.any():
        line += (f" {int(bf.sum())} of the {len(bf)} units trained on a CPU with bf16 "
                 "instructions, in fp32, because the pair comes first there and has not run yet.")
    else:
        line += " No CPU with bf16 instructions has trained a unit for this project yet."
    return line


def decide(device: torch.device, results_dir: str | Path | None = None
           ) -> tuple[bool | torch.dtype, str, str]:
    """The campaign's precision on ``device``: ``(amp, name, why)`` with ``amp`` for
    :class:`~lstpe.training.config.TrainConfig` (False = fp32, True = the device's autocast)."""
    if device.type == "cuda":
        tag = device_tag(device)
        pair = load_pair(results_dir, tag)
        if pair is None:
            return False, "fp32", ("fp32 with TF32 off, as the authors' V100: no precision "
                                   f"pair is stored for {tag}")
        v = pair_verdict(pair_table(pair))
        return (True, "bf16", f"bf16 autocast: the precision pair of {tag} moves validation "
                "accuracy less than a change of seed") if v["ok"] else \
            (False, "fp32", f"fp32 with TF32 off: the precision pair of {tag} moves validation "
             "accuracy more than a change of seed")
    if device.type != "cpu":
        return False, "fp32", f"fp32 (no mixed precision on {device.type})"
    if not has_bf16():
        return False, "fp32", ("fp32: this CPU has no bf16 instructions (flags: "
                               f"{' '.join(cpu_flags()) or 'unknown'}), where bf16 is emulated")
    pair = load_pair(results_dir)
    if pair is None:
        return False, "fp32", (f"fp32: this CPU has bf16 instructions ({cpu_tag()}), but no "
                               "precision pair is stored for it (lstpe campaign pair)")
    v = pair_verdict(pair_table(pair))
    worst = v["per_pe"].assign(r=lambda d: d.precision_diff - d.seed_spread).nlargest(1, "r")
    pe, dif, spread = worst.iloc[0][["pe", "precision_diff", "seed_spread"]]
    if v["ok"]:
        return True, "bf16", (f"bf16 autocast: the precision pair of {cpu_tag()} moves "
                              f"validation accuracy less than a change of seed (largest: {pe}, "
                              f"{dif:.3f} vs seed spread {spread:.3f}, epochs "
                              f"{v['epochs'][0]}-{v['epochs'][1]})")
    return False, "fp32", (f"fp32: the precision pair of {cpu_tag()} moves {pe} by {dif:.3f}, "
                           f"more than its seed spread {spread:.3f}")
