"""One task's share of the paper's models: the slice a cluster array task trains.

``lstpe reproduce run --task-index I --task-count N`` trains slice ``I`` of ``N``: the models
(run, PE, seed) of the runs asked for, listed in a fixed order (:func:`run_models`), dealt out
round-robin (:func:`task_slice`: model ``k`` goes to task ``k mod N``). Every model of every
run lands in exactly one task, whatever ``N`` (tasks beyond the number of models get none),
and each task's share of a long run and of a short one is within one model of the others'.

Under Slurm the two values default to the array's (:func:`task_of`): a job submitted with
``sbatch --array=0-(N-1)`` runs task ``$SLURM_ARRAY_TASK_ID`` of ``$SLURM_ARRAY_TASK_COUNT``
(an array that starts elsewhere or steps, ``--array=1-8:2``, is counted from its
``SLURM_ARRAY_TASK_MIN`` in steps of ``SLURM_ARRAY_TASK_STEP``). Nothing here trains.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from lstpe.experiments.registry import bundles, run_config

ENV_INDEX, ENV_COUNT = "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"
ENV_MIN, ENV_STEP = "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_STEP"


class Model(NamedTuple):
    """One model of a named run: the registry name, its PE label and its seed."""

    run: str
    pe: str
    seed: int


def run_models(names: Sequence[str], scale: str = "paper", **overrides: Any) -> list[Model]:
    """Every model of the runs ``names`` at ``scale`` (``overrides``: ``seeds``, ``epochs``,
    ...), runs in the order :func:`lstpe.experiments.registry.bundles` trains them, then each
    run's PEs, then its seeds."""
    out: list[Model] = []
    for group in bundles(names, scale, **overrides) if names else []:
        for name in group:
            cfg = run_config(name, scale, **overrides)
            out += [Model(name, pe, int(s)) for pe in cfg.pes for s in cfg.seeds]
    return out


def check_task(index: int, count: int) -> None:
    """Raise unless ``0 <= index < count`` (naming the values).

    Raises:
        ValueError: ``count`` below 1, or ``index`` outside ``[0, count)``.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"--task-count must be a whole number >= 1, got {count!r}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise ValueError(f"--task-index must be a whole number in [0, {count}) for "
                         f"--task-count {count}, got {index!r}")


def task_slice(models: Sequence[Model], index: int, count: int) -> list[Model]:
    """The models task ``index`` of ``count`` trains: every ``count``-th from ``index``.

    Raises:
        ValueError: as :func:`check_task`.
    """
    check_task(index, count)
    return list(models[index::count])


def _env_int(environ: Mapping[str, str], key: str) -> int | None:
    text = environ.get(key)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"${key} must be a whole number, got {text!r}") from None


def task_of(index: int | None = None, count: int | None = None,
            environ: Mapping[str, str] | None = None) -> tuple[int, int] | None:
    """The task ``(index, count)`` to train, or None for every model: the values given, else
    the Slurm array's (module docstring); None when neither gives one.

    Raises:
        ValueError: only one of the two is known, or they are out of range (naming the
            values, and the variable where one came from the environment).
    """
    env = os.environ if environ is None else environ
    origin = []
    if index is None:
        task_id = _env_int(env, ENV_INDEX)
        if task_id is not None:
            low, step = _env_int(env, ENV_MIN) or 0, _env_int(env, ENV_STEP) or 1
            if step < 1 or (task_id - low) % step:
                raise ValueError(f"${ENV_INDEX}={task_id} is not on the array's grid "
                                 f"(${ENV_MIN}={low}, ${ENV_STEP}={step})")
            index = (task_id - low) // step
            origin.append(f"${ENV_INDEX}={task_id}")
    if count is None:
        count = _env_int(env, ENV_COUNT)
        if count is not None:
            origin.append(f"${ENV_COUNT}={count}")
    if index is None and count is None:
        return None
    if index is None or count is None:
        given = "--task-index" if count is None else "--task-count"
        missing = "--task-count" if count is None else "--task-index"
        raise ValueError(f"{given} needs {missing} (or a Slurm array: ${ENV_INDEX} and "
                         f"${ENV_COUNT})")
    try:
        check_task(index, count)
    except ValueError as e:
        raise ValueError(f"{e} (from {', '.join(origin)})" if origin else str(e)) from None
    return index, count
