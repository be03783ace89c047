"""Tables and sentences about one run, as the chapters (5-10) show them.

* :data:`SPLIT_LABELS`, :data:`SHORT_VERDICT`: how the tables name splits and verdicts;
* :func:`compare_splits`, :func:`compact`, :func:`summary`: a paper table lined up against
  ours, like for like (the paper's validation accuracy against ours evaluated as the authors
  did, its training accuracy against our running training accuracy), with the other evaluation
  beside it, and the columns formatted so that the table fits the page;
* :func:`complexity_table`, :func:`complexity_sentence`: accuracy per relational complexity,
  and a sentence that says what this table shows (not what people do);
* :func:`pe_kernel`, :func:`pe_kernels`: the position x position cosine of learned PEs;
* :func:`noise_loss`, :func:`noise_sentence`: accuracy per noise level and the accuracy lost
  to the largest one; what the table shows in the paper's measure;
* :func:`human_table`, :func:`constant_cosine`, :func:`human_summary`: the models-and-humans
  table in a few columns, the cosine any constant model reaches, the chapter's "this run" line;
* :func:`run_summary`: the "this run" line of a chapter's takeaways.

Our numbers beside the authors' logs and beside initialisation are in
:mod:`lstpe.chapters.baselines`.

Accuracy columns are the history's (:data:`lstpe.store.results.HISTORY_COLUMNS`); comparisons are
:func:`lstpe.analysis.paper_compare.compare_to_paper` tables. Part of :mod:`lstpe.chapters`; imports
from :mod:`lstpe.chapters.text` only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from lstpe.chapters.text import _names, _span, caveats, chance_pes, chance_test

__all__ = [
    "SPLIT_LABELS", "SHORT_VERDICT", "AT_CHANCE", "compare_splits", "compact", "summary",
    "complexity_table", "complexity_sentence", "pe_kernel", "pe_kernels", "noise_loss",
    "noise_sentence", "human_table", "constant_cosine", "human_summary", "run_summary",
]

SPLIT_LABELS: dict[str, str] = {
    "val_dropout": "dropout on",
    "val": "eval mode",
    "train_running": "running",
    "train": "eval mode",
    "test": "held out",
}
"""How the chapters name each split of the history."""

SHORT_VERDICT = {"too few seeds (n<5)": "no test (n<5)"}

AT_CHANCE = "at chance"
"""The verdict of a row whose models' validation accuracy is within noise of chance."""

MIN_SEEDS = 5
"""Seeds a row needs before a correlation or verdict is computed from it."""


# --------------------------------------------------------------------------- paper tables


