"""The GPU driver: train the paper's named runs, batch by batch, resumably; plan, pack, unpack.

``lstpe reproduce`` (:mod:`lstpe.cli`) loops over the registry
(:mod:`lstpe.experiments.registry`): runs that share a number of epochs train as one batch of
models (:func:`lstpe.training.train.train_many`), each written to ``<out>/<name>/`` with its
manifest. A run whose folder holds a finished run of the same configuration is skipped; one of
another configuration stops the driver (nothing is overwritten). An interrupted batch resumes
from its checkpoints in ``<out>/_work/``.

Subcommands::

    lstpe reproduce run  [--parts table2 table1 ...] [--minutes 9] [--task-index I --task-count N]
    lstpe reproduce plan [--parts ...] [--rate 250] [--memory-gib 70]
    lstpe reproduce pack --out PACKDIR [--runs table2 ...] [--volume K --to DIR]
    lstpe reproduce unpack PACKDIR [PACKDIR ...] [--into results/paper-e1000]
    lstpe reproduce submit --tasks N [--cluster slurm|local] [--wait] -- RUN FLAGS

Where runs go: a whole paper-scale run of E epochs lives in ``results/paper-e<E>/<name>/``
(:func:`run_home`); ``results/paper/`` holds only the campaign's 200-epoch fragments, and
``unpack`` refuses to place a whole run there.

A cluster: ``--task-index I --task-count N`` (under Slurm, by default the array task's,
:func:`lstpe.experiments.slices.task_of`) trains slice ``I`` of the runs' models
(:func:`lstpe.experiments.slices.task_slice`), each model into its own folder
``<run home>/<pe>/<seed>/`` (:func:`model_home`; at paper scale
``results/paper-e<E>/<name>/<pe>/<seed>/``, which :func:`lstpe.experiments.runs.get_run`
reads and counts); its summary goes to ``reproduce_summary-task<I>of<N>.json``, and only task 0
runs ``bench`` and ``brain``.
``submit`` (:mod:`lstpe.experiments.submit`) submits such an array in one command.

Exit status: 0 if everything asked finished, 1 if a part failed, 3 stopped by ``--minutes``
(checkpointed: rerun to resume), 2 on bad arguments, a refused or damaged pack, or a failed
write (one line naming the file).

Parts: the run names of the registry, ``bench`` (the throughput benchmark) and ``brain``
(only when named: the brain experiment at the scale's preset).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lstpe.experiments import slices
from lstpe.experiments.limits import positive_minutes
from lstpe.experiments.registry import REGISTRY, bundles, run_config
from lstpe.experiments.submit import add_submit_parser, cmd_submit
from lstpe.runtime import repo_root
from lstpe.store import results as res
from lstpe.training.config import SCALES
from lstpe.training.flags import add_training_flags

DEFAULT_PARTS: list[str] = ["table2", "table1", "table4/adam", "table4/sgd", "tables56",
                            "long4000", "bench"]
"""The order of the paper's issue: Table 2, Table 1, Tables 4-6, the long run, the benchmark."""

EXTRA_PARTS = ("bench", "brain")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    model = {k: v for k, v in (("d_model", args.d_model), ("n_layers", args.n_layers))
             if v is not None}
    ov: dict[str, Any] = dict(epochs=args.epochs, seeds=args.seeds, device=args.device,
                              amp=args.amp or None, max_models=args.max_models,
                              checkpoint_every=args.checkpoint_every, n_train=args.n_train,
                              step_mode=args.step_mode)
    if model:
        from lstpe.training.config import preset

        ov["model"] = {**preset(args.scale).model.to_dict(), **model}
    return ov


def _check_parts(parts: list[str]) -> None:
    bad = [p for p in parts if p not in REGISTRY and p not in EXTRA_PARTS]
    if bad:
        raise ValueError(f"unknown part(s) {', '.join(map(repr, bad))}; valid parts: "
                         f"{', '.join([*REGISTRY, *EXTRA_PARTS])}")


def _finished(run_dir: Path, cfg_dict: dict) -> bool:
    """True if ``run_dir`` holds this finished run (files verified); raises
    :class:`lstpe.store.results.RunDirError` if it holds another run, a damaged one, or is not a
    writable run folder (:func:`lstpe.store.results.check_run_dir`)."""
    return res.check_run_dir(run_dir, cfg_dict) == "finished"


