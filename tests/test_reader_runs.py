"""A reader's own runs count (issue 78): the stored set with the most models is what a page
shows.

Everything trains for real at preview size in a temporary results tree: the paper scale is
shrunk to a 16-wide, 1-block model on 64 puzzles, and Table 2 to its reference and one sigma
(2d-fixed, learn-0.2) for 2 epochs. The campaign's fragments are imported from one such run;
a reader's runs come from ``lstpe reproduce run``. ``get_run`` is then never allowed to train.
"""

from __future__ import annotations

import dataclasses

import pytest

from lstpe import cli
from lstpe.experiments import campaign as cp
from lstpe.experiments import fragments as fr
from lstpe.experiments import registry, runs, stored_sets
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
    monkeypatch.setattr(cp, "CAMPAIGN_EPOCHS", 2)
    out = tmp_path / "results"
    monkeypatch.setenv("LSTPE_RESULTS", str(out))
    monkeypatch.setenv("LSTPE_CACHE", str(tmp_path / "cache"))
    return out


def never_train(monkeypatch) -> None:
    monkeypatch.setattr(runs, "_train", lambda *a, **k: pytest.fail("get_run trained"))


def store_fragments(results, seeds: list[int]) -> None:
    """The campaign's fragments of Table 2's two PEs at ``seeds`` (imported from one run)."""
    cfg = cp.find_unit("table2/2d-fixed/2235").config(pes=PES, seeds=seeds)
    src = train(cfg, run_dir=results.parent / f"bundle-{len(seeds)}", progress=False)
    fr.import_run(src.path, results)


def reproduce(*extra: str) -> int:
    return cli.main(["reproduce", "run", "--parts", "table2", "--device", "cpu",
                     "--no-progress", *extra])


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