def compare_splits(exp: Any, table: int | str, splits: Sequence[str] = ("val_dropout", "val"),
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
        :func:`lstpe.analysis.paper_compare.compare_to_paper`'s columns plus ``split`` (the
        first), ``mean_<split>`` for the others and ``at_chance``: the PE's validation
        accuracy (eval mode, seeds pooled) is within noise of chance (:func:`chance_test`), so
        its row says nothing about the paper (:func:`compact` shows no difference for it).
    """
    from lstpe.analysis import paper_compare

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
    paper); ``verdict`` (``no test (n<5)`` for too few seeds). ``index`` (``pe`` or
    ``sigma``) becomes the index. Rows ``at_chance`` (:func:`compare_splits`) get ``-`` as
    their difference and ``at chance`` as their verdict: guessing is not compared with the
    paper.
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
    if cmp["ci_low"].notna().any():  # no column of dashes: it appears with 5 seeds
        out["95% CI"] = ["-" if math.isnan(lo) else f"[{lo:.{digits}f}, {hi:.{digits}f}]"
                         for lo, hi in zip(cmp["ci_low"], cmp["ci_high"], strict=True)]
    out["paper"] = [_pm(m, s, digits) for m, s in zip(cmp["paper_mean"], cmp["paper_sd"],
                                                      strict=True)]
    chance = _chance_flags(cmp)
    out["diff"] = ["-" if c else f"{d:+.{digits}f}"
                   for d, c in zip(cmp["diff"], chance, strict=True)]
    out["verdict"] = [AT_CHANCE if c else SHORT_VERDICT.get(v, v)
                      for v, c in zip(cmp["verdict"], chance, strict=True)]
    return out


def summary(table: pd.DataFrame, value: str = "accuracy", by: str = "pe", digits: int = 3,
            min_seeds: int = 5) -> pd.DataFrame:
    """Per group: ``n``, ``mean ± SD`` and the 95% t interval as text (``-`` under
    ``min_seeds`` seeds, where an interval from so few values says nothing)."""
    from lstpe.analysis import seed_stats

    s = seed_stats.summarize(table, value, by)
    out = pd.DataFrame(index=s[by].to_numpy())
    out.index.name = by
    out["n"] = s["n"].to_numpy()
    out["mean ± SD"] = [_pm(m, sd, digits) for m, sd in zip(s["mean"], s["sd"], strict=True)]
    out["95% CI"] = ["-" if n < min_seeds else f"[{lo:.{digits}f}, {hi:.{digits}f}]"
                     for n, lo, hi in zip(s["n"], s["ci_low"], s["ci_high"], strict=True)]
    return out


# --------------------------------------------------------------------------- complexity


def complexity_table(exp: Any, pes: Sequence[str] | None = None,
                     humans: pd.DataFrame | None = None) -> pd.DataFrame:
    """Validation accuracy per relational complexity (1, 2, 3 vectors): models and people.

    Models: mean over seeds of each seed's accuracy on the condition's 36 puzzles (eval mode).
    People: the mean per-puzzle accuracy of the 40 participants (:func:`lstpe.lst.human_accuracy`).

    Returns:
        Index ``pe`` (``people`` last), columns ``1``, ``2``, ``3`` and ``falls`` (accuracy
        strictly decreasing from 1 to 3 vectors), ``at_chance`` (overall accuracy within noise
        of chance, :func:`chance_test`; False for people).
    """
    from lstpe import lst

    parts = [exp.final("val", c).assign(vectors=c) for c in ("1", "2", "3")]
    t = pd.concat(parts).pivot_table(index="pe", columns="vectors", values="accuracy",
                                     aggfunc="mean")
    order = [p for p in (pes or dict.fromkeys(exp.final("val")["pe"])) if p in t.index]
    t = t.loc[order]
    t.columns = [str(c) for c in t.columns]
    ct = chance_test(exp.final("val")).set_index("pe")["at_chance"]
    t["at_chance"] = [bool(ct.get(p, False)) for p in t.index]
    h = lst.human_accuracy() if humans is None else humans
    people = h.groupby("vectors")["accuracy"].mean()
    t.loc["people"] = [*(float(people[v]) for v in (1, 2, 3)), False]
    vals = t[["1", "2", "3"]].to_numpy(float)
    t.insert(3, "falls", (vals[:, 0] > vals[:, 1]) & (vals[:, 1] > vals[:, 2]))
    t.index.name = "pe"
    return t


def complexity_sentence(table: pd.DataFrame) -> str:
    """What :func:`complexity_table` shows, in words: the people's fall, and for which models
    accuracy falls with complexity on this run (models at chance are named apart)."""
    h = table.loc["people", ["1", "2", "3"]].astype(float)
    models = table.drop(index="people")
    real = models[~models["at_chance"].astype(bool)]
    noise = models[models["at_chance"].astype(bool)]
    out = [f"People: {h['1']:.2f} -> {h['2']:.2f} -> {h['3']:.2f} from 1- to 3-vector puzzles."]
    if len(real):
        falls = real[real["falls"].astype(bool)].index
        rest = real[~real["falls"].astype(bool)].index
        out.append(f"On this run accuracy falls from 1 to 2 to 3 vectors for {len(falls)} of "
                   f"{len(real)} models above chance" + (f" ({_names(falls)})" if len(falls)
                                                          else "")
                   + (f"; not for {_names(rest)}." if len(rest) else "."))
    if len(noise):
        out.append(f"{len(noise)} model(s) ({_names(noise.index)}) are within noise of chance "
                   f"overall: they guess, and their per-condition differences, whatever their "
                   f"order, come from noise and from which answers a guessing model prefers, "
                   f"not from the puzzles' complexity.")
    return " ".join(out)


# --------------------------------------------------------------------------- learned PEs


def pe_kernel(pe: Any) -> np.ndarray:
    """Position x position cosine of a (n, d) PE (rows normalised; zero rows stay zero)."""
    p = np.asarray(pe, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"a PE is (positions, dims), got shape {p.shape}")
    norm = np.linalg.norm(p, axis=-1, keepdims=True)
    p = np.divide(p, norm, out=np.zeros_like(p), where=norm > 0)
    return p @ p.T


def pe_kernels(artifacts: Mapping[str, Any], seed: int | None = None, block: int = 0,
               stage: str = "final", pes: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """:func:`pe_kernel` of block ``block``'s PE for every model of one seed, by PE label.

    Args:
        artifacts: with ``labels``, ``seeds`` and ``pe_final`` / ``pe_init`` (M, L, n, d).
        seed: default the first model's seed.
        stage: ``final`` or ``init``.
        pes: only these labels (in this order).
    Raises:
        ValueError: unknown stage, seed or PE.
    """
    if stage not in ("final", "init"):
        raise ValueError(f"unknown stage {stage!r}; valid: final, init")
    labels, seeds = list(artifacts["labels"]), [int(s) for s in artifacts["seeds"]]
    seed = seeds[0] if seed is None else int(seed)
    if seed not in seeds:
        raise ValueError(f"no model with seed {seed}; seeds: {sorted(set(seeds))}")
    pe = artifacts[f"pe_{stage}"]
    idx = {lab: i for i, (lab, s) in enumerate(zip(labels, seeds, strict=True)) if s == seed}
    want = list(pes) if pes is not None else list(idx)
    missing = [p for p in want if p not in idx]
    if missing:
        raise ValueError(f"no model {missing} with seed {seed}; labels: {', '.join(idx)}")
    out = {}
    for lab in want:
        x = pe[idx[lab], block]
        x = x.float().numpy() if hasattr(x, "float") else np.asarray(x)
        out[lab] = pe_kernel(x)
    return out


def noise_loss(noise: pd.DataFrame, condition: str = "all",
               pes: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean accuracy over seeds per PE at the smallest and the largest noise std, and the
    accuracy lost between them (``loss``; positive = noise hurts). Three columns, so the table
    fits a page; :func:`lstpe.analysis.plots.plot_noise_heatmap` shows every level.

    Args:
        noise: :func:`lstpe.training.noise.noise_robustness` table (``noise, pe, condition,
        accuracy``).
        pes: row order (default: first seen).
    Raises:
        ValueError: no rows for ``condition``, or fewer than two noise levels.
    """
    r = noise[noise["condition"].astype(str) == condition]
    if r.empty:
        raise ValueError(f"no rows for condition {condition!r}")
    t = r.pivot_table(index="pe", columns="noise", values="accuracy", aggfunc="mean")
    if t.shape[1] < 2:
        raise ValueError("need at least two noise levels")
    t = t.loc[[p for p in (pes or dict.fromkeys(r["pe"])) if p in t.index]]
    lo, hi = min(t.columns), max(t.columns)
    t = t[[lo, hi]].copy()
    t["loss"] = t[lo] - t[hi]
    t.columns = [f"noise {c:g}" if not isinstance(c, str) else c for c in t.columns]
    t.index.name = "pe"
    return t


