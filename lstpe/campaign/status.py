"""What the campaign has done: units done, claimed, paused or damaged; hours spent and left.

``lstpe campaign status`` prints :func:`status_text` of :func:`status`, :func:`progress`
(per item of the plan, Tables 1-2 at 3 seeds, the whole plan) and :func:`progress_text` (the
same in a sentence); one row per stored fragment is
:func:`lstpe.experiments.fragments.stored_units`, which the chapters read. Hours come from the
stored fragments' manifests (:func:`unit_seconds`: the unit's share of the wall time of the
chunk it trained in); CPU core-hours are those times the threads the unit trained with
(:func:`unit_threads`).
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
from pathlib import Path
from typing import Any

import pandas as pd

from lstpe.campaign.items import ITEMS, WHY
from lstpe.experiments.fragments import (
    done_units,
    load_fragment,
    stored_units,
    unit_commits,
    unit_seconds,
)
from lstpe.experiments.units import CAMPAIGN_EPOCHS, campaign_work, plan
from lstpe.store import results as res


def brief(message: str, limit: int = 1000) -> str:
    """``message`` on one line, whole up to ``limit`` characters; a longer one keeps its head
    (what is wrong, naming the file) and its tail (what to do), joined by an ellipsis."""
    text = " ".join(message.split())
    if len(text) <= limit:
        return text
    tail = limit * 2 // 5
    return text[:limit - tail - 3] + " … " + text[-tail:]


def unit_threads(manifest: dict) -> int:
    """CPU threads a unit trained with: the campaign's setting, else its machine record, else
    the ``(N threads)`` of the manifest's device, else 1."""
    camp = manifest.get("campaign") or {}
    for rec in (camp.get("setting") or {}, camp.get("machine") or {}):
        if rec.get("threads"):
            return int(rec["threads"])
    m = re.search(r"\((\d+) threads?\)", str(manifest.get("device", "")))
    return int(m.group(1)) if m else 1


def status(results_dir: str | Path | None = None, verify: bool = True) -> pd.DataFrame:
    """One row per unit: ``unit, item, state, seconds, measured, threads, device, precision,
    commit, epochs, error, at_epoch`` (``seconds``: :func:`unit_seconds`; ``measured``:
    trained by the campaign itself, with its probe; ``threads``: :func:`unit_threads`, 0 until
    done).

    ``state``: ``done`` (fragment stored, and verified when ``verify``), ``damaged`` (it fails
    verification: the ``error`` column says why), ``claimed`` (a live process trains it),
    ``paused`` (a checkpoint waits for it: ``at_epoch``, :func:`paused_epoch`), ``todo``.

    Verifying checks what a chapter checks before it reads a fragment: its files, its recipe,
    its history, and the witnesses of its maps at initialisation against this code's
    initialisation (:func:`lstpe.experiments.init_maps.witness_errors`: the PE and the maps of
    the first puzzles, recomputed in one batched model per shape), so a unit the chapters
    refuse is never counted done.
    """
    from lstpe.store.rundir import RunLock

    rows = []
    loaded: list[tuple[dict[str, Any], res.Run]] = []  # verified fragments, for the witnesses
    work = campaign_work(results_dir)
    paused = paused_units(results_dir)
    at: dict[Path, tuple[int, int]] = {}  # one checkpoint read per paused chunk
    for u in plan():
        row: dict[str, Any] = {"unit": u.key, "item": u.item, "state": "todo", "seconds": 0.0,
                               "measured": False, "threads": 0,
                               "device": "", "precision": "", "commit": "", "epochs": 0,
                               "error": "", "at_epoch": 0}
        if (u.path(results_dir) / "manifest.json").exists():
            try:
                f = load_fragment(u, results_dir, artifacts=verify, restore=False) if verify else \
                    res.Run(pd.DataFrame(), res.read_manifest(u.path(results_dir),
                                                                 verify=False))
                man = f.manifest
                if not isinstance(man.get("config"), dict):  # a manifest edited by hand
                    raise res.DamagedFileError(
                        f"manifest {u.path(results_dir) / 'manifest.json'} holds no config: "
                        f"the fragment cannot be verified; delete {u.path(results_dir)} to "
                        "retrain the unit")
                camp = man.get("campaign") or {}
                row.update(state="done", seconds=unit_seconds(man), device=man.get("device"),
                           error=wall_problem(man, u.path(results_dir)),
                           precision=camp.get("precision", ""),
                           commit=unit_commits(man),
                           epochs=man["config"].get("epochs"), measured="probe" in camp,
                           threads=unit_threads(man))
                if verify:
                    loaded.append((row, f))
            except (ValueError, OSError, TypeError, ArithmeticError) as e:
                row.update(state="damaged", error=brief(str(e)))
            if row["error"] and row["state"] == "done":  # never in the rate or the hours
                row["seconds"] = math.nan
        elif u.path(results_dir).is_symlink():  # a fragment is a folder, never a link
            row.update(state="damaged", error=f"{u.path(results_dir)} is a symbolic link (to "
                       f"{os.readlink(u.path(results_dir))}), not a fragment folder: remove it "
                       "(the unit then trains again)")
        elif u.path(results_dir).exists():
            row.update(state="damaged", error=f"{u.path(results_dir)} has no manifest.json")
        else:
            lock = RunLock(work / "claims" / u.slug)
            info = lock.read() if lock.path.exists() else None
            mine = bool(info) and info.get("pid") == os.getpid() and \
                info.get("host") == socket.gethostname()
            try:
                live = info is not None and (mine or lock.stale_reason(info) is None)
            except res.RunDirError as e:  # a claim edited by hand
                row.update(state="damaged", error=str(e))
                rows.append(row)
                continue
            if live:
                row["state"] = "claimed"
            elif u.key in paused:
                row["state"] = "paused"
                chunk = paused[u.key]
                if chunk not in at:
                    at[chunk] = paused_epoch(chunk)
                row["at_epoch"], row["epochs"] = at[chunk]
        rows.append(row)
    _refuse_witnesses(loaded)
    return pd.DataFrame(rows)


