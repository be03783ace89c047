"""Trim this checkout for a GPU lease that trains one long chunk, and restore it afterwards.

The device tool sends the working tree (tracked files, and untracked ones git does not
ignore) up to 64 MiB; the stored results make it far larger (the two resume checkpoints alone
are 80 MB). A lease that trains one long chunk needs the code, that chunk's resume checkpoint
(``results/long/_resume/<chunk>/``) and the last segment of each of its units (the next
segment's manifest names the one before); the last segment of every other long unit stays
too, so that a chunk without its checkpoint here is seen as published and passed over, not
trained again from epoch 0. ``trim`` takes every other tracked file under
``results/`` out of the working tree, only after checking that git holds all of it (a clean
``git status``); ``restore`` checks those files out again from git, and touches nothing else
(the segments a lease brings back are new, untracked files).

    python3 scripts/lease_tree.py trim --chunk mechanism   # prints what will travel
    ... the device call: lstpe campaign run --device cuda ...
    python3 scripts/lease_tree.py restore

``lstpe campaign run`` passes over a chunk whose segments are here without its checkpoint
(:func:`lstpe.experiments.long_units.unresumable`), so the lease trains the chunk kept, then
any chunk not begun. A lease, whole (the device returns at most 8 files of 16 MiB):

    python3 scripts/lease_tree.py trim --chunk mechanism
    run: export PYTHONPATH=$PWD; timeout 570 python3 -m lstpe.cli campaign run --device cuda
         --minutes 9 > $OUT/log.txt 2>&1; tar czf /tmp/l.tgz --exclude=.work results/long;
         split -b 15m /tmp/l.tgz $OUT/long.tgz.
    python3 scripts/lease_tree.py restore
    cat <files_at>/long.tgz.* | tar xzf -; lstpe campaign status   # then commit

Only ``results/long`` comes back: with ``results/paper`` out of the tree, a lease that runs
past its long chunks trains 200-epoch units already stored, which are left on the device.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

LIMIT = 64 * 2**20
"""The device tool's limit on the working tree that travels, in bytes."""


def git(repo: Path, *args: str) -> list[str]:
    """``git -C repo args``: its output lines (NUL-separated for ``-z``)."""
    out = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                         text=True).stdout
    return [x for x in out.split("\0" if "-z" in args else "\n") if x]


def keep_paths(repo: Path, chunk: str) -> list[Path]:
    """Folders under ``results/`` that the lease of ``chunk`` needs: its resume folder and
    the last segment of every long unit (relative to ``repo``)."""
    from lstpe.experiments import long_units as lu

    chunks = [c for c in lu.LONG_PLAN if c.name == chunk]
    if not chunks and chunk != "none":
        names = sorted({c.name for c in lu.LONG_PLAN})
        raise SystemExit(f"no long chunk named {chunk!r}; the plan's chunks: {names}")
    results = repo / "results"
    keep = [lu.resume_dir(chunk, results)] if chunk != "none" else []
    for u in {u.key: u for c in lu.LONG_PLAN for u in c.units}.values():
        keep += lu.segments(u, results)[-1:]
    return [p.relative_to(repo) for p in keep]


def trim(repo: Path, chunk: str) -> int:
    """Delete from the working tree every tracked file under ``results/`` outside
    :func:`keep_paths`; return the bytes that will travel. Refuses on an unclean tree."""
    dirty = git(repo, "status", "--porcelain")
    if dirty:
        raise SystemExit(f"git status is not clean ({len(dirty)} entries, e.g. {dirty[0]!r}): "
                         "commit first, so that every file trim removes is in git")
    keep = keep_paths(repo, chunk)
    gone = 0
    for f in git(repo, "ls-files", "-z", "--", "results"):
        p = Path(f)
        if not any(p.is_relative_to(k) for k in keep):
            (repo / p).unlink()
            gone += 1
    travel = git(repo, "ls-files", "-z") + git(repo, "ls-files", "-z", "--others",
                                               "--exclude-standard")
    size = sum((repo / f).stat().st_size for f in travel if (repo / f).is_file())
    print(f"trimmed for {chunk}: {gone} tracked result files out of the working tree; kept "
          f"{', '.join(map(str, keep))}; {size / 2**20:.1f} MiB will travel "
          f"(limit {LIMIT / 2**20:.0f} MiB){'' if size <= LIMIT else ': TOO LARGE'}")
    return size


def restore(repo: Path) -> int:
    """Check out again every tracked file missing from the working tree; return how many."""
    gone = git(repo, "ls-files", "-z", "--deleted")
    for i in range(0, len(gone), 500):
        subprocess.run(["git", "-C", str(repo), "checkout", "--", *gone[i:i + 500]],
                       check=True)
    left = git(repo, "ls-files", "-z", "--deleted")
    if left:
        raise SystemExit(f"{len(left)} tracked files are still missing, e.g. {left[0]}")
    print(f"restored {len(gone)} tracked files")
    return len(gone)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trim", help="take what a lease of one chunk does not need out")
    t.add_argument("--chunk", required=True, help="the long chunk the lease resumes, or "
                   "'none' (lstpe campaign lease: new units only)")
    sub.add_parser("restore", help="check out again what trim took out")
    ap.add_argument("--repo", type=Path, default=None, help="default: this checkout")
    a = ap.parse_args(argv)
    repo = (a.repo or Path(__file__).resolve().parents[1]).resolve()
    if a.cmd == "trim":
        sys.exit(0 if trim(repo, a.chunk) <= LIMIT else 1)
    restore(repo)


if __name__ == "__main__":
    main()
