"""The repository the book installs from and launches in Colab: one URL, kept in one place.

The single source is ``repository.url`` and ``repository.branch`` in ``_config.yml`` (Jupyter
Book reads them for its Colab and repository buttons). Everything else that names the
repository follows it:

* the install cell of every chapter (``lstpe @ git+<url>@<branch>``),
* ``README.md`` (the same pip line, ``git clone <url>`` and the Colab links).

Command line (run from anywhere inside the repository; ``python -m lstpe.repo`` is the same
command where the ``lstpe`` script is not installed)::

    lstpe repo show                      # the configured url and branch
    lstpe repo check                     # exit 1 and list what disagrees
    lstpe repo set-url https://github.com/you/fork [--branch main]

``set-url`` rewrites ``_config.yml``, ``README.md`` and the install cell of every notebook under
``book/`` by plain text substitution, so every other byte of those files stays as it was.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

CONFIG = "_config.yml"
README = "README.md"
BOOK = "book"
INSTALL_MARK = 'importlib.util.find_spec("lstpe")'
"""Text that identifies a chapter's install cell."""

_URL = r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?"
_BRANCH = r"[A-Za-z0-9_./-]+"
_PIP = re.compile(rf"git\+(?P<url>{_URL})(?:\.git)?@(?P<branch>{_BRANCH}?)(?=[\"'\s`)\\]|$)")
_COLAB = re.compile(r"colab\.research\.google\.com/github/(?P<slug>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)"
                    rf"/blob/(?P<branch>{_BRANCH}?)/(?={BOOK}/)")  # a branch may hold "/"
_CLONE = re.compile(rf"git clone (?P<url>{_URL})(?:\.git)?(?=[\s`]|$)")


@dataclass(frozen=True)
class Repository:
    """Where the book's code lives: a GitHub URL and a branch."""

    url: str
    branch: str

    @property
    def slug(self) -> str:
        """``owner/name``."""
        return self.url.removeprefix("https://github.com/")

    @property
    def pip_spec(self) -> str:
        """What a chapter's install cell passes to pip."""
        return f"lstpe @ git+{self.url}@{self.branch}"

    def colab(self, notebook: str) -> str:
        """Colab URL of a notebook given by its path in the repository (``book/...``)."""
        return f"https://colab.research.google.com/github/{self.slug}/blob/{self.branch}/{notebook}"


def find_root(start: Path | None = None) -> Path:
    """The repository root: the first folder upwards holding ``_config.yml`` and ``lstpe/``."""
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / CONFIG).is_file() and (p / "lstpe").is_dir():
            return p
    raise FileNotFoundError(f"no {CONFIG} with an lstpe/ folder beside it above {here}")


def _repository_block(text: str) -> tuple[int, int]:
    """Start and end offsets of the ``repository:`` mapping of a Jupyter Book config."""
    m = re.search(r"^repository:[^\n]*\n((?:[ \t]+[^\n]*\n|[ \t]*\n)*)", text, re.M)
    if not m:
        raise ValueError(f"{CONFIG} has no top-level 'repository:' section")
    return m.start(1), m.end(1)


def _field(block: str, key: str) -> re.Match:
    m = re.search(rf"^(?P<pre>[ \t]+{key}[ \t]*:[ \t]*)(?P<val>[^\s#]+)", block, re.M)
    if not m:
        raise ValueError(f"{CONFIG}: 'repository.{key}' is missing")
    return m


def configured(root: Path) -> Repository:
    """The repository named in ``_config.yml``."""
    text = (root / CONFIG).read_text(encoding="utf-8")
    a, b = _repository_block(text)
    block = text[a:b]
    url = _field(block, "url")["val"].strip("\"'").removesuffix(".git").rstrip("/")
    branch = _field(block, "branch")["val"].strip("\"'")
    if not re.fullmatch(_URL, url):
        raise ValueError(f"{CONFIG}: repository.url {url!r} is not https://github.com/OWNER/NAME")
    return Repository(url, branch)


def notebooks(root: Path) -> list[Path]:
    """Every chapter notebook under ``book/``."""
    return sorted((root / BOOK).glob("*.ipynb"))