def _refuse_witnesses(loaded: list[tuple[dict[str, Any], res.Run]]) -> None:
    """Mark ``damaged`` (in place) the rows whose fragment a chapter would refuse for its
    maps at initialisation (:func:`lstpe.experiments.init_maps.witness_errors`)."""
    from lstpe.experiments import init_maps

    row_of = {id(f): row for row, f in loaded}
    for f, e in init_maps.witness_errors([f for _, f in loaded]):
        row_of[id(f)].update(state="damaged", seconds=0.0, error=brief(str(e)))


def check_long_root(results_dir: str | Path | None = None) -> None:
    """Refuse a ``results/long`` that exists but is not a folder (its long chunks could be
    neither read nor trained: never "no free unit left" in silence).

    Raises:
        lstpe.store.results.NotWritableError: naming it and what to do.
    """
    from lstpe.experiments import long_units as lu

    root = lu.long_root(results_dir)
    if (root.exists() or root.is_symlink()) and not root.is_dir():
        raise res.NotWritableError(f"{root} is not a folder (the long units live there): move "
                                   "it away, or restore the folder (git checkout -- "
                                   "results/long); nothing was trained")


def held_long(results_dir: str | Path | None = None) -> dict[str, str]:
    """The long chunks short of their target whose units' claims another live process holds:
    chunk name -> who holds it (pid, host, since, command)."""
    from lstpe.experiments import long_units as lu
    from lstpe.store.rundir import RunLock

    out: dict[str, str] = {}
    claims = lu.long_root(results_dir) / ".work" / "claims"
    for c in lu.LONG_PLAN:
        if c.name in out or lu.chunk_epoch(c, results_dir) >= c.target:
            continue
        for u in c.units:
            lock = RunLock(claims / u.key.replace("/", "__"))
            info = lock.read() if lock.path.is_file() else None
            try:
                if info and info.get("pid") != os.getpid() and lock.stale_reason(info) is None:
                    out[c.name] = lock.describe_holder(info)
                    break
            except res.RunDirError:  # a claim edited by hand: train_or_pass names it
                continue
    return out


