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
    "runtime": 0, "repo": 0, "sphinx_mathjax": 0, "__init__": 0,
    "lst": 1,
    "nn": 2, "store": 2,
    "training": 3,
    "analysis": 4,
    "brain": 5, "tutorial": 5,
    "experiments": 6,
    "chapters": 7,
    "cli": 8,
}
"""Each top-level part of the package and its floor: a part imports only from lower floors or
from itself (``nn`` and ``store`` share a floor and do not import each other)."""


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["lstpe", *parts])


def _imports(path: Path) -> set[str]:
    """The lstpe modules a file imports (``from lstpe.x import y`` counts ``lstpe.x.y`` when
    that is a module, else ``lstpe.x``)."""
    tree = ast.parse(path.read_text())
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
