"""The campaign's one decision on precision, and the pair of runs that earns bf16 its place.

Precision is decided here and only here (:func:`decide`), with one reason string:

* a CUDA device: fp32 with TF32 off, as the authors' V100 trained (no precision pair has
  been run on a GPU, and a stored result earns bf16 only through a pair of that model of
  card, ``lstpe campaign pair --device cuda``); long units trained on a GPU in fp32 then
  continue on CPUs without a change of precision;
* a CPU without bf16 instructions (AVX2 only: older AMD EPYCs and Intel Xeons): fp32 --
  bf16 is emulated there, many times slower;
* a CPU with bf16 instructions (``avx512_bf16``: AMD EPYC Zen 4, most of this project's
  machines; ``amx_bf16``: recent Intel Xeons): bf16 autocast only once the **precision pair**
  stored for that kind of CPU (:func:`pair_dir`) shows that bf16 leaves validation accuracy
  within the seed-to-seed spread (:func:`pair_verdict`); fp32 until then. On a 2-core Zen 4
  EPYC at the paper's size, bf16 autocast trains the batched engine about 2x faster than fp32
  (``benchmarks/train_throughput.py``: 0.277 against 0.136 model-epochs/s at 4 models, on
  oneDNN's avx512_core_bf16 matmuls).

The precision pair (:func:`run_pair`, ``lstpe campaign pair``): :data:`PAIR_PES` x
:data:`PAIR_SEEDS`, the paper's recipe for :data:`PAIR_EPOCHS` epochs, once in fp32 and once
with bf16 autocast (fp32 weights, optimizer and loss), evaluated every epoch. Both runs are
stored under ``results/precision_pair/<cpu>/{fp32,bf16}/`` and compared per epoch
(:func:`pair_table`): the bf16-minus-fp32 difference of each seed's validation accuracy beside
the difference between the two seeds of one precision (the seed spread). A stored pair decides
only as what it is (:func:`check_pair`): every run in the precision of its folder (its ``amp``
and recorded precision), of :data:`PAIR_EPOCHS` epochs, the same configuration in both
precisions, no model diverged and no accuracy NaN; otherwise fp32, naming the run at fault.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from lstpe.runtime import PAPER_SEEDS, cpu_flags, has_bf16
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

CANDIDATES: tuple[str, ...] = ("bf16", "tf32")
"""The precisions a pair can clear against fp32: ``bf16`` autocast (fp32 weights, optimizer
and loss) and, on a GPU, ``tf32`` (fp32 with TF32 matmuls, no autocast). A pair holds the
fp32 runs and the candidate's, in folders of those names."""


def tag_candidate(tag: str) -> str:
    """The candidate a pair's tag is for: ``tf32`` for a :func:`gpu_tag` with TF32 on and no
    autocast (``...-tf32on-fp32``), else ``bf16``."""
    return "tf32" if tag.endswith("-tf32on-fp32") else "bf16"


def candidate_tag(gpu_name: str, candidate: str) -> str:
    """The tag under which a pair of ``candidate`` on the GPU ``gpu_name`` is stored:
    ``gpu-<model>-tf32off-bf16`` for bf16, ``gpu-<model>-tf32on-fp32`` for TF32; each clears
    its own candidate on that model of card only.

    Raises:
        ValueError: an unknown candidate (naming it and the known ones).
    """
    if candidate not in CANDIDATES:
        raise ValueError(f"unknown precision candidate {candidate!r}; valid: "
                         f"{', '.join(CANDIDATES)}")
    return gpu_tag(gpu_name, tf32=candidate == "tf32",
                   autocast="bf16" if candidate == "bf16" else "fp32")


def _candidate(pair: dict[str, Any]) -> str:
    """The candidate precision of a pair (its key besides ``fp32``; ``bf16`` if none)."""
    return next((k for k in pair if k in CANDIDATES), "bf16")


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
    base = res.results_root(results_dir)
    return base / "precision_pair" / (tag or device_tag(device))


def pair_configs(device: str = "cpu", candidate: str = "bf16", **overrides: Any
                 ) -> dict[str, list]:
    """The pair's configurations: ``{"fp32": [...], "bf16": [...]}`` (``"tf32"`` for that
    candidate: fp32 configurations, trained with TF32 matmuls), one per (PE, seed)."""
    from lstpe.experiments.units import Unit

    out: dict[str, list] = {}
    for name, amp in (("fp32", False), (candidate, candidate == "bf16")):
        kw = dict(epochs=PAIR_EPOCHS, amp=amp, noise_levels=[], dense_until=PAIR_EPOCHS,
                  save_attention=False)
        kw.update(overrides)
        out[name] = [Unit(run, pe, s).config(device=device, **kw)
                     for run, pe in PAIR_PES for s in PAIR_SEEDS]
    return out