# --------------------------------------------------------------------------- humans


PAPER_ROBUST_SIGMAS = (0.1, 0.6)
"""The range of sigma the earlier version of the paper found most robust to embedding noise."""


def noise_sentence(noise: pd.DataFrame, final: pd.DataFrame | None = None,
                   condition: str = "all") -> str:
    """What a noise table shows, in the paper's measure: each PE's mean accuracy over the noisy
    levels (std > 0, seeds and levels pooled; the paper's Fig. A9D), highest first; the most
    robust learnable PE and whether its sigma lies in the paper's most robust range
    (:data:`PAPER_ROBUST_SIGMAS`); the largest drop from no noise to the largest std, and, where
    the drop alone ranks another learnable PE most robust, that one (the mean over levels
    carries clean accuracy with it). PEs within noise of chance in ``final`` (one validation
    row per model) are named apart.
    """
    r = noise[noise["condition"].astype(str) == condition]
    noisy = r[r["noise"] > 0]
    if noisy.empty:
        raise ValueError(f"no noisy rows for condition {condition!r}")
    low = chance_pes(final)
    avg = noisy.groupby("pe")["accuracy"].mean().sort_values(ascending=False)
    real = avg[[p for p in avg.index if p not in low]]
    seeds = r.groupby("pe")["seed"].nunique()
    lo, hi = noisy["noise"].min(), noisy["noise"].max()
    parts = [f"Mean validation accuracy over the noise stds {lo:g}-{hi:g} (the paper's Fig. A9D "
             f"measure; {_span(seeds.min(), seeds.max())} seed(s) per PE), highest first: "
             + ", ".join(f"{p} {v:.3f}" for p, v in real.items()) + "."]
    learn = [p for p in real.index if str(p).startswith("learn-")]
    if len(learn) > 1:
        sigma = float(str(learn[0]).split("-", 1)[1])
        a, b = PAPER_ROBUST_SIGMAS
        where = "inside" if a <= sigma <= b else "outside"
        parts.append(f"The most robust learnable PE here is {learn[0]}, {where} the paper's "
                     f"most robust range σ = {a:g}-{b:g}.")
    loss = noise_loss(noise, condition)["loss"].drop(list(low), errors="ignore")
    if len(loss):
        parts.append(f"Largest drop from no noise to {hi:g}: {loss.idxmax()} "
                     f"({loss.max():.3f}).")
    kept = loss[[str(p).startswith("learn-") for p in loss.index]].dropna().round(3)
    if len(learn) > 1 and learn[0] in kept and kept.min() < kept[learn[0]]:
        parts.append(f"The mean over noise levels carries each PE's clean accuracy with it; by "
                     f"the drop alone the most robust learnable PE is {kept.idxmin()} "
                     f"({kept.min():.3f}), and {learn[0]} drops {kept[learn[0]]:.3f}.")
    if low:
        parts.append(f"Within noise of chance, not ranked: {', '.join(sorted(low))}.")
    ranked = seeds[[str(p) not in low for p in seeds.index]]  # PEs at chance: named above
    ranked = ranked if len(ranked) else seeds
    if ranked.max() < MIN_SEEDS:
        parts.append(f"With fewer than {MIN_SEEDS} seeds per PE this describes these models; it "
                     "tests nothing.")
    elif ranked.min() < MIN_SEEDS:
        few = sorted(str(p) for p in ranked.index[ranked < MIN_SEEDS])
        parts.append(f"Below {MIN_SEEDS} seeds ({', '.join(few)}) a PE's value describes its few "
                     "models; nothing here is a test.")
    return " ".join(parts)


