"""The paper's claims scored on the stored units, as the intro and the report both show them.

:func:`claims_card` measures once what the claims read (:class:`lstpe.claims.Inputs`) from a
page's runs and the results folder and asks :mod:`lstpe.claims` for the verdicts;
:func:`claims_markdown` is the table (one line per claim: verdict, evidence, chapter) that
both pages display. Nothing here decides a verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lstpe import claims as C
from lstpe.analysis import attention, humans, pe_structure, procrustes
from lstpe.analysis.claim_tables import noise_loss_per_model
from lstpe.chapters.long_mechanism import (
    LongMechanism,
    long_mechanism,
    table1_long,
    weight_decay_witness,
)
from lstpe.experiments import campaign_status as cs
from lstpe.store.results import Run

OPTIMIZER_RUNS: tuple[str, ...] = ("table4/adam", "table4/sgd", "tables56")
"""The registry runs of Tables 4-6, whose stored units the optimizer claim counts."""


@dataclass
class Claims:
    """What the scorecard rests on, for a page's own sentences and tables."""

    card: pd.DataFrame        # one row per claim: lstpe.claims.SCORECARD_COLUMNS
    verdicts: list[C.Verdict]  # each claim's verdict with its tests and numbers
    inputs: C.Inputs          # what the claims read
    stored: pd.DataFrame      # campaign_status.stored_units
    long: pd.DataFrame        # campaign_status.long_table
    mechanism_long: LongMechanism  # the mechanism's long units at epochs 0, 200 and their last

    @property
    def final(self) -> pd.DataFrame:
        """One row per stored model of Tables 1-2 (``pe, seed, accuracy, epoch``)."""
        return self.inputs.final

    @property
    def structure(self) -> pd.DataFrame:
        """:func:`lstpe.analysis.pe_structure.stored_structure` of the Table 2 run."""
        return self.inputs.structure

    @property
    def similarity(self) -> pd.DataFrame:
        """Per-puzzle similarity to people, one row per PE of both runs."""
        return self.inputs.similarity

    @property
    def mechanism_epoch(self) -> int:
        """The epoch all the mechanism's long units have published (0: none)."""
        return self.inputs.mechanism_epoch


def runs_human_similarity(runs: Iterable[Run]) -> pd.DataFrame:
    """:func:`lstpe.analysis.humans.human_similarity` of every PE of ``runs``, one row per PE:
    a PE two runs share (Table 1 reads Table 2's ``2d-fixed`` and ``learn-0.2``) counts once,
    from the first run that has it."""
    sims = [humans.human_similarity(r.artifacts) for r in runs]
    return pd.concat(sims).drop_duplicates("pe").reset_index(drop=True)


def _learn(t: pd.DataFrame) -> pd.DataFrame:
    return t[t["pe_name"] == "learn"].reset_index(drop=True)


def claims_card(runs: Mapping[str, Run], results_dir: str | Path | None = None) -> Claims:
    """The paper's claims scored on ``runs`` (``{"table1": ..., "table2": ...}`` and, where
    the page loads it, ``"table4/adam"``, as ``S.get_run`` returns them) and on what
    ``results_dir`` stores (long units, Tables 4-6)."""
    t1, t2 = runs["table1"], runs["table2"]
    final = pd.concat([t1.final("val_dropout"), t2.final("val_dropout")]).drop_duplicates(
        ["pe", "seed"])
    stored, long = cs.stored_units(results_dir), cs.long_table(results_dir)
    lm = long_mechanism(results_dir, reference=t2, every=False)
    x = C.Inputs(final=final, structure=pe_structure.stored_structure([t2]),
                 similarity=runs_human_similarity([t2, t1]), mechanism_epoch=lm.reached,
                 mechanism_long=lm.summary,
                 paper_scale=all(runs[n].manifest.get("kind") == "campaign-merge"
                                 for n in ("table1", "table2")))
    if x.paper_scale:  # what only the claims read: a preview tests none of them
        _measure_claims(x, t1, t2, runs.get("table4/adam"), stored, results_dir)
    verdicts = C.judge_all(x)
    return Claims(C.scorecard(verdicts), verdicts, x, stored, long, lm)


def _measure_claims(x: C.Inputs, t1: Run, t2: Run, adam: Run | None, stored: pd.DataFrame,
                    results_dir: str | Path | None) -> None:
    """Fill the fields of ``x`` that only the claims read (Table 3, Procrustes, noise, the
    long units of Table 1 and of weight decay, Tables 4-6)."""
    learn = t2.final("val").query("pe_name == 'learn'")["pe"].unique()
    x.table3_init, x.table3 = (attention.table3(t2.artifacts, stage=s, pes=learn)
                               for s in ("init", "final"))
    if t2.final("val").query("pe == '2d-fixed'")["seed"].nunique() >= 2:
        x.table3_init_other = attention.table3(t2.artifacts, stage="init", pes=learn,
                                               pairing="other-seed")
    x.procrustes, x.procrustes_init = (
        _learn(attention.average_layers(procrustes.pe_alignment(t2.artifacts, stage=s)))
        for s in ("final", "init"))
    noise = [r.tables["noise"] for r in (t1, t2) if "noise" in r.tables]
    x.noise = noise_loss_per_model(pd.concat(noise)) if noise else None
    x.table1_long, x.witness = table1_long(results_dir), weight_decay_witness(results_dir)
    if adam is not None and adam.manifest.get("kind") == "campaign-merge":
        x.adam4 = adam.final("val_dropout")
    x.optimizer_units = {r: int(stored["unit"].str.startswith(r + "/").sum()) if len(stored)
                         else 0 for r in OPTIMIZER_RUNS}


def claims_markdown(card: pd.DataFrame) -> str:
    """``card`` (:func:`lstpe.claims.scorecard`) as a Markdown table: claim, verdict in bold
    (with its epoch and the part that holds), evidence, a link to the chapter that shows
    it."""
    rows = [f"| {r.claim} | **{r.label}** | {r.evidence} | "
            f"[chapter {int(r.where[:2])}]({r.where}) |" for r in card.itertuples()]
    return ("| the paper's claim | verdict | evidence | where |\n| --- | --- | --- | --- |\n"
            + "\n".join(rows))