def run_home(name: str, args: argparse.Namespace, out: Path) -> Path:
    """Where ``reproduce run`` writes the run ``name``: ``<--out>/<name>`` when ``--out`` is
    given, else its place in the results folder (:func:`lstpe.experiments.runs.full_run_dir`:
    ``results/paper-e<epochs>/<name>`` at paper scale, beside the campaign's fragments in
    ``results/paper/``, never among them)."""
    from lstpe.experiments.runs import full_run_dir

    if getattr(args, "out", None):
        return out / name
    cfg = run_config(name, args.scale, **_overrides(args))
    return full_run_dir(name, args.scale, cfg.epochs, out.parent)


def model_home(model: slices.Model, args: argparse.Namespace, out: Path) -> Path:
    """Where a task of a cluster array writes one model: ``<run home>/<pe>/<seed>``
    (:func:`run_home`)."""
    return run_home(model.run, args, out) / model.pe / str(model.seed)


def _whole_run_here(home: Path, cfg_dict: dict) -> bool:
    """True if ``home`` holds this finished whole run (its models need no task); raises if it
    holds another run, or the checkpoints of a whole run in training (naming the folder)."""
    if (home / "manifest.json").exists():
        return _finished(home, cfg_dict)
    ckpts = home / "checkpoints"
    if ckpts.is_dir() and any(ckpts.glob("*.pt")):
        raise res.RunDirError(f"{home} holds the checkpoints of a whole run in training; finish "
                              f"it without --task-count, or delete {ckpts} to train it in "
                              "tasks")
    return False


def _model_config(model: slices.Model, scale: str, ov: dict[str, Any]) -> Any:
    return run_config(model.run, scale, **{**ov, "pes": [model.pe], "seeds": [model.seed]})


def preflight(runs: list[str], args: argparse.Namespace, out: Path,
              models: list[slices.Model] | None = None) -> None:
    """Every check that can fail before any training: the device, and every run folder (a
    task's: every model folder of its slice ``models``)."""
    from lstpe.runtime import pick_device

    pick_device(args.device or "auto")
    ov = _overrides(args)
    if models is None:
        for n in runs:
            _finished(run_home(n, args, out), run_config(n, args.scale, **ov).to_dict())
        return
    whole = {n: _whole_run_here(run_home(n, args, out), run_config(n, args.scale, **ov)
                                .to_dict()) for n in {m.run for m in models}}
    for m in models:
        if not whole[m.run]:
            _finished(model_home(m, args, out), _model_config(m, args.scale, ov).to_dict())


