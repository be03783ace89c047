"""Our numbers beside their baselines: the authors' own logs, and the models' initialisation.

* :func:`like_for_like`, :func:`like_summary`: our 200-epoch units beside the authors' own logs
  at epoch 200 and the paper's 4000-epoch table
  (:func:`lstpe.analysis.authors_logs.compare_with_authors`), as a table and a paragraph;
* :func:`init_vs_final`, :func:`init_final_sentence`: a measure at initialisation beside its
  value after training and the change, per sigma, so that a trend the models had before any
  training is not read as learned;
* :func:`accuracy_correlations`: each measure's rank correlation with accuracy across sigma,
  after training and at initialisation;
* :func:`rising_sentence`: which PEs are still climbing when the run stops, so that a gap to
  the paper's 4000 epochs is read as the epochs it is, or not;
* :func:`paper_gap_sentence`: ours minus the paper over the rows above chance, and on which
  side of the paper they fall.

Part of :mod:`lstpe.chapters`; imports from :mod:`lstpe.chapters.text` and
:mod:`lstpe.chapters.tables`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from lstpe.analysis.seed_stats import MIN_SEEDS_FOR_CI
from lstpe.chapters.tables import _pm
from lstpe.chapters.text import _span, chance_pes, chance_test

__all__ = ["init_final_sentence", "init_vs_final", "like_for_like", "like_summary",
           "accuracy_correlations", "rising_sentence", "paper_gap_sentence", "RISE"]

RISE = 0.02
"""A PE whose seed-mean validation accuracy gained more than this between the last two windows
of its run is "still rising" (:func:`rising_sentence`): about two puzzles of 108."""


def like_for_like(final: pd.DataFrame, epoch: int = 200, digits: int = 3) -> pd.DataFrame:
    """Our models beside the authors' logs at ``epoch`` and the paper's 4000-epoch table.

    ``final``: one row per model (``run.final("val_dropout")``: evaluated as the authors did,
    dropout active for 2d-fixed). Columns: ``seeds`` (ours), ``ours`` (each seed's accuracy,
    then the mean when there are several), ``authors @<epoch>`` (mean ± SD, n),
    ``ours - authors``, ``Welch p`` (5 seeds or more; else why not), ``paper @4000``.
    """
    from lstpe.analysis.authors_logs import compare_with_authors

    cmp = compare_with_authors(final, epoch=epoch)
    per = final.groupby("pe", sort=False)
    out = pd.DataFrame(index=cmp["pe"].to_numpy())
    out.index.name = "pe"
    out["seeds"] = [", ".join(str(int(s)) for s in per.get_group(p)["seed"]) for p in cmp["pe"]]
    out["ours"] = [
        " ".join(f"{a:.{digits}f}" for a in per.get_group(p)["accuracy"])
        + (f" (mean {m:.{digits}f})" if n > 1 else "")
        for p, m, n in zip(cmp["pe"], cmp["ours_mean"], cmp["n_ours"], strict=True)]
    out[f"authors @{epoch}"] = [
        "no log" if math.isnan(m) else f"{_pm(m, s, digits)} (n={int(n)})"
        for m, s, n in zip(cmp["authors_mean"], cmp["authors_sd"], cmp["authors_n"],
                           strict=True)]
    out["ours - authors"] = ["-" if math.isnan(d) else f"{d:+.{digits}f}" for d in cmp["diff"]]
    out["Welch p"] = [f"{p:.3f}" if not math.isnan(p) else note
                      for p, note in zip(cmp["test"], cmp["note"], strict=True)]
    out["paper @4000"] = [_pm(m, s, digits) for m, s in zip(cmp["paper_mean"], cmp["paper_sd"],
                                                            strict=True)]
    return out


def like_summary(final: pd.DataFrame, epoch: int = 200) -> str:
    """One paragraph on our units against the authors' logs at ``epoch``: PEs at chance are
    named and not compared; the others are placed against the authors' mean ± SD (a Welch test
    only with 5 seeds or more)."""
    from lstpe.analysis.authors_logs import compare_with_authors

    cmp = compare_with_authors(final, epoch=epoch).set_index("pe")
    ct = chance_test(final).set_index("pe")
    n = final.groupby("pe")["seed"].nunique()
    parts = [f"Stored so far: {len(cmp)} PEs, {_span(n.min(), n.max())} seed(s) each "
             f"({epoch} epochs, the authors' recipe)."]
    above = [p for p in cmp.index if not ct.loc[p, "at_chance"]]
    chance = [p for p in cmp.index if ct.loc[p, "at_chance"]]
    far: tuple[float, str] | None = None
    for p in above:
        r = cmp.loc[p]
        if math.isnan(r["authors_mean"]):
            parts.append(f"{p}: {r['ours_mean']:.3f} (the authors logged no {p}).")
            continue
        k = abs(r["diff"]) / r["authors_sd"] if r["authors_sd"] > 0 else math.inf
        far = max(far, (k, p)) if far is not None else (k, p)
        test = f", Welch p = {r['test']:.3f}" if not math.isnan(r["test"]) else ""
        parts.append(f"{p}: {r['ours_mean']:.3f} against the authors' {r['authors_mean']:.3f} "
                     f"± {r['authors_sd']:.3f} at epoch {epoch} ({k:.1f} of their seed-to-seed "
                     f"SDs away{test}).")
    if far is not None and len(above) > 1:
        parts.append(f"Farthest from the authors' mean: {far[1]} ({far[0]:.1f} SDs).")
    if chance:
        names = ", ".join(f"{p} ({cmp.loc[p, 'ours_mean']:.3f})" for p in chance)
        parts.append("Within noise of chance on the 108 validation puzzles (binomial test), so "
                     f"not compared: {names}.")
    few = [p for p in above if n.get(p, 0) < MIN_SEEDS_FOR_CI]
    if few and len(few) == len(above):
        parts.append(f"With fewer than {MIN_SEEDS_FOR_CI} seeds per PE these are a few models "
                     "placed against the authors' spread, not estimates of a mean: no interval "
                     "and no test yet.")
    elif few:
        parts.append(f"Below {MIN_SEEDS_FOR_CI} seeds ({', '.join(few)}) a PE is a few models "
                     "placed against the authors' spread, not an estimate of a mean: no "
                     "interval and no test for it yet.")
    return " ".join(parts)


# --------------------------------------------------------------------------- init vs trained


def init_vs_final(init: pd.DataFrame, final: pd.DataFrame, values: str | Sequence[str],
                  by: str = "sigma", paper: int | str | None = None,
                  paper_metric: str = "attention_cosine", digits: int = 3) -> pd.DataFrame:
    """Each value at initialisation, after training and the change, per ``by`` group.

    Args:
        init, final: one row per model at each stage, the same models (paired by ``model``),
            with ``by`` and ``values`` (e.g. :func:`lstpe.analysis.attention.table3`).
        paper: a paper table (``3``): adds its means (4000 epochs, 15 seeds) of
            ``paper_metric``, matched on the ``pe`` label (``final`` then needs ``pe``).
    Returns:
        Index ``by`` (first-seen order); columns ``("n", "")`` (models per group), then per
        value ``(value, "at init" | "trained" | "change")``: group means of each stage and of
        the per-model trained - init; with ``paper``, ``("paper", "@4000 ep.")`` (NaN where
        the paper has no such row).
    Raises:
        ValueError: empty tables, missing columns, or different models at the two stages.
    """
    values = [values] if isinstance(values, str) else list(values)
    for name, t in (("init", init), ("final", final)):
        need = ("model", by, *values, *(("pe",) if paper is not None else ()))
        missing = [c for c in need if c not in t]
        if t.empty or missing:
            raise ValueError(f"the {name} table is empty or lacks columns {missing}")
    if sorted(init["model"]) != sorted(final["model"]) or init["model"].duplicated().any():
        raise ValueError("init and final must hold the same models, one row each")
    both = final.merge(init[["model", *values]], on="model", suffixes=("", "@init"))
    g = both.groupby(by, sort=False)
    out = pd.DataFrame({("n", ""): g.size()})
    for v in values:
        out[(v, "at init")] = g[f"{v}@init"].mean()
        out[(v, "trained")] = g[v].mean()
        out[(v, "change")] = (both[v] - both[f"{v}@init"]).groupby(both[by], sort=False).mean()
    if paper is not None:  # matched on the PE label
        from lstpe.analysis.paper_compare import load_paper_tables

        pt = load_paper_tables()
        pt = pt[(pt["table"] == str(paper)) & (pt["metric"] == paper_metric)]
        means = both["pe"].map(dict(zip(pt["pe"], pt["mean"], strict=True)))
        out[("paper", "@4000 ep.")] = means.groupby(both[by], sort=False).first()
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out.index.name = by
    return out.round(digits)


SMALL_CHANGE = 0.01
"""A change below this fraction of the value at initialisation (at every group) is called
small by :func:`init_final_sentence`: an ordering resting on it is read off the third digit."""


def init_final_sentence(table: pd.DataFrame, value: str, what: str | None = None) -> str:
    """One sentence on an :func:`init_vs_final` column group (as shown, i.e. rounded): its range
    at initialisation, after training and of the change from the smallest to the largest index
    value, and (with 3 or more rows) the Spearman correlation of each with the index -- a
    correlation after training that was already there at initialisation is inherited, not
    learned. A column that is constant has no correlation ("none (constant)"). Where every
    change is below :data:`SMALL_CHANGE` of its value at initialisation the sentence says so,
    and an ordering that only such changes made is called nudged, not changed."""
    if value not in table.columns.get_level_values(0):
        raise ValueError(f"the table has no {value!r} columns")
    t, x = table[value], table.index.to_numpy(float)
    by = {"sigma": "σ"}.get(str(table.index.name), str(table.index.name))
    lo, hi = int(np.argmin(x)), int(np.argmax(x))
    rng = {c: f"{t[c].iloc[lo]:.3f} at {by} = {x[lo]:g} to {t[c].iloc[hi]:.3f} at {x[hi]:g}"
           for c in ("at init", "trained", "change")}
    parts = [f"{what or value}: at initialisation {rng['at init']}; after training "
             f"{rng['trained']}; change {rng['change']}."]
    change = t["change"].to_numpy(float)
    if (change < 0).all() or (change > 0).all():
        parts.append(f"Training moved it {'down' if change[0] < 0 else 'up'} at every {by}.")
    init = np.abs(t["at init"].to_numpy(float))
    rel = float(np.max(np.abs(change) / np.where(init > 0, init, np.nan), initial=0.0,
                       where=init > 0))
    if rel < SMALL_CHANGE:
        parts.append(f"Each change is at most {rel:.1%} of the value at initialisation: "
                     f"training barely moved it.")
    if len(t) >= 3:
        r = {c: math.nan if t[c].nunique() < 2 else float(sps.spearmanr(x, t[c]).statistic)
             for c in ("at init", "trained", "change")}
        rho = {c: "none (constant)" if math.isnan(v) else f"{v:+.2f}" for c, v in r.items()}
        n = sorted({int(table["n"].min()), int(table["n"].max())})
        parts.append(f"Spearman correlation with {by}: {rho['at init']} at initialisation, "
                     f"{rho['trained']} after training, {rho['change']} for the change "
                     f"({len(t)} values of {by}, {'-'.join(map(str, n))} model(s) each).")
        a, b = r["at init"], r["trained"]
        if not math.isnan(b) and b != 0:
            if not math.isnan(a) and a * b > 0 and abs(a) >= abs(b):
                parts.append(f"So its ordering over {by} after training was already there at "
                             f"initialisation: on this run it is inherited, not learned.")
            elif rel < SMALL_CHANGE:
                parts.append(f"Its ordering over {by} after training was not there at "
                             f"initialisation as strongly, but it rests on these small changes, "
                             f"not on a new shape: training nudged it.")
            else:
                parts.append(f"Its ordering over {by} after training was not there at "
                             f"initialisation as strongly: training changed it.")
    return " ".join(parts)


def accuracy_correlations(measures: Sequence[tuple[str, pd.DataFrame, pd.DataFrame, str]],
                          history: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """Spearman correlation across sigma (per-sigma means) of each measure with the models'
    validation accuracy after training, for the measure after training and at initialisation.

    Args:
        measures: ``(name, trained, at_init, column)``: per-model tables (``model``,
            ``sigma``) of the measure after training and at initialisation.
        history: the run's history (:func:`lstpe.analysis.seed_stats.with_accuracy`).
    Returns:
        Index ``measure``; ``rho``, ``pvalue`` (exact up to 8 sigmas), ``n`` (sigmas) of the
        trained measure, and ``rho at init.``: the measure before training against the same
        accuracy. Where that is as strong as ``rho``, the correlation was there before training.
        Each measure is rounded to ``digits`` first, as :func:`init_vs_final` shows it, so a
        measure the tables show as constant has no correlation (NaN), not one of float noise.
    """
    from lstpe.analysis.seed_stats import rank_correlation, with_accuracy

    rows = []
    for name, trained, init, col in measures:
        r, r0 = (rank_correlation(with_accuracy(t.assign(**{col: t[col].round(digits)}),
                                                history), col) for t in (trained, init))
        rows.append({"measure": name, **r, "rho at init.": r0["rho"]})
    return pd.DataFrame(rows).set_index("measure")


_SPLIT_WORDS = {"val_dropout": "validation accuracy as the authors evaluated it (dropout on)",
                "val": "validation accuracy (eval mode)"}


def rising_sentence(history: pd.DataFrame, split: str = "val_dropout", window: int = 50,
                    rise: float = RISE) -> str:
    """Which PEs were still climbing when their run stopped, which were level and which fell.

    Uses :func:`lstpe.analysis.curves.late_gain` (each PE's seed-mean curve over its last
    ``window`` epochs against the ``window`` before): above ``rise`` it is rising, below
    ``-rise`` falling, else level. A rising PE's value at its last epoch is not where a longer
    run would leave it; a level one may still move later (a flat stretch does not rule that
    out). PEs at chance at their last epoch (:func:`~lstpe.chapters.text.chance_test`) are named
    apart: their jitter is guessing. A history without ``split`` falls back to ``val``.
    """
    from lstpe.analysis.curves import late_gain
    from lstpe.store.results import final_table

    if split not in set(history["split"]) and "val" in set(history["split"]):
        split = "val"
    try:
        g = late_gain(history, split, window)
    except ValueError as err:
        return f"No late-gain reading: {err}."
    chance = chance_pes(final_table(history, split, include_diverged=True))  # each model's last
    live = g[~g.index.isin(chance)]
    up, down = live[live["gain"] > rise], live[live["gain"] < -rise]
    level = live[live["gain"].abs() <= rise]
    ends = set(zip(g["from_epoch"], g["to_epoch"], strict=True))
    if len(ends) == 1:
        (a, b), = ends
        when = f"epochs {a}-{b} against {a - window}-{b - window}"
    else:
        when = f"each PE's last {window} epochs against the {window} before"
    parts = [f"Seed means of {_SPLIT_WORDS.get(split, split)}, {when}:"]

    def moved(t: pd.DataFrame) -> str:
        return ", ".join(f"{pe} ({r.gain:+.3f}, {r.final:.3f} at {int(r.to_epoch)})"
                         for pe, r in t.iterrows())

    if len(up):
        parts.append(f"still rising: {moved(up)} (a longer run could move "
                     f"{'it' if len(up) == 1 else 'them'});")
    if len(level):
        parts.append(f"level within {rise:g}: " + ", ".join(
            f"{pe} ({r.final:.3f})" for pe, r in level.sort_index().iterrows()) + ";")
    if len(down):
        parts.append(f"falling: {moved(down)};")
    if chance:
        parts.append("at chance: " + ", ".join(sorted(chance)) + ";")
    return " ".join(parts)[:-1] + "."


def paper_gap_sentence(cmp: pd.DataFrame, final: pd.DataFrame, what: str,
                       digits: int = 3) -> str:
    """Ours minus the paper over the rows whose models are above chance, and their side.

    Args:
        cmp: :func:`lstpe.analysis.paper_compare.compare_to_paper` rows (``pe``, ``n``,
            ``mean``, ``paper_mean``).
        final: one validation row per model; the PEs of ``cmp`` within noise of chance there
            (:func:`~lstpe.chapters.text.chance_test`) are left out and named.
        what: the measure, e.g. ``"attention cosine (paper variant)"``.
        digits: the differences are rounded to this many decimals before their side is read
            (a difference that rounds to 0 is "equal").
    """
    chance = chance_pes(final) & set(cmp["pe"].astype(str))
    rows = cmp[~cmp["pe"].astype(str).isin(chance) & cmp["mean"].notna()]
    left = f" At chance, not compared: {', '.join(sorted(chance))}." if chance else ""
    if rows.empty:
        return f"No row above chance: the {what} is not compared with the paper.{left}"
    d = (rows["mean"] - rows["paper_mean"]).round(digits)
    n_rows = f"{len(d)} row{'s' * (len(d) != 1)}"
    below, above = int((d < 0).sum()), int((d > 0).sum())
    equal = len(d) - below - above
    if below == len(d):
        side = "below the paper in every row" if len(d) > 1 else "below the paper"
    elif above == len(d):
        side = "above the paper in every row" if len(d) > 1 else "above the paper"
    else:
        side = "; ".join(f"{k} in {v}" for k, v in
                         (("below", below), ("above", above), ("equal", equal)) if v)
    n = int(rows["n"].min())
    few = (f" With {_span(n, int(rows['n'].max()))} seed(s) per row this describes these "
           "models; it tests nothing." if n < MIN_SEEDS_FOR_CI else "")
    span = (f"{d.iloc[0]:+.{digits}f}" if len(d) == 1 else
            f"{d.min():+.{digits}f} to {d.max():+.{digits}f} (mean {d.mean():+.{digits}f})")
    return (f"Ours minus the paper, {what}, over the {n_rows} above chance: {span}, "
            f"{side}.{few}{left}")
