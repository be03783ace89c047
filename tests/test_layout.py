"""The package's layout: subpackages in the order data flows, imports only downward, no circle.

Read from the source with ``ast`` (every import, at module level or inside a function, as the
import graph a reader follows), not from what happens to be imported at run time.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import lstpe
from lstpe.experiments import runs

ROOT = Path(lstpe.__file__).parent

LAYERS: dict[str, int] = {
    "runtime": 0, "repo": 0, "sphinx_mathjax": 0, "sphinx_bib": 0, "__init__": 0,
    "lst": 1,
    "nn": 2, "store": 2,
    "training": 3,
    "stats": 4, "rendering": 4,
    "references": 5,
    "analysis": 6,
    "evidence": 7,
    "figures": 8,
    "brain": 9, "tutorial": 9,
    "experiments": 10,
    "claims": 11, "campaign": 11,
    "chapters": 12,
    "cli": 13,
}
"""Each top-level part of the package and its floor: a part imports only from lower floors or
from itself (parts that share a floor do not import each other). Statistics sit below the
measures (which summarise over seeds with them: ``mean_ci``, ``ALPHA``) and page rendering below
everything that draws (the measures' own figures, :mod:`lstpe.figures`, brain, tutorial,
chapters); the references (the paper's tables, the authors' logs) below the measures that mark
them on a curve; the evidence (ours against a reference) above all three; figures above it."""


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["lstpe", *parts])


def _imports(path: Path) -> set[str]:
    """The lstpe modules a file imports (``from lstpe.x import y`` counts ``lstpe.x.y`` when
    that is a module, else ``lstpe.x``)."""
    return _imports_in(ast.parse(path.read_text()))


def _imports_in(tree: ast.AST) -> set[str]:
    """The lstpe modules a parsed source imports, anywhere in it (as :func:`_imports`)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("lstpe")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lstpe"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in MODULES else node.module)
    return out


FILES = sorted(ROOT.rglob("*.py"))
MODULES = {_module(p) for p in FILES}
GRAPH = {_module(p): _imports(p) - {_module(p)} for p in FILES}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_part_has_a_floor() -> None:
    assert {_part(m) for m in MODULES} <= set(LAYERS), \
        f"parts without a floor: {sorted({_part(m) for m in MODULES} - set(LAYERS))}"


def test_imports_only_go_down() -> None:
    up = []
    for mod, deps in GRAPH.items():
        a = _part(mod)
        for dep in deps:
            b = _part(dep)
            if b == "__init__" and dep == "lstpe":
                continue
            if a != b and LAYERS[b] >= LAYERS[a]:
                up.append(f"{mod} -> {dep}")
    assert up == [], "imports that do not go down: " + "; ".join(sorted(up))


def test_no_import_circle() -> None:
    state: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(GRAPH.get(m, ())):
            if d not in GRAPH:
                continue
            if state.get(d) == 1:
                circles.append([*stack[stack.index(d):], d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)
    assert circles == [], "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_modules_stay_under_about_500_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in FILES
            if (n := len(p.read_text().splitlines())) > 510}
    assert long == {}


def test_cache_key_follows_a_moved_file(tmp_path: Path) -> None:
    """The cache key covers the files found on disk: moving one changes it."""
    copy = tmp_path / "lstpe"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    key = runs.source_hash.__wrapped__  # uncached: the copy changes under the same path
    before = key(copy)
    assert before == key(ROOT)
    (copy / "nn" / "dropout.py").rename(copy / "training" / "dropout.py")
    assert key(copy) != before
    shutil.rmtree(copy / "nn")
    with pytest.raises(FileNotFoundError, match="'nn/\\*.py' matches no file"):
        key(copy)


def _top_level_names(path: Path) -> tuple[set[str], set[str], list[str]]:
    """(names a module defines, names it imports, its ``__all__``), read at module level."""
    tree = ast.parse(path.read_text())
    defined: set[str] = set()
    imported: set[str] = set()
    exported: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    defined.add(t.id)
                    if t.id == "__all__":
                        exported = list(ast.literal_eval(node.value))
    return defined, imported, exported