def paused_units(results_dir: str | Path | None = None) -> dict[str, Path]:
    """Units of chunks that stopped with a checkpoint: unit key -> chunk folder."""
    out: dict[str, Path] = {}
    chunks = campaign_work(results_dir) / "chunks"
    for d in sorted(chunks.glob("*")) if chunks.is_dir() else []:
        spec = d / "chunk.json"
        if spec.is_file() and any(d.glob("checkpoints/*.pt")):
            try:
                keys = json.loads(spec.read_text())["units"]
            except (OSError, json.JSONDecodeError, KeyError):
                continue
            for k in keys:
                out[k] = d
    return out


def paused_epoch(chunk: Path) -> tuple[int, int]:
    """(epochs trained, epochs of the recipe) of a paused chunk, read from its checkpoint;
    (-1, 0) if the checkpoint cannot be read (the next run says why, or starts it again)."""
    try:
        state = res.load_torch(next(chunk.glob("checkpoints/*.pt")), "checkpoint",
                               map_location="cpu")
        return int(state["epoch"]), int(state["meta"]["configs"][0]["epochs"])
    except (OSError, ValueError, KeyError, IndexError, TypeError, StopIteration):
        return -1, 0


def _threads(done: pd.DataFrame) -> pd.Series:
    """The threads each stored unit trained with (1 where a table has no ``threads``)."""
    return done["threads"] if "threads" in done else pd.Series(1, index=done.index)


def _core_hours(done: pd.DataFrame) -> float:
    """CPU core-hours of stored units: each unit's wall hours times its own threads
    (:func:`unit_threads`), not the threads of the process that reads them."""
    return float((done["seconds"] * _threads(done)).sum()) / 3600


def wall_problem(manifest: dict, path: Path) -> str:
    """What is wrong with a stored unit's wall time (:func:`unit_seconds`: not a finite
    number of seconds >= 0), naming the file; "" when nothing is."""
    try:
        sec = unit_seconds(manifest)
    except (ValueError, TypeError, ArithmeticError):
        sec = math.nan
    if math.isfinite(sec) and sec >= 0:
        return ""
    return (f"{path / 'manifest.json'}: its wall time (campaign.unit_wall_s) is "
            f"{str((manifest.get('campaign') or {}).get('unit_wall_s', sec))[:30]}, not a "
            "number of seconds >= 0: left out of the hours and the rate")


def unit_rate(table: pd.DataFrame) -> tuple[float, str]:
    """Seconds of the machine per unit, and what that rests on: the median over the units the
    campaign trained itself (whole chunks on an otherwise idle machine, as it runs), else over
    every stored unit (imported ones included)."""
    done = table[(table["state"] == "done") & table["seconds"].notna()]  # wall_problem
    own = done[done["measured"].astype(bool)]
    if len(own):
        return (float(own["seconds"].median()),
                f"median of the {len(own)} units the campaign trained")
    return float(done["seconds"].median()), f"median of the {len(done)} stored units"


def seconds_left(table: pd.DataFrame) -> pd.Series:
    """Estimated seconds of the machine for each unit not done (``table``: :func:`status`):
    :func:`unit_rate` each, and a paused unit the share of its epochs still to train.

    One rate for every PE: a PE's own units are too few and too much shaped by what shared
    the machine with their chunk to price it apart (relative attention's probe is about 20%
    slower per model-epoch than the others'). Indexed like ``table``'s rows not done; empty
    before any unit is stored.
    """
    left = table[table["state"] != "done"]
    if not (table["state"] == "done").any():
        return pd.Series(dtype=float)
    paused = (left["state"] == "paused") & (left["at_epoch"] >= 0) & (left["epochs"] > 0)
    share = pd.Series(1.0, index=left.index)
    share[paused] = 1 - left.loc[paused, "at_epoch"] / left.loc[paused, "epochs"]
    return unit_rate(table)[0] * share.clip(lower=0)


RATE_RULE = "a paused unit counts only the epochs it has left"
"""How :func:`seconds_left` prices the units left beyond the rate, in words."""

NO_RATE = "no stored unit has a usable wall time: no rate to estimate the hours left"
"""What the status says instead of hours left when every stored unit's wall time is
unusable (:func:`wall_problem`), never "nan min per unit" or 0.0 hours."""


