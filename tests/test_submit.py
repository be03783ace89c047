"""``lstpe reproduce submit`` (issue 78's optional launcher): a job array of ``reproduce run``
tasks through submitit, run here on submitit's local executor (one process per task). The
tasks train disjoint slices that together hold every model of the run exactly once."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from lstpe import cli
from lstpe.experiments import slices
from lstpe.training.config import preset

TINY = ["--scale", "preview", "--parts", "table2", "--seeds", "2235", "6312", "--epochs", "1",
        "--n-train", "64", "--d-model", "16", "--n-layers", "1", "--device", "cpu",
        "--no-progress"]


def test_an_array_on_the_local_executor_trains_every_model_once(tmp_path, capsys):
    pytest.importorskip("submitit")
    out = tmp_path / "results"
    rc = cli.main(["reproduce", "submit", "--tasks", "3", "--cluster", "local", "--hours",
                   "0.25", "--logs", str(tmp_path / "logs"), "--wait", "--", *TINY,
                   "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert [f"task {i} of 3: exit 0" in text for i in range(3)] == [True] * 3
    made = Counter(json.loads(p.read_text())["config"]["pes"][0] + "/" +
                   str(json.loads(p.read_text())["config"]["seeds"][0])
                   for p in out.rglob("manifest.json"))
    model = {**preset("preview").model.to_dict(), "d_model": 16, "n_layers": 1}
    want = slices.run_models(["table2"], "preview", seeds=[2235, 6312], epochs=1, n_train=64,
                             model=model)
    assert made == Counter(f"{m.pe}/{m.seed}" for m in want)  # each model once, none missing
    assert sorted(p.name for p in out.glob("reproduce_summary-task*")) == \
        [f"reproduce_summary-task{i}of3.json" for i in range(3)]


@pytest.mark.parametrize("bad, says", [
    (["--tasks", "0", "--", "--table", "2"], "--tasks 0: an array needs at least 1 task"),
    (["--tasks", "2", "--", "--table", "2", "--task-index", "1"],
     "--task-index: submit sets each task's --task-index"),
    (["--tasks", "2", "--", "--table", "2", "--bogus", "1"],
     "reproduce run does not take --bogus 1"),  # refused here, before a task is queued
])
def test_bad_arrays_are_refused_naming_the_value(bad, says, capsys):
    assert cli.main(["reproduce", "submit", "--cluster", "local", *bad]) == 2
    assert says in capsys.readouterr().err
