"""A reader's own runs count (issue 78): the stored set with the most models is what a page
shows, and a cluster array's tasks land where ``get_run`` reads them.

Everything trains for real at preview size in a temporary results tree: the paper scale is
shrunk to a 16-wide, 1-block model on 64 puzzles, and Table 2 to its reference and one sigma
(2d-fixed, learn-0.2) for 2 epochs. The campaign's fragments are imported from one such run;
a reader's runs come from ``lstpe reproduce run``. ``get_run`` is then never allowed to train.
"""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from lstpe import cli
from lstpe.experiments import fragments as fr
from lstpe.experiments import registry, runs, slices, stored_sets
from lstpe.experiments import units as un
from lstpe.nn.architecture import ModelConfig
from lstpe.runtime import PAPER_SEEDS
from lstpe.training.train import train

TINY = dict(model=ModelConfig(d_model=16, n_layers=1), n_train=64, eval_train_max=64,
            noise_levels=[0.05])
PES = ["2d-fixed", "learn-0.2"]


@pytest.fixture
def results(tmp_path, monkeypatch):
    """An empty results tree where the paper scale is tiny and Table 2 is 2 PEs x 2 epochs."""
    real = registry.preset

    def preset(name, **kw):
        return real(name, **({**TINY, **kw} if name == "paper" else kw))

    monkeypatch.setattr(registry, "preset", preset)
    monkeypatch.setitem(registry.REGISTRY, "table2", dataclasses.replace(
        registry.REGISTRY["table2"], pes="long", paper_epochs=2))
    monkeypatch.setattr(un, "CAMPAIGN_EPOCHS", 2)
    out = tmp_path / "results"
    monkeypatch.setenv("LSTPE_RESULTS", str(out))
    monkeypatch.setenv("LSTPE_CACHE", str(tmp_path / "cache"))
    for key in (slices.ENV_INDEX, slices.ENV_COUNT):
        monkeypatch.delenv(key, raising=False)
    return out


def never_train(monkeypatch) -> None:
    monkeypatch.setattr(runs, "_train", lambda *a, **k: pytest.fail("get_run trained"))


def store_fragments(results, seeds: list[int]) -> None:
    """The campaign's fragments of Table 2's two PEs at ``seeds`` (imported from one run)."""
    cfg = un.find_unit("table2/2d-fixed/2235").config(pes=PES, seeds=seeds)
    src = train(cfg, run_dir=results.parent / f"bundle-{len(seeds)}", progress=False)
    fr.import_run(src.path, results)


def reproduce(*extra: str) -> int:
    return cli.main(["reproduce", "run", "--parts", "table2", "--device", "cpu",
                     "--no-progress", *extra])


def train_tasks(seeds: list[int], count: int) -> None:
    """A reader's cluster array of ``count`` tasks over Table 2 at ``seeds``."""
    for i in range(count):
        assert reproduce("--seeds", *map(str, seeds), "--task-index", str(i),
                         "--task-count", str(count)) == 0


def per_pe(run) -> dict[str, list[int]]:
    return {pe: sorted(g["seed"].unique().tolist())
            for pe, g in run.history.groupby("pe", sort=False)}


def test_a_readers_whole_run_with_more_seeds_is_what_a_page_shows(results, monkeypatch,
                                                                   capsys):
    store_fragments(results, [2235, 6312])
    assert reproduce() == 0  # the registry's run: both PEs at the paper's 15 seeds
    never_train(monkeypatch)
    capsys.readouterr()
    got = runs.get_run("table2", "preview", results_dir=results)
    assert got.source == "stored" and got.path == results / "paper-e2" / "table2"
    assert per_pe(got) == {pe: sorted(PAPER_SEEDS) for pe in PES}
    shown = stored_sets.shown(got)
    assert shown["form"] == "whole" and shown["seeds_per_pe"] == {pe: 15 for pe in PES}
    assert shown["epochs"] == 2 and shown["trained_on"].startswith("cpu")
    assert "30 models (2 PEs, 15 seeds each), 2 epochs, a whole run" in \
        stored_sets.shown_line(got)
    out = capsys.readouterr().out  # the fragments passed over are named, not hidden
    assert f"also stored: {results / 'paper' / 'table2'} (4 models)" in out