def status_text(table: pd.DataFrame, seconds_per_unit: float | None = None) -> str:
    """What ``lstpe campaign status`` prints: per item done / left, hours spent and left."""
    lines = []
    for item, g in table.groupby("item"):
        done = int((g["state"] == "done").sum())
        lines.append(f"item {item}: {done}/{len(g)} units done"
                     + (f", {int((g['state'] != 'done').sum())} left" if done < len(g) else ""))
    done = table[table["state"] == "done"]
    spent = done["seconds"].sum() / 3600
    threads = sorted(set(_threads(done)))
    at = f" at {threads[0]} threads" if len(threads) == 1 else ""
    lines.append(f"all: {len(done)}/{len(table)} units done; {spent:.2f} hours of the whole "
                 f"machine spent ({_core_hours(done):.1f} CPU core-hours{at})")
    left = table[table["state"] != "done"]
    if seconds_per_unit:  # one rate for every unit, as given
        for item, g in left.groupby("item"):
            lines.append(f"  item {item}: {len(g)} units left = "
                         f"{len(g) * seconds_per_unit / 3600:.1f} machine-hours at "
                         f"{seconds_per_unit / 60:.1f} min per unit (as given)")
    elif len(done):
        rate, basis = unit_rate(table)
        if not math.isfinite(rate):  # every wall time unusable
            lines.append(f"  ({NO_RATE}; each is named below)")
        else:
            est = seconds_left(table)
            for item, g in left.groupby("item"):
                lines.append(f"  item {item}: {len(g)} units left = "
                             f"{est[g.index].sum() / 3600:.1f} machine-hours")
            lines.append(f"  (hours left at {rate / 60:.1f} min per unit, the {basis}; "
                         f"{RATE_RULE})")
    bad = done[done["error"].astype(bool)] if "error" in done else done.iloc[:0]
    for r in bad.itertuples():  # stored, but its hours unusable: named, never "nan min"
        lines.append(f"wall time unusable: {r.unit} ({r.error})")
    for state in ("claimed", "paused", "damaged"):
        sel = table[table["state"] == state]
        if not len(sel):
            continue
        if state == "paused":  # one line per epoch reached (a chunk's units share it)
            for (at, of), g in sel.groupby(["at_epoch", "epochs"], sort=False):
                where = f"at epoch {at} of {of}" if at >= 0 else "checkpoint unreadable"
                lines.append(f"paused: {', '.join(g['unit'])} ({where}; the next campaign run "
                             "on this machine resumes it first)")
            continue
        lines.append(f"{state}: " + ", ".join(sel["unit"])
                     + ("" if state != "damaged" else f" ({sel['error'].iloc[0]})"))
    return "\n".join(lines)


TABLES12_ITEMS: tuple[int, ...] = (1, 2)
"""The items that make Tables 1-2 at the paper's first 3 seeds (39 units)."""


def progress(table: pd.DataFrame) -> pd.DataFrame:
    """Units done and hours, per item of the plan and in total (``table``: :func:`status`).

    Returns:
        Index ``item``: ``"1"`` ... ``"5"``, then ``"1-2"`` (Tables 1-2 at 3 seeds, 39 units)
        and ``"all"`` (the plan); columns ``what``, ``units``, ``done``, ``left``, ``hours
        spent`` (wall hours of the machine, summed over the stored units), ``CPU hours spent``
        (wall hours x threads: core-hours), ``hours left`` (the units left at the measured
        rate, :func:`seconds_left`; NaN before any unit with a usable wall time is
        stored). Hours rounded to 2 decimals.
    """
    done = table[table["state"] == "done"]
    est = seconds_left(table)
    rated = bool(len(done)) and math.isfinite(unit_rate(table)[0])  # else NaN, never 0.0
    groups = [(str(item), ITEMS.get(int(item), ""), g) for item, g in table.groupby("item")]
    groups.append(("1-2", "Tables 1-2, seeds 1-3",
                   table[table["item"].isin(TABLES12_ITEMS)]))
    groups.append(("all", "the whole plan", table))
    rows = []
    for item, what, g in groups:
        d = g[g["state"] == "done"]
        left = len(g) - len(d)
        rows.append({"item": item, "what": what, "units": len(g), "done": len(d),
                     "left": left, "hours spent": round(d["seconds"].sum() / 3600, 2),
                     "CPU hours spent": round(_core_hours(d), 2),
                     "hours left": round(est[g.index.intersection(est.index)].sum() / 3600, 2)
                     if rated else math.nan})
    return pd.DataFrame(rows).set_index("item")


