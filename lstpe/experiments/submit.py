"""``lstpe reproduce submit``: one job array of ``lstpe reproduce run`` tasks, through submitit.

    pip install -e ".[cluster]"
    lstpe reproduce submit --tasks 16 --partition gpu --gpus 1 --hours 4 -- --table 2 --no-progress
    lstpe reproduce submit --tasks 2 --cluster local --wait -- --table 2 --device cpu

Everything after ``--`` is what one ``lstpe reproduce run`` takes; task ``I`` of ``N`` runs it
with ``--task-index I --task-count N``, so the tasks train disjoint slices that together cover
every model once (:mod:`lstpe.experiments.slices`), each into ``<run>/<pe>/<seed>/`` where
``get_run`` reads them. submitit writes each task's log and result under ``--logs``. A task
paused by ``--minutes`` ends with exit code 3: submit the same command again and it resumes.
``--cluster local`` runs the tasks as processes of this machine (submitit's local executor),
``auto`` (the default) on Slurm where ``sbatch`` is found, else locally.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from lstpe.store import results as res

TASK_FLAGS = ("--task-index", "--task-count")


def check_args(args: argparse.Namespace) -> list[str]:
    """``args.run_args`` without a leading ``--``, checked.

    Raises:
        ValueError: ``--tasks`` below 1, or the run flags set a task flag themselves.
    """
    run_args = list(args.run_args)
    if run_args[:1] == ["--"]:
        run_args = run_args[1:]
    if args.tasks < 1:
        raise ValueError(f"--tasks {args.tasks}: an array needs at least 1 task")
    given = [a for a in run_args if a.split("=")[0] in TASK_FLAGS]
    if given:
        raise ValueError(f"{' '.join(given)}: submit sets each task's --task-index and "
                         "--task-count itself; leave them out of the run's flags")
    return run_args


def cmd_submit(args: argparse.Namespace, task: Callable[[int, int, list[str]], int],
               parse: Callable[[int, int, list[str]], object]) -> int:
    """Submit the array of ``task(I, N, run_args)`` (picklable: it runs in another process,
    :func:`lstpe.experiments.reproduce.array_task`), after ``parse`` checked the run's flags
    here (a typo fails once, not in every queued task); with ``--wait``, wait for it: 0 when
    every task finished, else 1."""
    run_args = check_args(args)
    parse(0, args.tasks, run_args)
    try:
        import submitit
    except ImportError:
        raise ValueError("lstpe reproduce submit needs submitit: pip install -e \".[cluster]\" "
                         "(or pip install submitit)") from None
    logs = Path(args.logs) if args.logs else res.results_root() / ".submitit"
    ex = submitit.AutoExecutor(folder=logs / "%j",
                               cluster=None if args.cluster == "auto" else args.cluster)
    ex.update_parameters(name="lstpe-reproduce", timeout_min=max(1, round(args.hours * 60)),
                         cpus_per_task=args.cpus, gpus_per_node=args.gpus,
                         slurm_array_parallelism=args.parallel or args.tasks,
                         **({"slurm_partition": args.partition} if args.partition else {}))
    n = args.tasks
    jobs = ex.map_array(task, list(range(n)), [n] * n, [run_args] * n)
    print(f"submitted {n} task(s) to {ex.cluster}: {jobs[0].job_id.split('_')[0]} "
          f"(logs in {logs})", flush=True)
    if not args.wait:
        return 0
    codes = []
    for i, j in enumerate(jobs):
        try:
            c = j.result()
            why = " (paused: submit again to resume)" if c == 3 else ""
        except Exception as e:  # noqa: BLE001 - a task that failed: name it, go on
            tail = " ".join(str(e).split())[-300:]
            c, why = None, f" (failed: {tail}; its log: {j.paths.stderr})"
        codes.append(c)
        print(f"task {i} of {n}: exit {c}{why}", flush=True)
    return 0 if all(c == 0 for c in codes) else 1


def add_submit_parser(sub: argparse._SubParsersAction) -> None:
    """``lstpe reproduce submit`` (its flags, then ``--`` and the run's flags)."""
    s = sub.add_parser("submit", help="a job array of reproduce run tasks (submitit)")
    s.add_argument("--tasks", type=int, required=True, help="tasks in the array")
    s.add_argument("--cluster", choices=("auto", "slurm", "local"), default="auto")
    s.add_argument("--partition", help="Slurm partition")
    s.add_argument("--gpus", type=int, default=0, help="GPUs per task (default 0; with "
                   "--cluster local a task sees only these: CUDA_VISIBLE_DEVICES)")
    s.add_argument("--cpus", type=int, default=4, help="CPU cores per task (default 4)")
    s.add_argument("--hours", type=float, default=4.0, help="time limit per task")
    s.add_argument("--parallel", type=int, help="tasks running at once (default: all)")
    s.add_argument("--logs", help="submitit's folder (default results/.submitit)")
    s.add_argument("--wait", action="store_true", help="wait for every task, print each exit")
    s.add_argument("run_args", nargs=argparse.REMAINDER, help="-- then reproduce run's flags")
