"""Chapter 7 in two pages: 7 (what a learnable PE learns) and 7b (the paper's alignment
measures). The numbers 7b's finding glues in, and every claim pointing at the page that judges
it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from lstpe import claims as C
from lstpe.analysis.mechanism import mechanism_table
from lstpe.chapters import alignment as am
from lstpe.chapters.claims import claims_markdown

ROOT = Path(__file__).resolve().parents[1]


def _tables() -> tuple[pd.DataFrame, ...]:
    """Per-model tables of two sigmas (two models each) and a fixed PE without a sigma."""
    sig = [0.1, 0.1, 2.0, 2.0, np.nan]
    t3_0 = pd.DataFrame({"sigma": sig, "cosine_paper": [0.99, 0.97, 0.90, 0.80, 0.5]})
    t3 = pd.DataFrame({"sigma": sig, "cosine_paper": [0.95, 0.93, 0.70, 0.60, 0.5]})
    al0 = pd.DataFrame({"sigma": sig, "distance": [1.0, 2.0, 10.0, 12.0, 0.0]})
    al = pd.DataFrame({"sigma": sig, "distance": [1.5, 2.5, 10.5, 11.5, 0.0]})
    return t3_0, t3, al0, al


def test_alignment_by_sigma_by_hand() -> None:
    t3_0, t3, al0, al = _tables()
    got = am.alignment_by_sigma(t3_0, t3, al0, al, {0.1: 0.836})
    assert list(got.columns) == list(am.ALIGNMENT_COLUMNS)
    assert got["sigma"].tolist() == [0.1, 2.0] and got["n"].tolist() == [2, 2]
    assert got["cos_init"].tolist() == pytest.approx([0.98, 0.85])
    assert got["cos_trained"].tolist() == pytest.approx([0.94, 0.65])
    assert got["cos_paper"].iloc[0] == 0.836 and np.isnan(got["cos_paper"].iloc[1])
    assert got["procrustes_init"].tolist() == pytest.approx([1.5, 11.0])
    assert got["procrustes_trained"].tolist() == pytest.approx([2.0, 11.0])


def test_alignment_by_sigma_are_the_mechanism_tables_alignment_columns() -> None:
    """The same inputs through chapter 7's mechanism table give the same per-sigma columns."""
    t3_0, t3, al0, al = _tables()
    structure = pd.DataFrame({"sigma": [0.1, 0.1, 2.0, 2.0], "block": 0, "score_dpe": 0.5,
                              "p_dpe": 0.01, "score_final": 0.2, "p_final": 0.2,
                              "init_share": 0.9})
    mech = mechanism_table(structure, t3_0, t3, al0, al, {0.1: 0.836})
    got = am.alignment_by_sigma(t3_0, t3, al0, al, {0.1: 0.836})
    cols = [c for c in am.ALIGNMENT_COLUMNS if c != "n"]
    pd.testing.assert_frame_equal(got[cols], mech[cols])


def test_alignment_by_sigma_names_a_table_without_its_columns() -> None:
    t3_0, t3, al0, al = _tables()
    with pytest.raises(ValueError, match="align lacks the columns 'sigma' and 'distance'"):
        am.alignment_by_sigma(t3_0, t3, al0, al.rename(columns={"distance": "d"}))
    with pytest.raises(ValueError, match="no learnable PE"):
        am.alignment_by_sigma(t3_0, t3.assign(sigma=np.nan), al0, al)


def test_alignment_facts_format_the_spans_and_say_what_is_missing() -> None:
    by = am.alignment_by_sigma(*_tables(), {0.1: 0.836})
    verdict = SimpleNamespace(label="not shown")
    f = am.alignment_facts(by, pd.DataFrame(index=pd.Index([], name="measure")),
                           {"table3": verdict})
    assert (f["s0"], f["sN"]) == ("0.1", "2")
    assert f["cos_init"] == "0.980 to 0.850" and f["cos_trained"] == "0.940 to 0.650"
    assert f["cos_paper"] == "0.836 to –"  # the paper has no value at sigma 2 here
    assert f["pr_init"] == "1.50 to 11.00" and f["pr_trained"] == "2.00 to 11.00"
    assert f["cos_drop"] == "0.290" and f["cos_drop_init"] == "0.130"
    assert f["cos"] == f["pr0"] == f["n"] == "–"  # no correlation with two sigmas
    assert f["table3_label"] == "not shown"


def test_alignment_correlations_need_three_sigmas() -> None:
    t3_0, t3, al0, al = _tables()
    assert am.alignment_correlations(t3, t3_0, al, al0, pd.DataFrame()).empty


def test_the_scorecard_links_chapter_7b_by_its_own_number() -> None:
    card = pd.DataFrame({"claim": ["a", "b", "c"], "label": ["x", "y", "z"],
                         "evidence": ["e1", "e2", "e3"],
                         "where": ["07b_alignment.ipynb", "07_inside_the_models.ipynb",
                                   "10_brain.ipynb"]})
    rows = claims_markdown(card).splitlines()[2:]
    assert rows[0].endswith("[chapter 7b](07b_alignment.ipynb) |")
    assert rows[1].endswith("[chapter 7](07_inside_the_models.ipynb) |")
    assert rows[2].endswith("[chapter 10](10_brain.ipynb) |")


def _toc_pages() -> set[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return {Path(c["file"]).name for p in toc["parts"] for c in p["chapters"]}


def test_chapter_7s_claims_point_at_the_page_that_judges_them() -> None:
    """Every claim links to a page of the book; structure to chapter 7, Table 3 and
    Procrustes to chapter 7b, and that page computes the claim's verdict
    (``C.judge(C.<claim>, ...)``)."""
    pages = _toc_pages()
    assert {m.CLAIM: m.WHERE for m in C.CLAIMS if m.WHERE.removesuffix(".ipynb") not in pages} \
        == {}
    where = {}
    for claim in ("structure", "attention", "procrustes"):
        module = next(m for m in C.CLAIMS if m.CLAIM == claim)
        cells = json.loads((ROOT / "book" / module.WHERE).read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        where[claim] = (module.WHERE, bool(re.search(rf"C\.judge\(C\.{claim}\b", code)))
    assert where == {"structure": ("07_inside_the_models.ipynb", True),
                     "attention": ("07b_alignment.ipynb", True),
                     "procrustes": ("07b_alignment.ipynb", True)}
