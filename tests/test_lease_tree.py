"""scripts/lease_tree.py: a checkout trimmed for a GPU lease keeps exactly what the lease of
one long chunk needs, refuses to trim what git does not hold, and restores every file."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from lstpe.experiments import long_units as lu
from lstpe.runtime import repo_root

spec = importlib.util.spec_from_file_location("lease_tree",
                                              repo_root() / "scripts" / "lease_tree.py")
lt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lt)


def sh(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path, lease_checkout) -> Path:
    """A git repo shaped like this one (conftest's ``lease_checkout``)."""
    return lease_checkout(tmp_path)


def present(repo: Path) -> set[str]:
    return {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file() and
            ".git" not in p.parts}


def test_trim_keeps_the_chunk_checkpoint_and_last_segments_and_restore_brings_all_back(repo):
    before = {f: (repo / f).read_text() for f in present(repo)}
    size = lt.trim(repo, "mechanism")
    units = [u for c in lu.LONG_PLAN if c.name in ("mechanism", "weight-decay") for u in c.units]
    want = {"lstpe/x.py", "results/long/_resume/mechanism/chunk0.pt",
            *(f"results/long/{u.key}/e0400/manifest.json" for u in units)}
    assert present(repo) == want
    wd = next(c for c in lu.LONG_PLAN if c.name == "weight-decay")
    assert lu.unresumable(wd, repo / "results")  # passed over by the lease, not retrained
    assert lu.next_chunk(repo / "results").name == "mechanism"  # the chunk kept trains
    assert size == sum((repo / f).stat().st_size for f in want)
    (repo / "results/long/new.txt").write_text("brought back by a lease")  # untracked: kept
    assert lt.restore(repo) == len(before) - len(want)
    assert {f: (repo / f).read_text() for f in before} == before
    assert (repo / "results/long/new.txt").exists()


def test_trim_refuses_a_tree_git_does_not_hold_and_an_unknown_chunk(repo):
    (repo / "results/paper/table1/nope/8880/history.csv").write_text("changed")
    with pytest.raises(SystemExit, match="not clean"):
        lt.trim(repo, "mechanism")
    sh(repo, "checkout", "--", ".")
    with pytest.raises(SystemExit, match="no long chunk named 'mech'"):
        lt.trim(repo, "mech")
    assert len(present(repo)) > 3  # nothing was removed


def test_trim_for_a_lease_of_new_units_keeps_no_checkpoint(repo):
    """``--chunk none`` (``lstpe campaign lease``): only the last segments travel, so every
    chunk begun elsewhere is passed over, and the lease's own chunks start from epoch 0."""
    lt.trim(repo, "none")
    units = [u for c in lu.LONG_PLAN if c.name in ("mechanism", "weight-decay") for u in c.units]
    assert present(repo) == {"lstpe/x.py",
                             *(f"results/long/{u.key}/e0400/manifest.json" for u in units)}
    results = repo / "results"
    begun = [c for c in lu.LONG_PLAN if c.name in ("mechanism", "weight-decay")]
    assert all(lu.unresumable(c, results) for c in begun)
    assert lu.next_chunk(results).name == "table1-2235"  # the first chunk not begun


def test_trim_leaves_no_empty_segment_folder_and_takes_out_what_a_lease_never_reads(
        tmp_path, lease_checkout):
    """A segment folder the trim empties is removed (here it read as an incomplete copy and
    the lease passed the mechanism over as damaged; git carries no empty folder to the
    device); the book, the vendored MathJax and the brain data stay home; restore brings
    every file back."""
    extra = {"_vendor/mathjax/tex.js": "js", "book/05.ipynb": "{}",
             "lstpe/data/brain/fc.npz": "fc", "lstpe/data/lst/puzzles.csv": "p"}
    repo = lease_checkout(tmp_path, extra)
    before = {f: (repo / f).read_text() for f in present(repo)}
    lt.trim(repo, "mechanism")
    mech = next(c for c in lu.LONG_PLAN if c.name == "mechanism")
    for u in mech.units:
        assert [p.name for p in lu.segments(u, repo / "results")] == ["e0400"]
    assert not [d for d in repo.rglob("*") if d.is_dir() and ".git" not in d.parts
                and not any(d.iterdir())]
    here = present(repo)
    assert "lstpe/data/lst/puzzles.csv" in here and "lstpe/x.py" in here
    assert not {"_vendor/mathjax/tex.js", "book/05.ipynb", "lstpe/data/brain/fc.npz"} & here
    lt.restore(repo)
    assert {f: (repo / f).read_text() for f in present(repo)} == before


def test_trim_keeps_the_leases_earlier_decisions_for_the_card(tmp_path, lease_checkout):
    """The lease records and each card's precision pairs travel (without their weights):
    without them a lease on a card whose TF32 was cleared would pair TF32 again and train
    fp32. The CPU's benchmarks and pairs stay home."""
    card = "results/precision_pair/gpu-NVIDIA-H200-tf32on-fp32/stored-pair"
    keep = {"results/benchmarks/lease_NVIDIA_H200_2026.json": "{}",
            "results/benchmarks/lease_NVIDIA_H200_2026.csv": "a",
            f"{card}/verdict.json": "{}", f"{card}/table2__learn-1__2235/history.csv": "h"}
    home = {"results/benchmarks/cpu_paper.json": "{}",
            f"{card}/table2__learn-1__2235/artifacts.pt": "w",
            "results/precision_pair/cpu-amd-epyc/fp32/history.csv": "h"}
    repo = lease_checkout(tmp_path, {**keep, **home})
    lt.trim(repo, "mechanism")
    here = present(repo)
    assert set(keep) <= here and not set(home) & here
