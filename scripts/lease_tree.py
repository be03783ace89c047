"""Trim this checkout for a GPU lease that trains one long chunk, and restore it afterwards.

The device tool sends the working tree (tracked files, and untracked ones git does not ignore)
up to 64 MiB; the stored results make it far larger (the two resume checkpoints alone are 80
MB). A lease that trains one long chunk needs the code, that chunk's resume checkpoint
(``results/long/_resume/<chunk>/``) and the last segment of each of its units (the next
segment's manifest names the one before); the last segment of every other long unit stays too,
and every other begun chunk's ``chunk.json``, so that a chunk without its checkpoint here is
seen as begun and passed over, not trained again from epoch 0. ``trim`` takes every other
tracked file under ``results/`` out of the working tree, and the folders a lease never reads
(:data:`NOT_TRAVEL`), removing the folders it empties, only after checking that git holds
all of it (a clean ``git status``), and records the commit it trimmed and what it took out
(``lstpe-lease-trim.json`` in the git folder: it does not travel); ``restore`` checks those
files out again from that commit (or, without a record, every file of HEAD missing from the
working tree), and touches nothing else (the segments a lease brings back are new, untracked
files). A second ``trim`` sees an earlier trim's deletions and trims again (for another chunk
too); never commit them: after ``git add -A`` or a commit of the deletions ``restore`` still
brings every file back, and says what to commit.

    python3 scripts/lease_tree.py trim --chunk mechanism   # prints what will travel
    ... the device calls: lstpe campaign lease ... (README: "A short GPU lease")
    python3 scripts/lease_tree.py restore

``lstpe campaign lease`` packs the chunk kept (its checkpoint is here:
:func:`lstpe.experiments.lease.paused_sources`) beside the chunks not begun, writes that
chunk's checkpoint back where its units stopped, and brings back only what it wrote
(``results.tgz.*``, at most 4 pieces of 15 MiB: the device returns at most 8 files of
16 MiB). ``lstpe campaign run --device cuda`` still resumes the kept chunk alone; it passes
over a chunk whose segments are here without its checkpoint
(:func:`lstpe.experiments.long_units.unresumable`). Then::

    python3 scripts/lease_tree.py restore
    cat <files_at>/results.tgz.* | tar xzf - -C results; lstpe campaign status  # then commit
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

LIMIT = 64 * 2**20
"""The device tool's limit on the working tree that travels, in bytes."""

NOT_TRAVEL: tuple[str, ...] = ("_vendor", "book", "lstpe/data/brain")
"""Tracked folders outside ``results/`` that a lease never reads, also taken out: the book's
pages and its vendored MathJax, and the brain experiment's data (about 5.4 MB of headroom under
:data:`LIMIT`, which the mechanism's 47 MiB checkpoint leaves little of)."""

RECORD = "lstpe-lease-trim.json"
"""The trim's record in the git folder: the commit trimmed, the chunk, the paths taken out."""

BATCH = 500
"""Paths per ``git checkout`` call."""


def git(repo: Path, *args: str) -> list[str]:
    """``git -C repo args``: its output lines (NUL-separated for ``-z``); a failure stops the
    script naming the command, the folder and git's message."""
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"git {' '.join(args[:3])} failed in {repo}: {r.stderr.strip()}")
    return [x for x in r.stdout.split("\0" if "-z" in args else "\n") if x]


def checkout_root(repo: Path) -> Path:
    """``repo`` if it is the top folder of a git checkout with a commit, else a clear stop."""
    if not repo.is_dir():
        raise SystemExit(f"--repo {repo}: no such folder")
    r = subprocess.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"--repo {repo} is not a git checkout ({r.stderr.strip()})")
    top = Path(r.stdout.strip()).resolve()
    if top != repo.resolve():
        raise SystemExit(f"--repo {repo} is inside the checkout {top}, not its top folder: "
                         f"give --repo {top}")
    git(repo, "rev-parse", "--verify", "HEAD")  # a checkout without a commit holds nothing
    return repo


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")[0]


def _record_path(repo: Path) -> Path:
    return repo / git(repo, "rev-parse", "--git-path", RECORD)[0]


def read_record(repo: Path) -> dict | None:
    """The record of the trim not yet restored (None if there is none)."""
    path = _record_path(repo)
    if not path.exists():
        return None
    try:
        rec = json.loads(path.read_text())
        if not isinstance(rec.get("commit"), str) or not isinstance(rec.get("trimmed"), list):
            raise ValueError("no commit or trimmed list")
    except ValueError as e:
        raise SystemExit(f"the trim record {path} is damaged ({e}): restore by hand with "
                         "git checkout <the commit trimmed> -- results, then delete it") from e
    return rec


