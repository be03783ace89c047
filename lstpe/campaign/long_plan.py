"""The long plan priced and ordered, the CPU's order, and the bound on resume state in the tree.

:data:`lstpe.experiments.long_units.LONG_PLAN` lists the long legs in the order of what a
model-epoch shows (its items: :data:`lstpe.campaign.items.ITEMS`); here each entry gets
its cost in model-epochs (:func:`leg_cost`: models x the epochs of its leg) and what is left
(:func:`leg_left`), and :func:`long_plan_text` prints them for ``lstpe campaign plan``.

**The CPU's order** (:func:`cpu_first`): legs that resume from a checkpoint in the tree (the
weight-decay pair), then the legs of :data:`CPU_BEFORE_UNITS` (Table 4's SGD at seed 1, sigma
0.01 and 0.1), one model at a time, each only when it is predicted to finish in the time left
(:func:`lstpe.campaign.scheduler.run` probes) or, fresh, when at least half of it fits
(:func:`splits`: it pauses once and the next run finishes it); then the 200-epoch units; then
the rest of :data:`CPU_FIRST` (Table 1 at 1000, SGD's other sigmas, Adam beside them). A leg
with published segments and no checkpoint (as a past GPU lease left some) is passed over.

**Resume state in the tree** (``results/long/_resume/``, tracked by git so that another
machine continues the same trajectory) is bounded (:func:`resume_problems`, which ``lstpe
campaign status`` prints and exits 1 on):

* at most :data:`RESUME_LIMIT_BYTES` (100 MB) at any time: a leg whose state would pass it
  waits (:func:`state_fits`);
* a chunk's state leaves the tree once its last planned leg is done (:func:`retire`, called
  by the run that finishes it, which says so in its log); a finished leg keeps its final state
  (weights, optimizer) only when the plan takes its models further (:func:`~lstpe.experiments.
  long_units.extended`);
* at most one checkpoint per 1000 epochs of a chunk is committed: a checkpoint that replaces
  the committed one (``HEAD``) inside the same 1000-epoch span, short of its target, is named
  and must stay out of the commit (the next run on this machine resumes from it). CPU legs are
  started only when they are predicted to finish, or split once in two (:func:`splits`), so
  a pause is the exception.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch

from lstpe.campaign import resume as rs
from lstpe.campaign.items import ITEMS, WHY
from lstpe.experiments import long_units as lu
from lstpe.experiments.registry import REGISTRY
from lstpe.runtime import PAPER_SEEDS

RESUME_LIMIT_BYTES = 100 * 10**6
"""Bytes of ``results/long/_resume`` the tree may hold (every chunk's state together)."""

COMMIT_SPAN = 1000
"""Epochs of a chunk per committed checkpoint at most (a pause inside one span is not
committed again)."""

STATE_BYTES = {"adam": 16_400_000, "adamw": 16_400_000, "sgd": 5_500_000}
"""Bytes of one model's resume state by optimizer: weights and two moments (the mechanism's
3-model checkpoint is 49.06 MB); plain SGD keeps no moments (a third of that)."""

CPU_SGD_SIGMAS: tuple[str, ...] = ("learn-0.01", "learn-0.1", "learn-0.05", "learn-0.2")
"""The order of SGD's sigmas on a CPU: 0.01 (the paper's widest SGD-Adam gap in Table 4, 0.885
against 0.588), then 0.1, whose
Adam twin at seed 1 (the mechanism's ``learn-0.1``) already stands past 1000, so the two read
at the same epochs; then 0.05 and 0.2."""

CPU_SGD_FIRST: tuple[str, ...] = tuple(sorted(
    (c.name for c in lu.LONG_PLAN if c.target == 1000 and len(c.units) == 1
     and c.units[0].run == "table4/sgd" and c.units[0].seed == PAPER_SEEDS[0]),
    key=lambda name: CPU_SGD_SIGMAS.index(lu.find_chunk(name).units[0].pe)))
"""Table 4's SGD column at seed 1, one model per leg, in :data:`CPU_SGD_SIGMAS`' order."""

CPU_TABLE1: tuple[str, ...] = ("table1-2d-fixed-2235", "table1-2d-fixed-6312",
                               "table1-learn-0.2-6312")
"""Table 1 at 1000 beside its six other PEs (which stand there at seeds 1-2): 2d-fixed at
seeds 1 and 2, learn-0.2 at seed 2 (learn-0.2 at seed 1 is the mechanism's model)."""

CPU_ADAM4: tuple[str, ...] = ("table4-adam-learn-0.01-2235", "table4-adam-learn-0.05-2235")
"""Table 4's Adam at sigma 0.01 and 0.05, seed 1, to 1000: beside SGD at the same epochs."""

CPU_FIRST: tuple[str, ...] = (*CPU_SGD_FIRST[:2], *CPU_TABLE1, *CPU_SGD_FIRST[2:], *CPU_ADAM4)
"""The 1000-epoch legs a CPU takes one model at a time, in this order: SGD at 0.01 and 0.1
(the only optimizer claim no unit spoke to), Table 1's 2d-fixed and learn-0.2 (so that Table 1
reads at 1000), SGD at 0.05 and 0.2, Adam at 0.01 and 0.05 (Table 4's three small sigmas at one
seed, Adam beside SGD). Only those of :data:`CPU_BEFORE_UNITS` come before the 200-epoch units;
each of these legs may train in two runs (:func:`splits`)."""

CPU_BEFORE_UNITS: tuple[str, ...] = CPU_SGD_FIRST[:2]
"""The legs a CPU trains before the 200-epoch units left: SGD at 0.01 (Table 4's widest
SGD-Adam gap) and 0.1 (read beside its Adam twin). The others wait until no 200-epoch unit is
left: each unit is about 25 minutes of a CPU, against 125-140 for one model to 1000."""


def start_epoch(chunk: lu.LongChunk) -> int:
    """Where ``chunk``'s leg begins: the previous target of the same name, else 0."""
    return max([c.target for c in lu.LONG_PLAN if c.name == chunk.name
                and c.target < chunk.target], default=0)


def leg_cost(chunk: lu.LongChunk) -> int:
    """Model-epochs of ``chunk``'s leg (models x the epochs from :func:`start_epoch`)."""
    return len(chunk.units) * (chunk.target - start_epoch(chunk))


def reached(chunk: lu.LongChunk, results_dir: str | Path | None = None) -> int:
    """The epoch ``chunk``'s models stand at: the later of its published segments and its
    resume checkpoint (an unreadable one counts as none)."""
    try:
        at = rs.resume_epoch(chunk, results_dir)
    except (OSError, ValueError):
        at = 0
    return max(lu.chunk_epoch(chunk, results_dir), at)


def leg_left(chunk: lu.LongChunk, results_dir: str | Path | None = None) -> int:
    """Model-epochs of ``chunk``'s leg still to train."""
    at = min(max(reached(chunk, results_dir), start_epoch(chunk)), chunk.target)
    return len(chunk.units) * (chunk.target - at)


def state_bytes(chunk: lu.LongChunk) -> int:
    """Bytes of ``chunk``'s resume state (:data:`STATE_BYTES` per model)."""
    return sum(STATE_BYTES[REGISTRY[u.run].optimizer] for u in chunk.units)


def resume_bytes(results_dir: str | Path | None = None) -> dict[str, int]:
    """Bytes per chunk folder under ``results/long/_resume`` (what the tree holds)."""
    root = lu.long_root(results_dir) / "_resume"
    out = {}
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if d.is_dir():
            out[d.name] = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
    return out


def last_leg(name: str) -> lu.LongChunk:
    """The last leg of the chunk ``name`` in :data:`~lstpe.experiments.long_units.LONG_PLAN`."""
    return max((c for c in lu.LONG_PLAN if c.name == name), key=lambda c: c.target)


def state_fits(chunk: lu.LongChunk, results_dir: str | Path | None = None) -> bool:
    """Whether ``chunk``'s leg may train here without taking the tree's resume state past
    :data:`RESUME_LIMIT_BYTES`: a chunk whose state is already in the tree always may; a new
    one adds :func:`state_bytes`."""
    have = resume_bytes(results_dir)
    return chunk.name in have or sum(have.values()) + state_bytes(chunk) <= RESUME_LIMIT_BYTES


def retire(chunk: lu.LongChunk, results_dir: str | Path | None = None, log=print) -> bool:
    """After ``chunk`` reached its target: delete its resume state when no later leg needs it
    (saying so in ``log``); keep it when the plan extends its models. True if deleted."""
    rdir = rs.resume_dir(chunk, results_dir)
    if not rdir.exists() or lu.extended(chunk):
        if rdir.exists():
            log(f"long: {chunk.name} reached {chunk.target}; its final state stays in {rdir} "
                f"for its next leg (to {last_leg(chunk.name).target})")
        return False
    size = resume_bytes(results_dir).get(chunk.name, 0)
    shutil.rmtree(rdir)
    log(f"long: {chunk.name} finished its last planned leg (epoch {chunk.target}): its resume "
        f"state ({size / 1e6:.1f} MB) leaves the tree: deleted {rdir} (commit the deletion)")
    return True


def cpu_first(results_dir: str | Path | None = None,
              units_left: bool = False) -> list[lu.LongChunk]:
    """The legs a CPU takes before its 200-epoch units, in order: every leg short of its
    target that resumes from a checkpoint in the tree, then :data:`CPU_FIRST` (only the legs
    of :data:`CPU_BEFORE_UNITS` while ``units_left``, 200-epoch units still to train); none with
    segments and no checkpoint (:func:`~lstpe.campaign.resume.unresumable`), none at
    its target."""
    out: list[lu.LongChunk] = []
    for c in lu.LONG_PLAN:
        if c.name in {x.name for x in out} or not rs.resume_checkpoint(c, results_dir).exists():
            continue
        if start_epoch(c) <= reached(c, results_dir) < c.target:
            out.append(c)
    out += sorted((c for c in lu.LONG_PLAN if c.name in CPU_FIRST and c.target == 1000
                   and c not in out and reached(c, results_dir) < c.target
                   and not rs.unresumable(c, results_dir)
                   and not (units_left and c.name not in CPU_BEFORE_UNITS)),
                  key=lambda c: CPU_FIRST.index(c.name))
    return out


SPLIT_SHARE = 0.5
"""A CPU leg of :data:`CPU_FIRST` that does not finish in one run starts anyway, fresh, when
at least this share of it fits: it pauses once and the next run finishes it (a 1000-epoch
model is about 2.2-3 hours of two cores, more than a run's budget)."""


def splits(chunk: lu.LongChunk, need: float, left: float,
           results_dir: str | Path | None = None) -> bool:
    """True when ``chunk`` (``need`` seconds to its target, ``left`` in the run) trains in two
    runs: a leg of :data:`CPU_FIRST` that has not started (no checkpoint, nothing published
    past its start), of which at least :data:`SPLIT_SHARE` fits in the time left, so that it
    pauses once, inside one 1000-epoch span (one committed checkpoint), and what remains fits
    in the next run. A leg that resumes must finish where it resumes."""
    return (chunk.name in CPU_FIRST and left >= SPLIT_SHARE * need
            and not rs.resume_checkpoint(chunk, results_dir).exists()
            and reached(chunk, results_dir) <= start_epoch(chunk))


def epochs_left(chunk: lu.LongChunk, results_dir: str | Path | None = None) -> int:
    """Epochs of ``chunk``'s leg from where its models stand to its target."""
    return chunk.target - min(max(reached(chunk, results_dir), start_epoch(chunk)),
                              chunk.target)


class AtLeast(float):
    """Seconds that are a lower bound, not an estimate: a leg priced at half the fastest rate
    measured so far, not probed because even that is longer than the time left."""


def _need(seconds: float) -> str:
    """``seconds`` in words for the log: "at least N min" for :class:`AtLeast`, else "about"."""
    return f"{'at least' if isinstance(seconds, AtLeast) else 'about'} {seconds / 60:.0f} min"


def next_leg(results_dir: str | Path | None, on_gpu: bool, deadline: float, skip: set[str],
             units_left: bool, seconds: Callable[[lu.LongChunk, float], float],
             log) -> lu.LongChunk | None:
    """The long leg ``campaign run`` trains next, or None (then a 200-epoch unit). On a GPU
    :func:`~lstpe.campaign.resume.next_chunk`, as before. On a CPU only a leg predicted
    (``seconds(leg, time left)``: :func:`lstpe.campaign.scheduler.leg_seconds`, the
    probe's estimate) to finish in the time left, so that a leg ends where it starts: first
    :func:`lstpe.campaign.long_plan.cpu_first` (a leg resuming from its checkpoint, then
    Table 4's SGD at seed 1: its other sigmas only once no 200-epoch unit is left), then, once
    no 200-epoch unit is left, the plan's other legs in order. A leg that does not fit, or
    whose final state would take the resume state past its budget, is named and added to
    ``skip`` for the rest of the run."""
    if on_gpu:
        return rs.next_chunk(results_dir, skip=skip)
    first = [c for c in cpu_first(results_dir, units_left) if c.name not in skip]
    while True:
        chunk = first.pop(0) if first else None if units_left else \
            rs.next_chunk(results_dir, skip=skip)
        if chunk is None or chunk.name in skip:  # (a plan that offers a skipped leg again)
            return None
        left = deadline - time.monotonic()
        if not state_fits(chunk, results_dir):
            log(f"long: {chunk.name} waits: its state ({state_bytes(chunk) / 1e6:.0f} MB) "
                f"would take results/long/_resume past {RESUME_LIMIT_BYTES / 1e6:.0f} MB")
        elif (need := seconds(chunk, left)) > left and not splits(chunk, need, left,
                                                                   results_dir):
            log(f"long: {chunk.name} to {chunk.target} needs {_need(need)}, "
                f"{left / 60:.0f} min left: not started (a leg finishes where it starts)")
        else:
            if need > left:
                log(f"long: {chunk.name} to {chunk.target} needs {_need(need)}, "
                    f"{left / 60:.0f} min left: longer than one run of a CPU, so it trains "
                    "in two: it pauses once at this run's deadline (its checkpoint, the "
                    "one of this 1000-epoch span, is committed) and the next run here "
                    "resumes it first")
            return chunk
        skip.add(chunk.name)


# --------------------------------------------------------------------------- the commit rule


def committed_epoch(path: Path) -> int | None:
    """The epoch of ``path``'s version in git's ``HEAD`` when the file in the tree differs from
    it; None when they are the same, git does not hold it, or this is no git checkout."""
    path = Path(path).resolve()
    try:
        top = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        rel = path.relative_to(top).as_posix()
        if subprocess.run(["git", "-C", top, "diff", "--quiet", "HEAD", "--", rel],
                          capture_output=True).returncode == 0:
            return None
        blob = subprocess.run(["git", "-C", top, "show", f"HEAD:{rel}"], capture_output=True,
                              check=True).stdout
    except (OSError, ValueError, subprocess.CalledProcessError):
        return None
    try:
        state = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
        return int(state["epoch"])
    except Exception:  # noqa: BLE001 - an unreadable committed version gives no rule
        return None


def resume_problems(results_dir: str | Path | None = None) -> list[str]:
    """What keeps the tree's resume state from being committed, each naming the folder or file
    and what to do; [] when none (the rules: module docstring)."""
    have = resume_bytes(results_dir)
    out = []
    total = sum(have.values())
    if total > RESUME_LIMIT_BYTES:
        out.append(f"results/long/_resume holds {total / 1e6:.1f} MB, more than the "
                   f"{RESUME_LIMIT_BYTES / 1e6:.0f} MB budget: do not commit it; finish a "
                   "chunk's last leg (its state then leaves) before another begins")
    names = {c.name for c in lu.LONG_PLAN}
    for name in have:
        rdir = lu.long_root(results_dir) / "_resume" / name
        if name not in names:
            out.append(f"{rdir} belongs to no chunk of the long plan: move it out of the tree")
            continue
        last = last_leg(name)
        try:
            at = rs.resume_epoch(last, results_dir)
        except (OSError, ValueError):
            continue  # named by chunk_problems
        if at >= last.target:
            out.append(f"{name} finished its last planned leg (epoch {last.target}): its resume "
                       f"state leaves the tree (git rm -r {rdir})")
            continue
        before = committed_epoch(rs.resume_checkpoint(last, results_dir))
        targets = {c.target for c in lu.LONG_PLAN if c.name == name}
        if before is not None and at not in targets and \
                at // COMMIT_SPAN <= before // COMMIT_SPAN:
            out.append(f"{rs.resume_checkpoint(last, results_dir)} moved from epoch {before} "
                       f"(committed) to {at}, inside the same {COMMIT_SPAN}-epoch span: at most "
                       f"one checkpoint per {COMMIT_SPAN} epochs of a chunk is committed; leave "
                       "it out of the commit (git restore --staged), the next run here resumes "
                       "from it")
    return out


def budget_text(results_dir: str | Path | None = None) -> str:
    """``lstpe campaign status``'s lines on resume state: the budget, what uses it, problems."""
    have = resume_bytes(results_dir)
    lines = [f"resume state in the tree: {sum(have.values()) / 1e6:.1f} MB of the "
             f"{RESUME_LIMIT_BYTES / 1e6:.0f} MB budget"]
    for name, size in have.items():
        legs = [c for c in lu.LONG_PLAN if c.name == name]
        at = reached(legs[-1], results_dir) if legs else 0
        leg = next((c for c in legs if at < c.target), None)
        why = ("no chunk of the plan" if not legs else "finished: it leaves the tree"
               if leg is None else f"paused at epoch {at} of its leg to {leg.target}"
               if at > start_epoch(leg) else f"final state at {at}, kept for its leg to "
               f"{leg.target}")
        lines.append(f"  {name}: {size / 1e6:.1f} MB ({why})")
    lines += [f"  RESUME STATE: {p}" for p in resume_problems(results_dir)]
    return "\n".join(lines)


# --------------------------------------------------------------------------- the plan


def long_plan_text(results_dir: str | Path | None = None) -> str:
    """The long plan in its order, per item its reason and its cost and what is left in
    model-epochs, and each leg (epoch reached of its target); then the order a CPU takes them
    in."""
    lines = ["the long plan, in order (model-epochs: models x epochs of each leg):"]
    items = list(dict.fromkeys(c.item for c in lu.LONG_PLAN))
    for item in items:
        legs = [c for c in lu.LONG_PLAN if c.item == item]
        cost, left = sum(map(leg_cost, legs)), sum(leg_left(c, results_dir) for c in legs)
        lines.append(f"item {item}: {ITEMS.get(item, '')} -- {WHY.get(item, '')}")
        lines.append(f"  cost {cost:,} model-epochs, {left:,} left: " + ", ".join(
            f"{c.name} ({len(c.units)}, at {min(reached(c, results_dir), c.target)} of "
            f"{c.target})" for c in legs))
    now = cpu_first(results_dir, units_left=True)
    later = [c for c in cpu_first(results_dir) if c not in now]
    lines.append("a CPU (campaign run): " + ", ".join(c.name for c in now) + ", each when "
                 "predicted to finish in the budget, one model at a time; then the "
                 "200-epoch units; then " + "".join(f"{c.name}, " for c in later)
                 + "and the legs above that finish in the budget")
    return "\n".join(lines)
