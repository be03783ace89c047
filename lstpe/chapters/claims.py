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
from lstpe import lst
from lstpe.analysis import attention, humans, pe_structure, procrustes
from lstpe.chapters import facts
from lstpe.chapters import findings as fd
from lstpe.chapters.long_mechanism import (
    LongMechanism,
    long_line,
    long_mechanism,
    table1_long,
    weight_decay_witness,
)
from lstpe.evidence.claim_tables import model_human_agreement, noise_loss_per_model
from lstpe.experiments.fragments import stored_units
from lstpe.store.results import Run
from lstpe.training.config import PAPER_SIGMAS

OPTIMIZER_RUNS: tuple[str, ...] = ("table4/adam", "table4/sgd", "tables56")
"""The registry runs of Tables 4-6, whose stored units the optimizer claim counts."""


@dataclass
class Claims:
    """What the scorecard rests on, for a page's own sentences and tables."""

    card: pd.DataFrame        # one row per claim: lstpe.claims.SCORECARD_COLUMNS
    verdicts: list[C.Verdict]  # each claim's verdict with its tests and numbers
    inputs: C.Inputs          # what the claims read
    stored: pd.DataFrame      # lstpe.experiments.fragments.stored_units
    mechanism_long: LongMechanism  # the mechanism's long units at epochs 0, 200 and their last

    @property
    def checks(self) -> pd.DataFrame:
        """The paper's own analysis, one row per sentence tested
        (:func:`lstpe.claims.paper_checks`)."""
        return C.paper_checks(self.verdicts)

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


def noise_levels(noise: pd.DataFrame) -> pd.DataFrame:
    """Accuracy under each noise std, one row per (model, std), all puzzles (``pe, seed,
    noise, accuracy``), from the runs' noise tables; a model two runs share counts once."""
    r = noise[noise["condition"].astype(str) == "all"]
    return r.drop_duplicates(["noise", "pe", "seed"])[["pe", "seed", "noise", "accuracy"]] \
        .reset_index(drop=True)


def _learn(t: pd.DataFrame) -> pd.DataFrame:
    return t[t["pe_name"] == "learn"].reset_index(drop=True)


def claims_card(runs: Mapping[str, Run], results_dir: str | Path | None = None) -> Claims:
    """The paper's claims scored on ``runs`` (``{"table1": ..., "table2": ...}`` and, where
    the page loads it, ``"table4/adam"``, as ``S.get_run`` returns them) and on what
    ``results_dir`` stores (long units, Tables 4-6)."""
    t1, t2 = runs["table1"], runs["table2"]
    final = pd.concat([t1.final("val_dropout"), t2.final("val_dropout")]).drop_duplicates(
        ["pe", "seed"])
    stored = stored_units(results_dir)
    lm = long_mechanism(results_dir, reference=t2, every=False)
    x = C.Inputs(final=final, structure=pe_structure.stored_structure([t2]),
                 similarity=runs_human_similarity([t2, t1]), mechanism_epoch=lm.reached,
                 mechanism_long=lm.summary,
                 paper_scale=all(runs[n].manifest.get("kind") == "campaign-merge"
                                 for n in ("table1", "table2")))
    if x.paper_scale:  # what only the claims read: a preview tests none of them
        _measure_claims(x, t1, t2, runs.get("table4/adam"), stored, results_dir)
    verdicts = C.judge_all(x)
    return Claims(C.scorecard(verdicts), verdicts, x, stored, lm)


