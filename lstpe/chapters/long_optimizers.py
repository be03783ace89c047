"""The long runs of one seed read by optimizer, for chapter 8: AdamW's (and, once stored,
SGD's) validation curve against Adam's at the same epochs, with the paper's values as
reference lines.

The long plan (:data:`lstpe.experiments.long_units.LONG_PLAN`) trains each optimizer's models
past 200 epochs under its registry run: Adam under ``table2``, ``table1`` and ``table4/adam``,
AdamW (weight decay 0.1) under ``tables56``, plain SGD under ``table4/sgd``. A PE and seed has
at most one long model per optimizer (the plan leaves out a model an earlier leg already
trains), so the curves of one PE at one seed are one model each:

* :func:`optimizer_curves`: validation accuracy over epochs, every optimizer of every PE that
  has an AdamW or SGD long model at the seed, each cut at the last epoch its AdamW or SGD
  model reached, so Adam is read at the same epochs;
* :func:`paper_references`: the paper's value per (PE, optimizer) after 4000 epochs over 15
  seeds (Table 5 for AdamW, Table 4 for SGD, Adam from Table 4, else Table 1, else Table 2);
* :func:`side_by_side`: the curves every ``every`` epochs, one column per optimizer, with the
  paper's row under each PE (its tables in the row's label);
* :func:`optimizer_facts`: the numbers chapter 8's paragraph glues in;
* :func:`plot_optimizer_curves`: one panel per PE, reference lines dotted.

One model per optimizer gives a trajectory, not an estimate: no interval, no test.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from lstpe.analysis.long_runs import accuracy_at
from lstpe.chapters.facts import witness_facts
from lstpe.experiments import long_units as lu
from lstpe.experiments.registry import REGISTRY
from lstpe.nn.encodings import parse_pe
from lstpe.references.paper_tables import load_paper_tables
from lstpe.rendering import style

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["CURVE_COLUMNS", "PLOT_ORDER", "REFERENCE_COLUMNS", "optimizer_curves",
           "paper_references", "side_by_side", "optimizer_facts", "plot_optimizer_curves"]

PLOT_ORDER: tuple[str, ...] = ("adamw", "adam", "sgd")
"""The registry's optimizers, in the order a page lists them."""
NAMES = {"adamw": "AdamW", "adam": "Adam", "sgd": "SGD"}
"""How a page names each optimizer."""
CURVE_COLUMNS: tuple[str, ...] = ("pe", "sigma", "seed", "optimizer", "epoch", "accuracy")
"""Columns of :func:`optimizer_curves`."""
REFERENCE_COLUMNS: tuple[str, ...] = ("pe", "optimizer", "table", "accuracy")
"""Columns of :func:`paper_references`."""
SPLIT = "val_dropout"
"""The split read: validation accuracy as the authors evaluated it (dropout on)."""


def _units(seed: int) -> dict[tuple[str, str], lu.LongUnit]:
    """Each (PE, optimizer) of the long plan at ``seed``: its one long model."""
    out: dict[tuple[str, str], lu.LongUnit] = {}
    for c in lu.LONG_PLAN:
        for u in c.units:
            if u.seed == seed:
                out.setdefault((u.pe, REGISTRY[u.run].optimizer), u)
    return out


def optimizer_curves(results_dir: str | Path | None = None, seed: int = 2235,
                     pes: Sequence[str] | None = None) -> pd.DataFrame:
    """Validation accuracy over epochs of the long models of ``seed``, by optimizer.

    Args:
        results_dir: the results folder (default: the repository's).
        seed: the seed read.
        pes: the PEs read (None: every PE with an AdamW or SGD long model stored at ``seed``).
    Returns:
        :data:`CURVE_COLUMNS`, one row per (PE, optimizer, evaluated epoch), accuracy of
        :data:`SPLIT` over all puzzles; each PE's rows stop at the last epoch its AdamW or SGD
        models reached (a PE without one has no rows). Empty when nothing is stored.
    """
    units = _units(seed)
    longs = {k: d for k, u in units.items() if (pes is None or k[0] in pes)
             and (d := lu.load_long(u, results_dir)) is not None}
    rows = []
    for pe in dict.fromkeys(k[0] for k in longs):
        other = [d["epoch"] for (p, o), d in longs.items() if p == pe and o != "adam"]
        if not other:
            continue
        upto = max(other)
        for opt in PLOT_ORDER:
            d = longs.get((pe, opt))
            if d is None:
                continue
            h = d["history"]
            eps = sorted(int(e) for e in h.loc[h["split"] == SPLIT, "epoch"].unique()
                         if e <= upto)
            acc = accuracy_at(d, eps, (SPLIT,))
            rows.append(acc.drop(columns="split").assign(
                pe=pe, sigma=parse_pe(pe).sigma, seed=seed, optimizer=opt))
    if not rows:
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    return pd.concat(rows, ignore_index=True)[list(CURVE_COLUMNS)]