def run_bundle(names: list[str], args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Train the unfinished runs of one bundle together; return what the summary records."""
    from lstpe.training.train import train_many

    ov = _overrides(args)
    cfgs = {n: run_config(n, args.scale, **ov) for n in names}
    todo = [n for n in names if not _finished(run_home(n, args, out), cfgs[n].to_dict())]
    if not todo:
        print(f"  {' + '.join(names)}: finished run of this configuration exists, skipped")
        return {"result": "skipped"}
    models = sum(len(cfgs[n].pes) * len(cfgs[n].seeds) for n in todo)
    epochs = cfgs[todo[0]].epochs
    print(f"  {' + '.join(todo)}: {models} models, {epochs} epochs", flush=True)
    root = run_home(todo[0], args, out).parents[len(Path(todo[0]).parts) - 1]
    work = root / "_work" / "+".join(todo).replace("/", "_")
    t0 = time.perf_counter()
    deadline = getattr(args, "deadline", None)
    results = train_many([cfgs[n] for n in todo], [run_home(n, args, out) for n in todo],
                         progress=not args.no_progress, work_dir=work, deadline=deadline)
    wall = time.perf_counter() - t0
    shutil.rmtree(work, ignore_errors=True)
    for n, r in zip(todo, results, strict=True):
        fin = r.final("val")
        print(f"    {n}: " + ", ".join(f"{pe} {acc:.3f}" for pe, acc in
                                        fin.groupby("pe", sort=False)["accuracy"].mean().items()))
    total_wall = results[0].manifest.get("wall_time_s", wall)
    return {"result": "trained", "runs": todo, "models": models, "epochs": epochs,
            "train_wall_s": round(wall, 1), "wall_total_s": total_wall,
            "model_epochs_per_s": round(models * epochs / max(total_wall, 1e-9), 2),
            "device": results[0].manifest.get("device")}


def run_slice(models: list[slices.Model], args: argparse.Namespace, out: Path,
              task: tuple[int, int]) -> dict[str, Any]:
    """Train a task's unfinished models of one bundle together, each into its own folder
    (:func:`model_home`); return what the summary records."""
    from lstpe.training.train import train_many

    ov = _overrides(args)
    whole = {n: _whole_run_here(run_home(n, args, out), run_config(n, args.scale, **ov)
                                .to_dict()) for n in {m.run for m in models}}
    todo = [(m, _model_config(m, args.scale, ov)) for m in models if not whole[m.run]]
    todo = [(m, c) for m, c in todo if not _finished(model_home(m, args, out), c.to_dict())]
    label = f"task {task[0]} of {task[1]}"
    if not todo:
        print(f"  {label}: its {len(models)} models are trained, skipped")
        return {"result": "skipped", "task": list(task), "models": len(models)}
    first = todo[0][0].run
    epochs = todo[0][1].epochs
    print(f"  {label}: {len(todo)} of its {len(models)} models, {epochs} epochs", flush=True)
    root = run_home(first, args, out).parents[len(Path(first).parts) - 1]
    runs = "+".join(dict.fromkeys(m.run for m, _ in todo)).replace("/", "_")
    work = root / "_work" / f"task{task[0]}of{task[1]}-{runs}"
    t0 = time.perf_counter()
    results = train_many([c for _, c in todo], [model_home(m, args, out) for m, _ in todo],
                         progress=not args.no_progress, work_dir=work,
                         deadline=getattr(args, "deadline", None))
    wall = time.perf_counter() - t0
    shutil.rmtree(work, ignore_errors=True)
    return {"result": "trained", "task": list(task), "models": len(todo), "epochs": epochs,
            "trained": [f"{m.run}/{m.pe}/{m.seed}" for m, _ in todo],
            "train_wall_s": round(wall, 1), "device": results[0].manifest.get("device")}


def run_bench(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The throughput benchmark into ``out/bench/bench.json`` unless it exists."""
    target = out / "bench" / "bench.json"
    if target.exists():
        print(f"  bench: {target} exists, skipped")
        return {"result": "skipped"}
    root = repo_root(Path(__file__).resolve().parent) or Path.cwd()
    cmd = [sys.executable, str(root / "benchmarks" / "train_throughput.py"), "--size",
           args.scale, "--json", str(target), "--steps", "20" if args.scale == "paper" else "2",
           "--models", *(["1", "15", "60", "150", "300"] if args.scale == "paper" else
                         ["1", "4"])]
    for flag, val in (("--device", args.device), ("--mode", args.step_mode or "auto")):
        if val:
            cmd += [flag, val]
    cmd += ["--amp"] if args.amp else []
    print("  bench: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return {"result": "trained"}


def run_brain(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The brain experiment (:func:`lstpe.brain.train_brain`) into ``out/brain``."""
    from lstpe import brain

    run_dir = out / "brain"
    cfg = run_config("brain", args.scale, seeds=args.seeds, device=args.device,
                     max_models=args.max_models)
    if _finished(run_dir, cfg.to_dict()):
        print("  brain: finished run of this configuration exists, skipped")
        return {"result": "skipped"}
    t0 = time.perf_counter()
    brain.train_brain(cfg, run_dir=run_dir, progress=not args.no_progress)  # locks the folder
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    return {"result": "trained", "train_wall_s": round(time.perf_counter() - t0, 1)}


def _save_summary(out: Path, part: str, entry: dict[str, Any],
                  task: tuple[int, int] | None = None) -> None:
    name = f"reproduce_summary-task{task[0]}of{task[1]}" if task else "reproduce_summary"
    path = out / f"{name}.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    summary[part] = entry
    res.save_json(summary, path)


def cmd_run(args: argparse.Namespace) -> int:
    """Train the parts; 0 when all finished, 1 when one failed, 3 when paused by --minutes."""
    from lstpe.training.engine import Paused

    minutes = None if args.minutes is None else positive_minutes(args.minutes)
    args.deadline = time.monotonic() + 60 * minutes if minutes is not None else None
    task = slices.task_of(getattr(args, "task_index", None), getattr(args, "task_count", None))
    parts = _parts(args)
    _check_parts(parts)
    runs = [p for p in parts if p in REGISTRY]
    ov = _overrides(args)
    groups = bundles(runs, args.scale, **ov) if runs else []  # validates every config
    out = Path(args.out) if args.out else res.results_root() / args.scale
    mine = slices.task_slice(slices.run_models(runs, args.scale, **ov), *task) if task else None
    preflight(runs, args, out, mine)
    where = f", task {task[0]} of {task[1]}: {len(mine or [])} models" if task else ""
    print(f"reproduce: scale {args.scale}, parts {' '.join(parts)}{where} -> {out}")
    failed, paused = [], False
    steps: list[tuple[str, Any]] = [("+".join(g), g) for g in groups]
    if mine is not None:
        steps = [(label, [m for m in mine if m.run in g]) for label, g in steps]
        steps = [(label, ms) for label, ms in steps if ms]
    if task is None or task[0] == 0:
        steps += [(p, p) for p in parts if p in EXTRA_PARTS]
    for label, what in steps:
        print(f"[{label}]", flush=True)
        t0 = time.perf_counter()
        if paused:
            print(f"[{label}] not started: the time budget is spent", flush=True)
            continue
        try:
            if what == "bench":
                entry = run_bench(args, out)
            elif what == "brain":
                entry = run_brain(args, out)
            elif task is not None:
                entry = run_slice(what, args, out, task)
            else:
                entry = run_bundle(what, args, out)
            status = "ok"
        except Paused as e:
            entry, status, paused = {}, f"paused: {e}", True
            print(f"  {status}", flush=True)
        except Exception as e:  # noqa: BLE001 - keep going with the other parts
            entry, status = {}, f"failed: {type(e).__name__}: {e}"
            failed.append(label)
            print(f"  {status}", file=sys.stderr, flush=True)
        wall = time.perf_counter() - t0
        print(f"[{label}] {status}, wall time {wall:.1f} s", flush=True)
        _save_summary(out, label, {**entry, "status": status, "wall_s": round(wall, 1),
                                   "scale": args.scale}, task)
    if failed:
        print(f"reproduce: failed: {' '.join(failed)} (rerun to resume them)", file=sys.stderr)
        return 1
    if paused:
        print("reproduce: paused by --minutes; rerun the same command to resume", flush=True)
        return 3
    return 0


TABLE_PARTS: dict[str, list[str]] = {
    "1": ["table1"], "2": ["table2"], "3": ["table2"], "4": ["table4/adam", "table4/sgd"],
    "5": ["tables56"], "6": ["tables56"], "mechanism": ["long4000"]}
"""``--table``: the parts that train the models a table of the paper reads (tables numbered
as in its first version; Table 3 reads Table 2's models, Tables 5 and 6 the same runs)."""


def _parts(args: argparse.Namespace) -> list[str]:
    """The parts named by ``--parts`` or ``--table`` (not both), default :data:`DEFAULT_PARTS`."""
    table = getattr(args, "table", None)
    if table is not None and args.parts:
        raise ValueError("give --parts or --table, not both")
    if table is not None:
        if str(table) not in TABLE_PARTS:
            raise ValueError(f"--table {table!r} is not a table of the paper that trains "
                             f"models; one of {', '.join(TABLE_PARTS)}")
        return TABLE_PARTS[str(table)]
    return args.parts or DEFAULT_PARTS


def stored_models(runs: list[str], args: argparse.Namespace, out: Path) -> dict[str, int]:
    """Run name -> its models already finished where ``reproduce run`` writes them (the whole
    run's folder, or a cluster task's ``<run>/<pe>/<seed>/``), each verified."""
    ov = _overrides(args)
    done: dict[str, int] = {}
    for name in runs:
        home = run_home(name, args, out)
        models = slices.run_models([name], args.scale, **ov)
        if (home / "manifest.json").exists() and _finished(home, run_config(
                name, args.scale, **ov).to_dict()):
            done[name] = len(models)
            continue
        homes = [(m, model_home(m, args, out)) for m in models]
        done[name] = sum(1 for m, h in homes if (h / "manifest.json").exists()
                         and _finished(h, _model_config(m, args.scale, ov).to_dict()))
    return done


def _device_kind(device: str | None) -> str:
    """The kind of ``--device`` for the plan's rate: the local GPU's (or ``cpu``) for auto."""
    from lstpe.experiments.plan import device_kind

    if device in (None, "auto", "cuda") or str(device).startswith("cuda:"):
        import torch

        if torch.cuda.is_available():
            return device_kind(torch.cuda.get_device_name())
        return "cpu" if device in (None, "auto") else "cuda"
    return device_kind(str(device))


def cmd_plan(args: argparse.Namespace) -> int:
    """Print what the parts cost, what is left of them here, and the minutes that leaves on
    ``--device`` at a measured rate (an assumed one, labelled so, where none was measured)."""
    from lstpe.experiments.plan import TARGET_RATE, measured_rates, plan_table, rate_for

    asked = _parts(args)
    _check_parts(asked)
    parts = [p for p in asked if p in REGISTRY]
    out = Path(args.out) if args.out else res.results_root() / args.scale
    kind, precision = _device_kind(args.device), "bf16" if args.amp else "fp32"
    measured = None if args.rate is not None else rate_for(kind, precision,
                                                           measured_rates(repo_root()))
    rate = TARGET_RATE if args.rate is None else args.rate
    table = plan_table(parts, args.scale, rate=rate, memory_gib=args.memory_gib,
                       stored=stored_models(parts, args, out),
                       rate_at=measured[0] if measured else None, **_overrides(args))
    print(table.to_string(index=False))
    total = table["minutes_at_rate"].sum()
    left = int((table["to_train"] * table["epochs"]).sum())
    print(f"\nleft to train (not finished by `lstpe reproduce run` in {out.parent}): "
          f"{int(table['to_train'].sum())} of "
          f"{int(table['models'].sum())} models, {left:,} of "
          f"{int(table['model_epochs'].sum()):,} model-epochs; {total:.1f} min of training on "
          f"{kind} ({'fp16' if kind in ('t4', 'v100') and args.amp else precision})")
    if measured:
        print(f"rate: {measured[1]}")
    else:
        why = "--rate" if args.rate is not None else f"never measured on {kind} in {precision}"
        print(f"rate: an estimate, {rate:g} model-epochs/s assumed ({why}; the default is an "
              "H200's measured bf16 rate at 48 models)")
    print("evaluation and start-up come on top; a part that --minutes cuts off resumes when "
          "the same command runs again")
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    from lstpe.store import pack

    root = Path(args.root) if args.root else res.results_root() / "paper"
    index = pack.pack(root, args.out, runs=args.runs)
    print(f"packed {len(index['runs'])} runs into {len(index['pieces'])} pieces "
          f"({index['bytes'] / 2**20:.1f} MiB) in {args.out}")
    if args.to is not None:
        pack.copy_volume(index, args.out, args.volume, args.to)
        print(f"volume {args.volume} -> {args.to}")
    return 0


def cmd_unpack(args: argparse.Namespace) -> int:
    from lstpe.store import pack

    root = Path(args.into) if args.into else res.results_root() / "paper"

    def fragments_only(name: str, manifest: dict) -> None:
        """``results/paper/`` holds the campaign's fragments only: a whole run is refused,
        naming its place (:func:`lstpe.experiments.runs.full_run_dir`)."""
        if root.name == "paper" and "campaign" not in manifest:
            epochs = (manifest.get("config") or {}).get("epochs", "<E>")
            raise pack.PackError(
                f"run {name!r} of the pack is a whole run of {epochs} epochs, not a campaign "
                f"fragment: {root} holds only the campaign's fragments; unpack it with --into "
                f"{root.parent / f'paper-e{epochs}'} (where get_run reads whole runs); nothing "
                "was placed")

    written = pack.unpack(args.dirs, root, check=fragments_only)
    print(f"unpacked into {root}: {', '.join(written) if written else 'nothing new'}")
    return 0


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``reproduce`` and its actions (run, plan, pack, unpack, submit) to ``lstpe``."""
    p = commands.add_parser("reproduce", help="train the paper's named runs on a GPU; plan, "
                            "pack, unpack", description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    p.set_defaults(func=dispatch)
    for name in ("run", "plan"):
        s = sub.add_parser(name)
        s.add_argument("--parts", nargs="+", metavar="PART",
                       help=f"default: {' '.join(DEFAULT_PARTS)}")
        s.add_argument("--scale", default="paper", choices=list(SCALES))
        s.add_argument("--out", help="results folder (default: results/<scale>)")
        s.add_argument("--step-mode", help="auto (graph on CUDA), eager, compile, graph")
        add_training_flags(s)  # seeds, epochs, n-train, d-model (dry runs), device, amp, ...
        if name == "run":
            s.add_argument("--minutes", type=positive_minutes, help="stop cleanly "
                           "(checkpointed, exit 3) before this many minutes have passed; "
                           "rerun to resume")
            s.add_argument("--task-index", type=int, metavar="I", help="train slice I of "
                           "--task-count: one task of a cluster array, each model into "
                           "<run>/<pe>/<seed>/ (default: $SLURM_ARRAY_TASK_ID)")
            s.add_argument("--task-count", type=int, metavar="N", help="the array's number of "
                           "tasks (default: $SLURM_ARRAY_TASK_COUNT)")
        s.add_argument("--table", metavar="N", help="the parts that train table N's models "
                       f"({', '.join(TABLE_PARTS)}), instead of --parts")
        if name == "plan":
            s.add_argument("--rate", type=float, help="assumed model-epochs per second "
                           "(default: the rate measured on --device, else an H200's)")
            s.add_argument("--memory-gib", type=float, default=70.0)
    s = sub.add_parser("pack")
    s.add_argument("--root", help="results folder to pack (default results/paper)")
    s.add_argument("--out", required=True, help="empty folder for the pieces")
    s.add_argument("--runs", nargs="+", help="run folders relative to the root")
    s.add_argument("--volume", type=int, default=0, help="volume to copy with --to")
    s.add_argument("--to", help="copy one volume (7 pieces + index) here, e.g. $OUT")
    add_submit_parser(sub)
    s = sub.add_parser("unpack")
    s.add_argument("dirs", nargs="+", help="folders holding the pieces and the index")
    s.add_argument("--into", help="results folder (default results/paper)")


def task_args(index: int, count: int, run_args: list[str]) -> argparse.Namespace:
    """``reproduce run RUN_ARGS --task-index I --task-count N``, parsed (ValueError if not)."""
    p = argparse.ArgumentParser(prog="lstpe")
    add_parser(p.add_subparsers(dest="command"))
    argv = ["reproduce", "run", *run_args, "--task-index", str(index), "--task-count", str(count)]
    try:
        args, extra = p.parse_known_args(argv)
    except SystemExit:  # argparse said why
        raise ValueError(f"reproduce run {' '.join(run_args)}: bad flags") from None
    if extra:
        raise ValueError(f"reproduce run does not take {' '.join(extra)}")
    return args


def array_task(index: int, count: int, run_args: list[str]) -> int:
    """One task of ``lstpe reproduce submit``'s array, in its own process: ``reproduce run
    RUN_ARGS --task-index I --task-count N``; its exit code (2 on a bad argument or a failed
    write, as ``lstpe`` exits, with the message printed)."""
    try:
        return dispatch(task_args(index, count, run_args))
    except (ValueError, OSError) as e:
        print(f"lstpe: error: {e}", file=sys.stderr)
        return 2


def dispatch(args: argparse.Namespace) -> int:
    """Run the action of ``lstpe reproduce`` (errors propagate to :func:`lstpe.cli.main`)."""
    return {"run": cmd_run, "plan": cmd_plan, "pack": cmd_pack, "unpack": cmd_unpack,
            "submit": lambda a: cmd_submit(a, array_task, task_args)}[args.action](args)
