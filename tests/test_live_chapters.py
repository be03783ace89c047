"""Every chapter runs to its end under ``lstpe batch`` (papermill) when it must train (issue 80).

nbmake and the book build execute each chapter on the stored models with its default
parameters; this file executes each one the way a batch user does, at the smallest scale and
for a grid point the stored models do not hold:

* a chapter that takes ``seeds`` trains seed :data:`LIVE_SEED` (no stored model has it) for
  :data:`LIVE_EPOCHS` epochs where it takes ``epochs`` (chapter 10: a few optimizer steps and
  shuffles), reading the repository's stored models for everything else;
* the intro, which takes only ``results_dir``, is pointed at an empty folder, so each run it
  shows is trained;
* the tutorial chapters without a seed to set run at ``scale=preview``.

Each chapter must finish (status ``ok``), and a chapter that writes tables must show the
models it trained: every table row's ``source`` is ``live`` (or ``cached``, when an earlier
chapter of this file trained the same run) with seeds ``[LIVE_SEED]``. README's own batch
example runs verbatim (to a temporary ``--out``). The runs share one temporary cache, so a run
that several chapters read trains once; nothing is written to the repository.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest

from lstpe.chapters.batch import notebook_parameters
from lstpe.cli import main
from lstpe.runtime import PAPER_SEEDS

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb"))
LIVE_SEED = 7
"""A seed outside the authors' 15, so no stored model of the paper's recipe can ever hold it."""
LIVE_EPOCHS = 2
SMALL = {"steps": 20, "n_perm": 10}
"""Chapter 10's brain models: optimizer steps and label shuffles, at their smallest useful."""


def live_point(chapter: str, empty: Path) -> tuple[list[str], bool]:
    """``lstpe batch`` arguments for ``chapter``'s live point, and whether it trains."""
    params = notebook_parameters(ROOT / "book" / f"{chapter}.ipynb")
    if "seeds" in params:
        args = ["--grid", f"seeds=[{LIVE_SEED}]"]
        if "epochs" in params:
            args += ["-p", f"epochs={LIVE_EPOCHS}"]
        args += [a for k, v in SMALL.items() if k in params for a in ("-p", f"{k}={v}")]
        return args, True
    if "scale" not in params:  # the intro: every run it shows trained, from an empty store
        return ["--grid", f"results_dir={str(empty)!r}"], True
    return ["--grid", "scale=preview"], False


@pytest.fixture(scope="module")
def live_env(tmp_path_factory: pytest.TempPathFactory):
    """One temporary cache for the module's runs (the kernels inherit the environment), and
    this checkout's lstpe first on the kernels' path."""
    saved = {k: os.environ.get(k) for k in ("LSTPE_CACHE", "PYTHONPATH")}
    os.environ["LSTPE_CACHE"] = str(tmp_path_factory.mktemp("live-cache"))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), saved["PYTHONPATH"]]))
    yield tmp_path_factory.mktemp("live-empty-results")
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_the_live_seed_is_not_stored() -> None:
    """The point trains only if no stored model has its seed."""
    assert LIVE_SEED not in PAPER_SEEDS
    stored = {p.name for p in (ROOT / "results").rglob("*") if p.is_dir() and p.name.isdigit()}
    assert str(LIVE_SEED) not in stored


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_runs_to_its_end_when_it_trains(chapter: str, live_env: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    args, trains = live_point(chapter, live_env)
    out = tmp_path / "batch"
    rc = main(["batch", str(ROOT / "book" / f"{chapter}.ipynb"), *args, "--out", str(out)])
    said = capsys.readouterr()
    got = pd.read_csv(out / "collected.csv")
    assert rc == 0 and (got["status"] == "ok").all(), \
        f"{chapter} {args}: {got['status'].tolist()}\n{said.out[-3000:]}{said.err[-3000:]}"
    if trains and "source" in got:
        shown = got.dropna(subset=["source"])
        assert len(shown), f"{chapter}: no table row says which models it shows"
        sources = {v for s in shown["source"] for v in per_run(s)}
        assert sources <= {"live", "cached"}, \
            f"{chapter} shows stored models for a seed no stored model has: {sources}"
        if "seeds" in notebook_parameters(ROOT / "book" / f"{chapter}.ipynb"):
            seeds = {tuple(json.loads(v)) for s in shown["run_seeds"] for v in per_run(s)}
            assert seeds == {(LIVE_SEED,)}, f"{chapter} shows seeds {seeds}"


def per_run(value: str) -> list[str]:
    """The values of a collected column, one per run a page reads: ``live`` or, for a page
    of two runs, ``table1=cached; table2=cached`` (each run's after its ``=``)."""
    return [part.split("=", 1)[-1] for part in str(value).split("; ")]


def readme_batch_example() -> list[str]:
    """README's ``lstpe batch`` command, as its words (``lstpe`` dropped)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.startswith("lstpe batch "))
    return shlex.split(line)[1:]


def test_readmes_batch_example_succeeds(live_env: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    words = readme_batch_example()
    at = words.index("--out")
    words[at + 1] = str(tmp_path / words[at + 1])  # README's runs/batch, under a scratch folder
    monkeypatch.chdir(ROOT)  # README's paths are the repository's
    rc = main(words)
    said = capsys.readouterr()
    got = pd.read_csv(Path(words[at + 1]) / "collected.csv")
    assert rc == 0 and (got["status"] == "ok").all(), f"{said.out[-3000:]}{said.err[-3000:]}"
    points = re.findall(r"\[(\d+)\]", words[words.index("--grid") + 1])
    assert sorted({tuple(json.loads(s)) for s in got["run_seeds"]}) == \
        sorted((int(p),) for p in points)
