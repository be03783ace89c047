"""Shared fixtures of the test suite: tiny model sizes, cached data splits, small training data.

The machine the suite runs on may have few cores shared with other jobs; torch's intra-op
thread pool then spends its time spinning (a tiny training step gets ~10x slower with 2 threads
than with 1), so the whole suite runs single-threaded. One thread also makes batched and
sequential training bitwise reproducible on a given machine.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
import torch

from lstpe import lst
from lstpe.nn.architecture import ModelConfig

torch.set_num_threads(1)

TINY = ModelConfig(d_model=32, n_layers=2)
"""The model size of every test that builds or trains a transformer."""


def subset(split: lst.Split, idx: torch.Tensor | np.ndarray) -> lst.Split:
    """Rows ``idx`` of a :class:`~lstpe.lst.Split` (same name)."""
    idx = torch.as_tensor(idx)
    return lst.Split(split.x[idx], split.y[idx], split.vectors[idx], split.ids[idx], split.name)


@pytest.fixture(scope="session")
def tiny_cfg() -> ModelConfig:
    """ModelConfig(d_model=32, n_layers=2): the paper's architecture, scaled down."""
    return TINY


@pytest.fixture(scope="session")
def human_frame() -> pd.DataFrame:
    """The 108 human puzzles (:func:`lstpe.lst.load_human`)."""
    return lst.load_human()


@pytest.fixture(scope="session")
def training_frame() -> pd.DataFrame:
    """The authors' 9000 training puzzles (:func:`lstpe.lst.load_training`)."""
    return lst.load_training()


@pytest.fixture(scope="session")
def paper_splits() -> dict[str, lst.Split]:
    """The paper split as the authors' code made it (8100 / 900 / 108)."""
    return lst.load_split("paper", seed=0)


@pytest.fixture(scope="session")
def small_splits() -> dict[str, lst.Split]:
    """A small stratified paper split for training tests: 48 train, 36 test, all 108 val."""
    s = lst.load_split("paper", seed=0, n_train=48)
    return {"train": s["train"], "test": subset(s["test"], torch.arange(0, 900, 25)),
            "val": s["val"]}


@pytest.fixture(scope="session")
def all_squares() -> np.ndarray:
    """The order-4 Latin squares by brute force, independent of :func:`lstpe.lst.latin_squares`:
    every 4x4 array whose rows are permutations of 1-4 (24^4 candidates, vectorised) and whose
    columns hold 4 distinct values. (K, 4, 4) int8, sorted lexicographically."""
    perms = np.array(np.meshgrid(*[np.arange(1, 5)] * 4, indexing="ij")).reshape(4, -1).T
    perms = perms[[len(set(p)) == 4 for p in perms]]  # (24, 4)
    idx = np.array(np.meshgrid(*[np.arange(len(perms))] * 4, indexing="ij")).reshape(4, -1).T
    grids = perms[idx]  # (24^4, 4 rows, 4 cols)
    cols = np.sort(grids, axis=1)
    ok = (cols == np.arange(1, 5)[None, :, None]).all(axis=(1, 2))
    return grids[ok].astype(np.int8)


@pytest.fixture(scope="session", autouse=True)
def house_style() -> None:
    """Every figure of the suite is drawn in the house style, as every chapter draws it
    (``chapters.notebook.setup`` applies it), whatever test ran before: a figure's layout
    must not depend on the order the tests run in."""
    from lstpe.rendering import style

    style.apply()


# --- every chapter executed once per run (issue 65) -------------------------------------
# `pytest --nbmake tests book` executes each chapter under nbmake. The book build
# (tests/test_book.py) and the findings-change test (tests/test_findings_change.py) read those
# executed notebooks instead of executing every chapter again: the chapters run first, and
# each one nbmake executes without error is saved to one folder of this run.

BOOK = Path(__file__).resolve().parents[1] / "book"
EXECUTED_KEY = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    if not getattr(config.option, "nbmake", False):
        return
    folder = Path(tempfile.mkdtemp(prefix="lstpe-executed-"))
    config.stash[EXECUTED_KEY] = folder
    from nbmake import nb_run

    execute = nb_run.NotebookRun.execute

    def execute_and_keep(self):  # nbmake's own run, its executed notebook kept
        result = execute(self)
        source = Path(self.filename).resolve()
        if result.error is None and source.parent == BOOK:
            nbformat.write(result.nb, str(folder / source.name))
        return result

    nb_run.NotebookRun.execute = execute_and_keep


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The chapters first (nbmake's items), so that the tests reading them find them."""
    items.sort(key=lambda item: not getattr(item, "nbmake", False))


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(EXECUTED_KEY, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def executed_chapters(request: pytest.FixtureRequest) -> dict[str, Path]:
    """``{notebook file name: its executed copy}`` for every chapter nbmake collected in this
    run (none without ``--nbmake``: the caller executes what it needs itself). The copy exists
    only if nbmake executed the chapter without error, so a test reading a chapter that failed
    under nbmake fails naming it, rather than executing it again."""
    folder = request.config.stash.get(EXECUTED_KEY, None)
    if folder is None:
        return {}
    names = {Path(str(i.path)).name for i in request.session.items
             if getattr(i, "nbmake", False) and Path(str(i.path)).resolve().parent == BOOK}
    return {name: folder / name for name in sorted(names)}


def executed_copy(executed: dict[str, Path], name: str) -> Path | None:
    """The executed copy of chapter ``name`` from :func:`executed_chapters`, or None when
    nbmake did not collect it.

    Raises:
        pytest.fail: nbmake collected the chapter but did not execute it without error.
    """
    if name not in executed:
        return None
    if not executed[name].exists():
        pytest.fail(f"book/{name} did not execute under nbmake in this run (its own test "
                    "above says why); the tests that read it cannot run")
    return executed[name]
