"""The reproduction report (chapter 11): every table of the paper against our runs.

* :data:`REPORT_ROWS`: what the report compares (run, paper table, metric, splits, PE family,
  setting);
* :data:`PAPER_ROUNDING`, :func:`outside_paper_interval`: which rows fall outside the paper's
  95% interval (its tables are rounded to three decimals);
* :func:`explain_rows`: the reason the evidence gives for each row;
* :func:`paper_report`: every paper table against our runs like for like, with the reasons;
* :func:`verdict_table`, :func:`both_evaluations`, :func:`outside_rows`,
  :func:`report_summary`: the verdict counts per table, both evaluations of the PEs with
  dropout, the rows outside the paper's interval grouped by reason, and the verdict in words;
* :func:`paper_cells`: every cell of the paper's Tables 1-6 in one compact table -- our seeds
  and mean, the authors' logs at epoch 200, the paper's value, and a verdict or the reason
  there is none.

Part of :mod:`lstpe.chapters`; imports from :mod:`lstpe.chapters.text` and
:mod:`lstpe.chapters.tables` only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from lstpe.chapters.tables import AT_CHANCE, SHORT_VERDICT, _pm, compare_splits
from lstpe.chapters.text import (
    N_PAPER_SEEDS,
    PAPER_EPOCHS,
    _cfg,
    _seed_label,
)

__all__ = [
    "PAPER_ROUNDING", "REPORT_ROWS", "outside_paper_interval", "explain_rows", "paper_report",
    "verdict_table", "both_evaluations", "outside_rows", "report_summary", "paper_cells",
    "CELL_METRICS",
]


PAPER_ROUNDING = 0.0005
"""Half a unit of the paper's third decimal: its tables are rounded, so an SD of 0.000 means
less than this, and no interval is narrower than ± this."""


def outside_paper_interval(cmp: pd.DataFrame, level: float = 0.95,
                           n_paper: int = N_PAPER_SEEDS) -> pd.Series:
    """True where our mean lies outside the t interval of the paper's mean (its mean ± t *
    SD / sqrt(15), at least ± :data:`PAPER_ROUNDING`); False where inside; None where we have
    too few seeds to say."""
    t = sps.t.ppf((1 + level) / 2, n_paper - 1)
    half = (t * cmp["paper_sd"] / math.sqrt(n_paper)).clip(lower=PAPER_ROUNDING)
    out = (cmp["mean"] < cmp["paper_mean"] - half) | (cmp["mean"] > cmp["paper_mean"] + half)
    few = cmp["verdict"].astype(str).str.startswith("too few")
    return out.astype(object).mask(few, None)


def explain_rows(report: pd.DataFrame, runs: Mapping[str, Any]) -> pd.Series:
    """The reason the evidence gives for each row of the report, as far as it goes.

    ``report`` holds :func:`lstpe.analysis.paper_compare.compare_to_paper` rows with a ``run``
    column (the key of ``runs``) and ``metric``; rows inside the paper's interval get ``""``.
    Reasons, first match wins: the run is at preview scale; its models are at chance
    (``at_chance``); too few seeds; ``rope`` (the published row cannot come from the
    authors' public module, deviation 6); 2d-fixed or
    1d-fixed validation (evaluation mode and dropout, deviations 2-3; 2d-fixed still rising
    after epoch 200 in the authors' logs); a training-accuracy row of a run shorter than 4000
    epochs; any run shorter than 4000 epochs (its registry reason); otherwise none known.
    """
    inside = outside_paper_interval(report)
    reasons = []
    for r, out in zip(report.itertuples(index=False), inside, strict=True):
        cfg = _cfg(runs.get(r.run))
        epochs = cfg.get("epochs")
        short = epochs is not None and epochs < PAPER_EPOCHS
        if cfg.get("preset") == "preview":
            reasons.append("preview-scale run: cannot test the paper")
        elif bool(getattr(r, "at_chance", False)):
            reasons.append("validation accuracy at chance: not compared with the paper")
        elif out is None:
            reasons.append("too few seeds to compare")
        elif not out:
            reasons.append("")
        elif r.pe == "rope":
            reasons.append("the published rope row cannot come from the authors' public "
                           "module, which mixes puzzles (deviation 6); ours is a correct rope")
        elif r.pe in ("2d-fixed", "1d-fixed") and r.metric == "val_acc":
            why = "dropout and evaluation mode (deviations 2-3; both evaluations shown)"
            if r.pe == "2d-fixed" and short:
                why += (f"; {epochs} epochs: the authors' 2d-fixed still rose after epoch 200 "
                        "(0.938 at 200, 0.969 at 1000, 0.977 at 4000)")
            reasons.append(why)
        elif r.metric == "train_acc" and short:
            reasons.append(f"{epochs} epochs: the authors' running training accuracy reaches 1.0 "
                           "only by epoch 400-1000 for 2d-fixed and sigma >= 1.7")
        elif short:
            from lstpe.experiments.registry import REGISTRY

            spec = REGISTRY.get(r.run)
            reasons.append(f"{epochs} epochs, not 4000" + (f" ({spec.why})" if spec else ""))
        else:
            reasons.append("none known: same setup as the authors' code as far as it is public")
    return pd.Series(reasons, index=report.index, name="why")


REPORT_ROWS: tuple[tuple[str, str, str, tuple[str, ...], str | None, str | None], ...] = (
    ("table1", "1", "val_acc", ("val_dropout", "val"), None, None),
    ("table1", "1", "train_acc", ("train_running", "train"), None, None),
    ("table2", "2", "val_acc", ("val",), "learn", None),
    ("table2", "2", "train_acc", ("train_running", "train"), "learn", None),
    ("table4/adam", "4", "val_acc", ("val",), None, "adam"),
    ("table4/sgd", "4", "val_acc", ("val",), None, "sgd"),
    ("tables56", "5", "val_acc", ("val",), "learn", None),
    ("tables56", "5", "train_acc", ("train_running", "train"), "learn", None),
    ("tables56", "6", "val_acc", ("val_dropout", "val"), None, None),
    ("tables56", "6", "train_acc", ("train_running", "train"), None, None),
)
"""What the report compares: (run, paper table, metric, splits, PE family, setting). The first
split is the like-for-like one (:func:`compare_splits`): validation with dropout on where models
have dropout (the authors' evaluation; the learnable PEs have none, so eval mode is the same),
training accuracy as the running mean in train mode; the others are shown beside it."""


def paper_report(runs: Mapping[str, Any], attention: pd.DataFrame | None = None
                 ) -> pd.DataFrame:
    """Every table of the paper against our runs, like for like, with the reasons.

    Args:
        runs: experiments by registry name (``table1``, ``table2``, ``table4/adam``,
            ``table4/sgd``, ``tables56``); missing names are skipped.
        attention: one row per model of the ``table2`` run with a ``cosine`` column: the
            attention similarity compared with Table 3 (chapter 11 passes the paper variant of
            :func:`lstpe.analysis.attention.table3`); None skips Table 3.
    Returns:
        One row per (table, metric, setting, PE), in :data:`REPORT_ROWS` order (Table 3 after
        Table 2): ``run, table, setting, metric, split, pe, sigma, n, mean, sd, mean_<split>``
        (the other evaluations), ``ci_low, ci_high, paper_mean, paper_sd, diff, p_equiv,
        p_diff, verdict``, ``at_chance``, ``outside`` (:func:`outside_paper_interval`) and
        ``why`` (:func:`explain_rows`). A row is ``at_chance`` when its PE's validation
        accuracy (eval mode; Table 2's for Table 3) is within noise of chance
        (:func:`lstpe.chapters.text.chance_test`): such a row is not compared with the paper
        (verdict ``at chance``, no p values, ``outside`` None).
    """
    from lstpe.analysis import paper_compare

    parts = []
    for run, table, metric, splits, pe_name, setting in REPORT_ROWS:
        if run not in runs:
            continue
        cmp = compare_splits(runs[run], table, splits=splits, metric=metric, pe_name=pe_name,
                             setting=setting)
        parts.append(cmp.assign(run=run, metric=metric))
        if table == "2" and metric == "train_acc" and attention is not None:
            learn = attention[attention["pe_name"] == "learn"]
            t3 = paper_compare.compare_to_paper(learn, 3, metric="attention_cosine", value="cosine")
            parts.append(t3.assign(run="table2", metric="attention_cosine", split="val"))
    rep = pd.concat(parts, ignore_index=True)
    rep["at_chance"] = _chance_rows(rep)
    rep["outside"] = outside_paper_interval(rep).mask(rep["at_chance"], None)
    rep["why"] = explain_rows(rep, runs)
    rep.loc[rep["at_chance"], ["p_equiv", "p_diff"]] = math.nan
    rep.loc[rep["at_chance"], "verdict"] = AT_CHANCE
    first = ["run", "table", "setting", "metric", "split", "pe", "sigma", "n", "mean", "sd"]
    others = [c for c in rep.columns if c.startswith("mean_")]
    rest = [c for c in rep.columns if c not in first + others]
    return rep[first + others + rest]


def _chance_rows(report: pd.DataFrame) -> pd.Series:
    """``at_chance`` of every row: its own (:func:`compare_splits`), or for Table 3 rows
    (which have none) that of the same PE's Table 2 validation row; False where unknown."""
    own = (report["at_chance"] if "at_chance" in report
           else pd.Series(np.nan, index=report.index, dtype=object))
    val = report[report["metric"] == "val_acc"]
    known = {(str(t), str(pe)): bool(c) for t, pe, c in
             zip(val["table"], val["pe"], own[val.index], strict=True)
             if isinstance(c, (bool, np.bool_))}
    return pd.Series([bool(c) if isinstance(c, (bool, np.bool_)) else
                      known.get(("2" if str(t) == "3" else str(t), str(pe)), False)
                      for c, t, pe in zip(own, report["table"], report["pe"], strict=True)],
                     index=report.index, name="at_chance")


def verdict_table(report: pd.DataFrame) -> pd.DataFrame:
    """Per paper table and metric (index like ``T4 val (sgd)``): the number of rows, the mean
    absolute difference from the paper over the rows that can be compared with it, and how
    many rows get each verdict (``at chance`` included) -- eight narrow columns.

    ``mean |diff|`` leaves out rows of preview runs and rows at chance: their difference from
    the paper measures the preview or guessing, not the paper. ``-`` where no row is left.
    """
    from lstpe.analysis import paper_compare

    short = {"val_acc": "val", "train_acc": "train", "attention_cosine": "attention"}
    skip = report["verdict"] == AT_CHANCE
    if "why" in report:
        skip |= report["why"].astype(str).str.startswith("preview")
    rows = []
    for (t, st, m), g in report.groupby(["table", "setting", "metric"], sort=False):
        label = f"T{t} {short.get(m, m)}" + (f" ({st})" if str(t) == "4" else "")
        counts = g["verdict"].value_counts()
        d = g.loc[~skip[g.index], "diff"].abs()
        rows.append({"table": label, "rows": len(g),
                     "mean |diff|": "-" if d.empty else f"{d.mean():.3f}",
                     **{SHORT_VERDICT.get(v, v): int(counts.get(v, 0))
                        for v in (*paper_compare.VERDICTS, AT_CHANCE)}})
    return pd.DataFrame(rows).set_index("table")


def both_evaluations(report: pd.DataFrame) -> pd.DataFrame:
    """The validation rows of the PEs with dropout (2d-fixed, 1d-fixed): our accuracy with
    dropout on (the authors' evaluation) and in eval mode, beside the paper's. Rows at chance
    are left out (the gap between two guesses says nothing about dropout)."""
    r = report[(report["metric"] == "val_acc") & (report["split"] == "val_dropout")
               & report["pe"].isin(["2d-fixed", "1d-fixed"])
               & (report["verdict"] != AT_CHANCE)]
    out = pd.DataFrame({"table": r["table"], "pe": r["pe"], "n": r["n"],
                        "dropout on": r["mean"], "eval mode": r["mean_val"],
                        "eval - dropout": r["mean_val"] - r["mean"],
                        "paper": r["paper_mean"]})
    return out.set_index(["table", "pe"]).round(3)


def _label(r: Any) -> str:
    return f"T{r.table}" + (f" {r.setting}" if str(r.table) == "4" else "") + f" {r.metric}"


def outside_rows(report: pd.DataFrame) -> pd.DataFrame:
    """The rows outside the paper's 95% interval, grouped by the reason the evidence gives:
    ``why``, ``rows`` (how many), ``which`` (table, metric and PEs)."""
    out = report[report["outside"].apply(lambda v: v is True or v is np.True_)]
    rows = []
    for why, g in out.groupby("why", sort=False):
        which: dict[str, list[str]] = {}
        for r in g.itertuples(index=False):
            which.setdefault(_label(r), []).append(str(r.pe))
        rows.append({"why": why, "rows": len(g),
                     "which": "; ".join(f"{k}: {', '.join(v)}" for k, v in which.items())})
    return pd.DataFrame(rows, columns=["why", "rows", "which"])


def _seeds(run: Any) -> str:
    """``5 seeds``, or ``2-3 seeds per PE`` for a campaign run whose PEs differ."""
    n, _, per_pe = _seed_label(run).partition(" ")
    return f"{n} seed{'' if n == '1' else 's'}" + (f" {per_pe}" if per_pe else "")


def report_summary(report: pd.DataFrame, runs: Mapping[str, Any]) -> str:
    """The report's verdict in a few sentences: what the runs are, the verdict counts, how many
    rows fall outside the paper's interval and why, and -- for preview runs -- that preview
    numbers cannot test the paper."""
    names = list(dict.fromkeys(report["run"]))
    cfgs = {n: _cfg(runs.get(n)) for n in names}
    preview = [n for n in names if cfgs[n].get("preset") == "preview"]
    counts = report["verdict"].map(lambda v: SHORT_VERDICT.get(v, v)).value_counts()
    known = report["outside"].apply(lambda v: v is not None and not (isinstance(v, float)
                                                                     and math.isnan(v)))
    outside = int(report["outside"].apply(lambda v: v is True or v is np.True_).sum())
    parts = [f"{len(report)} rows from {len(names)} runs ("
             + ", ".join(f"{n}: {cfgs[n].get('preset')}, {_seeds(runs.get(n))}, "
                         f"{cfgs[n].get('epochs')} epochs" for n in names) + ").",
             "Verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".",
             f"Outside the paper's 95% interval: {outside} of the {int(known.sum())} rows with "
             f"enough seeds to say."]
    if preview:
        parts.append(f"{', '.join(preview)} ran at PREVIEW scale: small models, few seeds and "
                     f"epochs, accuracies near chance. Preview numbers cannot test the paper; "
                     f"these tables only show that every comparison can be computed. The "
                     f"reproduction needs the paper-scale runs (lstpe reproduce).")
    return " ".join(parts)


# --------------------------------------------------------------------------- every cell


CELL_METRICS: dict[str, str] = {"val_acc": "val", "train_acc": "train",
                                "attention_cosine": "attn"}
"""How :func:`paper_cells` names the paper's metrics."""

_LOG_PHASE = {"val_acc": "validation", "train_acc": "train"}
_LOGGED_TABLES = ("1", "2", "4")  # Adam, lr 1e-4: the recipe of the authors' logged runs


def _authors(epoch: int) -> dict[str, pd.DataFrame]:
    """The authors' logs at ``epoch`` per paper metric (index ``pe``)."""
    from lstpe.analysis.authors_logs import authors_at

    return {m: authors_at(epoch, phase) for m, phase in _LOG_PHASE.items()}


def paper_cells(report: pd.DataFrame | None, runs: Mapping[str, Any] | None = None,
                epoch: int = 200, digits: int = 3, min_seeds: int = 5) -> pd.DataFrame:
    """Every cell of the paper's Tables 1-6, one row each, with what we have for it.

    Args:
        report: :func:`paper_report` of our runs (None or empty: no run yet for any cell).
        runs: the runs behind ``report`` by registry name (their preset marks previews);
            None: previews are recognised by the report's ``why``.
        epoch: the authors' logged epoch shown beside ours (our units train 200 epochs).
        digits: decimals of every number.
        min_seeds: fewest seeds for a verdict (the report's, 5).
    Returns:
        One row per cell of :func:`lstpe.analysis.paper_compare.load_paper_tables` (table,
        setting, PE, metric; 140 cells), by table (1-6), then metric (val, train, attn), then
        the paper's row order, index ``(table, pe)`` with
        ``table`` like ``T1 val``, ``T4 sgd val``, ``T3 attn``; columns ``n`` (our seeds, 0
        without a run), ``ours`` (our mean of the like-for-like evaluation, or ``-``),
        ``authors @<epoch>`` (mean ± SD (n seeds) of the authors' logs, for the Adam rows of
        Tables 1, 2 and 4 whose PE they logged: 2d-fixed, learn-0.1 ... learn-2; ``-``
        elsewhere), ``paper`` (mean ± SD, 15 seeds, 4000 epochs) and ``verdict``: the report's
        verdict against the paper only with ``min_seeds`` seeds or more of a full-scale run
        whose models are above chance; else the reason, first match: ``no run yet``,
        ``preview: no test`` (``preview at chance: no test`` where its models guess),
        ``<n> seed(s): no test``, ``at chance`` (the validation accuracy
        of the same PEs, same table -- Table 2's for Table 3 -- within noise of 0.25).
    """
    from lstpe.analysis.paper_compare import load_paper_tables

    paper = load_paper_tables()
    rank = {m: k for k, m in enumerate(CELL_METRICS)}  # per table: val, train, attn rows
    paper = paper.assign(_m=paper["metric"].map(rank)).sort_values(["table", "_m"],
                                                                    kind="stable")
    rep = report if report is not None else pd.DataFrame(
        columns=["run", "table", "setting", "pe", "metric", "n", "mean", "verdict", "why"])
    key = ["table", "setting", "pe", "metric"]
    ours = {tuple(k): r for k, r in zip(rep[key].astype(str).itertuples(index=False),
                                        rep.itertuples(index=False), strict=True)}
    logs = _authors(epoch)
    rows = []
    for c in paper.itertuples(index=False):
        r = ours.get((c.table, c.setting, c.pe, c.metric))
        log = logs.get(c.metric)
        a = log.loc[c.pe] if (log is not None and c.setting == "adam"
                              and c.table in _LOGGED_TABLES and c.pe in log.index) else None
        label = f"T{c.table}" + (f" {c.setting}" if c.table == "4" else "")
        row = {"table": f"{label} {CELL_METRICS[c.metric]}", "pe": c.pe,
               "n": 0 if r is None else int(r.n),
               "ours": "-" if r is None else f"{r.mean:.{digits}f}",
               f"authors @{epoch}": "-" if a is None else
               f"{_pm(a['acc_mean'], a['acc_sd'], digits)} ({int(a['n_seeds'])})",
               "paper": _pm(c.mean, c.sd, digits)}
        row["verdict"] = _cell_verdict(r, runs, min_seeds)
        rows.append(row)
    return pd.DataFrame(rows).set_index(["table", "pe"])


def _cell_verdict(r: Any, runs: Mapping[str, Any] | None, min_seeds: int) -> str:
    """The verdict of one cell of :func:`paper_cells`, or why there is none."""
    if r is None:
        return "no run yet"
    preview = (_cfg(runs.get(r.run)).get("preset") == "preview" if runs is not None
               else str(getattr(r, "why", "")).startswith("preview"))
    if preview:
        return f"preview{' at chance' if r.verdict == AT_CHANCE else ''}: no test"
    if r.verdict == AT_CHANCE:  # whatever its seeds, as the table of its run says
        return AT_CHANCE
    if int(r.n) < min_seeds:
        return f"{int(r.n)} seed{'s' if int(r.n) != 1 else ''}: no test"
    return SHORT_VERDICT.get(r.verdict, r.verdict)