def status(repo: Path) -> list[tuple[str, str]]:
    """``git status`` as (XY, path) entries (renames: the new path)."""
    out, skip = [], False
    for entry in git(repo, "status", "--porcelain", "-z", "--untracked-files=all"):
        if skip:
            skip = False
            continue
        out.append((entry[:2], entry[3:]))
        skip = entry[0] in "RC"
    return out


def tree_files(repo: Path, commit: str, *paths: str) -> list[str]:
    """The files of ``commit`` (under ``paths``)."""
    return git(repo, "ls-tree", "-r", "-z", "--name-only", commit, "--", *paths)


def checkout(repo: Path, commit: str, paths: list[str]) -> None:
    """Write ``paths`` of ``commit`` into the working tree and the index."""
    for i in range(0, len(paths), BATCH):
        git(repo, "checkout", commit, "--", *paths[i:i + BATCH])


def keep_paths(repo: Path, chunk: str) -> list[Path]:
    """Folders and files under ``results/`` that the lease of ``chunk`` needs: its resume
    folder, the last segment of every long unit, every other begun chunk's
    ``chunk.json``, the stored units of the precision pair without their
    ``artifacts.pt`` (:func:`lstpe.experiments.lease_pair.travel_files`) and the lease's
    earlier decisions (:func:`decisions`), relative to ``repo``."""
    from lstpe.experiments import lease_pair as lp
    from lstpe.experiments import long_units as lu

    chunks = [c for c in lu.LONG_PLAN if c.name == chunk]
    if not chunks and chunk != "none":
        names = sorted({c.name for c in lu.LONG_PLAN})
        raise SystemExit(f"no long chunk named {chunk!r}; the plan's chunks: {names}")
    results = repo / "results"
    keep = [lu.resume_dir(chunk, results)] if chunk != "none" else []
    for u in {u.key: u for c in lu.LONG_PLAN for u in c.units}.values():
        keep += lu.segments(u, results)[-1:]
    # every begun chunk's chunk.json (a few bytes): one paused before its first segment is
    # then seen as begun, not trained again from epoch 0 by the lease
    keep += [lu.resume_dir(n, results) / "chunk.json" for n in sorted(
        {c.name for c in lu.LONG_PLAN}) if (lu.resume_dir(n, results) / "chunk.json").exists()]
    keep += lp.travel_files(results)  # what the lease's precision pair judges against (1 MB)
    keep += decisions(results)
    return [p.relative_to(repo) for p in keep]


def decisions(results: Path) -> list[Path]:
    """What a lease reads to choose its precision and step: the lease records
    (``benchmarks/lease_*``: the step-time fits and variant tables) and every card's precision
    pairs (``precision_pair/gpu-*``, without ``artifacts.pt``). Without them a lease would
    take every candidate as undecided: it would pair the cleared one again, and train fp32."""
    out = sorted((results / "benchmarks").glob("lease_*"))
    for card in sorted((results / "precision_pair").glob("gpu-*")):
        out += sorted(f for f in card.rglob("*") if f.is_file() and f.name != "artifacts.pt")
    return out


def _undo_earlier_trim(repo: Path, rec: dict) -> int:
    """Before a second trim: check that nothing but the earlier trim's deletions changed,
    and bring them back; returns how many files it had taken out."""
    trimmed = set(rec["trimmed"])
    other = [(xy, f) for xy, f in status(repo) if not ("D" in xy and f in trimmed)]
    if head(repo) != rec["commit"] or other:
        why = (f"HEAD is no longer {rec['commit'][:12]}, the commit it trimmed"
               if head(repo) != rec["commit"] else
               f"git status shows more than its deletions, e.g. {''.join(other[0])!r}")
        raise SystemExit(f"this tree was trimmed for {rec.get('chunk')} and {why}: run "
                         "python3 scripts/lease_tree.py restore first (never commit the "
                         "trim's deletions), then trim again")
    checkout(repo, rec["commit"], sorted(f for f in trimmed if not (repo / f).exists()))
    _record_path(repo).unlink()
    return len(trimmed)


