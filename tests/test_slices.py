"""A cluster array's slices of the paper's models (issue 78).

The slices are checked against the registry's runs enumerated here by hand (PE lists from the
paper's sigmas, the paper's 15 seeds), for array sizes from 1 to more tasks than models;
nothing is trained.
"""

from __future__ import annotations

from collections import Counter

import pytest

from lstpe import cli
from lstpe.experiments import slices
from lstpe.experiments.registry import REGISTRY, TABLE1_PES
from lstpe.runtime import PAPER_SEEDS

SIGMAS = [round(0.1 * k, 1) for k in range(1, 21)]  # Table 2: 0.1, 0.2, ..., 2.0
LEARN = [f"learn-{s:g}" for s in SIGMAS]
EXPECTED_PES = {
    "table1": [*TABLE1_PES, "alibi", "rope-2d"],
    "table2": ["2d-fixed", *LEARN],
    "table4/adam": ["learn-0.01", "learn-0.05", "learn-0.1", "learn-0.2"],
    "table4/sgd": ["learn-0.01", "learn-0.05", "learn-0.1", "learn-0.2"],
    "tables56": [*LEARN, *(p for p in TABLE1_PES if p not in LEARN)],
    "long4000": ["2d-fixed", "learn-0.2"],
}


def expected(name: str) -> set[tuple[str, str, int]]:
    return {(name, pe, s) for pe in EXPECTED_PES[name] for s in PAPER_SEEDS}


def test_the_hand_enumeration_is_the_registry_and_the_paper():
    assert set(EXPECTED_PES) == set(REGISTRY)
    assert len(PAPER_SEEDS) == 15 and len(expected("table2")) == 21 * 15
    assert len(expected("tables56")) == (20 + 7) * 15  # 20 sigmas, the 7 other paper PEs


@pytest.mark.parametrize("name", sorted(EXPECTED_PES))
@pytest.mark.parametrize("count", [1, 2, 3, 7, 16, 64, 1000])
def test_slices_of_a_table_cover_each_model_exactly_once(name, count):
    models = slices.run_models([name])
    assert set(models) == expected(name) and len(models) == len(expected(name))
    parts = [slices.task_slice(models, i, count) for i in range(count)]
    seen = Counter(m for part in parts for m in part)
    assert set(seen) == expected(name) and set(seen.values()) == {1}
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1  # balanced; tasks beyond the models get none
    if count > len(models):
        assert sizes.count(0) == count - len(models)


def test_slices_of_every_table_at_once_and_of_asked_seeds():
    names = list(REGISTRY)
    every = set().union(*(expected(n) for n in names))
    models = slices.run_models(names)
    for count in (5, 100, len(models) + 3):
        seen = Counter(m for i in range(count) for m in slices.task_slice(models, i, count))
        assert set(seen) == every and set(seen.values()) == {1}
    few = slices.run_models(["table2"], seeds=[2235, 6312])
    assert set(few) == {("table2", pe, s) for pe in EXPECTED_PES["table2"] for s in (2235, 6312)}
    assert slices.task_slice(few, 0, 2) != slices.task_slice(few, 1, 2)
    assert slices.task_slice(few, 1, 2) == slices.task_slice(list(few), 1, 2)  # deterministic


@pytest.mark.parametrize("index,count,words", [
    (0, 0, "--task-count must be a whole number >= 1, got 0"),
    (0, -2, "got -2"),
    (3, 3, r"--task-index must be a whole number in \[0, 3\) for --task-count 3, got 3"),
    (-1, 4, "got -1"),
])
def test_a_task_outside_the_array_is_named(index, count, words):
    with pytest.raises(ValueError, match=words):
        slices.task_slice([], index, count)
    with pytest.raises(ValueError, match=words):
        slices.task_of(index, count, environ={})


def test_the_task_defaults_to_the_slurm_array():
    env = {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "5"}
    assert slices.task_of(environ={}) is None
    assert slices.task_of(environ=env) == (4, 5)
    assert slices.task_of(1, None, environ=env) == (1, 5)  # a flag wins over the array
    stepped = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_COUNT": "4",
               "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_STEP": "2"}  # --array=1-7:2
    assert slices.task_of(environ=stepped) == (3, 4)
    with pytest.raises(ValueError, match=r"got 5 \(from \$SLURM_ARRAY_TASK_ID=5"):
        slices.task_of(environ={**env, "SLURM_ARRAY_TASK_ID": "5"})
    with pytest.raises(ValueError, match=r"\$SLURM_ARRAY_TASK_COUNT must be a whole number, "
                                         "got 'x'"):
        slices.task_of(environ={**env, "SLURM_ARRAY_TASK_COUNT": "x"})
    with pytest.raises(ValueError, match="--task-index needs --task-count"):
        slices.task_of(2, None, environ={})


def _main(argv, capsys) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


def test_reproduce_names_a_task_outside_the_array_before_training(tmp_path, monkeypatch,
                                                                  capsys):
    monkeypatch.setenv("LSTPE_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_TASK_COUNT", raising=False)
    code, err = _main(["reproduce", "run", "--parts", "table2", "--task-index", "3",
                       "--task-count", "3"], capsys)
    assert code == 2 and "--task-index" in err and "got 3" in err
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "9")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "4")
    code, err = _main(["reproduce", "run", "--parts", "table2"], capsys)
    assert code == 2 and "SLURM_ARRAY_TASK_ID=9" in err
    assert not (tmp_path / "results").exists()  # nothing written