def progress_text(table: pd.DataFrame) -> str:
    """:func:`progress` in two sentences: units done of Tables 1-2 at 3 seeds and of the plan,
    hours and CPU core-hours spent, and hours left at the measured rate (and what it rests on)."""
    p = progress(table)
    t12, whole = p.loc["1-2"], p.loc["all"]
    text = (f"{t12['done']} of the {t12['units']} units of Tables 1-2 at 3 seeds done, "
            f"{whole['done']} of the plan's {whole['units']}; {whole['hours spent']:.2f} hours "
            f"of the machine spent ({whole['CPU hours spent']:.2f} CPU core-hours).")
    damaged = table.loc[table["state"] == "damaged", "unit"].tolist()
    if damaged:  # stored but unusable: never silently one unit fewer
        text += (f" {len(damaged)} stored unit(s) damaged, not counted as done: "
                 f"{', '.join(damaged)} (lstpe campaign status says why).")
    if not whole["done"]:
        return text + " No unit stored yet: no rate to estimate the hours left."
    rate, basis = unit_rate(table)
    if not math.isfinite(rate):
        return text + f" {NO_RATE[0].upper()}{NO_RATE[1:]} (lstpe campaign status names them)."
    return text + (f" At the measured {rate / 60:.1f} min per unit ({basis}; {RATE_RULE}): "
                   f"{t12['hours left']:.1f} hours left for Tables 1-2, "
                   f"{whole['hours left']:.1f} for the whole plan.")


def plan_text(results_dir: str | Path | None = None) -> str:
    """``lstpe campaign plan``: every 200-epoch item in the campaign's order with the reason
    for its place and its units (done or not), then the long plan in its order with each
    item's reason and cost, and a CPU's order
    (:func:`lstpe.campaign.long_plan.long_plan_text`)."""
    from lstpe.campaign import long_plan as lp

    done = {u.key for u in done_units(results_dir)}
    units, lines = plan(), []
    for item, what in ITEMS.items():
        mine = [u for u in units if u.item == item]
        if not mine:
            continue
        n = sum(u.key in done for u in mine)
        lines.append(f"item {item}: {what} -- {WHY[item]}")
        lines.append(f"  {len(mine)} units of {CAMPAIGN_EPOCHS} epochs, {n} stored: "
                     + ", ".join(u.key + (" (done)" if u.key in done else "") for u in mine))
    return "\n".join([*lines, lp.long_plan_text(results_dir)])


def long_table(results_dir: str | Path | None = None,
               table: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`lstpe.campaign.long_progress.long_status`, a chunk with no segment yet priced at
    the 200-epoch units' measured rate (:func:`unit_rate`; ``table``: :func:`status`, read
    unverified when not given)."""
    table = status(results_dir, verify=False) if table is None else table
    rate = unit_rate(table)[0] / CAMPAIGN_EPOCHS if (table["state"] == "done").any() else None
    rate = rate if rate is not None and math.isfinite(rate) else None  # no usable wall time
    from lstpe.campaign import long_progress

    out = long_progress.long_status(results_dir, rate)
    return out


def long_and_cpus_text(table: pd.DataFrame, results_dir: str | Path | None = None,
                       long: pd.DataFrame | None = None) -> str:
    """The long chunks' epochs and hours left (a damaged chunk marked, with what is wrong),
    and which CPUs (flags, precision) trained the stored units (``long``: :func:`long_table`,
    computed when not given)."""

    long = long_table(results_dir, table) if long is None else long
    from lstpe.campaign import long_progress
    from lstpe.campaign.long_plan import budget_text

    lines = [long_progress.long_status_text(long), budget_text(results_dir)]
    last = long.drop_duplicates("chunk", keep="last")  # a chunk's last target holds the rest
    if last["hours_left"].notna().any():
        lines.append(f"long units left: {last['hours_left'].sum():.1f} hours of this kind of "
                     "CPU, each chunk trained alone")
    st = stored_units(results_dir)
    if len(st):
        for (flags, prec), g in st.groupby(["cpu flags", "precision"], dropna=False):
            lines.append(f"trained on {flags or '-'} in {prec or 'fp32'}: {len(g)} units")
    return "\n".join(lines)
