"""A GPU lease in one call: a throughput table, then the most long units that finish in it.

A lease is a few minutes of a lent GPU, one command, and at most 64 MiB coming back. A paused
model's resume state is about 15 MB, so a lease trains work that *finishes* inside the call:
``lstpe campaign lease --minutes 8.5 --out DIR`` (:func:`lease`)

1. times one training step (CUDA graph, fp32 with TF32 off, and bf16 autocast as the
   candidate) at M = 3, 12, 48 learnable-PE models, beside the fp32 matmul floor at each M
   (:func:`throughput`), and stores the table under ``results/benchmarks/``; then, on a
   card without a decision for TF32 (or else bf16), the stored-unit precision pair
   (:mod:`lstpe.experiments.lease_pair`) when it fits 40% of the time left (``--pair-first``:
   whenever it fits; ``--no-pair``: never);
2. measures the step time of the lease's candidate chunk at two sizes: first the paused
   long chunks whose resume checkpoints are in the tree (:func:`paused_sources`: a tree
   trimmed for the mechanism carries its checkpoint), each to its own target
   (:data:`SOURCE_REACH`: the mechanism from its checkpoint to 4000), then the chunks of
   :data:`LEASE_ORDER` (1000-epoch long units from epoch 0); any mix of PEs, optimizers and
   epochs. A chunk with a resume checkpoint that the lease does not
   continue (damaged, bf16, too large to bring back: :func:`held`) is named and passed over,
   never trained from epoch 0. It fits seconds per step = a + b x models, adds the
   evaluations' measured time, and takes the groups predicted to finish with
   :data:`LEASE_MARGIN_S` to spare, in that order, passing over one too large for the time
   left (:func:`choose`). A model past its target still computes until the chunk's longest
   is done, so the prediction counts every model for the longest;
3. trains them as one packed chunk (:func:`lstpe.experiments.packed.train_packed`), each
   model at its own epoch: it publishes every unit's verified 200-epoch segments as it goes,
   writes each paused chunk's resume checkpoint back at the epoch its units reached, and
   pauses cleanly at the deadline if the prediction was wrong (the segments published so
   far stay valid, and each new group short of its target gets its own checkpoint);
4. packs what it wrote under ``results/`` (segments, the checkpoints written back, the
   table) into at most 4 files of 15 MiB under ``DIR`` (:func:`pack_results`), after
   removing an earlier lease's pieces there; a paused new group whose checkpoint cannot
   come back is left out whole (:func:`lstpe.experiments.lease_store.unfinished`).

Nothing here is timed by a test; ``tests/test_lease.py`` runs the whole lease on the CPU with
a tiny model (the pre-flight).
"""

from __future__ import annotations

import dataclasses
import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from lstpe.experiments import lease_pair as lp
from lstpe.experiments import lease_store as lc
from lstpe.experiments import lease_tune as lt
from lstpe.experiments import long_units as lu
from lstpe.experiments import packed as pk
from lstpe.experiments.lease_fit import (  # measuring and predicting (also read from here)
    affordable_epochs,
    fit_steps,
    n_evals,
    predict_seconds,
    step_seconds,
)
from lstpe.experiments.lease_fit import n_train as _n_train
from lstpe.experiments.lease_store import PIECE_BYTES, pack_results  # noqa: F401 (re-exported)
from lstpe.runtime import tf32_mode
from lstpe.store.results import results_root

LEASE_MARGIN_S = 45.0
"""Seconds of the lease kept free after the predicted end of training (the final checkpoint,
the last segments, packing)."""

TARGET = 1000
"""Epochs every unit of a lease trains to (Table 1's length)."""

SOURCE_REACH = lu.LONG_EPOCHS
"""How far past its checkpoint a paused chunk may go in one lease: to its own target (the
mechanism from 2817 to 4000 finishes where it started, its checkpoint then leaves the tree),
when :func:`choose` predicts it fits the call; a lease never stops a leg at a segment's end
short of its target."""

LEASE_ORDER: tuple[str, ...] = tuple(
    c.name for c in lu.LONG_PLAN if c.target == TARGET and c.item not in (4, 5)
    and not lu.extended(c))