def run_pair(results_dir: str | Path | None = None, device: str = "cpu", log=print,
             candidate: str = "bf16", **overrides: Any) -> dict[str, list[res.Run]]:
    """Train (or read, where stored) both runs of the pair of ``candidate`` (``bf16``; on a
    GPU also ``tf32``, stored under its own :func:`candidate_tag`); resumable (checkpoints per
    run). The fp32 runs train with TF32 off, a TF32 candidate's with TF32 on.

    Raises:
        ValueError: the CPU has no bf16 instructions (the pair would measure emulation), or
            a TF32 pair off CUDA, or an unknown candidate.
    """
    from lstpe.training import train as lst_train

    dev = torch.device(device)
    if dev.type == "cpu" and not has_bf16():
        raise ValueError("this CPU has no bf16 instructions (flags: "
                         f"{' '.join(cpu_flags()) or 'unknown'}): no precision pair to run")
    if candidate == "tf32" and dev.type != "cuda":
        raise ValueError(f"a TF32 pair needs a CUDA device, got {device}")
    base = candidate_dir(results_dir, device, candidate)
    out: dict[str, list[res.Run]] = {}
    for name, cfgs in pair_configs(device, candidate, **overrides).items():
        dirs = [base / name / f"{c.pes[0]}__{c.seeds[0]}" for c in cfgs]
        if all((d / "manifest.json").exists() for d in dirs):
            out[name] = [res.load(d, artifacts=False) for d in dirs]
            continue
        log(f"precision pair: training {name} ({len(cfgs)} models, {PAIR_EPOCHS} epochs)")
        tf32, lst_train.TF32 = lst_train.TF32, name == "tf32"
        try:
            out[name] = lst_train.train_many(cfgs, dirs, progress=False,
                                             work_dir=base / name / "checkpoints")
        finally:
            lst_train.TF32 = tf32
    return out


def candidate_dir(results_dir: str | Path | None, device: str, candidate: str) -> Path:
    """Where the pair of ``candidate`` on ``device`` is stored (:func:`pair_dir`)."""
    dev = torch.device(device)
    if candidate == "bf16" or dev.type != "cuda":
        return pair_dir(results_dir, device=device)
    return pair_dir(results_dir, candidate_tag(torch.cuda.get_device_name(dev), candidate))


def load_pair(results_dir: str | Path | None = None, tag: str | None = None
              ) -> dict[str, list[res.Run]] | None:
    """The stored pair of ``tag`` (default: this kind of CPU; verified on load): its fp32 runs
    and those of its candidate (:func:`tag_candidate`), or None if it is not stored."""
    base = pair_dir(results_dir, tag)
    out = {}
    for name in ("fp32", tag_candidate(base.name)):
        dirs = sorted(p for p in (base / name).glob("*__*") if (p / "manifest.json").exists())
        if len(dirs) != len(PAIR_PES) * len(PAIR_SEEDS):
            return None
        out[name] = [res.load(d, artifacts=False) for d in dirs]
    return out


def _metric_rows(history: pd.DataFrame) -> pd.DataFrame:
    """The rows of :data:`PAIR_METRIC` (empty where the history has none)."""
    split, cond = PAIR_METRIC
    if not {"split", "condition", "epoch", "accuracy"} <= set(history.columns):
        return history.iloc[:0]
    return history[(history["split"] == split) & (history["condition"].astype(str) == cond)]


def _diverged(history: pd.DataFrame) -> pd.DataFrame:
    """:func:`lstpe.store.results.diverged_models` of a history (``pe, seed, epoch``: from
    which evaluation each model diverged); a history without a ``model`` column is read one
    model per (PE, seed)."""
    if "model" not in history.columns:
        history = history.assign(model=history["pe"].astype(str) + "|"
                                 + history["seed"].astype(str))
    return res.diverged_models(history)


