"""The chapters' code cells stay thin: hidden cells hold prose, not logic (issue 48), and a
results page opens with its finding (issue 51).

A hidden cell (tagged ``remove-input`` or ``remove-cell``) is code a reader of the rendered
book never sees. A folded cell (``hide-input``) is one click away ("Show code cell source"):
it holds no branch. A ``parameters`` cell (papermill's, hidden in the book, shown in Colab)
holds only assignments of literals and is not counted. A hidden cell's logic is counted as
code lines (lines holding a token other than a string or a comment: a hand-written paragraph
in one string counts the lines of the call around it) and branches
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
HIDDEN = {"remove-input", "remove-cell"}
FOLDED = {"hide-input"}
RESULTS_PAGES = ("intro", "05_training", "06_sigma_sweep", "07_inside_the_models", "07b_alignment",
                 "08_robustness", "09_models_and_humans", "10_brain", "11_reproduction_report")
"""The pages that open with a finding: the intro and chapters 5-11."""
MAX_LINES, MAX_IFS = 250, 8
"""The budget for all hidden cells of the book together: issue 48's 80 lines, plus 40 for the
takeaways issue 51 glues under figures and in each Takeaways section (one ``fd.md`` or
``fd.md_facts`` call each, 2-4 counted lines: the call's first and last line and its facts
argument), plus 130 for the takeaway under every other figure of chapters 2-11 (38 cells of
2-4 counted lines: the call, and at most two lines naming what it formats). Branches stay at
issue 48's 8: a takeaway that depends on what the run holds takes its branch from
:mod:`lstpe.chapters.facts`."""
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
               if tags & HIDDEN and "parameters" not in tags and 'find_spec("lstpe")' not in src]
    lines, ifs = sum(c[2] for c in counted), sum(c[3] for c in counted)
    worst = sorted(counted, key=lambda c: -c[2])[:5]
    assert lines <= MAX_LINES and ifs <= MAX_IFS, \
        f"hidden cells: {lines} code lines, {ifs} branches; largest: {worst}"


def test_no_code_cell_is_longer_than_15_lines() -> None:
    long = [(nb, i, len(src.splitlines())) for nb, i, _, src in code_cells()
            if len(src.splitlines()) > 15]
    assert not long, f"code cells over 15 lines (notebook, cell, lines): {long}"


def test_folded_cells_hold_no_branch() -> None:
    branching = [(nb, i) for nb, i, tags, src in code_cells()
                 if tags & FOLDED and logic(src)[1]]
    assert not branching, f"folded cells with a branch (notebook, cell): {branching}"


def test_every_notebook_has_a_parameters_cell_of_literals() -> None:
    """Every notebook has papermill's ``parameters`` cell (so ``lstpe batch`` can point it at
    another results folder); it holds only ``name = literal`` lines."""
    cells = code_cells()
    books = {nb for nb, *_ in cells}
    with_params = {nb for nb, _, tags, _ in cells if "parameters" in tags}
    assert books == with_params, f"no parameters cell: {sorted(books - with_params)}"
    for nb, i, tags, src in cells:
        if "parameters" in tags:
            for stmt in ast.parse(src).body:
                ok = isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
                assert ok, f"{nb} cell {i}: a parameters cell holds only literals: {src!r}"


def finding_index(cells: list[tuple[str, int, set[str], str]]) -> int:
    """Index (in ``cells``) of a page's finding: its first cell that prints a hand-written
    paragraph (``fd.md(`` or ``fd.md_facts(``)."""
    return next(k for k, (_, _, _, src) in enumerate(cells)
                if "fd.md(" in src or "fd.md_facts(" in src)


def test_results_pages_open_with_their_finding() -> None:
    """No code input a reader sees (not hidden, not folded) before the finding (issue 65:
    the page's question, its finding, then the code)."""
    for page in RESULTS_PAGES:
        cells = [c for c in code_cells() if c[0] == f"{page}.ipynb"]
        before = cells[:finding_index(cells)]
        shown = [i for _, i, tags, _ in before if not tags & (HIDDEN | FOLDED)]
        assert not shown, f"{page}: code cells shown before the finding: {shown}"


def test_finding_check_sees_a_second_visible_cell() -> None:
    """The check above can fail: two visible cells before a finding are counted."""
    cells = [("x", 0, set(), "a = 1"), ("x", 1, set(), "b = 2"), ("x", 2, {"remove-input"},
             "fd.md('found')")]
    k = finding_index(cells)
    assert k == 2 and [i for _, i, t, _ in cells[:k] if not t & (HIDDEN | FOLDED)] == [0, 1]


def test_every_cell_has_a_unique_id() -> None:
    """nbformat 4.5 cells carry an ``id`` (papermill and nbformat warn, later fail, without)."""
    for nb in sorted((ROOT / "book").glob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        ids = [c.get("id") for c in cells]
        assert None not in ids and len(set(ids)) == len(ids), f"{nb.name}: cell ids {ids}"