def test_a_readers_array_tasks_land_where_get_run_reads_and_count(results, monkeypatch,
                                                                  capsys):
    store_fragments(results, [2235, 6312])
    seeds = [2235, 6312, 6068]
    train_tasks(seeds, 4)  # 6 models over 4 tasks: 2, 2, 1, 1
    home = results / "paper-e2" / "table2"
    made = sorted(p.relative_to(home).as_posix() for p in home.glob("*/*/manifest.json"))
    assert made == sorted(f"{pe}/{s}/manifest.json" for pe in PES for s in seeds)
    for i in range(4):
        assert (results / "paper" / f"reproduce_summary-task{i}of4.json").is_file()
    assert reproduce("--seeds", *map(str, seeds), "--task-index", "1", "--task-count",
                     "4") == 0  # a task rerun trains nothing
    assert "models are trained, skipped" in capsys.readouterr().out
    never_train(monkeypatch)
    got = runs.get_run("table2", "preview", results_dir=results)
    assert got.source == "stored" and per_pe(got) == {pe: sorted(seeds) for pe in PES}
    assert stored_sets.shown(got)["form"] == "models"
    assert stored_sets.shown(got)["path"] == str(home)
    # the reader's model is the campaign's model: same recipe, same numbers
    frag = fr.load_fragment(un.find_unit("table2/learn-0.2/6312"), results)
    mine = got.final("val").set_index(["pe", "seed"])["accuracy"]
    assert mine[("learn-0.2", 6312)] == pytest.approx(frag.final("val")["accuracy"].iloc[0],
                                                       abs=1e-6)


def test_the_stored_fragments_stay_where_they_hold_more_or_as_many(results, monkeypatch):
    store_fragments(results, [2235, 6312, 6068])
    train_tasks([2235, 6312], 3)  # 4 models against 6 fragments
    never_train(monkeypatch)
    got = runs.get_run("table2", "preview", results_dir=results)
    assert got.manifest["store_form"] == "fragments"
    assert per_pe(got) == {pe: [2235, 6068, 6312] for pe in PES}
    for pe in PES:  # a tie (2 x 2 each) keeps the fragments, as before sets were counted
        shutil.rmtree(un.find_unit(f"table2/{pe}/6068").path(results))
    tie = runs.get_run("table2", "preview", results_dir=results)
    assert stored_sets.shown(tie)["form"] == "fragments"
    sets = stored_sets.paper_sets("table2", PES, 2, results)
    assert [(s.form, s.n_models) for s in sets] == [("fragments", 4), ("models", 4)]


def test_a_readers_model_in_the_wrong_folder_is_named(results, monkeypatch):
    train_tasks([2235], 1)
    never_train(monkeypatch)
    home = results / "paper-e2" / "table2"
    (home / "learn-0.2" / "2235").rename(home / "learn-0.2" / "6312")
    with pytest.raises(runs.StoredRunMismatch, match="not learn-0.2 seed 6312"):
        runs.get_run("table2", "preview", results_dir=results)


def test_a_task_paused_by_its_budget_resumes_to_the_same_models(results, monkeypatch, capsys):
    store_fragments(results, [2235])
    args = ("--seeds", "2235", "--task-index", "0", "--task-count", "1")
    assert reproduce(*args, "--minutes", "1e-6") == 3  # paused: checkpointed, nothing stored
    assert "paused" in capsys.readouterr().out
    assert not list((results / "paper-e2" / "table2").glob("*/*/manifest.json"))
    assert reproduce(*args) == 0  # the same command, resumed
    never_train(monkeypatch)
    got = runs.get_run("table2", "preview", results_dir=results, pes=["learn-0.2"],
                       seeds=[2235])
    assert stored_sets.shown(got)["form"] == "fragments"  # 1 model each: a tie
    mine = runs.models_run("table2", results, pes=["learn-0.2"], seeds=[2235])
    assert mine.final("val")["accuracy"].tolist() == pytest.approx(
        got.final("val")["accuracy"].tolist(), abs=1e-6)


def test_the_plan_counts_what_a_readers_tasks_finished(results, capsys):
    """``reproduce plan`` says what is left: before any task all 30 models of the (shrunk)
    Table 2; after two of three tasks over 3 seeds, the models of the third task's slice."""
    seeds = [2235, 6312, 6068]
    plan = ["reproduce", "plan", "--table", "2", "--seeds", *map(str, seeds), "--device",
            "h100"]
    assert cli.main(plan) == 0
    assert "6 of 6 models" in capsys.readouterr().out
    for i in range(2):
        assert reproduce("--seeds", *map(str, seeds), "--task-index", str(i),
                         "--task-count", "3") == 0
    capsys.readouterr()
    assert cli.main(plan) == 0
    out = capsys.readouterr().out
    third = slices.task_slice(slices.run_models(["table2"], "paper", seeds=seeds), 2, 3)
    assert f"{len(third)} of 6 models" in out and f"{len(third) * 2} of 12 model-epochs" in out
    assert "measured fp32" in out and "H100" in out  # the stored lease's rate, named