def paper_references(pes: Sequence[str]) -> pd.DataFrame:
    """The paper's validation accuracy (4000 epochs, 15 seeds) for each PE and optimizer it
    reports: AdamW from Table 5 (Table 6 for a PE Table 5 lacks), SGD from Table 4, Adam from
    Table 4, else Table 1, else Table 2.

    Returns:
        :data:`REFERENCE_COLUMNS`, ``table`` the table's number as text.
    """
    t = load_paper_tables().query("metric == 'val_acc'")
    where = {"adamw": ("adamw-wd0.1", ("5", "6")), "sgd": ("sgd", ("4",)),
             "adam": ("adam", ("4", "1", "2"))}
    rows = []
    for pe in pes:
        for opt in PLOT_ORDER:
            setting, tables = where[opt]
            hit = t[(t["pe"] == pe) & (t["setting"] == setting)]
            for table in tables:
                if (h := hit[hit["table"] == table]).size:
                    rows.append({"pe": pe, "optimizer": opt, "table": table,
                                 "accuracy": float(h["mean"].iloc[0])})
                    break
    return pd.DataFrame(rows, columns=list(REFERENCE_COLUMNS))


def side_by_side(curves: pd.DataFrame, refs: pd.DataFrame, every: int = 200) -> pd.DataFrame:
    """The curves every ``every`` epochs (and at each PE's last), one column per optimizer
    present, ``AdamW − Adam`` where both are, and under each PE the paper's row, labelled
    ``paper, 4000 ep. (Tables a, b)`` with each column's table in the columns' order.

    Returns:
        Indexed by (``pe``, ``epoch``: text); NaN where an optimizer has no value.
    """
    opts = [o for o in PLOT_ORDER if o in set(curves["optimizer"])]
    out = []
    for pe, g in curves.groupby("pe", sort=False):
        w = g.pivot_table(index="epoch", columns="optimizer", values="accuracy")
        w = w.reindex(columns=opts)
        keep = [e for e in w.index if e % every == 0 or e == w.index.max()]
        w = w.loc[keep]
        w.index = [str(e) for e in w.index]
        r = refs[refs["pe"] == pe].set_index("optimizer")
        tables = ", ".join(str(r.loc[o, "table"]) if o in r.index else "–" for o in opts)
        paper = pd.DataFrame([r["accuracy"].reindex(opts)],
                             index=[f"paper, 4000 ep. (Tables {tables})"])
        w = pd.concat([w, paper])
        if {"adamw", "adam"} <= set(opts):
            w["AdamW − Adam"] = w["adamw"] - w["adam"]
        out.append(w.rename(columns=NAMES).assign(pe=pe))
    if not out:
        return pd.DataFrame()
    t = pd.concat(out)
    t.index.name = "epoch"
    return t.reset_index().set_index(["pe", "epoch"])


