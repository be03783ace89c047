"""What the chapters call, kept out of their cells (``from lstpe import chapters as ch``).

One module per job; each module's docstring says what its functions do:

* :mod:`lstpe.chapters.notebook`: a chapter's setup (``S = nb.setup(...)``, ``S.get_run``) and
  ``save_tables`` for ``lstpe batch``;
* :mod:`lstpe.chapters.text`: the setup line, the page's provenance, wrapped printing -- the
  only functions here that write words about runs;
* :mod:`lstpe.chapters.findings`: numbers formatted for a page's hand-written finding, and
  evidence tables (:mod:`lstpe.evidence.tables`) in the columns a page shows;
* :mod:`lstpe.chapters.claims`: the paper's claims scored on the stored units, which the
  intro and the report both show;
* :mod:`lstpe.chapters.long_mechanism`: the mechanism's long units, measured for chapter 7
  and stated in a line in chapter 6 and the scorecard;
* :mod:`lstpe.chapters.tables`, :mod:`lstpe.chapters.baselines`: tables of one run, and a
  measure at initialisation beside its value after training;
* :mod:`lstpe.chapters.explore`: chapter 6's explorer (a live widget in Jupyter, pre-rendered
  views on the page);
* :mod:`lstpe.chapters.batch`, :mod:`lstpe.chapters.values`: ``lstpe batch``.

Statistics live in :mod:`lstpe.stats` and :mod:`lstpe.evidence`; this package formats.
"""

from __future__ import annotations

from lstpe.chapters.baselines import accuracy_correlations, init_vs_final
from lstpe.chapters.explore import sigma_explorer, sigma_grid
from lstpe.chapters.tables import (
    SPLIT_LABELS,
    compact,
    compare_splits,
    complexity_table,
    human_table,
)
from lstpe.chapters.text import (
    N_PAPER_SEEDS,
    PAPER_EPOCHS,
    PRINT_WIDTH,
    describe_page,
    describe_setup,
    run_facts,
    say,
    show_runs,
)
from lstpe.evidence.verdict import AT_CHANCE
from lstpe.rendering.widgets import WithStatic, with_static

__all__ = [
    "PAPER_EPOCHS", "N_PAPER_SEEDS", "PRINT_WIDTH", "say", "describe_page", "describe_setup",
    "run_facts", "show_runs",
    "SPLIT_LABELS", "AT_CHANCE", "compare_splits", "compact", "complexity_table",
    "human_table", "init_vs_final", "accuracy_correlations",
    "WithStatic", "with_static", "sigma_explorer", "sigma_grid",
]
