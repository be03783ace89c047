"""The book's findings follow the stored units: with more units the numbers and verdicts on the
pages change, while no hand-written Markdown states a count that changed (issue 35).

"More" is the repository's own ``results/``; "fewer" is a scratch copy of it (named by
``LSTPE_RESULTS``) in which every PE of ``table1`` and ``table2`` with two or more stored seeds
loses the fragment of its last seed. The intro and every results chapter that reads the
campaign's units (5-9 and 11; chapter 10 reads the brain run, which the campaign does not
train) are compared on both: their outputs must differ, and every "<count> units/seeds/
fragments" phrase that differs between the two must be absent from the notebooks' Markdown.
Each page runs once more (on "fewer"); on "more" the test reads the chapter nbmake executed
in the same run (``executed_chapters``), and executes it only when nbmake did not. Only the
pages' words and numbers are compared, so the test's own executions draw no figure
(``lstpe.rendering.responsive.TEXT_ONLY_ENV``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lstpe.experiments import units as un
from lstpe.experiments.registry import run_config
from lstpe.rendering.responsive import TEXT_ONLY_ENV
from lstpe.runtime import PAPER_SEEDS
from tests.conftest import executed_copy

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("intro.ipynb", "05_training.ipynb", "06_sigma_sweep.ipynb",
         "07_inside_the_models.ipynb", "07b_alignment.ipynb", "08_robustness.ipynb",
         "09_models_and_humans.ipynb", "11_reproduction_report.ipynb")
RUNS = ("table1", "table2")
COUNT = re.compile(r"\b(\d+)\s+(?:of\s+(?:the\s+)?\d+\s+)?(units?|seeds?|fragments?|models?)\b")


def _execute(page: str, results: Path, out: Path) -> dict:
    env = {**os.environ, "LSTPE_RESULTS": str(results), TEXT_ONLY_ENV: "1"}  # text is read
    subprocess.run([sys.executable, "-m", "papermill", str(ROOT / "book" / page), str(out),
                    "--cwd", str(ROOT / "book"), "-k", "python3", "--no-progress-bar"],
                   check=True, env=env, capture_output=True)
    return json.loads(out.read_text())


def _outputs(nb: dict) -> str:
    text = []
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            data = o.get("data", {})
            for key in ("text/markdown", "text/plain"):
                if key in data:
                    text.append("".join(data[key]))
            if "text" in o:
                text.append("".join(o["text"]))
    return "\n".join(text)


def _markdown(nb: dict) -> str:
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


@pytest.fixture(scope="module")
def executed(tmp_path_factory, executed_chapters):
    real = ROOT / "results"
    if not (real / "paper" / "table1").is_dir():
        pytest.skip("no stored units in this checkout")
    base = tmp_path_factory.mktemp("findings")
    fewer = base / "fewer" / "results"
    shutil.copytree(real, fewer, ignore=shutil.ignore_patterns(".campaign", ".work"))
    removed = []
    for run in RUNS:
        for pe_dir in sorted(p for p in (real / "paper" / run).iterdir() if p.is_dir()):
            seeds = [s for s in PAPER_SEEDS if (pe_dir / str(s) / "manifest.json").exists()]
            if len(seeds) < 2:
                continue
            unit = un.Unit(run, pe_dir.name, seeds[-1], 0)
            shutil.rmtree(unit.path(fewer))
            removed.append(unit.key)
    assert {k.split("/")[0] for k in removed} == set(RUNS), removed

    def more(page: str) -> dict:
        copy = executed_copy(executed_chapters, page)
        return json.loads(copy.read_text()) if copy else \
            _execute(page, real, base / f"more_{page}")

    return {page: (_execute(page, fewer, base / f"fewer_{page}"), more(page))
            for page in PAGES}, removed


def test_chapter_11_counts_the_removed_units(executed):
    """Chapter 11's runs line names more trained models of each run with every unit than with
    fewer, one more per removed unit of a PE the run reads (Table 1 reads Table 2's 2d-fixed
    and learn-0.2, which are its units too)."""
    (fewer, more), removed = executed[0]["11_reproduction_report.ipynb"], executed[1]
    for run in RUNS:
        pes = set(run_config(run, "paper").pes)
        n = [int(re.search(rf"{run}: (\d+) trained models", _outputs(nb)).group(1))
             for nb in (fewer, more)]
        assert n[1] - n[0] == len({tuple(k.split("/")[1:]) for k in removed
                                   if k.split("/")[1] in pes}), run


@pytest.mark.parametrize("page", PAGES)
def test_numbers_and_verdicts_change_with_the_units(executed, page):
    fewer, more = executed[0][page]
    a, b = _outputs(fewer), _outputs(more)
    assert a != b
    nums = re.compile(r"\d+\.\d+")
    assert set(nums.findall(a)) != set(nums.findall(b)), "no number changed"


@pytest.mark.parametrize("page", PAGES)
def test_no_markdown_states_a_count_that_changed(executed, page):
    fewer, more = executed[0][page]
    a, b = (set(m.group(0) for m in COUNT.finditer(_outputs(nb))) for nb in (fewer, more))
    changed = a ^ b
    md = _markdown(fewer) + "\n" + _markdown(more)
    # a count as a whole number: "5 seeds" is not stated by "15 seeds"
    stated = sorted(c for c in changed if re.search(rf"(?<![\d.]){re.escape(c)}", md))
    assert not stated, f"{page}: hand-written Markdown states counts that changed: {stated}"
