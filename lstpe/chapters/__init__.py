"""What the chapters print and tabulate, kept out of their cells.

The book's chapters (5-11) call these as ``ch.<name>`` (``from lstpe import chapters as ch``) so
that a cell stays a few lines long and every chapter words its results the same way. This
package face gathers the names of five modules, one job each:

* :mod:`lstpe.chapters.text` -- printing and caveats: when a run can (not) test the paper:

  * :func:`chance_test`, :func:`caveats`, :func:`warn`: say next to the numbers when a run
    cannot test the paper -- ``preview`` scale, fewer seeds than an interval needs, fewer
    epochs than the paper, or accuracies within noise of chance (0.25);
  * :func:`say`, :func:`source_note`, :func:`show_run`: wrapped printing, and where a run's
    numbers come from and what that source can show;
  * :func:`run_facts`, :func:`show_runs`: the facts about a page's runs said once for all of
    them (chapters 5-11, whose one admonition says what the runs can and cannot show);
  * :func:`describe_setup`: the chapter's setup line without local paths.

* :mod:`lstpe.chapters.tables` -- tables and sentences about one run:

  * :func:`compare_splits`, :func:`compact`, :func:`summary`: a paper table lined up against
    ours, like for like (the paper's validation accuracy against ours evaluated as the authors
    did, its training accuracy against our running training accuracy), with the other
    evaluation beside it and the columns formatted so that the table fits the page;
  * :func:`complexity_table`, :func:`complexity_sentence`: accuracy per relational complexity,
    and a sentence that says what this table shows (not what people do);
  * :func:`pe_kernel`, :func:`pe_kernels`: the position x position cosine of learned PEs;
  * :func:`noise_loss`, :func:`noise_sentence`: accuracy per noise level and the accuracy
    lost to the largest one; what that shows in the paper's measure;
  * :func:`human_table`, :func:`constant_cosine`, :func:`human_summary`: the
    models-and-humans table in a few columns, the cosine any constant model reaches, the
    chapter's "this run" line;
  * :func:`run_summary`: the "this run" line of a chapter's takeaways.

* :mod:`lstpe.chapters.baselines` -- our numbers beside their baselines:

  * :func:`like_for_like`, :func:`like_summary`: our units beside the authors' logs at epoch
    200 and the paper, as a table and a paragraph;
  * :func:`init_vs_final`, :func:`init_final_sentence`: a measure at initialisation, after
    training and the change, per sigma;
  * :func:`accuracy_correlations`: each measure's rank correlation with accuracy across sigma,
    after training and at initialisation;
  * :func:`rising_sentence`: which PEs were still climbing when their run stopped;
  * :func:`paper_gap_sentence`: ours minus the paper over the rows above chance.

* :mod:`lstpe.chapters.report` -- the reproduction report (chapter 11):

  * :func:`outside_paper_interval`, :func:`explain_rows`: which rows of the report fall
    outside the paper's 95% interval, and the reason the evidence gives for each;
  * :func:`paper_report`, :func:`verdict_table`, :func:`both_evaluations`,
    :func:`outside_rows`, :func:`report_summary`: every paper table against our runs like for
    like, the verdict counts per table, both evaluations of the PEs with dropout, the rows
    outside the paper's interval grouped by reason, and the verdict in words;
  * :func:`paper_cells`: every cell of the paper's Tables 1-6 in one table -- our seeds and
    mean, the authors' logs at epoch 200, the paper's value, a verdict or why there is none.

* :mod:`lstpe.chapters.explore` -- explorers for a live kernel with a static twin for the page:

  * :func:`with_static`, :class:`WithStatic`: one displayed object holding an ipywidgets view
    and a PNG of the same content (``_config.yml`` ranks the PNG first on the html page);
  * :func:`sigma_explorer`, :func:`sigma_grid`: chapter 6's pick-a-sigma-and-seed explorer (PE
    kernel and validation curve beside the authors' logs) and its grid over every stored sigma.

Accuracy columns are the history's (:data:`lstpe.store.results.HISTORY_COLUMNS`); comparisons are
:func:`lstpe.analysis.paper_compare.compare_to_paper` tables.

Imports go one way: ``text`` <- ``tables`` <- ``report`` <- this face, and ``tables`` <-
``baselines`` / ``explore`` <- this face (``notebook`` and ``batch`` stand beside them). A test
that patches a helper patches it where it is used (e.g. ``lstpe.chapters.text.caveats``), not here.
"""

from __future__ import annotations

from lstpe.analysis.widgets import WithStatic, with_static
from lstpe.chapters.baselines import (
    accuracy_correlations,
    init_final_sentence,
    init_vs_final,
    like_for_like,
    like_summary,
    paper_gap_sentence,
    rising_sentence,
)
from lstpe.chapters.explore import sigma_explorer, sigma_grid
from lstpe.chapters.report import (
    PAPER_ROUNDING,
    REPORT_ROWS,
    both_evaluations,
    explain_rows,
    outside_paper_interval,
    outside_rows,
    paper_cells,
    paper_report,
    report_summary,
    verdict_table,
)
from lstpe.chapters.tables import (
    AT_CHANCE,
    SHORT_VERDICT,
    SPLIT_LABELS,
    compact,
    compare_splits,
    complexity_sentence,
    complexity_table,
    constant_cosine,
    human_summary,
    human_table,
    noise_loss,
    noise_sentence,
    pe_kernel,
    pe_kernels,
    run_summary,
    summary,
)
from lstpe.chapters.text import (
    CHANCE,
    N_PAPER_SEEDS,
    N_VAL_PUZZLES,
    PAPER_EPOCHS,
    PRINT_WIDTH,
    caveats,
    chance_pes,
    chance_test,
    comparable,
    describe_setup,
    run_facts,
    say,
    show_run,
    show_runs,
    source_note,
    warn,
    why_no_correlation,
)

__all__ = [
    # lstpe.chapters.text
    "CHANCE", "N_VAL_PUZZLES", "PAPER_EPOCHS", "N_PAPER_SEEDS", "PRINT_WIDTH", "chance_test",
    "chance_pes", "caveats", "comparable", "say", "source_note", "show_run", "warn",
    "why_no_correlation", "describe_setup", "run_facts", "show_runs",
    # lstpe.chapters.tables
    "SPLIT_LABELS", "SHORT_VERDICT", "AT_CHANCE", "compare_splits", "compact", "summary",
    "complexity_table", "complexity_sentence", "pe_kernel", "pe_kernels", "noise_loss",
    "noise_sentence", "human_table", "constant_cosine", "human_summary", "run_summary",
    "like_for_like", "like_summary", "init_vs_final", "init_final_sentence",
    "accuracy_correlations", "rising_sentence", "paper_gap_sentence",
    # lstpe.chapters.report
    "PAPER_ROUNDING", "REPORT_ROWS", "outside_paper_interval", "explain_rows", "paper_report",
    "verdict_table", "both_evaluations", "outside_rows", "report_summary", "paper_cells",
    # lstpe.chapters.explore
    "WithStatic", "with_static", "sigma_explorer", "sigma_grid",
]