"""The long chunks (:data:`lstpe.experiments.long_units.LONG_PLAN`'s 1000-epoch legs) a lease
trains from epoch 0, in the plan's order (what a model-epoch shows): Table 1's 8 PEs at seeds
1-3, Tables 4, 6 and 5 at 1000, then Table 1 at seeds 4-5. Not the legs begun before this
plan (items 4 and 5: their checkpoints are :func:`paused_sources`), nor those whose final
state the plan keeps for a later leg (:func:`~lstpe.experiments.long_units.extended`: seed 1
of Tables 4-6): a lease brings back no new unit's state, so they train where it stays
(``lstpe campaign run``). Each chunk whole or not at all."""


RESUME_BACK_BYTES = 48 * 2**20
"""Bytes of resume checkpoints a lease may pack (each comes back whole beside the segments,
in :func:`pack_results`'s 60 MiB): the mechanism's 3 models (47 MB) or the weight-decay pair
(31 MB), not both."""


def paused_sources(results_dir: str | Path | None = None, epochs: int = TARGET
                   ) -> list[lu.LongChunk]:
    """The paused long chunks a lease continues: per name, the plan's first leg short of its
    target whose resume checkpoint is here, in fp32 and with nothing
    :func:`~lstpe.experiments.long_units.chunk_problems` finds, in the plan's order while
    their checkpoints fit :data:`RESUME_BACK_BYTES`; each with its lease target, its own or
    the last segment's end within ``epochs`` of its checkpoint. The others with a checkpoint
    are :func:`held` (a damaged one among them never raises here)."""
    return lc.survey(results_dir, epochs, RESUME_BACK_BYTES)[0]


def held(results_dir: str | Path | None = None, epochs: int = TARGET
         ) -> dict[str, tuple[str, str]]:
    """The long chunks a lease does not train, name -> (state, reason): those with a resume
    checkpoint here that it does not continue (damaged, bf16, a checkpoint too large to bring
    back: CPU only; or later, for another lease), and the chunks of :data:`LEASE_ORDER`
    that are damaged or begun (:func:`lstpe.experiments.lease_store.survey`,
    :func:`~lstpe.experiments.lease_store.hold_groups`)."""
    srcs, out = lc.survey(results_dir, epochs, RESUME_BACK_BYTES)
    lc.hold_groups([lu.find_chunk(n, TARGET) for n in LEASE_ORDER], results_dir, srcs, out)
    return out


def open_groups(results_dir: str | Path | None = None) -> list[lu.LongChunk]:
    """The chunks of :data:`LEASE_ORDER` (their :data:`TARGET`-epoch legs) none of whose units
    has a published segment and without a resume checkpoint (a chunk with one goes on from
    it, never again from epoch 0), in that order."""
    chunks = [lu.find_chunk(name, TARGET) for name in LEASE_ORDER]
    return [c for c in chunks
            if all(lu.published_epoch(u, results_dir) == 0 for u in c.units)
            and not lu.resume_checkpoint(c, results_dir).exists()]


# --------------------------------------------------------------------------- measuring