def _measure_claims(x: C.Inputs, t1: Run, t2: Run, adam: Run | None, stored: pd.DataFrame,
                    results_dir: str | Path | None) -> None:
    """Fill the fields of ``x`` that only the claims read (Table 3, Fig. A8, Procrustes, noise,
    each model against people, the long units of Table 1 and of weight decay, Tables 4-6)."""
    learn = t2.final("val").query("pe_name == 'learn'")["pe"].unique()
    x.table3_init, x.table3 = (attention.table3(t2.artifacts, stage=s, pes=learn)
                               for s in ("init", "final"))
    x.table1_attention = attention.table3_stages(t1.artifacts, mean_too=True)  # Fig. A8C,D
    x.table3_init_other = attention.other_seed_baseline(t2.artifacts, pes=learn)
    x.procrustes, x.procrustes_init = (
        _learn(attention.average_layers(procrustes.pe_alignment(t2.artifacts, stage=s)))
        for s in ("final", "init"))
    noise = [r.tables["noise"] for r in (t1, t2) if "noise" in r.tables]
    x.noise = noise_loss_per_model(pd.concat(noise)) if noise else None
    x.noise_levels = noise_levels(pd.concat(noise)) if noise else None
    correct = pd.concat([humans.model_correct(r.artifacts) for r in (t1, t2)])
    x.agreement = model_human_agreement(correct.drop_duplicates(["pe", "seed", "id"]),
                                        lst.human_accuracy())
    x.table1_long, x.witness = table1_long(results_dir), weight_decay_witness(results_dir)
    if adam is not None and adam.manifest.get("kind") == "campaign-merge":
        x.adam4 = adam.final("val_dropout")
    x.optimizer_units = {r: int(stored["unit"].str.startswith(r + "/").sum()) if len(stored)
                         else 0 for r in OPTIMIZER_RUNS}


def claims_markdown(card: pd.DataFrame, evidence: bool = True) -> str:
    """``card`` (:func:`lstpe.claims.scorecard`) as a Markdown table: claim, verdict in bold
    (with its epoch and the part that holds), evidence (left out with ``evidence=False``, for
    a page that folds it), a link to the chapter that shows it."""
    rows = [f"| {r.claim} | **{r.label}** | " + (f"{r.evidence} | " if evidence else "")
            + f"[chapter {r.where.split('_', 1)[0].lstrip('0')}]({r.where}) |"  # 07b_x: 7b
            for r in card.itertuples()]
    head = ("| the paper's claim | verdict | evidence | where |\n| --- | --- | --- | --- |\n"
            if evidence else "| the paper's claim | verdict | where |\n| --- | --- | --- |\n")
    return head + "\n".join(rows)


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _chapter(where: str) -> str:
    """``[chapter 7b](07b_alignment.ipynb)``."""
    return f"[chapter {where.split('_', 1)[0].lstrip('0')}]({where})"


def checks_markdown(checks: pd.DataFrame, chapter: bool = True, ours: bool = False) -> str:
    """The paper's own analysis (:func:`lstpe.claims.paper_checks`) as a Markdown table, one
    row per sentence: the sentence verbatim in quotation marks with its version and place,
    the paper's number, ours, the result and explanation words in bold and, with
    ``chapter``, the chapter that shows it; ``ours`` adds our analyses' verdict (labelled
    as ours)."""
    head = ["the paper's sentence", "the paper", "ours", "result", "explanation"]
    head += ["our analyses (ours)"] * ours + ["where"] * chapter
    rows = []
    for r in checks.itertuples():
        cells = [f"“{_cell(r.sentence)}” ({r.version}, {_cell(r.where_in_paper)})",
                 _cell(r.paper) or "–", _cell(r.ours), f"**{r.result}**",
                 f"**{_cell(r.explanation)}**"]
        cells += [_cell(r.our_analyses)] * ours + [_chapter(r.where)] * chapter
        rows.append("| " + " | ".join(cells) + " |")
    return ("| " + " | ".join(head) + " |\n|" + " --- |" * len(head) + "\n"
            + "\n".join(rows))


def page_checks(*verdicts: C.Verdict) -> str:
    """A results page's table of the paper's sentences its claims test, from the page's own
    ``verdicts`` (:func:`checks_markdown` without the chapter column, our analyses' verdict
    beside, labelled as ours)."""
    return checks_markdown(C.paper_checks(list(verdicts)), chapter=False, ours=True)


def results_phrase(verdict: C.Verdict) -> str:
    """The result word of each sentence ``verdict`` tests the paper's way, in one phrase a
    page's opening holds: ``small σ the most robust (v2): **reproduced**; ...``."""
    return "; ".join(f"{c.what or c.quote.where} ({c.quote.version}): **{c.result}**"
                     for c in verdict.checks) or "no sentence tested"


CLAIM_NAMES: dict[str, str] = {
    "table1": "Table 1's ranking", "sigma": "the σ sweep", "attention": "attention similarity",
    "procrustes": "the Procrustes distance", "structure": "the 2-D structure",
    "noise": "noise robustness", "humans": "models against people", "sgd": "SGD against Adam",
    "weight_decay": "weight decay", "brain": "the brain experiment"}
"""Each claim in the reader's words, as the openings name them."""