def install_cell(nb_path: Path) -> str | None:
    """Source of the notebook's install cell (its first code cell, if it is one)."""
    cells = json.loads(nb_path.read_text(encoding="utf-8"))["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    if not code:
        return None
    src = "".join(code[0]["source"])
    return src if INSTALL_MARK in src else None


def clone_command(cell: str, url: str, branch: str, into: str) -> str:
    """The shell command an install cell (``cell``'s source) runs to clone the repository
    (its ``clone = (...)`` expression) for ``url`` and ``branch`` into the folder ``into``
    (the cell's ``new``: it clones beside its ``home`` and renames the clone once whole).

    Raises:
        ValueError: the cell assigns no ``clone`` command.
    """
    import shlex

    for node in ast.walk(ast.parse(cell)):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "clone":
            code = compile(ast.Expression(node.value), "install cell", "eval")
            return str(eval(code, {"shlex": shlex},
                            {"url": url, "branch": branch, "new": into}))
    raise ValueError("the install cell assigns no clone command (clone = ...)")


def check(root: Path) -> list[str]:
    """Everything that disagrees with ``_config.yml`` (an empty list when all agree)."""
    repo = configured(root)
    problems = []
    for nb in notebooks(root):
        rel = nb.relative_to(root).as_posix()
        src = install_cell(nb)
        if src is None:
            problems.append(f"{rel}: the first code cell is not the install cell")
            continue
        found = [(m["url"], m["branch"]) for m in _PIP.finditer(src)]
        if found != [(repo.url, repo.branch)]:
            problems.append(f"{rel}: install cell installs {found}, expected "
                            f"{[(repo.url, repo.branch)]}")
    readme = root / README
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""
    pips = [(m["url"], m["branch"]) for m in _PIP.finditer(text)]
    if not pips:
        problems.append(f"{README}: no 'lstpe @ git+{repo.url}@{repo.branch}' line")
    problems += [f"{README}: pip line names {u}@{b}" for u, b in pips
                 if (u, b) != (repo.url, repo.branch)]
    problems += [f"{README}: Colab link names {m['slug']}@{m['branch']}"
                 for m in _COLAB.finditer(text) if (m["slug"], m["branch"]) != (repo.slug,
                                                                                repo.branch)]
    problems += [f"{README}: git clone names {m['url']}" for m in _CLONE.finditer(text)
                 if m["url"] != repo.url]
    return problems


def _rewrite(text: str, repo: Repository) -> str:
    text = _PIP.sub(f"git+{repo.url}@{repo.branch}", text)
    text = _COLAB.sub(f"colab.research.google.com/github/{repo.slug}/blob/{repo.branch}/", text)
    return _CLONE.sub(f"git clone {repo.url}", text)


def valid_branch(branch: str) -> bool:
    """Whether ``branch`` is a branch name by ``git check-ref-format``'s rules, within the
    characters this module rewrites (``feature/x`` yes; ``../..``, ``a//b``, ``.x``, ``x.lock``
    no)."""
    if not re.fullmatch(_BRANCH, branch) or ".." in branch or branch.endswith((".", "/")):
        return False
    parts = branch.split("/")
    return all(p and not p.startswith(".") and not p.endswith(".lock") for p in parts)


def set_url(root: Path, url: str, branch: str | None = None) -> list[Path]:
    """Point ``_config.yml``, README and every install cell at ``url`` (and ``branch``).

    Returns the files that changed.
    """
    url = url.strip().removesuffix(".git").rstrip("/")
    if not re.fullmatch(_URL, url):
        raise ValueError(f"{url!r} is not a GitHub repository URL (https://github.com/OWNER/NAME)")
    old = configured(root)
    repo = Repository(url, branch or old.branch)
    if not valid_branch(repo.branch):
        raise ValueError(f"{repo.branch!r} is not a branch name git accepts (letters, digits "
                         "and _./-; no '..', '//', component starting with '.', or ending in "
                         "'/', '.' or '.lock')")
    changed = []
    cfg = root / CONFIG
    text = cfg.read_text(encoding="utf-8")
    a, b = _repository_block(text)
    block = text[a:b]
    for key, val in (("url", repo.url), ("branch", repo.branch)):
        m = _field(block, key)
        block = block[:m.start("val")] + val + block[m.end("val"):]
    new = text[:a] + block + text[b:]
    if new != text:
        cfg.write_text(new, encoding="utf-8")
        changed.append(cfg)
    for path in [root / README, *notebooks(root)]:
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        new = _rewrite(text, repo)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The arguments of ``lstpe repo`` (and ``python -m lstpe.repo``): show, check, set-url."""
    ap.add_argument("--root", type=Path, default=None, help="repository root (default: found "
                    "upwards from the current folder)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("show", help="print the configured url and branch")
    sub.add_parser("check", help="list files that disagree with _config.yml; exit 1 if any")
    s = sub.add_parser("set-url", help="point _config.yml, README and every install cell at a fork")
    s.add_argument("url", help="https://github.com/OWNER/NAME")
    s.add_argument("--branch", default=None, help="branch to install from (default: keep)")
    ap.set_defaults(func=run_command)


def main(argv: list[str] | None = None) -> int:
    """``python -m lstpe.repo``: the same command as ``lstpe repo``, for a checkout where the
    ``lstpe`` script is not installed (stdlib only)."""
    ap = argparse.ArgumentParser(prog="python -m lstpe.repo", description=__doc__.split("\n")[0])
    add_arguments(ap)
    return run_command(ap.parse_args(argv))


def run_command(args: argparse.Namespace) -> int:
    """Show, check or set the repository URL; 1 if files disagree with ``_config.yml``."""
    root = args.root.resolve() if args.root else find_root()
    if args.cmd == "show":
        repo = configured(root)
        print(f"url:    {repo.url}\nbranch: {repo.branch}\npip:    {repo.pip_spec}")
        return 0
    if args.cmd == "check":
        problems = check(root)
        for p in problems:
            print(p)
        print("all agree with _config.yml" if not problems else f"{len(problems)} problem(s)")
        return 1 if problems else 0
    changed = set_url(root, args.url, args.branch)
    for p in changed:
        print("rewrote", p.relative_to(root))
    problems = check(root)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