ENTRY_POINTS = {"main", "setup", "CLAIM", "LINE", "WHERE", "QUOTES", "judge", "EVIDENCE",
                "checks"}
"""Names the protocol fixes: ``main`` of a ``python -m`` module (``lstpe.cli``,
``lstpe.repo``), ``setup`` of a Sphinx extension and of a chapter (``lstpe.chapters.notebook``),
the five every claim module of :mod:`lstpe.claims` defines (its scorecard loops over them),
``checks``, a claim module's recomputation of the paper's own analysis (its verdict carries
them), and ``EVIDENCE``, the evidence table a claim module reads where its page shows that table
(:func:`lstpe.claims.judge` carries it for a preview too)."""


def test_each_public_name_has_one_home() -> None:
    """Only a subpackage's ``__init__.py`` (its face) re-exports; every other module exports
    what it defines, and no public name is defined in two modules."""
    homes: dict[str, list[str]] = {}
    reexports = []
    for path in FILES:
        defined, imported, exported = _top_level_names(path)
        if path.name != "__init__.py":
            bad = sorted(n for n in exported if n in imported and n not in defined)
            if bad:
                reexports.append(f"{_module(path)} re-exports {bad}")
            for n in defined - ENTRY_POINTS:
                if not n.startswith("_"):
                    homes.setdefault(n, []).append(_module(path))
    clashes = {n: m for n, m in homes.items() if len(m) > 1}
    assert not reexports, reexports
    assert not clashes, clashes


def test_private_names_stay_inside_their_subpackage() -> None:
    crossing = []
    for path in FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lstpe."):
                for a in node.names:
                    private = a.name.startswith("_") and not a.name.startswith("__")
                    if private and _part(node.module) != _part(_module(path)):
                        crossing.append(f"{_module(path)} imports {node.module}.{a.name}")
    assert not crossing, crossing


def _module_aliases(tree: ast.AST) -> dict[str, str]:
    """The names a file binds to lstpe modules: ``import lstpe.x.y as a``, ``from lstpe.x
    import y [as a]`` when ``lstpe.x.y`` is a module (name -> module)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.asname: a.name for a in node.names
                    if a.asname and a.name in MODULES}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lstpe"):
            for a in node.names:
                if f"{node.module}.{a.name}" in MODULES:
                    out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_private_names(tree: ast.AST) -> set[str]:
    """Private names a file defines anywhere: functions, methods, classes, and attributes
    assigned at module or class level or on ``self``."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
    return {n for n in out if _private(n)}


TREES = {_module(p): ast.parse(p.read_text()) for p in FILES}
PRIVATE_HOMES: dict[str, set[str]] = {}
for _mod, _tree in TREES.items():
    for _name in _defined_private_names(_tree):
        PRIVATE_HOMES.setdefault(_name, set()).add(_part(_mod))