def opening_facts(cl: Claims) -> dict[str, str]:
    """What the intro's and chapter 11's openings glue in, every result named, the negative
    ones included: ``at`` (the models' epoch), ``n`` (sentences tested), per result word the
    count (``n_rep``, ``n_dir``, ``n_not``, ``n_open``) and what has it (``rep``, ``dir``,
    ``not``, ``open``: the claims' names for the sentences that reproduce; for the others,
    each sentence's point in a few words), and ``at_init``: the claims whose explanation
    is not supported because the ordering is already present at initialisation, and
    ``against`` (a sentence, or empty): those of them whose reason names our own measure
    against that reading."""
    t = cl.checks
    out = {"at": str(cl.inputs.epoch), "n": str(len(t))}
    for key, word in (("rep", "reproduced"), ("dir", "same direction, smaller"),
                      ("not", "not reproduced"), ("open", "not testable yet")):
        rows = t[t["result"] == word]
        out[f"n_{key}"] = str(len(rows))
        names = [w if key != "rep" and w else CLAIM_NAMES.get(i, i)
                 for i, w in zip(rows["id"], rows["what"], strict=True)]
        out[key] = ", ".join(dict.fromkeys(names)) or "none"
    init = t[t["explanation"].str.contains(C.verdicts.AT_INIT, regex=False)]
    out["at_init"] = ", ".join(CLAIM_NAMES.get(i, i) for i in dict.fromkeys(init["id"])) or "none"
    weighed = init[init["explanation"].str.contains("against this reading", regex=False)]
    out["against"] = (" Yet for " + ", ".join(CLAIM_NAMES.get(i, i) for i in
                                             dict.fromkeys(weighed["id"]))
                      + ", our own measure finds that what training adds to a small-σ PE is 2-D, "
                      "which the paper's distance does not register (chapter 7)." if len(weighed)
                      else "")
    return out


def report_facts(cl: Claims) -> dict[str, str] | None:
    """The numbers chapter 11's opening paragraph glues in (``cl`` from :func:`claims_card`);
    None when the runs test no claim (previews). Keys: ``at`` (the units' epoch); learn-0.2
    against learn-2 (``pair_ci``, ``pair_p``) and against sigma 1 (``one_ci``, ``one_p``);
    the sigma curve's shape (``plateau_to``, ``drop``, ``drop_from``, ``drop_to``); Table 1
    (``n_above`` of ``n_common`` fixed PEs, ``open`` the rest, ``gt_abs`` / ``gt_side`` /
    ``gt_p`` against 2d-fixed); ``noise_label``, ``noise_worst``; ``n_dpe`` of ``n_small``
    small-sigma units whose learned part is grid-shaped and the init's share
    ``init_share`` (its per-sigma medians, lowest to highest); ``long_line``
    (:func:`lstpe.chapters.long_mechanism.long_line`); ``rho``
    (learn-0.2's Spearman with people, the paper's measure) and ``human_r`` (its models' mean
    r, the measure the humans claim tests, or "–"); ``untested`` (the claims not testable
    yet)."""
    v = {x.claim: x for x in cl.verdicts}
    if not cl.inputs.paper_scale or any("rows" not in v[k].numbers for k in ("table1", "sigma")):
        return None
    r1, r2 = (v[k].numbers["rows"].set_index("b") for k in ("table1", "sigma"))
    shape, above = v["sigma"].numbers["shape"], v["table1"].numbers["above"]
    common = [b for b in r1.index if b != "2d-fixed"]
    small = cl.structure.query("block == 0 and sigma <= 0.2")
    card = cl.card
    return {"at": str(v["sigma"].at), **facts.contrast_facts(r2, "learn-2", "pair"),
            **facts.contrast_facts(r2, "learn-1", "one"), **facts.reference_facts(r1),
            "plateau_to": f"{shape['plateau_to']:g}",
            "drop": f"{shape['drop']:.3f}", "drop_from": f"{shape['drop_from']:g}",
            "drop_to": f"{shape['drop_to']:g}", "n_above": str(len(above)),
            "n_common": str(len(common)),
            "open": ", ".join(b for b in common if b not in above) or "none",
            "noise_label": v["noise"].label,
            "noise_worst": str(v["noise"].numbers.get("worst", "–")),
            "n_dpe": str(int((small["p_dpe"] < 0.05).sum())), "n_small": str(len(small)),
            "init_share": _share_range(small),
            "long_line": long_line(cl.mechanism_long),
            "rho": _rho(cl.similarity),
            "human_r": _human_r(v["humans"]),
            "untested": "; ".join(card.loc[card["verdict"] == "not testable yet", "claim"])
            or "none"}


