"""The paper's claims scored on the stored units, as the intro and the report both show them.

:func:`claims_card` gathers once what :func:`lstpe.analysis.scorecard.scorecard` needs from a
page's Table 1 and Table 2 runs and the results folder; :func:`claims_markdown` is the table
(one line per claim: verdict, evidence, chapter) that both pages display.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lstpe.analysis import humans, pe_structure
from lstpe.analysis import scorecard as sc
from lstpe.chapters.long_mechanism import LongMechanism, long_mechanism, weight_decay_witness
from lstpe.experiments import campaign_status as cs
from lstpe.store.results import Run

OPTIMIZER_RUNS: tuple[str, ...] = ("table4/adam", "table4/sgd", "tables56")
"""The registry runs of Tables 4-6, whose stored units the optimizer claim counts."""


@dataclass
class Claims:
    """What the scorecard rests on, for a page's own sentences and tables."""

    card: pd.DataFrame        # one row per claim: claim, verdict, evidence, where
    final: pd.DataFrame       # one row per stored model of Tables 1-2 (pe, seed, accuracy...)
    structure: pd.DataFrame   # pe_structure.stored_structure of the Table 2 run
    similarity: pd.DataFrame  # per-puzzle similarity to people, one row per PE of both runs
    stored: pd.DataFrame      # campaign_status.stored_units
    long: pd.DataFrame        # campaign_status.long_table
    mechanism_epoch: int      # the epoch all the mechanism's long units have published
    mechanism_long: LongMechanism  # those long units at epochs 0, 200 and their last


def runs_human_similarity(runs: Iterable[Run]) -> pd.DataFrame:
    """:func:`lstpe.analysis.humans.human_similarity` of every PE of ``runs``, one row per PE:
    a PE two runs share (Table 1 reads Table 2's ``2d-fixed`` and ``learn-0.2``) counts once,
    from the first run that has it."""
    sims = [humans.human_similarity(r.artifacts) for r in runs]
    return pd.concat(sims).drop_duplicates("pe").reset_index(drop=True)


def claims_card(runs: Mapping[str, Run], results_dir: str | Path | None = None) -> Claims:
    """The paper's claims scored on ``runs`` (``{"table1": ..., "table2": ...}``, as
    ``S.get_run`` returns them) and on what ``results_dir`` stores (long units, Tables 4-6)."""
    final = pd.concat([r.final("val_dropout") for r in runs.values()]).drop_duplicates(
        ["pe", "seed"])
    structure = pe_structure.stored_structure([runs["table2"]])
    similarity = runs_human_similarity([runs["table2"], runs["table1"]])
    stored, long = cs.stored_units(results_dir), cs.long_table(results_dir)
    optim = {r: int(stored["unit"].str.startswith(r + "/").sum()) if len(stored) else 0
             for r in OPTIMIZER_RUNS}
    lm = long_mechanism(results_dir, reference=runs["table2"], every=False)
    mech = lm.reached  # the epoch every mechanism long unit has published
    paper_scale = all(r.manifest.get("kind") == "campaign-merge" for r in runs.values())
    card = sc.scorecard(final, structure, similarity, long_epoch=mech, optimizer_units=optim,
                        paper_scale=paper_scale, long=lm.summary,
                        witness=weight_decay_witness(results_dir))
    return Claims(card, final, structure, similarity, stored, long, mech, lm)


def claims_markdown(card: pd.DataFrame) -> str:
    """``card`` (:func:`lstpe.analysis.scorecard.scorecard`) as a Markdown table: claim,
    verdict in bold, evidence, a link to the chapter that shows it."""
    rows = [f"| {r.claim} | **{r.verdict}** | {r.evidence} | "
            f"[chapter {int(r.where[:2])}]({r.where}) |" for r in card.itertuples()]
    return ("| the paper's claim | verdict | evidence | where |\n| --- | --- | --- | --- |\n"
            + "\n".join(rows))
