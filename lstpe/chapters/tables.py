"""Tables about one run, as the chapters (5-10) show them (numbers only, no sentences).

* :data:`SPLIT_LABELS`: how the tables name splits;
* :func:`compare_splits`, :func:`compact`: a paper table lined up against
  ours, like for like (the paper's validation accuracy against ours evaluated as the authors
  did, its training accuracy against our running training accuracy), with the other evaluation
  beside it, and the columns formatted so that the table fits the page;
* :func:`complexity_table`: accuracy per relational complexity;
* :func:`human_table`: the models-and-humans table in a few columns.

Our numbers beside the authors' logs and beside initialisation are in
:mod:`lstpe.chapters.baselines`.

Accuracy columns are the history's (:data:`lstpe.store.results.HISTORY_COLUMNS`); comparisons are
:func:`lstpe.evidence.paper_compare.compare_to_paper` tables. Part of :mod:`lstpe.chapters`; imports
from :mod:`lstpe.chapters.text` only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from lstpe.chapters.findings import signed_ci
from lstpe.evidence.verdict import shown_verdict
from lstpe.stats.chance import chance_test

if TYPE_CHECKING:
    from lstpe.store.results import Run

__all__ = [
    "SPLIT_LABELS", "compare_splits", "compact", "complexity_table",
    "human_table",
]

SPLIT_LABELS: dict[str, str] = {
    "val_dropout": "dropout on",
    "val": "eval mode",
    "train_running": "running",
    "train": "eval mode",
    "test": "held out",
}
"""How the chapters name each split of the history."""



# --------------------------------------------------------------------------- paper tables


def compare_splits(exp: Run, table: int | str, splits: Sequence[str] = ("val_dropout", "val"),
                   metric: str = "val_acc", pe_name: str | None = None,
                   setting: str | None = None) -> pd.DataFrame:
    """A paper table against our first split (the verdict), other splits' means beside it.

    The first split is the like-for-like one: ``val_dropout`` for the paper's validation
    accuracy (the authors evaluated with dropout active), ``train_running`` for its training
    accuracy (a running mean over the epoch's minibatches in train mode). The others are added
    as ``mean_<split>`` columns (e.g. ``mean_val``: eval mode).

    Args:
        exp: an experiment with ``final(split)``.
        pe_name: keep only models of this PE family (``"learn"`` for Tables 2 and 5).
    Returns:
        :func:`lstpe.evidence.paper_compare.compare_to_paper`'s columns plus ``split`` (the
        first), ``mean_<split>`` for the others and ``at_chance``: the PE's validation
        accuracy (eval mode, seeds pooled) is within noise of chance (:func:`chance_test`), so
        its row says nothing about the paper (:func:`compact` shows no difference for it).
    """
    from lstpe.evidence import paper_compare

    def final(split: str) -> pd.DataFrame:
        f = exp.final(split)
        return f[f["pe_name"] == pe_name] if pe_name is not None else f

    cmp = paper_compare.compare_to_paper(final(splits[0]), table, metric=metric, setting=setting)
    cmp.insert(cmp.columns.get_loc("mean"), "split", splits[0])
    for s in splits[1:]:
        means = final(s).groupby("pe")["accuracy"].mean()
        cmp.insert(cmp.columns.get_loc("ci_low"), f"mean_{s}", cmp["pe"].map(means).to_numpy())
    val = final("val")
    chance = chance_test(val).set_index("pe")["at_chance"] if not val.empty else {}
    cmp["at_chance"] = [bool(chance.get(p, False)) for p in cmp["pe"]]
    return cmp


def _pm(mean: float, sd: float, digits: int) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    if sd is None or (isinstance(sd, float) and math.isnan(sd)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def _chance_flags(cmp: pd.DataFrame) -> pd.Series:
    """The ``at_chance`` column of a :func:`compare_splits` table as booleans (all False
    without one)."""
    if "at_chance" not in cmp:
        return pd.Series(False, index=cmp.index)
    return cmp["at_chance"].fillna(False).astype(bool)


def compact(cmp: pd.DataFrame, index: str = "pe", names: Mapping[str, str] | None = None,
            digits: int = 3) -> pd.DataFrame:
    """A comparison table formatted to fit a page: a few short text columns.

    Columns: ``n``; ``ours (<split>)`` (mean ± SD over seeds; the split the verdict is
    about); one column ``ours (<split>)`` per ``mean_<split>`` of :func:`compare_splits`
    (splits named by ``names`` or :data:`SPLIT_LABELS`); ``95% CI`` (only when some row
    has one, ``-`` for the others); ``paper`` (mean ± SD, 15 seeds); ``diff`` (ours -
    paper); ``verdict`` (``n=1`` for a single model). ``index`` (``pe`` or
    ``sigma``) becomes the index. Rows ``at_chance`` (:func:`compare_splits`) get ``-`` as
    their difference and the word of :func:`lstpe.evidence.verdict.shown_verdict`, ``at
    chance``, as their verdict: guessing is not compared with the paper.
    """
    names = dict(names or {})
    out = pd.DataFrame(index=cmp[index].to_numpy())
    out.index.name = index
    out["n"] = cmp["n"].astype(int).to_numpy()
    first = cmp["split"].iloc[0] if "split" in cmp else None
    ours = "ours" if first is None else f"ours ({names.get(first, SPLIT_LABELS.get(first, first))})"
    out[ours] = [_pm(m, s, digits) for m, s in zip(cmp["mean"], cmp["sd"], strict=True)]
    for col in [c for c in cmp.columns if c.startswith("mean_") and cmp[c].notna().any()]:
        s = col.removeprefix("mean_")
        out[f"ours ({names.get(s, SPLIT_LABELS.get(s, s))})"] = [
            _pm(v, math.nan, digits) for v in cmp[col]]
    if cmp["ci_low"].notna().any():  # no column of dashes: it appears with 2 seeds
        out["95% CI"] = ["-" if math.isnan(lo) else f"[{lo:.{digits}f}, {hi:.{digits}f}]"
                         for lo, hi in zip(cmp["ci_low"], cmp["ci_high"], strict=True)]
    out["paper"] = [_pm(m, s, digits) for m, s in zip(cmp["paper_mean"], cmp["paper_sd"],
                                                      strict=True)]
    chance = _chance_flags(cmp)
    out["diff"] = ["-" if c else signed_ci(d, math.nan, math.nan, digits)
                   for d, c in zip(cmp["diff"], chance, strict=True)]
    out["verdict"] = [shown_verdict(v, c) for v, c in zip(cmp["verdict"], chance, strict=True)]
    return out


# --------------------------------------------------------------------------- complexity


def complexity_table(exp: Run | Sequence[Run], pes: Sequence[str] | None = None,
                     humans: pd.DataFrame | None = None) -> pd.DataFrame:
    """Validation accuracy per relational complexity (1, 2, 3 vectors): models and people.

    Models: mean over seeds of each seed's accuracy on the condition's 36 puzzles (eval mode);
    given several runs, each PE is read from the first run that holds it. People: the mean
    per-puzzle accuracy of the 40 participants (:func:`lstpe.lst.human_accuracy`).

    Returns:
        Index ``pe`` (``people`` last), columns ``1``, ``2``, ``3`` and ``falls`` (accuracy
        strictly decreasing from 1 to 3 vectors), ``at_chance`` (overall accuracy within noise
        of chance, :func:`chance_test`; False for people).
    """
    from lstpe import lst

    runs = exp if isinstance(exp, list | tuple) else [exp]
    t = pd.concat([_complexity_rows(e, pes) for e in runs])
    t = t[~t.index.duplicated()]
    h = lst.human_accuracy() if humans is None else humans
    people = h.groupby("vectors")["accuracy"].mean()
    t.loc["people"] = [*(float(people[v]) for v in (1, 2, 3)), False]
    vals = t[["1", "2", "3"]].to_numpy(float)
    t.insert(3, "falls", (vals[:, 0] > vals[:, 1]) & (vals[:, 1] > vals[:, 2]))
    t.index.name = "pe"
    return t


def _complexity_rows(exp: Run, pes: Sequence[str] | None) -> pd.DataFrame:
    """:func:`complexity_table`'s model rows of one run: ``1``, ``2``, ``3``, ``at_chance``."""
    parts = [exp.final("val", c).assign(vectors=c) for c in ("1", "2", "3")]
    t = pd.concat(parts).pivot_table(index="pe", columns="vectors", values="accuracy",
                                     aggfunc="mean")
    order = [p for p in (pes or dict.fromkeys(exp.final("val")["pe"])) if p in t.index]
    t = t.loc[order]
    t.columns = [str(c) for c in t.columns]
    ct = chance_test(exp.final("val")).set_index("pe")["at_chance"]
    t["at_chance"] = [bool(ct.get(p, False)) for p in t.index]
    return t


