"""Chapters 5 and 6 show the verdict's own contrast table (``verdict.numbers["contrasts"]``),
not a second computation of it: the page's setup cell, run on synthetic stored models, leaves
the page's table and the verdict's the same object, and the verdict's tested rows are rows of
that table."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from lstpe import claims as C
from lstpe.chapters import long_mechanism
from lstpe.chapters import notebook as nb
from lstpe.claims import sigma, table1
from lstpe.evidence import tables as ev

BOOK = Path(__file__).resolve().parents[1] / "book"
SEEDS = (1, 2, 3, 4, 5)
PAGES = {"05_training.ipynb": table1, "06_sigma_sweep.ipynb": sigma}


def _final(acc: dict[str, float]) -> pd.DataFrame:
    """Five seeds per PE at ``acc`` +- a distinct spread, epoch 200 (``exp.final``'s rows)."""
    return pd.DataFrame([{"pe": pe, "seed": s, "accuracy": a + 0.004 * (i - 2) / 2,
                          "epoch": 200} for pe, a in acc.items() for i, s in enumerate(SEEDS)])


FINALS = {
    table1: _final({"learn-0.2": 0.95, "2d-fixed": 0.98, "relative": 0.93, "random": 0.6,
                    "rope": 0.5, "1d-fixed": 0.45, "nope": 0.3, "c-nope": 0.3}),
    sigma: _final({"2d-fixed": 0.98, **{f"learn-{s:g}": 0.97 - 0.2 * s
                                        for s in (0.1, 0.2, 0.4, 1.0, 1.5, 2.0)}}),
}


def _cells(page: str) -> list[tuple[list[str], str]]:
    """(tags, source) of each code cell of a page."""
    cells = json.loads((BOOK / page).read_text())["cells"]
    return [(c.get("metadata", {}).get("tags", []), "".join(c["source"])) for c in cells
            if c["cell_type"] == "code"]


def _run_setup(page: str, final: pd.DataFrame, scale: str,
               monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The page's parameters cell and the cell that judges its claim, run with the stored
    models replaced by ``final`` (a run of ``scale``); the names they leave."""
    exp = SimpleNamespace(final=lambda split: final, scale=scale)
    monkeypatch.setattr(nb, "setup", lambda *a, **k: SimpleNamespace(
        get_run=lambda *a, **k: exp, results_dir=Path("unused")))
    monkeypatch.setattr(long_mechanism, "table1_long", lambda results_dir: pd.DataFrame(
        columns=["pe", "epoch", "seeds", "val_200", "val_last", "train_200", "train_last"]))
    cells = _cells(page)
    ns: dict[str, Any] = {}
    exec(next(src for tags, src in cells if "parameters" in tags), ns)
    exec(next(src for _, src in cells if "verdict = C.judge(" in src), ns)
    return ns


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("scale", ["paper", "preview"])
def test_the_page_shows_the_table_its_verdict_judged(page: str, scale: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    module = PAGES[page]
    final = FINALS[module]
    ns = _run_setup(page, final, scale, monkeypatch)
    verdict, shown = ns["verdict"], ns["contrasts"]
    assert verdict.claim == module.CLAIM
    assert shown is verdict.numbers["contrasts"]
    # and it is the claim's contrast table on these models, every row of it
    pd.testing.assert_frame_equal(shown, ev.contrast_table(module.EVIDENCE, final))
    assert "fd.show_evidence(claim, contrasts)" in {src.strip() for _, src in _cells(page)}
    if scale == "preview":
        assert verdict.verdict == "not testable yet" and "preview" in verdict.evidence
        return
    # the contrasts the verdict tests are rows of the page's table, their numbers unchanged
    cols = list(ev.CONTRAST_COLUMNS)
    tested = verdict.numbers["rows"]
    assert len(tested) >= 2
    for _, r in tested.iterrows():
        row = shown[(shown["a"] == r["a"]) & (shown["b"] == r["b"])]
        assert len(row) == 1
        pd.testing.assert_series_equal(r[cols], row.iloc[0][cols], check_names=False)


def test_no_page_computes_a_contrast_table_of_its_own() -> None:
    """Neither page calls ``contrast_table``: its contrasts come from the verdict."""
    for page in PAGES:
        calls = [n for _, src in _cells(page) for n in ast.walk(ast.parse(src))
                 if isinstance(n, ast.Call) and "contrast_table" in ast.unparse(n.func)]
        assert not calls, f"{page}: {[ast.unparse(c) for c in calls]}"


def test_the_adam_dip_is_the_row_of_the_shown_table() -> None:
    """The sigma verdict's learn-0.1 against learn-0.2 (shown, not tested) is the row chapter 6
    shows, not a third computation of it."""
    v = sigma.judge(C.Inputs(final=FINALS[sigma]))
    c = v.numbers["contrasts"]
    row = c[(c["a"] == "learn-0.1") & (c["b"] == "learn-0.2")].iloc[0]
    pd.testing.assert_series_equal(v.numbers["dip"], row)
    assert f"{row['diff']:+.3f}" in v.evidence