def trim(repo: Path, chunk: str) -> int:
    """Delete from the working tree every tracked file under ``results/`` outside
    :func:`keep_paths`; record what it took out; return the bytes that will travel. Refuses on
    an unclean tree; a tree an earlier trim left is trimmed again (for ``chunk``)."""
    checkout_root(repo)
    rec = read_record(repo)
    again = _undo_earlier_trim(repo, rec) if rec is not None else 0
    dirty = status(repo)
    if dirty:
        gone = [f for xy, f in dirty if "D" in xy and f.startswith(
            tuple(f"{d}/" for d in ("results", *NOT_TRAVEL)))]
        if len(gone) == len(dirty):
            raise SystemExit(f"git status is not clean: {len(gone)} result files are deleted "
                             f"(e.g. {gone[0]!r}), as a trim of an older lease_tree.py leaves "
                             "them: run python3 scripts/lease_tree.py restore first; do not "
                             "commit these deletions")
        raise SystemExit(f"git status is not clean ({len(dirty)} entries, e.g. "
                         f"{''.join(dirty[0])!r}): commit first, so that every file trim "
                         "removes is in git")
    keep = keep_paths(repo, chunk)
    commit, trimmed = head(repo), []
    for f in tree_files(repo, "HEAD", "results", *NOT_TRAVEL):
        p = Path(f)
        if not any(p.is_relative_to(k) for k in keep):
            (repo / p).unlink(missing_ok=True)
            trimmed.append(f)
    prune_empty(repo, {Path(f).parent for f in trimmed})
    _record_path(repo).write_text(json.dumps({"commit": commit, "chunk": chunk,
                                              "trimmed": trimmed}, indent=0))
    travel = git(repo, "ls-files", "-z") + git(repo, "ls-files", "-z", "--others",
                                               "--exclude-standard")
    size = sum((repo / f).stat().st_size for f in travel if (repo / f).is_file())
    if again:
        print(f"already trimmed ({again} result files out): trimmed again for {chunk}")
    print(f"trimmed for {chunk}: {len(trimmed)} tracked result files out of the working tree; "
          f"kept {', '.join(map(str, keep))}; {size / 2**20:.1f} MiB will travel "
          f"(limit {LIMIT / 2**20:.0f} MiB){'' if size <= LIMIT else ': TOO LARGE'}")
    return size


def prune_empty(repo: Path, folders: set[Path]) -> None:
    """Remove the folders (relative to ``repo``) that the trim emptied, and their parents
    left empty: git does not carry empty folders to the device, and here a segment folder
    left empty reads as an incomplete copy, a damaged chunk that the lease passes over."""
    for d in sorted(folders, key=lambda d: len(d.parts), reverse=True):
        while d.parts and (repo / d).is_dir() and not any((repo / d).iterdir()):
            (repo / d).rmdir()
            d = d.parent


def restore(repo: Path) -> int:
    """Check out again what :func:`trim` took out, from the commit it trimmed (without a
    record: every file of HEAD missing from the working tree), whatever the index says
    (``git add -A``) and even after a commit of the deletions (then said, with what to
    commit); return how many files came back."""
    checkout_root(repo)
    rec = read_record(repo)
    now = head(repo)
    base = rec["commit"] if rec else now
    paths = rec["trimmed"] if rec else tree_files(repo, base)
    missing = [f for f in paths if not (repo / f).exists()]
    checkout(repo, base, missing)
    left = [f for f in missing if not (repo / f).exists()]
    if left:
        raise SystemExit(f"{len(left)} files of {base[:12]} are still missing, e.g. {left[0]}")
    lost = sorted(set(missing) - set(tree_files(repo, now))) if missing else []
    print(f"restored {len(missing)} tracked files from {base[:12]}")
    if lost:
        print(f"{len(lost)} of them are not in HEAD {now[:12]}: the trim's deletion was "
              f"committed after {base[:12]}. They are back in the working tree and staged; "
              "git commit them to undo that deletion (e.g. git commit -m 'restore the "
              "results a lease trim took out')")
    elif rec is None and not missing:
        hint = git(repo, "log", "-1", "--diff-filter=D", "--format=%h %s", "--", "results")
        if hint:
            print(f"nothing is missing against HEAD; the last commit that deleted result files "
                  f"is {hint[0]!r}: if that was a trim's deletion, bring them back with git "
                  f"checkout {hint[0].split()[0]}^ -- results and commit them")
    if rec is not None:
        _record_path(repo).unlink()
    return len(missing)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trim", help="take what a lease of one chunk does not need out")
    t.add_argument("--chunk", required=True, help="the long chunk the lease resumes, or "
                   "'none' (lstpe campaign lease: new units only)")
    sub.add_parser("restore", help="check out again what trim took out")
    ap.add_argument("--repo", type=Path, default=None, help="default: this checkout")
    a = ap.parse_args(argv)
    repo = checkout_root((a.repo or Path(__file__).resolve().parents[1]).resolve())
    if a.cmd == "trim":
        sys.exit(0 if trim(repo, a.chunk) <= LIMIT else 1)
    restore(repo)


if __name__ == "__main__":
    main()
