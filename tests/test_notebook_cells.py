"""The chapters' code cells stay thin: hidden cells hold prose, not logic (issue 48).

A hidden cell (tagged ``remove-input``, ``remove-cell`` or ``hide-input``) is code a reader of
the rendered book never sees. Its logic is counted as code lines (lines holding a token other
than a string or a comment: a hand-written paragraph in one string counts the lines of
the call around it) and branches
(``if`` statements, conditional expressions and comprehension filters, inside f-strings too).
The install cell, the same in every chapter and tested in ``tests/test_links.py``, is left out.
Every code cell, hidden or not, has at most 15 lines.
"""

from __future__ import annotations

import ast
import io
import json
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = {"remove-input", "remove-cell", "hide-input"}
MAX_LINES, MAX_IFS = 80, 8
"""The issue's budget for all hidden cells of the book together."""
SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
        tokenize.ENDMARKER, tokenize.STRING}


def logic(src: str) -> tuple[int, int]:
    """(code lines, branches) of one cell's source."""
    lines = {t.start[0] for t in tokenize.generate_tokens(io.StringIO(src).readline)
             if t.type not in SKIP}
    nodes = list(ast.walk(ast.parse(src)))
    ifs = sum(isinstance(n, ast.If | ast.IfExp) for n in nodes)
    ifs += sum(len(n.ifs) for n in nodes if isinstance(n, ast.comprehension))
    return len(lines), ifs


def code_cells() -> list[tuple[str, int, set[str], str]]:
    """(notebook, index, tags, source) of every code cell of the book."""
    out = []
    for nb in sorted((ROOT / "book").glob("*.ipynb")):
        for i, c in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            if c["cell_type"] == "code":
                out.append((nb.name, i, set(c.get("metadata", {}).get("tags", [])),
                            "".join(c["source"])))
    return out


def test_logic_counts_code_lines_and_branches() -> None:
    paragraph = 'fd.md(f"""one {x}\ntwo {y}\nthree""")'
    assert logic(paragraph) == (2, 0)  # the call's first and last line
    assert logic('fd.md(f"""a {\'is\' if n == 1 else \'are\'}\nb""")') == (2, 1)
    assert logic("# a comment\nif a:\n    b = [x for x in c if x]\nelse:\n    b = 1 if d else 2\n"
                 ) == (4, 3)


def test_hidden_cells_hold_prose_not_logic() -> None:
    counted = [(nb, i, *logic(src)) for nb, i, tags, src in code_cells()
               if tags & HIDDEN and 'find_spec("lstpe")' not in src]
    lines, ifs = sum(c[2] for c in counted), sum(c[3] for c in counted)
    worst = sorted(counted, key=lambda c: -c[2])[:5]
    assert lines <= MAX_LINES and ifs <= MAX_IFS, \
        f"hidden cells: {lines} code lines, {ifs} branches; largest: {worst}"


def test_no_code_cell_is_longer_than_15_lines() -> None:
    long = [(nb, i, len(src.splitlines())) for nb, i, _, src in code_cells()
            if len(src.splitlines()) > 15]
    assert not long, f"code cells over 15 lines (notebook, cell, lines): {long}"