def throughput(device: torch.device, models: Sequence[int] = (3, 12, 48),
               precisions: Sequence[str] = ("fp32", "bf16"), steps: int = 30,
               scale: str = "paper") -> pd.DataFrame:
    """The throughput table: per M and precision, seconds per step, model-epochs/s (training
    steps only), and the fraction of the fp32 matmul floor at that M
    (:func:`lstpe.training.floor.measure_floor`, TF32 off)."""
    from lstpe.experiments.registry import run_config
    from lstpe.training.floor import measure_floor

    sigmas = ("0.1", "0.2", "0.5", "1", "1.5", "2")
    rows = []
    for M in models:
        cfgs = [run_config("table2", scale, pes=[f"learn-{sigmas[i % 6]}"],
                           seeds=[2235 + i // 6], device=str(device), amp=False)
                for i in range(M)]
        n_train = _n_train(cfgs[0])
        steps_per_epoch = -(-n_train // cfgs[0].batch_size)
        floor = measure_floor(cfgs[0].model, cfgs[0].batch_size, M, n_train, device,
                              repeats=3)
        for prec in precisions:
            amp = False if prec == "fp32" else torch.bfloat16
            m = step_seconds(cfgs, device, amp, steps)
            rate = M / (steps_per_epoch * m["s_per_step"])
            rows.append({"models": M, "precision": prec, "s_per_step": m["s_per_step"],
                         "model_epochs_per_s": rate,
                         "fp32_floor_model_epochs_per_s": floor["model_epochs_per_s"],
                         "fraction_of_fp32_floor": rate / floor["model_epochs_per_s"],
                         "s_per_eval": m["s_per_eval"]})
            print(f"throughput: M={M} {prec}: {m['s_per_step'] * 1e3:.2f} ms/step, "
                  f"{rate:.1f} model-epochs/s, {rate / floor['model_epochs_per_s']:.2f} of the "
                  f"fp32 floor ({floor['model_epochs_per_s']:.1f})", flush=True)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- choosing


def choose(groups: Sequence[lu.LongChunk], fit: dict[str, float], seconds: float,
           n_evals: int, steps_per_epoch: int, epochs: int = TARGET,
           legs: Sequence[int] | None = None) -> list[int]:
    """Indices of the groups trained together: each in order, taken where the chunk with it
    is still predicted to finish in ``seconds``, passed over where not (so a card too slow
    for the first group trains a smaller one rather than nothing). ``legs``: each group's
    epochs in this lease (default ``epochs`` each; a paused chunk's, from its checkpoint to
    its target); the chunk is priced at its longest leg taken, with ``n_evals`` (of an
    ``epochs``-long leg) in proportion: every model as if it ran that long (an upper bound)."""
    n, top, taken = 0, 0, []
    for i, g in enumerate(groups):
        e = max(top, legs[i] if legs is not None else epochs)
        if _priced(n + len(g.units), fit, n_evals, e, epochs, steps_per_epoch) <= seconds:
            n, top = n + len(g.units), e
            taken.append(i)
    return taken


def _priced(n_models: int, fit: dict[str, float], n_evals: int, leg: int, epochs: int,
                steps_per_epoch: int) -> float:
    """:func:`~lstpe.experiments.lease_fit.predict_seconds` of a chunk whose longest leg is
    ``leg`` epochs, ``n_evals`` (those of an ``epochs``-long leg) in proportion."""
    return predict_seconds(n_models, fit, round(n_evals * leg / epochs), leg, steps_per_epoch)


def resume_epochs(sources: Sequence[lu.LongChunk], results_dir: str | Path | None
                  ) -> dict[lu.LongChunk, int]:
    """Each paused chunk's checkpoint epoch, read once (each read loads the checkpoint: the
    mechanism's is 49 MB)."""
    return {c: lu.resume_epoch(c, results_dir) for c in sources}


def legs_of(groups: Sequence[lu.LongChunk], at: dict[lu.LongChunk, int]) -> list[int]:
    """Each group's epochs in a lease: a paused chunk's (one of ``at``:
    :func:`resume_epochs`) from its checkpoint to its lease target, a new one's to its
    target."""
    return [g.target - at.get(g, 0) for g in groups]


# --------------------------------------------------------------------------- the lease


def device_record(device: torch.device) -> dict[str, Any]:
    """What a lease records of its device: GPU name, torch, TF32 flags, host."""
    rec: dict[str, Any] = {"device": str(device), "torch": torch.__version__,
                           "host": platform.node(),
                           "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32)}
    if device.type == "cuda":
        rec["gpu"] = torch.cuda.get_device_name(device)
    return rec


def lease(minutes: float, out: str | Path, results_dir: str | Path | None = None,
          device: str = "cuda", models: Sequence[int] = (3, 12, 48),
          groups: Sequence[lu.LongChunk] | None = None, epochs: int = TARGET,
          sources: Sequence[lu.LongChunk] | None = None,
          skip_table: bool = False, table_scale: str = "paper", log=print,
          tune: bool | None = None, measure_fn: Any = None, clock: Any = time.monotonic,
          pair: bool | None = None, pair_fit: dict[str, float] | None = None,
          pair_train: Any = None, pair_first: bool = False,
          reach: int = SOURCE_REACH) -> dict[str, Any]:
    """The whole lease (module docstring); returns its summary (also ``out/lease.json``).
    ``groups``/``sources``: the chunks from epoch 0 and the paused ones to consider (default:
    :func:`open_groups` and :func:`paused_sources`, each paused one to its own target, or the
    last segment's end within ``reach`` epochs of its checkpoint); a group with a resume
    checkpoint or a published segment, or a damaged one, is never trained from epoch 0
    (:func:`held`: named in the log and the summary). ``tune`` (default: on CUDA only): the
    tuning minute (:func:`lstpe.experiments.lease_tune.tune`, with ``measure_fn`` and
    ``clock`` for tests) chooses the step variant; without it the lease trains today's step
    in fp32. ``pair`` (default: on CUDA only): before it, the stored-unit precision pair of a
    candidate the card has no decision for (:func:`lstpe.experiments.lease_pair.in_lease`;
    ``pair_fit``, ``pair_train``: its step-time fit and training, for tests), recorded as
    ``pair``; it runs when it takes at most :data:`~lstpe.experiments.lease_pair.SHARE` of
    the time left, or ``pair_first``, whenever it finishes :data:`LEASE_MARGIN_S` before the
    call's end.

    Raises:
        ValueError: ``minutes`` is not a positive, finite number, or ``device`` is one this
            machine lacks (naming it).
        FileExistsError: ``out`` holds a ``results.tgz.*`` a lease did not make (naming it).
    """
    from lstpe.runtime import pick_device

    minutes = lc.check_minutes(minutes)
    dev = pick_device(device)
    t_start, since = time.monotonic(), time.time() - 1.0
    end = t_start + minutes * 60
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stale = lc.clear_pieces(out)  # an earlier lease's pieces: never returned with these
    if stale:
        log(f"lease: removed {len(stale)} file(s) an earlier lease packed in {out}")
    results = results_root(results_dir)
    summary: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "minutes": minutes, **device_record(dev)}
    with tf32_mode(dev, False):
        if not skip_table:
            table = throughput(dev, models, scale=table_scale)
            name = f"lease_{summary.get('gpu', device).replace(' ', '_')}_{summary['started']}"
            path = results / "benchmarks" / f"{name.replace(':', '')}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            table.to_csv(path, index=False)
            summary["record"] = str(path.with_suffix(".json"))
            summary["table"] = str(path.relative_to(results.parent)) \
                if path.is_relative_to(results.parent) else str(path)
        if dev.type == "cuda" if pair is None else pair:
            summary["pair"] = lp.in_lease(
                dev, results, summary.get("gpu"), end - LEASE_MARGIN_S * pair_first, log,
                pair_fit, pair_train, 1.0 if pair_first else lp.SHARE)
        found, kept_out = lc.survey(results, reach, RESUME_BACK_BYTES)
        srcs = list(sources) if sources is not None else found
        fresh = lc.hold_groups(groups if groups is not None else open_groups(results),
                               results, srcs, kept_out)
        for name, (state, why) in kept_out.items():
            log(f"lease: {name} is not trained in this lease ({state}): {why}")
        summary["held"] = {n: {"state": st, "why": w} for n, (st, w) in kept_out.items()}
        todo = srcs + [dataclasses.replace(g, target=epochs) for g in fresh]  # paused first
        if not todo:
            log("lease: no open group to train")
            return _finish(summary, out, results, t_start, since)
        cfgs_all = [u.config(device=device, checkpoint_every=0) for g in todo for u in g.units]
        variant = lt.choose_variant(dev, cfgs_all, results, summary, log,
                                  dev.type == "cuda" if tune is None else tune, measure_fn,
                                  clock)
        mode = {} if variant == lt.today(dev) else {"mode": variant.step}
        with tf32_mode(dev, variant.tf32):
            small = step_seconds(cfgs_all[:len(todo[0].units)], dev, **mode)
            large = step_seconds(cfgs_all, dev, **mode)
        fit = fit_steps(small, large)
        evals = n_evals(cfgs_all[0], 0, epochs)
        spe = -(-_n_train(cfgs_all[0]) // cfgs_all[0].batch_size)
        left = end - time.monotonic() - LEASE_MARGIN_S
        at = resume_epochs(srcs, results)
        legs = legs_of(todo, at)
        taken = [todo[i] for i in choose(todo, fit, left, evals, spe, epochs, legs)]
        if not taken and srcs:  # a call too short for a group: the paused chunks towards
            # their own targets, paused at the deadline with their checkpoints written back
            n = sum(len(c.units) for c in srcs)
            summary["predicted_epochs"] = affordable_epochs(n, fit, left, spe, evals / epochs)
            srcs = taken = paused_sources(results, lu.LONG_EPOCHS)
            at = resume_epochs(srcs, results)
        summary.update({"fit": fit, "measured": [small, large], "seconds_for_training": left,
                        "groups": [g.name for g in taken]})
        log(f"lease: step {fit['a'] * 1e3:.2f} ms + {fit['b'] * 1e3:.3f} ms/model; "
            f"{left:.0f} s for training: {len(taken)} of {len(todo)} groups fit "
            f"({', '.join(g.name for g in taken) or 'none'})")
        if not taken:
            return _finish(summary, out, results, t_start, since)
        paused = [g for g in taken if g in srcs]
        packed = pk.packed_chunk(f"lease-{summary['started'][:10]}", paused,
                                 [g for g in taken if g not in srcs],
                                 "a GPU lease: " + ", ".join(g.name for g in taken),
                                 fresh_snapshots="sparse")
        units = packed.units
        n = len(units)
        top = max(legs_of(taken, at))  # (the fallback above replaced srcs and at)
        summary["predicted_s"] = _priced(n, fit, evals, top, epochs, spe)
        start = {c.name: at[c] for c in paused}
        t0 = time.monotonic()
        with tf32_mode(dev, variant.tf32):
            done = pk.train_packed(packed, end - LEASE_MARGIN_S / 3, results, dev, log=log,
                                   checkpoint_every=0, step_mode=variant.step)
        wall = time.monotonic() - t0
        left_out, summary["paused_groups"] = lc.unfinished(
            [g for g in taken if g not in srcs], paused, results, RESUME_BACK_BYTES, log)
        trained = sum(lu.published_epoch(u, results) for g in taken if g not in srcs
                      for u in g.units) + sum(
            (lu.resume_epoch(c, results) - start[c.name]) * len(c.units) for c in paused)
        summary.update({"units": [u.key for u in units], "finished": done,
                        "continued": {c.name: [start[c.name], lu.resume_epoch(c, results)]
                                      for c in paused},
                        "train_wall_s": wall, "model_epochs": trained,
                        "model_epochs_per_s": trained / wall if wall > 0 else None})
        log(f"lease: {n} units {'finished' if done else 'paused'} in {wall:.0f} s "
            f"(predicted {summary['predicted_s']:.0f} s)")
    return _finish(summary, out, results, t_start, since, left_out)


def _finish(summary: dict[str, Any], out: Path, results: Path, t_start: float,
            since: float | None = None, left_out: Sequence[str] = ()) -> dict[str, Any]:
    summary["wall_s"] = time.monotonic() - t_start
    text = json.dumps(summary, indent=1, default=str)
    (out / "lease.json").write_text(text)
    if summary.get("record"):  # beside the table: what the next lease's plan is fitted to
        Path(summary["record"]).write_text(text)
    pack_results(results, out, since=since, exclude=left_out)
    return summary


def _stderr(msg: str) -> None:
    import sys

    print(msg, file=sys.stderr)


def last_record(results_dir: str | Path | None = None, log=_stderr
                ) -> dict[str, Any] | None:
    """The newest lease record with a step-time fit (``results/benchmarks/lease_*.json``),
    by the time it started (its ``started``), whatever its GPU's name; a damaged record (not
    JSON, a ``fit`` without its numbers) is passed over, named through ``log``
    (:func:`lstpe.experiments.lease_store.read_records`)."""
    recs, problems = lc.read_records(results_dir)
    for line in problems:
        log(line)
    return max(recs, key=lambda r: str(r.get("started", ""))) if recs else None


PLAN_COLUMNS = ["chunk", "units", "models", "predicted_s", "fits", "state", "why"]
"""The columns of :func:`lease_plan` (``state``: trains, waits, or why a chunk is
:func:`held`)."""


def lease_plan(minutes: float, results_dir: str | Path | None = None,
               record: dict[str, Any] | None = None, log=_stderr,
               pair: bool = True, pair_first: bool = False) -> pd.DataFrame:
    """What a lease of ``minutes`` would train: the paused chunks it continues
    (:func:`paused_sources`) and the open chunks of :data:`LEASE_ORDER`, with the predicted
    seconds of each prefix as one chunk, from the step-time fit of the newest
    lease record (``record``), the same choice :func:`lease` makes after measuring; then the
    chunks it does not train (:func:`held`: damaged, CPU only, later, begun), each with
    its reason. The throughput table and the two measurements take about :data:`SETUP_S`
    seconds first, and a stored-unit precision pair that runs
    (:func:`lstpe.experiments.lease_pair.plan_pair`) its predicted seconds before the chunks;
    ``pair=False`` (a lease run with ``--no-pair``) plans none and gives the chunks its time;
    ``pair_first`` (``--pair-first``) plans it whenever it fits the call.

    Raises:
        FileNotFoundError: no usable lease record (the damaged ones passed over are named).
    """
    if record is None:
        recs, problems = lc.read_records(results_dir)
        for line in problems:
            log(line)
        if not recs:
            raise FileNotFoundError(lc.record_error(results_dir, problems))
        record = max(recs, key=lambda r: str(r.get("started", "")))
    rec = record
    srcs, kept_out = lc.survey(results_dir, SOURCE_REACH, RESUME_BACK_BYTES)
    groups = srcs + lc.hold_groups(open_groups(results_dir), results_dir, srcs, kept_out)
    lc.hold_groups([lu.find_chunk(n, TARGET) for n in LEASE_ORDER], results_dir, srcs,
                   kept_out)
    rows: list[dict[str, Any]] = []
    taken: list[int] = []
    legs = legs_of(groups, resume_epochs(srcs, results_dir))
    pair = lp.plan_pair(rec, results_dir, minutes * 60 - SETUP_S - LEASE_MARGIN_S * pair_first,
                        1.0 if pair_first else lp.SHARE) if pair else None
    pair_s = pair["predicted_s"] if pair and pair["runs"] else 0.0
    if groups:
        cfg = groups[0].units[0].config()
        evals, spe = n_evals(cfg, 0, TARGET), -(-_n_train(cfg) // cfg.batch_size)
        taken = choose(groups, rec["fit"], minutes * 60 - SETUP_S - LEASE_MARGIN_S - pair_s,
                       evals, spe, TARGET, legs)
    n, top = 0, 0
    for i, g in enumerate(groups):
        m = n + len(g.units)  # the chunk's models if this group joins the ones taken before it
        e = max(top, legs[i])  # and its longest leg
        rows.append({"chunk": g.name, "units": ", ".join(u.key for u in g.units), "models": m,
                     "predicted_s": round(_priced(m, rec["fit"], evals, e, TARGET, spe)),
                     "fits": i in taken, "state": "trains" if i in taken else "waits",
                     "why": (f"continues from its checkpoint at epoch "
                             f"{g.target - legs[i]} to {g.target}: "
                             if g in srcs else "") + g.reason})
        n, top = (m, e) if i in taken else (n, top)
    for name, (state, why) in kept_out.items():
        c = next(c for c in lu.LONG_PLAN if c.name == name)
        rows.append({"chunk": name, "units": ", ".join(u.key for u in c.units),
                     "models": None, "predicted_s": None, "fits": False, "state": state,
                     "why": why})
    table = pd.DataFrame(rows, columns=PLAN_COLUMNS)
    for col in ("models", "predicted_s"):  # whole numbers; <NA> for a chunk not in a lease
        table[col] = table[col].astype("Int64")
    table.attrs.update({"record": rec.get("path"), "gpu": rec.get("gpu"),
                        "pair": pair,
                        "model_epochs": sum(len(groups[i].units) * legs[i] for i in taken)})
    return table


SETUP_S = 40.0
"""Seconds a lease spends before training: the throughput table and the two measurements of
the chunk's step time (measured: 33 s on an H200)."""


def lease_plan_text(t: pd.DataFrame) -> str:
    """What ``lstpe campaign plan --device cuda`` prints of :func:`lease_plan`'s table: one
    block per chunk (what, whether it fits, and why), then where the prediction comes from."""
    lines = []
    for r in t.itertuples():
        size = f"{r.models} models in the chunk, {r.predicted_s} s predicted" \
            if r.state in ("trains", "waits") else "not in this lease"
        lines.append(f"{r.chunk}: {r.state} ({size})\n  units: {r.units}\n  why: {r.why}")
    lines.append(f"(seconds predicted by the step-time fit of {t.attrs.get('record')}, measured "
                 f"on an {t.attrs.get('gpu')}; after {SETUP_S:g} s of measuring: "
                 f"{t.attrs.get('model_epochs', 0)} model-epochs. lstpe campaign lease "
                 "measures again and chooses; lstpe campaign run --device cuda resumes the "
                 "paused long chunks)")
    if p := t.attrs.get("pair"):
        lines.append(pair_text(p))
    return "\n".join(lines)


def pair_text(p: dict[str, Any]) -> str:
    """One line on the stored-unit precision pair a plan holds
    (:func:`lstpe.experiments.lease_pair.plan_pair`): its cost and whether it runs."""
    when = ("it runs first, before the chunks above (their seconds count it)" if p["runs"]
            else f"skipped: {p['why']}")
    return (f"the stored-unit precision pair of {p['candidate']} ({p['tag']}): "
            f"{p['model_epochs']} model-epochs, {p['predicted_s']:.0f} s predicted at that "
            f"fit; {when}")