def test_private_attributes_stay_inside_their_subpackage() -> None:
    """No module reaches a private name of another subpackage through an attribute: neither
    of a module (``cp._base`` with ``cp`` the campaign module, from the CLI) nor of an object
    whose class lives there (``lock._stale_reason`` of a :mod:`lstpe.store` lock, from
    :mod:`lstpe.experiments`): a name used across subpackages is public and documented."""
    crossing = []
    for mod, tree in TREES.items():
        part = _part(mod)
        aliases = _module_aliases(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            value = node.value
            if isinstance(value, ast.Name) and value.id in aliases:
                owner = {_part(aliases[value.id])}
            elif isinstance(value, ast.Name) and value.id in ("self", "cls"):
                continue
            else:  # an object's attribute: whose subpackages define that name
                owner = PRIVATE_HOMES.get(node.attr, set())
                if part in owner:
                    continue
            if owner and part not in owner:
                crossing.append(f"{mod}:{node.lineno} uses {ast.unparse(node)} "
                                f"(defined in {', '.join(sorted(owner))})")
    assert not crossing, crossing


RESOLVER_HOME = {"lstpe.runtime", "lstpe.store.results"}
"""Where the default results folder is found (:func:`lstpe.runtime.find_results`) and where
an optional ``results_dir`` becomes a folder (:func:`lstpe.store.results.results_root`)."""


def test_one_results_folder_resolver() -> None:
    """Every function that takes an optional results folder resolves it with
    :func:`lstpe.store.results.results_root` (or ``results_source``): none calls the default
    finder itself or writes ``Path(results_dir) if results_dir ... else ...`` again."""
    import re

    by_hand = re.compile(r"results_dir\)? if results_dir|results_dir or |"
                         r"if results_dir is not None else|if results_dir else")
    finders = {"default_results_dir", "find_results"}
    found = []
    for path in FILES:
        mod = _module(path)
        if mod in RESOLVER_HOME:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if by_hand.search(line):
                found.append(f"{mod}:{i}: {line.strip()}")
        for node in ast.walk(TREES[mod]):
            names = ([a.name for a in node.names] if isinstance(node, ast.ImportFrom) else
                     [node.id] if isinstance(node, ast.Name) else
                     [node.attr] if isinstance(node, ast.Attribute) else [])
            found += [f"{mod}:{node.lineno}: {n}" for n in names if n in finders]
    assert not found, found


CAMPAIGN = "campaign"
"""The campaign's subpackage, :mod:`lstpe.campaign` (this project's own CPU scheduler, its packed
chunks and its precision pair). The book's readers never need it: what a page reads of the
stored models lives in :mod:`lstpe.experiments` (``units``, ``fragments``, ``long_units``...)."""

BOOK = ROOT.parent / "book"


def _campaign(module: str) -> bool:
    return _part(module) == CAMPAIGN


def _notebook_imports(path: Path) -> set[str]:
    """The lstpe modules the code cells of a notebook import (IPython's ``%`` and ``!`` lines
    left out)."""
    import json

    out: set[str] = set()
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            src = "".join(cell["source"])
            src = "\n".join(ln for ln in src.splitlines()
                            if not ln.lstrip().startswith(("%", "!")))
            out |= _imports_in(ast.parse(src))
    return out


def _notebook_closure(book: Path = BOOK) -> dict[str, str]:
    """Every lstpe module a notebook of ``book`` imports, directly or through other modules
    (their imports at module level and inside functions, and the packages above them, which
    Python imports first): module -> what imported it first (a module, or a notebook's
    name)."""
    came_from: dict[str, str] = {}
    todo: list[str] = []
    for nb in sorted(book.glob("*.ipynb")):
        for m in sorted(_notebook_imports(nb)):
            if m in MODULES and m not in came_from:
                came_from[m] = f"book/{nb.name}"
                todo.append(m)
    while todo:
        m = todo.pop(0)
        parts = m.split(".")
        above = {".".join(parts[:i]) for i in range(1, len(parts))}
        for dep in sorted(GRAPH.get(m, set()) | above):
            if dep in MODULES and dep not in came_from:
                came_from[dep] = m
                todo.append(dep)
    return came_from


def _chain(module: str, came_from: dict[str, str]) -> str:
    chain = [module]
    while chain[-1] in came_from:
        chain.append(came_from[chain[-1]])
    return " <- ".join(chain)


def test_notebooks_import_no_campaign_module() -> None:
    """The book's notebooks reach no campaign module (:mod:`lstpe.campaign`), counting
    imports inside functions: a page reads stored units, it never imports the scheduler that
    trains them."""
    came_from = _notebook_closure()
    assert len(came_from) > 20 and "lstpe.chapters.claims" in came_from  # it read the book
    cells = {f"book/{nb.name}": _notebook_imports(nb) for nb in sorted(BOOK.glob("*.ipynb"))}
    edges = sorted(f"{m} -> {d}" for m, deps in [*cells.items(), *GRAPH.items()]
                   if m in cells or (m in came_from and not _campaign(m))
                   for d in deps if _campaign(d))
    reached = sorted(_chain(m, came_from) for m in came_from if _campaign(m))
    assert not edges, ("the notebooks import campaign modules through: " + "; ".join(edges)
                       + " (first paths: " + "; ".join(reached) + ")")