def pair_table(pair: dict[str, list[res.Run]]) -> pd.DataFrame:
    """Per PE and epoch: ``pe, epoch, fp32_<seed>, bf16_<seed>`` (validation accuracy as the
    authors evaluated it; ``tf32_<seed>`` for a TF32 pair), ``diff`` (candidate minus fp32,
    the mean over seeds), ``max_abs_diff`` (over seeds) and ``seed_spread``
    (|seed 1 - seed 2| in fp32).

    Nothing is dropped: an accuracy from the epoch at which its model diverged on (the
    history's ``diverged`` flag, or a non-finite loss) counts as NaN, a NaN stays NaN, and a
    PE NaN everywhere keeps its rows; any NaN of a (PE, epoch) makes its ``diff`` and
    ``max_abs_diff`` NaN (and :func:`pair_verdict` then refuses bf16). One seed has no
    spread (NaN).

    Raises:
        ValueError: one precision holds a (PE, seed, epoch) twice (naming it); use
            :func:`check_pair` first for a stored pair.
    """
    rows = []
    cand = _candidate(pair)
    for name in ("fp32", cand):
        for r in pair.get(name) or []:
            m = _metric_rows(r.history)
            since = {(str(d.pe), int(d.seed)): int(d.epoch)
                     for d in _diverged(r.history).itertuples()}
            for x in m.itertuples():
                acc = float(pd.to_numeric(x.accuracy, errors="coerce"))
                if int(x.epoch) >= since.get((str(x.pe), int(x.seed)), np.inf):
                    acc = np.nan
                rows.append({"precision": name, "pe": str(x.pe), "seed": int(x.seed),
                             "epoch": int(x.epoch), "accuracy": acc})
    df = pd.DataFrame(rows, columns=["precision", "pe", "seed", "epoch", "accuracy"])
    twice = df[df.duplicated(["precision", "pe", "seed", "epoch"])]
    if len(twice):
        x = twice.iloc[0]
        raise ValueError(f"the precision pair holds {x.pe}, seed {x.seed}, epoch {x.epoch} "
                         f"twice in {x.precision}")
    seeds = sorted(set(df["seed"]))
    if df.empty:
        return pd.DataFrame(columns=["pe", "epoch", "diff", "max_abs_diff", "seed_spread"])
    t = df.pivot(index=["pe", "epoch"], columns=["precision", "seed"], values="accuracy")
    out = pd.DataFrame(index=t.index)
    for p in ("fp32", cand):
        for s in seeds:
            out[f"{p}_{s}"] = t[(p, s)] if (p, s) in t.columns else np.nan
    d = pd.DataFrame({s: out[f"{cand}_{s}"] - out[f"fp32_{s}"] for s in seeds})
    out["diff"] = d.mean(axis=1, skipna=False)
    out["max_abs_diff"] = d.abs().max(axis=1, skipna=False)
    out["seed_spread"] = (out[f"fp32_{seeds[0]}"] - out[f"fp32_{seeds[-1]}"]).abs() \
        if len(seeds) > 1 else np.nan
    return out.reset_index()


def pair_verdict(table: pd.DataFrame, last: int = 10) -> dict[str, Any]:
    """Whether bf16 stays within the seed spread, over the last ``last`` epochs of the pair.

    Per PE: the mean over those epochs of |bf16 - fp32| (per seed) against the mean of the
    fp32 seed spread over the same epochs. ``ok`` when, for every PE, the precision
    difference is no larger than the seed spread (bf16 then moves a model less than a change
    of seed does); a NaN anywhere in those epochs (a diverged or missing run) makes its PE's
    numbers NaN and ``ok`` False, and so does an empty table. Returns ``{"ok", "per_pe":
    DataFrame(pe, precision_diff, seed_spread), "epochs": (first, last)}``.
    """
    seeds = [c[5:] for c in table.columns if c.startswith("fp32_")]
    cand = next((c[:4] for c in table.columns if c[:5] in ("bf16_", "tf32_")), "bf16")
    if table.empty or not seeds:
        return {"ok": False, "per_pe": pd.DataFrame(columns=["pe", "precision_diff",
                                                              "seed_spread"]),
                "epochs": (0, 0)}
    top = int(table["epoch"].max())
    first = max(top - last + 1, int(table["epoch"].min()))
    t = table[table["epoch"] >= first]
    per = []
    for pe, g in t.groupby("pe"):
        dif = np.mean([(g[f"{cand}_{s}"] - g[f"fp32_{s}"]).abs().mean(skipna=False)
                       for s in seeds])
        per.append({"pe": pe, "precision_diff": float(dif),
                    "seed_spread": float(g["seed_spread"].mean(skipna=False))})
    per_pe = pd.DataFrame(per)
    finite = np.isfinite(per_pe[["precision_diff", "seed_spread"]]).all(axis=1)
    ok = bool(finite.all() and (per_pe["precision_diff"] <= per_pe["seed_spread"]).all())
    return {"ok": ok, "per_pe": per_pe, "epochs": (first, top)}


def _where(run: Any, name: str) -> str:
    """A run of the pair in messages: its folder, else ``<precision>/<name>``."""
    path = getattr(run, "path", None)
    return str(path) if path is not None else f"{name}/{getattr(run, 'name', '') or '?'}"


