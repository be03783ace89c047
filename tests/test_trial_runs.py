"""The second adversarial trial (issue 38), what the chapters read: a fragment without its
manifest is named (5), asked seeds and PEs are never silently dropped (6), a whole run of
another length has its own place and neither hides nor is hidden by the fragments (7), and a
cache that cannot be written is refused before training (13).

Each test failed on 8e4ea56. Fragments are imported from one tiny two-PE run.
"""

from __future__ import annotations

import argparse
import shutil

import pytest

from lstpe.campaign import status as cs
from lstpe.experiments import fragments as fr
from lstpe.experiments import reproduce, runs
from lstpe.experiments import units as un
from lstpe.store import pack
from lstpe.store import results as res
from tests.test_campaign import _bundle, tiny  # noqa: F401 (a fixture)
from tests.test_faults import TINY_MODEL, fake_stored_run
from tests.test_pack import cli

pytestmark = pytest.mark.usefixtures("tiny")


@pytest.fixture
def results(tmp_path, monkeypatch):
    """A results folder holding the fragments table2/2d-fixed/2235 and table2/learn-0.2/2235."""
    monkeypatch.setenv("LSTPE_CACHE", str(tmp_path / "cache"))
    src = _bundle(tmp_path)
    out = tmp_path / "results"
    fr.import_run(src.path, out)
    return out


def _refuse_training(monkeypatch) -> None:
    def trained(*a, **k):
        raise AssertionError("trained")

    monkeypatch.setattr(runs, "_train", trained)


# --------------------------------------------------------------------------- 5


def test_a_fragment_without_its_manifest_is_named_not_dropped(results, monkeypatch):
    """Finding 5: get_run showed the PE with one seed fewer and said nothing; chapter 11 said
    "38 of the 39 units done"."""
    _refuse_training(monkeypatch)
    frag = un.find_unit("table2/learn-0.2/2235").path(results)
    (frag / "manifest.json").unlink()
    with pytest.raises(res.DamagedFileError, match=str(frag)):
        runs.get_run("table2", "preview", results_dir=results)
    with pytest.raises(res.DamagedFileError, match=str(frag)):
        runs.get_run("table1", "preview", results_dir=results)  # borrows table2's units
    text = cs.progress_text(cs.status(results))
    assert "table2/learn-0.2/2235" in text and "damaged" in text


# --------------------------------------------------------------------------- 6


def test_asked_seeds_and_pes_that_are_not_stored_are_named(results, monkeypatch, capsys):
    """Finding 6: seeds=[2235, 8880] returned seed 2235 only; pes=['learn-0.2', 'learn-1.7']
    returned learn-0.2 only; nothing said so."""
    _refuse_training(monkeypatch)
    with pytest.raises(FileNotFoundError, match="learn-0.2 seed 8880"):
        runs.get_run("table2", "preview", results_dir=results, require_stored=True,
                     seeds=[2235, 8880])
    with pytest.raises(FileNotFoundError, match="learn-1.7"):
        runs.get_run("table2", "preview", results_dir=results, require_stored=True,
                     pes=["learn-0.2", "learn-1.7"])
    got = runs.get_run("table2", "preview", results_dir=results, seeds=[2235, 8880])
    assert got.manifest["missing"] == ["2d-fixed seed 8880", "learn-0.2 seed 8880"]
    assert "learn-0.2 seed 8880" in got.describe()
    assert "learn-0.2 seed 8880" in capsys.readouterr().out
    # what is stored is still shown without a word
    whole = runs.get_run("table2", "preview", results_dir=results, require_stored=True)
    assert "missing" not in whole.manifest
    assert whole.manifest["seeds_per_pe"] == {"2d-fixed": [2235], "learn-0.2": [2235]}


# --------------------------------------------------------------------------- 7