def optimizer_facts(curves: pd.DataFrame, refs: pd.DataFrame,
                    witness: pd.DataFrame | None = None) -> dict[str, str] | None:
    """Chapter 8's paragraphs on :func:`optimizer_curves`; None when no AdamW or SGD long model
    is stored. Keys: ``seed``; ``at`` (each PE's last common epoch); ``pairs`` (per PE: each
    optimizer's accuracy there, AdamW − Adam, and the paper's values with their tables);
    ``sgd`` (the PEs with an SGD curve and their epoch, or that Table 4's SGD column has no
    model trained past 200 epochs yet); with ``witness``
    (:func:`lstpe.chapters.long_mechanism.weight_decay_witness`), the keys of
    :func:`lstpe.chapters.facts.witness_facts` too (the PE's norm under each optimizer)."""
    if curves.empty:
        return None
    wf = witness_facts(witness) if witness is not None else None
    r = refs.set_index(["pe", "optimizer"])
    parts, ats = [], []
    for pe, g in curves.groupby("pe", sort=False):
        at = int(g["epoch"].max())
        last = g[g["epoch"] == at].set_index("optimizer")["accuracy"]
        ours = ", ".join(f"{NAMES[o]} {last[o]:.3f}" for o in PLOT_ORDER if o in last.index)
        gap = (f"; AdamW − Adam {last['adamw'] - last['adam']:+.3f}"
               if {"adamw", "adam"} <= set(last.index) else "")
        paper = ", ".join(f"{NAMES[o]} {r.loc[(pe, o), 'accuracy']:.3f} (Table "
                          f"{r.loc[(pe, o), 'table']})" for o in PLOT_ORDER
                          if (pe, o) in r.index and o in set(g["optimizer"]))
        parts.append(f"`{pe}` at epoch {at}: {ours}{gap} (the paper after 4000 epochs: "
                     f"{paper})")
        ats.append(at)
    sgd = curves[curves["optimizer"] == "sgd"]
    sgd_text = ("SGD: " + ", ".join(f"`{pe}` to epoch {int(g['epoch'].max())}"
                                    for pe, g in sgd.groupby("pe", sort=False))
                if len(sgd) else
                "Table 4's SGD column has no model trained past 200 epochs here yet; its "
                "curves join the figure and the table when they are stored")
    return {**(wf or {}), "seed": str(int(curves["seed"].iloc[0])),
            "at": ", ".join(sorted({str(a) for a in ats})),
            "pairs": "; ".join(parts), "sgd": sgd_text}


def plot_optimizer_curves(curves: pd.DataFrame, refs: pd.DataFrame) -> Figure:
    """One panel per PE: validation accuracy over epochs, AdamW solid, Adam dashed, SGD
    dash-dotted, each optimizer's paper value (4000 epochs) a dotted line of its colour, chance
    (0.25) grey.

    Raises:
        ValueError: ``curves`` is empty.
    """
    import matplotlib.pyplot as plt

    if curves.empty:
        raise ValueError("no long-run curves to draw: optimizer_curves found no AdamW or "
                         "SGD long model")
    pes = list(dict.fromkeys(curves["pe"]))
    ncols = min(len(pes), 3)
    nrows = -(-len(pes) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=style.figsize(1.0, 2.9 * nrows + 0.8),
                             layout="constrained", sharey=True, squeeze=False)
    ls = {"adamw": "-", "adam": "--", "sgd": "-."}
    color = {o: f"C{i}" for i, o in enumerate(PLOT_ORDER)}
    for ax, pe in zip(axes.flat, pes, strict=False):
        g = curves[curves["pe"] == pe]
        for opt in PLOT_ORDER:
            h = g[g["optimizer"] == opt]
            if len(h):
                ax.plot(h["epoch"], h["accuracy"], ls[opt], color=color[opt], lw=1.2,
                        label=f"{NAMES[opt]} (ours, one model)")
        for row in refs[refs["pe"] == pe].itertuples():
            if row.optimizer in set(g["optimizer"]):
                ax.axhline(row.accuracy, color=color[row.optimizer], ls=":", lw=1.2,
                           label=f"{NAMES[row.optimizer]}: the paper at 4000")
        ax.axhline(0.25, color="0.6", lw=0.8)
        ax.set(title=pe, xlabel="epoch", ylim=(0, 1.02), xlim=(0, max(g["epoch"].max(), 1)))
    for ax in axes.flat[len(pes):]:
        ax.set_visible(False)
    axes[0, 0].set_ylabel("validation accuracy\n(grey: chance)")
    handles = {lab: h for ax in axes.flat for h, lab in zip(*ax.get_legend_handles_labels(),
                                                             strict=True)}
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=2,
               fontsize=9, frameon=False)
    return style.readable(fig)
