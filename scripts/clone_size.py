"""What a reader's clone of this repository downloads: a plain shallow clone and the chapters'.

    python scripts/clone_size.py [--repo .] [--branch BRANCH]

Serves a bare copy of the repository as GitHub serves it (partial clone allowed) and clones
its branch twice over ``file://`` (``--no-local``, so git packs and sends objects as over the
network): ``git clone --depth 1`` (prints the size of ``.git/objects/pack``), and the command of
the chapters' install cell (:func:`lstpe.repo.clone_command`: shallow, partial, without
``results/long/_resume``; prints the size of its ``.git``). Sizes in MB (10^6 bytes) and MiB.
Needs about twice the repository's pack in free space under the system's temporary folder.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from lstpe import repo
from lstpe.training.compiled import folder_bytes


def _run(cmd: str | list[str], **kw) -> None:
    subprocess.run(cmd, check=True, **kw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=".", help="the repository (default: the current folder)")
    ap.add_argument("--branch", default=None, help="the branch (default: the checked-out one)")
    args = ap.parse_args()
    root = Path(subprocess.run(["git", "-C", args.repo, "rev-parse", "--show-toplevel"],
                               check=True, capture_output=True, text=True).stdout.strip())
    branch = args.branch or subprocess.run(
        ["git", "-C", str(root), "branch", "--show-current"], check=True, capture_output=True,
        text=True).stdout.strip()
    if not branch:
        raise SystemExit(f"{root} has no branch checked out (detached HEAD): pass --branch")
    cell = next((c for c in map(repo.install_cell, repo.notebooks(root)) if c), None)
    if cell is None:
        raise SystemExit(f"no chapter under {root / repo.BOOK} has an install cell")
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", branch],
                            check=True, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        srv, plain, colab = Path(tmp, "srv.git"), Path(tmp, "plain"), Path(tmp, "colab")
        _run(["git", "clone", "-q", "--bare", "--no-local", str(root), str(srv)])
        for key in ("uploadpack.allowfilter", "uploadpack.allowanysha1inwant"):
            _run(["git", "-C", str(srv), "config", key, "true"])
        _run(["git", "clone", "-q", "--depth", "1", "--no-local", "-b", branch,
              f"file://{srv}", str(plain)])
        _run(repo.clone_command(cell, f"file://{srv}", branch, str(colab)), shell=True,
             cwd=tmp)
        sizes = {"plain shallow clone (git clone --depth 1), .git/objects/pack":
                 folder_bytes(plain / ".git" / "objects" / "pack"),
                 "the chapters' clone (install cell), .git": folder_bytes(colab / ".git")}
    print(f"{branch} at {commit}:")
    for what, n in sizes.items():
        print(f"  {what}: {n / 1e6:.1f} MB ({n / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