@pytest.mark.parametrize("garbage", [False, True])
def test_a_whole_run_among_the_fragments_is_refused_not_shadowed(results, monkeypatch,
                                                                 garbage):
    """Finding 7: with a whole run under results/paper/table2 (even a garbage manifest),
    get_run quietly returned the 200-epoch fragments."""
    _refuse_training(monkeypatch)
    whole = results / "paper" / "table2"
    fake_stored_run(results / "elsewhere", "table2", [2235])
    for f in (results / "elsewhere").rglob("*"):
        if f.is_file():
            shutil.copy(f, whole / f.name)
    if garbage:
        (whole / "manifest.json").write_text("{")
    with pytest.raises(runs.StoredRunMismatch, match="paper-e"):
        runs.get_run("table2", "preview", results_dir=results)


def test_a_whole_run_of_another_length_has_its_own_place(results, monkeypatch, capsys):
    """Finding 7: a run of 1000 epochs had no place beside the fragments; one is stored under
    results/paper-e<E>/, named beside the fragments and shown when its epochs are asked."""
    _refuse_training(monkeypatch)
    long = fake_stored_run(results, "table1", [2235], epochs=3)
    assert long == results / "paper-e3" / "table1"
    shown = runs.get_run("table1", "preview", results_dir=results)
    assert shown.manifest["kind"] == "campaign-merge"
    assert str(long) in capsys.readouterr().out  # the other length is named, not hidden
    got = runs.get_run("table1", "preview", results_dir=results, pes=["2d-fixed"],
                       seeds=[2235], epochs=3, n_train=64, model=TINY_MODEL)
    assert got.path == long and got.source == "stored"


def test_reproduce_writes_whole_runs_beside_the_fragments(tmp_path, monkeypatch):
    """Finding 7: ``reproduce run`` at paper scale wrote into results/paper/<name>, where the
    fragments live (and was refused there)."""
    monkeypatch.setenv("LSTPE_RESULTS", str(tmp_path / "results"))
    args = argparse.Namespace(out=None, scale="paper", epochs=4000, seeds=None, device=None,
                              amp=False, max_models=None, checkpoint_every=None, n_train=None,
                              step_mode=None, d_model=None, n_layers=None)
    out = tmp_path / "results" / "paper"
    assert reproduce.run_home("table1", args, out) == tmp_path / "results" / "paper-e4000" / \
        "table1"
    args.epochs = None  # the registry's: 1000 for table4/sgd
    assert reproduce.run_home("table4/sgd", args, out) == \
        tmp_path / "results" / "paper-e1000" / "table4" / "sgd"
    args.out = str(tmp_path / "runs")
    assert reproduce.run_home("table1", args, tmp_path / "runs") == tmp_path / "runs" / "table1"


def test_unpacking_a_whole_run_among_the_fragments_is_refused(tmp_path):
    """Finding 7: an unpacked whole run had no place but results/paper/<name>."""
    import pandas as pd

    src = tmp_path / "src" / "table1"
    res.save_run(src, pd.DataFrame({"model": [0]}), {"config": {"epochs": 1000}})
    pack.pack(tmp_path / "src", tmp_path / "p")
    rc, err = cli(["unpack", str(tmp_path / "p"), "--into", str(tmp_path / "results" /
                                                                  "paper")])
    assert rc == 2 and "paper-e1000" in err and "Traceback" not in err
    assert not (tmp_path / "results" / "paper" / "table1").exists()
    rc, err = cli(["unpack", str(tmp_path / "p"), "--into", str(tmp_path / "results" /
                                                                  "paper-e1000")])
    assert rc == 0 and (tmp_path / "results" / "paper-e1000" / "table1" /
                        "manifest.json").exists()


# --------------------------------------------------------------------------- 13


def test_a_cache_that_cannot_be_written_is_refused_before_training(tmp_path, monkeypatch):
    """Finding 13: with LSTPE_CACHE at a file, get_run trained, then raised, and threw the run
    away."""
    _refuse_training(monkeypatch)
    afile = tmp_path / "cache.txt"
    afile.write_text("x")
    monkeypatch.setenv("LSTPE_CACHE", str(afile))
    with pytest.raises(res.NotWritableError, match="LSTPE_CACHE"):
        runs.get_run("table2", "preview", results_dir=tmp_path / "results", pes=["2d-fixed"],
                     seeds=[29], epochs=1, n_train=64, model=TINY_MODEL)
    assert afile.read_text() == "x"