def human_table(sim: pd.DataFrame, by: str = "pe", digits: int = 3) -> pd.DataFrame:
    """:func:`lstpe.analysis.humans.human_similarity` in five short columns, sorted by
    composite: ``accuracy`` (the model's mean over puzzles), ``cosine``, ``Spearman ρ``,
    ``p (ρ)``, ``composite``; index ``by`` (``pe`` or ``sigma``)."""
    t = sim.sort_values("composite", ascending=False, na_position="last")
    out = pd.DataFrame({"accuracy": t["model_accuracy"], "cosine": t["cosine"],
                        "Spearman ρ": t["spearman"], "p (ρ)": t["spearman_p"],
                        "composite": t["composite"]}).round(digits)
    out.index = t[by].to_numpy()
    out.index.name = by
    return out


def constant_cosine(human: Sequence[float] | pd.Series) -> float:
    """Cosine between the people's per-puzzle accuracy and *any* constant vector: the score a
    model gets that finds every puzzle equally hard (0.985 for the 108 puzzles), the floor
    against which a model's cosine means something."""
    h = np.asarray(human, dtype=np.float64)
    if h.ndim != 1 or h.size == 0 or not np.linalg.norm(h) > 0:
        raise ValueError("need a non-empty, non-zero vector of accuracies")
    return float(h.sum() / (math.sqrt(h.size) * np.linalg.norm(h)))