def _config(run: Any) -> dict:
    return (getattr(run, "manifest", None) or {}).get("config") or {}


def _models(run: Any) -> list[tuple[str, int]]:
    """The (PE, seed) a run of the pair trained: from its configuration, else its history."""
    cfg = _config(run)
    if cfg.get("pes") and cfg.get("seeds"):
        return [(str(pe), int(s)) for pe in cfg["pes"] for s in cfg["seeds"]]
    m = _metric_rows(run.history)
    return sorted({(str(pe), int(s)) for pe, s in zip(m["pe"], m["seed"], strict=True)})


def _run_problems(run: Any, name: str, epochs: int) -> list[str]:
    """What keeps one run of the pair, filed under ``name``, from counting."""
    where, cfg = _where(run, name), _config(run)
    manifest = getattr(run, "manifest", None) or {}
    out = []
    amp, recorded = cfg.get("amp"), manifest.get("precision")
    if amp is None or bool(amp) != (name == "bf16"):
        out.append(f"{where} was trained with amp={amp!r}, not in {name} as its folder says")
    if recorded is not None and recorded != ("fp32" if name == "tf32" else name):
        out.append(f"{where} trained in {recorded}, not in {name} as its folder says")
    if name == "tf32" and manifest.get("tf32") is not True:
        out.append(f"{where} was trained with TF32 {manifest.get('tf32')!r}, not with TF32 "
                   "matmuls as its folder says")
    if name != "tf32" and manifest.get("tf32") is True:
        out.append(f"{where} was trained with TF32 matmuls, not in {name} as its folder says")
    if cfg.get("epochs") != epochs:
        out.append(f"{where} was configured for {cfg.get('epochs')} epochs, not the pair's "
                   f"{epochs}")
    models = _models(run)
    if len(models) != 1:
        out.append(f"{where} holds {len(models)} models, not one (PE, seed)")
    elif getattr(run, "path", None) is not None and \
            Path(run.path).name != f"{models[0][0]}__{models[0][1]}":
        out.append(f"{where} holds {models[0][0]} seed {models[0][1]}, not what its folder "
                   "name says")
    m = _metric_rows(run.history)
    split, cond = PAIR_METRIC
    if m.empty:
        return [*out, f"{where} holds no {split} accuracy (condition {cond})"]
    if sorted({(str(p), int(s)) for p, s in zip(m["pe"], m["seed"], strict=True)}) != models:
        out.append(f"{where}: its history holds other models than its configuration")
    if int(m["epoch"].max()) < epochs:
        out.append(f"{where} reaches epoch {int(m['epoch'].max())} of the pair's {epochs}")
    div = _diverged(run.history)
    if len(div):
        out.append(f"{where} diverged: {res.describe_diverged(div)}")
    elif manifest.get("diverged_models"):
        out.append(f"{where} diverged: its manifest lists models "
                   f"{manifest['diverged_models']}")
    acc = pd.to_numeric(m["accuracy"], errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(acc).all():
        bad = m["epoch"].to_numpy()[~np.isfinite(acc)]
        out.append(f"{where} has no finite {split} accuracy at {len(bad)} of its "
                   f"{len(acc)} evaluations (from epoch {int(bad.min())})")
    return out


def check_pair(pair: dict[str, list[Any]], epochs: int | None = None) -> list[str]:
    """Why a stored pair cannot decide the precision, one sentence per problem naming the run
    folder (empty: it can). A pair counts only as what it is: each precision holds one run of
    every (PE, seed) of :data:`PAIR_PES` x :data:`PAIR_SEEDS`, in the precision of the folder
    it is filed under (its configuration's ``amp`` and the precision its manifest records),
    trained to ``epochs`` (default :data:`PAIR_EPOCHS`) and evaluated at the same epochs in
    both precisions, with the same configuration but ``amp`` (and how it was executed),
    without a diverged model or a non-finite accuracy."""
    epochs = PAIR_EPOCHS if epochs is None else epochs
    want = {(pe, s) for _, pe in PAIR_PES for s in PAIR_SEEDS}
    problems: list[str] = []
    held: dict[str, dict[tuple[str, int], tuple[str, Any]]] = {}
    cand = _candidate(pair)
    for name in ("fp32", cand):
        runs = list(pair.get(name) or [])
        paths = {Path(r.path).parent for r in runs if getattr(r, "path", None) is not None}
        folder = str(paths.pop()) if len(paths) == 1 else f"{name}/"
        held[name] = {}
        for r in runs:
            problems += _run_problems(r, name, epochs)
            for key in _models(r):
                if key in held[name]:
                    problems.append(f"{_where(r, name)} holds {key[0]} seed {key[1]} again "
                                    f"(as {held[name][key][0]} does)")
                else:
                    held[name][key] = (_where(r, name), r)
        if missing := sorted(want - set(held[name])):
            problems.append(f"{folder} holds no {name} run of "
                            + ", ".join(f"{pe} seed {s}" for pe, s in missing))
        if extra := sorted(set(held[name]) - want):
            problems.append(f"{folder} holds " + ", ".join(f"{pe} seed {s}" for pe, s in extra)
                            + ", which the pair does not train")
    for key in sorted(set(held["fp32"]) & set(held[cand])):
        (w32, r32), (w16, r16) = held["fp32"][key], held[cand][key]
        diff = res.config_diff(_config(r32), _config(r16), ignore=("amp", *res.EXECUTION_KEYS))
        if diff:
            problems.append(f"{w16} was trained with another {', '.join(diff)} than {w32}")
        e32, e16 = (set(_metric_rows(r.history)["epoch"].astype(int)) for r in (r32, r16))
        if e32 != e16:
            problems.append(f"{w16} was evaluated at other epochs than {w32}")
    return problems


def pair_decision(pair: dict[str, list[Any]], tag: str) -> tuple[bool, str]:
    """Whether the stored pair of ``tag`` earns bf16, and why (without the precision's name):
    never when :func:`check_pair` finds a problem, else by :func:`pair_verdict`."""
    problems = check_pair(pair)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return False, (f"the precision pair of {tag} cannot decide: "
                       + "; ".join(problems[:3]) + more)
    v = pair_verdict(pair_table(pair))
    per = v["per_pe"]
    worst = per.assign(r=per["precision_diff"] - per["seed_spread"]).nlargest(1, "r").iloc[0]
    pe, dif, spread = worst["pe"], worst["precision_diff"], worst["seed_spread"]
    span = f"epochs {v['epochs'][0]}-{v['epochs'][1]}"
    if v["ok"]:
        return True, (f"the precision pair of {tag} moves validation accuracy less than a "
                      f"change of seed (largest: {pe}, {dif:.3f} vs seed spread {spread:.3f}, "
                      f"{span})")
    return False, (f"the precision pair of {tag} moves {pe} by {dif:.3f}, more than its seed "
                   f"spread {spread:.3f} ({span})")


def incomplete_pair(base: Path) -> str | None:
    """Where the pair folder ``base`` holds some runs but not the whole pair: which folder
    holds how many of its runs (None where nothing of a pair is stored)."""
    n = len(PAIR_PES) * len(PAIR_SEEDS)
    held = {name: sum((p / "manifest.json").exists() for p in (base / name).glob("*__*"))
            for name in ("fp32", tag_candidate(base.name))}
    if not any(held.values()):
        return None
    return "; ".join(f"{base / name} holds {k} of the pair's {n} runs"
                     for name, k in held.items() if k != n)


def no_pair_line(cpu_flags_of_units: pd.Series) -> str:
    """The sentence a report gives while no precision pair is stored, from the ``cpu flags``
    column of :func:`lstpe.experiments.fragments.stored_units` (one string per unit):
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
    :class:`~lstpe.training.config.TrainConfig` (False = fp32, True = the device's autocast).

    A stored pair earns bf16 only through :func:`pair_decision` (checked against its own
    configuration first); an incomplete pair is named as such."""
    if device.type == "cuda":
        tag = device_tag(device)
        fp32 = "fp32 with TF32 off"
        none = f"{fp32}, as the authors' V100: no precision pair is stored for {tag}"
    elif device.type != "cpu":
        return False, "fp32", f"fp32 (no mixed precision on {device.type})"
    elif not has_bf16():
        return False, "fp32", ("fp32: this CPU has no bf16 instructions (flags: "
                               f"{' '.join(cpu_flags()) or 'unknown'}), where bf16 is emulated")
    else:
        tag, fp32 = cpu_tag(), "fp32"
        none = (f"fp32: this CPU has bf16 instructions ({tag}), but no precision pair is "
                "stored for it (lstpe campaign pair)")
    pair = load_pair(results_dir, tag)
    if pair is None:
        part = incomplete_pair(pair_dir(results_dir, tag))
        if part is None:
            return False, "fp32", none
        return False, "fp32", (f"{fp32}: the precision pair of {tag} is incomplete: {part} "
                               "(lstpe campaign pair resumes it)")
    ok, why = pair_decision(pair, tag)
    return (True, "bf16", f"bf16 autocast: {why}") if ok else (False, "fp32", f"{fp32}: {why}")