def _share_range(small: pd.DataFrame) -> str:
    """The initial draw's share of the PE as the table beside it reads: the lowest to the
    highest of its per-sigma medians (one value where they round alike)."""
    med = small.groupby("sigma")["init_share"].median()
    return fd.span_text(f"{med.min():.0%}", f"{med.max():.0%}")


def _rho(similarity: pd.DataFrame) -> str:
    """learn-0.2's Spearman with people, or "learn-0.2 not trained yet"."""
    sim = similarity.set_index("pe")
    if "learn-0.2" not in sim.index:
        return f"learn-0.2 {facts.UNTRAINED}"
    return f"{sim.loc['learn-0.2', 'spearman']:.2f}"


def _human_r(v: C.Verdict) -> str:
    """learn-0.2's mean r with people from the humans verdict's cells, or "–"."""
    cells = v.numbers.get("cells")
    if cells is None or "learn-0.2" not in set(cells["cell"]):
        return "–"
    return f"{cells.set_index('cell').loc['learn-0.2', 'mean']:+.3f}"


def stored_sigmas(table2: Run, logged: int = len(PAPER_SIGMAS)) -> dict[str, str]:
    """The learnable sigmas ``table2`` holds: ``n_sigmas`` and ``sigmas`` (ascending),
    ``seeds`` (its units per sigma, as a count or a range), ``rest`` (what adds the sigmas of
    the ``logged`` ones not held: item 7 of the campaign's plan, or nothing when all are
    held) and ``holder`` (who holds them: the campaign's stored units, or a run of another
    scale)."""
    learn = table2.final("val_dropout").query("pe_name == 'learn'")
    per = learn.groupby("sigma").size().sort_index()
    lo, hi = (int(per.min()), int(per.max())) if len(per) else (0, 0)
    return {"n_sigmas": str(len(per)), "sigmas": ", ".join(f"{x:g}" for x in per.index),
            "seeds": f"{lo} seed{'s' * (lo != 1)} each" if lo == hi
            else f"{lo} to {hi} seeds each",
            "rest": "" if len(per) >= logged
            else "; item 7 of the campaign's plan adds the others",
            "holder": "the campaign stores" if table2.scale == "paper"
            else f"this `{table2.scale}` run (no stored unit) trains"}


def counts_facts(card: pd.DataFrame) -> dict[str, str]:
    """The intro's sentence on the scorecard ``card``: ``parts`` (its rows), each verdict's
    count under its own key with spaces as underscores (``shown``, ``partly_shown``, ...),
    and ``is_are`` (the verb for the count of ``shown``)."""
    n = C.verdict_counts(card)
    out = {k.replace(" ", "_"): str(v) for k, v in n.items()}
    return {**out, "parts": str(len(card)), "is_are": "is" if n["shown"] == 1 else "are"}


def rank_facts(table2: Run) -> dict[str, str] | None:
    """The σ curve's rank order against the authors' at the units' epoch
    (:func:`lstpe.references.authors_logs.rank_order`), formatted: ``n``, ``tau``, ``p``,
    ``flipped`` (the pairs of σ ranked the other way, or "none"), ``epoch``, ``range`` (each
    unit against the range all the authors' seeds can span: :func:`fd.range_line`). None when
    ``table2`` is not of the authors' recipe or the authors logged no such epoch."""
    from lstpe.references.authors_logs import authors_range_check, rank_order
    from lstpe.stats.seed_stats import tau_text

    final = table2.final("val_dropout")
    epoch = int(final["epoch"].max()) if len(final) else 0
    if table2.scale != "paper" or epoch % 200 or not 0 < epoch <= 4000:
        return None
    r = rank_order(final, epoch)
    tau = tau_text(r["tau"], r["n"]) if r["n"] >= 3 else "no τ (fewer than 3 σ)"
    return {"n": str(r["n"]), "tau": tau, "p": fd.pval(r["p"]),
            "flipped": ", ".join(r["flipped"]) or "none", "epoch": str(epoch),
            "range": fd.range_line(authors_range_check(final))}
