"""How far the long chunks have got, what is left, and whether their stores are whole.

``lstpe campaign status`` prints :func:`long_status_text` of :func:`long_status` (through
:func:`lstpe.campaign.status.long_and_cpus_text`): per chunk and target of
:data:`lstpe.experiments.long_units.LONG_PLAN` the epoch its segments reached, its resume
checkpoint, hours left at a measured rate, and ``damaged`` with what
:func:`lstpe.campaign.resume.chunk_problems` found (every segment verified, every chain
checked from epoch 0): a damaged chunk is marked, the others are still reported.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lstpe.campaign import resume as rs
from lstpe.experiments import long_units as lu
from lstpe.store import model as mf
from lstpe.store import results as res


def long_status(results_dir: str | Path | None = None,
                s_per_model_epoch: float | None = None) -> pd.DataFrame:
    """One row per (chunk, target) of :data:`lstpe.experiments.long_units.LONG_PLAN`:
    ``item, chunk, units, target, epoch`` (the smallest published epoch over its units),
    ``from`` (where the hours left start: its epoch, or an earlier target of the same chunk),
    ``resume_epoch`` (its resume checkpoint; -1 when it cannot be read, 0 without one),
    ``resume_here`` (whether the checkpoint is in the tree), ``s_per_epoch`` (the
    chunk's seconds per epoch in its last segment, over the epochs its wall time covers;
    before one, when it ran on a GPU, or when it does not say which epochs it timed,
    ``s_per_model_epoch`` times its models, else NaN): hours of the CPU the campaign is
    planned for, ``basis`` (what that rate rests on), ``hours_left`` (to the target at that
    rate, from the later of the last segment and the resume checkpoint), ``state``
    (``damaged`` when :func:`lstpe.campaign.resume.chunk_problems` finds anything,
    every segment verified and its chain checked from epoch 0; else ``ok``) and ``problem``
    (what it found).

    ``s_per_model_epoch``: the 200-epoch units' measured rate
    (:func:`lstpe.campaign.status.long_table` passes it)."""
    rows = []
    problems: dict[str, list[str]] = {}  # one check per chunk name (its targets share it)
    ats: dict[str, int] = {}
    for c in lu.LONG_PLAN:
        if c.name not in problems:
            problems[c.name] = rs.chunk_problems(c, results_dir, whole=True)
            try:
                ats[c.name] = rs.resume_epoch(c, results_dir)
            except res.DamagedFileError:
                ats[c.name] = -1  # named by chunk_problems
        ep, at = lu.chunk_epoch(c, results_dir), ats[c.name]
        rate, basis = _segment_rate(c.units[0], results_dir)
        if rate != rate and s_per_model_epoch:  # no CPU segment yet (none, or a GPU's)
            rate, basis = s_per_model_epoch * len(c.units), "the 200-epoch units' rate"
        # a later target of the same chunk starts where the earlier one ends; a resume
        # checkpoint past the last segment counts
        start = max([ep, min(at, c.target)]
                    + [x.target for x in lu.LONG_PLAN
                       if x.name == c.name and x.target < c.target])
        rows.append({"item": c.item, "chunk": c.name, "units": len(c.units),
                     "target": c.target, "epoch": min(ep, c.target), "from": start,
                     "resume_epoch": at, "s_per_epoch": rate,
                     "resume_here": rs.resume_checkpoint(c, results_dir).exists(),
                     "basis": basis, "hours_left": max(c.target - start, 0) * rate / 3600,
                     "state": "damaged" if problems[c.name] else "ok",
                     "problem": "; ".join(problems[c.name])})
    return pd.DataFrame(rows)


def _segment_rate(unit: lu.LongUnit, results_dir: str | Path | None) -> tuple[float, str]:
    """(seconds per epoch, ``"its last segment"``) of the unit's last published segment
    trained on a CPU, else (NaN, "")."""
    try:
        last = mf.segments(unit.path(results_dir))
    except (OSError, ValueError):  # named by chunk_problems
        last = []
    man = last[-1].manifest if last else None
    if man is None:
        return float("nan"), ""
    info = man.get("long") or {}
    # the wall time covers the epochs from ``timed_from`` (a segment resumed in its
    # middle was timed only from there); a segment without it does not say which
    # epochs its time covers and gives no rate
    span = info.get("to_epoch", 0) - info.get("timed_from", info.get("to_epoch", 0))
    procs = [man, *(info.get("processes") or [])]  # every process of it on a CPU
    on_cpu = all(str(p.get("device", "cpu")).startswith("cpu") for p in procs)
    if span > 0 and man.get("wall_time_s") and on_cpu:
        return float(man["wall_time_s"]) / span, "its last segment"
    return float("nan"), ""


def long_status_text(table: pd.DataFrame) -> str:
    """``lstpe campaign status``'s lines for long chunks (``table``: :func:`long_status`)."""
    lines, shown = [], set()
    for _, r in table.iterrows():
        at = f" at {r['basis']}" if r["basis"] else " (no rate measured yet)"
        ckpt = "no resume checkpoint" if not r.get("resume_here", True) else \
            "resume checkpoint unreadable" if r["resume_epoch"] < 0 else \
            f"resume checkpoint at epoch {r['resume_epoch']}"
        lines.append(f"item {r['item']} (long): {r['chunk']} ({r['units']} models) at epoch "
                     f"{r['epoch']} of {r['target']} ({ckpt}); "
                     f"{r['hours_left']:.1f} machine-hours left{at}")
        if r.get("state") == "damaged" and r["chunk"] not in shown:  # once per chunk
            shown.add(r["chunk"])
            lines.append(f"  DAMAGED, not trained until repaired: {r['problem']}")
    return "\n".join(lines)