def human_summary(sim: pd.DataFrame, exp: Any, final: pd.DataFrame | None = None,
                  human: Sequence[float] | None = None, with_caveats: bool = False) -> str:
    """The "this run" line of chapter 9: the PE with the highest composite, where
    ``learn-0.2`` ranks, how many cosines beat the constant-model floor, and (``with_caveats``)
    the run's :func:`caveats` -- off by default: a page says them once, in its admonition and
    :func:`~lstpe.chapters.text.show_runs`."""
    t = sim.dropna(subset=["composite"]).sort_values("composite", ascending=False)
    parts = []
    if t.empty:
        parts.append("No PE has a composite score (every rank correlation is undefined).")
    else:
        best = t.iloc[0]
        score = (f"({best['composite']:.3f}: cosine {best['cosine']:.3f}, Spearman "
                 f"{best['spearman']:.3f})")
        none = [str(x) for x in sim["pe"] if x not in set(t["pe"])]
        if len(t) == 1:
            parts.append(f"Only {best['pe']} has a composite score {score}; nothing to rank it "
                         "against.")
        else:
            parts.append(f"Highest composite on this run: {best['pe']} {score}.")
            if "learn-0.2" in set(t["pe"]):
                rank = list(t["pe"]).index("learn-0.2") + 1
                parts.append(f"learn-0.2 ranks {rank} of {len(t)}.")
        if none:
            parts.append(f"No rank correlation, hence no composite: {', '.join(none)} "
                         "(the same accuracy on every puzzle).")
    if human is not None:
        floor = constant_cosine(human)
        above = int((sim["cosine"] > floor).sum())
        parts.append(f"{above} of {len(sim)} cosines exceed {floor:.3f}, the cosine of a model "
                     f"that finds every puzzle equally hard.")
    cav = caveats(exp, final) if with_caveats else []
    if cav:
        parts.append("Caveats: " + " ".join(cav))
    return " ".join(parts)


# --------------------------------------------------------------------------- takeaways


def run_summary(cmp: pd.DataFrame, exp: Any, final: pd.DataFrame | None = None,
                what: str = "validation accuracy", with_caveats: bool = False) -> str:
    """One paragraph for a chapter's takeaways: the range of our means over the rows whose
    models are above chance, beside the paper's over the same rows; the rows at chance, named
    and not compared (a run whose every row is at chance is not compared with the paper at
    all); the rank correlation with the paper's means (only with ``MIN_SEEDS`` seeds per row);
    the verdict counts; and (``with_caveats``) the run's :func:`caveats` -- off by default: a
    page says them once, in its admonition and :func:`~lstpe.chapters.text.show_runs`.

    A row is at chance when :func:`compare_splits` marked it (``at_chance``) or its PE is
    within noise of chance in ``final`` (:func:`chance_test`)."""
    name = getattr(exp, "name", "run")
    chance = _chance_flags(cmp) | cmp["pe"].astype(str).isin(chance_pes(final))
    real, low = cmp[~chance], cmp[chance]
    parts: list[str] = []
    if real.empty:
        parts.append(f"This run ({name}): every model is within noise of chance ({what} "
                     f"{cmp['mean'].min():.3f}-{cmp['mean'].max():.3f}), so none of it is "
                     "compared with the paper.")
    else:
        parts.append(f"This run ({name}): {what} {real['mean'].min():.3f}-"
                     f"{real['mean'].max():.3f} across {len(real)} rows above chance (paper, "
                     f"same rows: {real['paper_mean'].min():.3f}-"
                     f"{real['paper_mean'].max():.3f}).")
        if len(low):
            parts.append(f"Within noise of chance, not compared: {_names(low['pe'])}.")
        from lstpe.analysis.seed_stats import for_ranking  # float32 noise is no order

        ranked = for_ranking(real["mean"])
        n_few = int((real["n"] < MIN_SEEDS).sum()) if "n" in real else len(real)
        if n_few == len(real):
            parts.append(f"No rank correlation with the paper: fewer than {MIN_SEEDS} seeds per "
                         "row, so our means come from a few models each.")
        elif n_few:
            parts.append(f"No rank correlation with the paper: {n_few} of the {len(real)} rows "
                         f"{'has' if n_few == 1 else 'have'} fewer than {MIN_SEEDS} seeds, so "
                         "a ranking would mix means of a few models with estimates.")
        elif len(real) >= 3 and len(np.unique(ranked)) > 1:
            rho = sps.spearmanr(ranked, real["paper_mean"]).statistic
            parts.append(f"Spearman correlation of our means with the paper's: {rho:.2f} over "
                         f"{len(real)} rows, each of {int(real['n'].min())} or more seeds.")
        counts = real["verdict"].map(lambda v: SHORT_VERDICT.get(v, v)).value_counts()
        parts.append("Verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".")
    cav = caveats(exp, final) if with_caveats else []
    if cav:
        parts.append("Caveats: " + " ".join(cav))
    return " ".join(parts)
