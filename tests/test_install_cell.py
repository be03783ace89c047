"""The chapters' install cell, run as a reader's fresh kernel runs it (issue 80, findings 15,
16, 17 and 34).

The cell's own code is executed (``exec`` of its source, the same in every chapter) with
``lstpe`` reported missing, ``HOME`` in a temporary folder and the repository's URL pointing at
a local git repository laid out as this one is; git runs for real, pip is recorded instead of
run. Each case failed on the cell of c94fbef:

* 15: an interrupted clone (cut before or during its checkout) made the next run fall back to
  a pip install without the stored runs, or install the partial clone; now a clone is made
  beside the home folder and renamed only once whole, so a rerun clones again (a home folder
  the old cell left cut short is checked out whole where git can, else named, with the way
  to clone it again);
* 16: an older clone in the home folder was installed as it was, without a word; now it is
  brought to the branch's commit first;
* 17: a home folder with a space broke the unquoted ``git clone``;
* 34: without git, the fallback ``pip install "lstpe @ git+..."`` needed git; now it installs
  the branch's archive (no stored runs: the chapter says so when it sets up).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lstpe import repo

ROOT = Path(__file__).resolve().parents[1]
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _cell() -> str:
    cells = {repo.install_cell(nb) for nb in repo.notebooks(ROOT)}
    assert len(cells) == 1 and None not in cells, "the chapters' install cells differ"
    return cells.pop()


def _commit(origin: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (origin / rel).parent.mkdir(parents=True, exist_ok=True)
        (origin / rel).write_text(text)
    if not (origin / ".git").exists():
        subprocess.run([*GIT, "-C", str(origin), "init", "-q"], check=True)
        subprocess.run([*GIT, "-C", str(origin), "config", "uploadpack.allowFilter", "true"],
                       check=True)
    subprocess.run([*GIT, "-C", str(origin), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(origin), "commit", "-q", "-m", "x"], check=True)
    return subprocess.run(["git", "-C", str(origin), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """A repository laid out as this one is: the package, stored runs, resume state."""
    o = tmp_path / "origin"
    _commit(o, {"lstpe/__init__.py": "", "results/paper/a/manifest.json": "{}",
                "results/long/_resume/mechanism/chunk0.pt": "state"})
    return o


def run_cell(origin: Path, home_parent: Path, monkeypatch: pytest.MonkeyPatch,
             path: str | None = None) -> list[list[str]]:
    """Execute the install cell with ``lstpe`` missing, ``~`` = ``home_parent``, the URL at
    ``origin`` (and ``PATH`` = ``path`` where given); the pip calls it made."""
    real = repo.configured(ROOT)
    src = _cell().replace(real.url, f"file://{origin}")
    pip: list[list[str]] = []
    check_call = subprocess.check_call

    def record(args, *a, **k):
        if isinstance(args, list) and args[:3] == [sys.executable, "-m", "pip"]:
            pip.append(args)
            return 0
        return check_call(args, *a, **k)

    monkeypatch.setattr(subprocess, "check_call", record)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "lstpe" else _find_spec(name, *a))
    monkeypatch.setenv("HOME", str(home_parent))
    if path is not None:
        monkeypatch.setenv("PATH", path)
    exec(compile(src, "install cell", "exec"), {})  # noqa: S102 - the chapters' own cell
    return pip


_find_spec = importlib.util.find_spec


def _installed(pip: list[list[str]]) -> str:
    assert len(pip) == 1, pip
    return pip[0][-1]


def test_a_home_folder_with_a_space_gets_the_clone_with_its_stored_runs(origin, tmp_path,
                                                                        monkeypatch):
    parent = tmp_path / "my home"  # finding 17: the unquoted clone broke here
    home = parent / "lstpe"
    assert _installed(run_cell(origin, parent, monkeypatch)) == str(home)
    assert (home / "results/paper/a/manifest.json").exists()
    assert not (home / "results/long/_resume").exists()  # the resume state stays out
    assert not Path(f"{home}.partial").exists()


@pytest.mark.parametrize("where", ["lstpe.partial", "lstpe"])
@pytest.mark.parametrize("cut", ["before checkout", "during checkout"])
def test_a_clone_cut_short_is_made_whole_on_the_next_run(cut, where, origin, tmp_path,
                                                         monkeypatch, capsys):
    """Finding 15: a partial clone fell back to a pip install without stored runs, or was
    installed as it was (chapter 6 then showed 5 of 21 PEs). Cut short where this cell clones
    (``lstpe.partial``), it is cloned again; cut short in the home folder itself (by the cell
    of c94fbef, which cloned there), the update checks it out whole where git can, and where
    it cannot (files of the cut checkout in the way), says so and how to clone it again."""
    parent = tmp_path / "h"
    partial = parent / where
    subprocess.run(["git", "clone", "-q", "--no-checkout", f"file://{origin}", str(partial)],
                   check=True)
    if cut == "during checkout":
        (partial / "lstpe").mkdir()
        (partial / "lstpe" / "__init__.py").write_text("")  # a file or two, no results/
    assert _installed(run_cell(origin, parent, monkeypatch)) == str(parent / "lstpe")
    assert not (parent / "lstpe.partial").exists()
    if (cut, where) == ("during checkout", "lstpe"):
        assert f"could not update {parent / 'lstpe'}: installing it as it is (delete it to " \
            "clone it again)" in capsys.readouterr().err
    else:
        assert (parent / "lstpe/results/paper/a/manifest.json").exists()


def test_an_older_clone_is_brought_to_the_branchs_commit(origin, tmp_path, monkeypatch):
    """Finding 16: an older ``~/lstpe`` clone was installed as it was, without a word."""
    parent = tmp_path / "h"
    run_cell(origin, parent, monkeypatch)
    today = _commit(origin, {"results/paper/b/manifest.json": "{}"})  # a model stored since
    (parent / "lstpe" / "results" / "mine.csv").write_text("a reader's own file")
    assert _installed(run_cell(origin, parent, monkeypatch)) == str(parent / "lstpe")
    head = subprocess.run(["git", "-C", str(parent / "lstpe"), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert head == today and (parent / "lstpe/results/paper/b/manifest.json").exists()
    assert (parent / "lstpe/results/mine.csv").read_text() == "a reader's own file"


def test_an_older_clone_that_cannot_be_updated_is_said_and_installed(origin, tmp_path,
                                                                     monkeypatch, capsys):
    parent = tmp_path / "h"
    run_cell(origin, parent, monkeypatch)
    shutil.rmtree(origin)  # offline, or the remote is gone
    assert _installed(run_cell(origin, parent, monkeypatch)) == str(parent / "lstpe")
    assert f"could not update {parent / 'lstpe'}: installing it as it is (delete it to clone " \
        "it again)" in capsys.readouterr().err


def test_without_git_the_branchs_archive_is_installed(origin, tmp_path, monkeypatch):
    """Finding 34: the "no git" fallback was ``pip install "lstpe @ git+..."``, which needs
    git ("Cannot find command 'git'", then a traceback)."""
    bare = tmp_path / "bin"  # a PATH with a shell but no git
    bare.mkdir()
    for tool in ("sh", "env"):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bare / tool)
    got = _installed(run_cell(origin, tmp_path / "h", monkeypatch, path=str(bare)))
    assert got == f"lstpe @ file://{origin}/archive/main.zip"
    assert not (tmp_path / "h" / "lstpe").exists()
