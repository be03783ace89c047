"""The book's findings follow the stored units: with more units the numbers and verdicts on the
pages change, while no hand-written Markdown states a count that changed (issue 35).

Fake units are real fragments relabelled with another seed: in a scratch copy of ``results/``
(named by ``LSTPE_RESULTS``), every PE of ``table1`` and ``table2`` with two or more stored seeds
loses the fragment of its last seed ("fewer"); a second copy ("more") puts in that place a copy
of the PE's first seed relabelled with the removed seed (every file re-sealed, so the chapters
load and verify it as they would a trained unit). The slot is one the campaign plans, so the
test holds whatever the campaign has stored. The intro and every results chapter that reads the
campaign's units (5-9 and 11; chapter 10 reads the brain run, which the campaign does not train)
are executed on both folders; their outputs must differ, and every "<count> units/seeds/
fragments" phrase that differs between the two must be absent from the notebooks' Markdown.
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

from lstpe.experiments import campaign as cp
from lstpe.experiments.registry import run_config
from lstpe.store import results as res

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("intro.ipynb", "05_training.ipynb", "06_sigma_sweep.ipynb",
         "07_inside_the_models.ipynb", "08_robustness.ipynb", "09_models_and_humans.ipynb",
         "11_reproduction_report.ipynb")
RUNS = ("table1", "table2")
COUNT = re.compile(r"\b(\d+)\s+(?:of\s+(?:the\s+)?\d+\s+)?(units?|seeds?|fragments?|models?)\b")


def relabel(src: cp.Unit, dest: cp.Unit, results: Path) -> None:
    """Copy ``src``'s fragment under ``results`` as the unit ``dest`` (same PE, another seed),
    re-sealed."""
    run = res.load(src.path(results))
    man = dict(run.manifest)
    man["config"] = {**man["config"], "seeds": [dest.seed]}
    man["campaign"] = {**man.get("campaign", {}), "unit": dest.key}
    hist = run.history.assign(seed=dest.seed)
    arts = {**run.artifacts, "seeds": [dest.seed]}
    tables = {k: (t.assign(seed=dest.seed) if "seed" in t else t)
              for k, t in (run.tables or {}).items()}
    for k in ("files", "manifest_sha256"):
        man.pop(k, None)
    res.save_run(dest.path(results), hist, man, arts, tables)


def _execute(page: str, results: Path, out: Path) -> dict:
    env = {**os.environ, "LSTPE_RESULTS": str(results)}
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
def executed(tmp_path_factory):
    real = ROOT / "results"
    if not (real / "paper" / "table1").is_dir():
        pytest.skip("no stored units in this checkout")
    base = tmp_path_factory.mktemp("findings")
    fewer, more = base / "fewer" / "results", base / "more" / "results"
    for d in (fewer, more):
        shutil.copytree(real, d, ignore=shutil.ignore_patterns(".campaign", ".work"))
    added = []
    for run in RUNS:
        for pe_dir in sorted(p for p in (real / "paper" / run).iterdir() if p.is_dir()):
            seeds = [s for s in cp.PAPER_SEEDS if (pe_dir / str(s) / "manifest.json").exists()]
            if len(seeds) < 2:
                continue
            unit = cp.Unit(run, pe_dir.name, seeds[-1], 0)
            for d in (fewer, more):
                shutil.rmtree(unit.path(d))
            relabel(cp.Unit(run, pe_dir.name, seeds[0], 0), unit, more)
            added.append(unit.key)
    assert {k.split("/")[0] for k in added} == set(RUNS), added
    return {page: (_execute(page, fewer, base / f"fewer_{page}"),
                   _execute(page, more, base / f"more_{page}")) for page in PAGES}, added


def test_the_fake_units_verify_like_trained_ones(executed):
    """Chapter 11 read them: its runs line names more fragments of each run than with fewer
    units, one more per added unit of a PE the run reads (Table 1 reads Table 2's 2d-fixed and
    learn-0.2, which are its units too)."""
    (fewer, more), added = executed[0]["11_reproduction_report.ipynb"], executed[1]
    for run in RUNS:
        pes = set(run_config(run, "paper").pes)
        n = [int(re.search(rf"{run}: (\d+) fragments", _outputs(nb)).group(1))
             for nb in (fewer, more)]
        assert n[1] - n[0] == len({tuple(k.split("/")[1:]) for k in added
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