# --------------------------------------------------------------------------- learned PEs


# --------------------------------------------------------------------------- humans


def human_table(sim: pd.DataFrame, by: str = "pe", digits: int = 3) -> pd.DataFrame:
    """:func:`lstpe.analysis.humans.human_similarity` in five short columns: ``accuracy`` (the
    model's mean over puzzles), ``cosine``, ``Spearman ρ``, ``p (ρ)``, ``composite``; index
    ``by``: ``pe`` (rows sorted by composite, best first) or ``sigma`` (rows in order of σ, as
    a sweep is read)."""
    t = (sim.sort_values("sigma") if by == "sigma"
         else sim.sort_values("composite", ascending=False, na_position="last"))
    out = pd.DataFrame({"accuracy": t["model_accuracy"], "cosine": t["cosine"],
                        "Spearman ρ": t["spearman"], "p (ρ)": t["spearman_p"],
                        "composite": t["composite"]}).round(digits)
    out.index = t[by].to_numpy()
    out.index.name = by
    return out


# --------------------------------------------------------------------------- takeaways




def beside_paper(final: pd.DataFrame, table: str, setting: str) -> pd.DataFrame:
    """Our models' accuracy per PE (``final``: one row per model, ``pe`` and ``accuracy``)
    beside the paper's cell of ``table`` / ``setting`` (its 4000-epoch mean and SD over 15
    seeds): ``pe, n, mean, ci_low, ci_high`` (t 95%, NaN at n = 1), ``paper, paper_sd``, in
    the paper's order, only the PEs both have."""
    from lstpe.references.paper_tables import load_paper_tables
    from lstpe.stats import seed_stats

    paper = load_paper_tables().query("table == @table and setting == @setting "
                                      "and metric == 'val_acc'").set_index("pe")
    ours = seed_stats.summarize(final[final["pe"].isin(paper.index)], "accuracy", "pe")
    out = ours.set_index("pe").reindex([p for p in paper.index if p in set(ours["pe"])])
    out["paper"], out["paper_sd"] = paper["mean"], paper["sd"]
    return out.reset_index()[["pe", "n", "mean", "ci_low", "ci_high", "paper", "paper_sd"]]
