"""The second adversarial trial (issue 38), the command line: ``repo set-url`` with a branch
holding "/" (9), ``lstpe batch`` values a notebook cannot take (10), and a batch folder
inside a stored run (13).

Each test failed on 8e4ea56.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from lstpe import repo
from lstpe.chapters.batch import run_batch
from lstpe.chapters.values import parse_grid, parse_params
from lstpe.store import results as res

ROOT = Path(__file__).resolve().parents[1]


def _copy_repo(tmp_path: Path) -> Path:
    for name in ("_config.yml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "book", tmp_path / "book")
    (tmp_path / "lstpe").mkdir()
    return tmp_path


def test_set_url_with_a_branch_holding_a_slash(tmp_path):
    """Finding 9: ``--branch feature/x`` wrote ``.../blob/main/x/book/...`` Colab links (a lazy
    regex matched too little), and the next set-url broke them further."""
    root = _copy_repo(tmp_path)
    url = repo.configured(root).url
    repo.set_url(root, url, "feature/x")
    readme = (root / "README.md").read_text()
    slug = url.removeprefix("https://github.com/")
    assert f"colab.research.google.com/github/{slug}/blob/feature/x/book/" in readme
    assert "/blob/main/" not in readme and "/x/book/" not in readme.replace("feature/x/", "")
    assert repo.check(root) == []
    repo.set_url(root, url, "a/b/c")  # from a branch with "/" to another
    assert repo.check(root) == []
    repo.set_url(root, url, "main")
    assert (root / "README.md").read_text() == (ROOT / "README.md").read_text()


@pytest.mark.parametrize("branch", ["../..", "a/../b", ".hidden", "a//b", "a.lock", "x/",
                                    "/x", "a@{1}", "a..b"])
def test_set_url_refuses_what_git_refuses_as_a_branch(tmp_path, branch):
    """Finding 9: ``--branch ../..`` was accepted."""
    root = _copy_repo(tmp_path)
    before = (root / "README.md").read_text()
    with pytest.raises(ValueError, match="branch"):
        repo.set_url(root, repo.configured(root).url, branch)
    assert (root / "README.md").read_text() == before


@pytest.mark.parametrize("text", ["{1,2}", "b'x'", "1j", "...", "[1, {2}]", "{'a': b'x'}"])
def test_batch_refuses_values_a_notebook_cannot_take_before_running(text):
    """Finding 10: a set, bytes, a complex number or Ellipsis crashed in ``_slug`` (grid) or,
    after running the point, in ``_cell`` (-p), with a traceback and no summary."""
    with pytest.raises(ValueError, match="--grid"):
        parse_grid([f"a={text}"])
    with pytest.raises(ValueError, match="-p"):
        parse_params([f"a={text}"])


def test_batch_still_takes_plain_literals():
    """Finding 10: lists, dicts, tuples, numbers, strings, None and booleans still pass."""
    grid = parse_grid(["a=[1,2],(3,4)", "b={'k': [1.5, None, True]}"])
    assert grid == {"a": [[1, 2], (3, 4)], "b": [{"k": [1.5, None, True]}]}


def test_batch_out_inside_a_stored_run_is_refused(tmp_path):
    """Finding 13: ``batch --out`` inside a fragment's ``tables/`` was accepted, and ``pack``
    then carried its CSVs."""
    pytest.importorskip("papermill")
    run = tmp_path / "results" / "paper" / "table2" / "2d-fixed" / "2235"
    res.save_run(run, pd.DataFrame({"model": [0]}), {"config": {}})
    import nbformat

    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata["tags"] = ["parameters"]
    nb = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), nb)
    for out in (run / "tables", run / "tables" / "x", run):
        with pytest.raises(ValueError, match=str(run)):
            run_batch(nb, {}, {}, out)
    assert sorted(p.name for p in run.rglob("*")) == ["history.csv", "manifest.json"]
