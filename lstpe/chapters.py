"""What the chapters print and tabulate, kept out of their cells.

The book's chapters (5-11) call these so that a cell stays a few lines long and every chapter
words its results the same way:

* :func:`chance_test`, :func:`caveats`, :func:`warn`: say next to the numbers when a run cannot
  test the paper -- ``preview`` scale, fewer seeds than an interval needs, fewer epochs than the
  paper, or accuracies within noise of chance (0.25);
* :func:`compare_splits`, :func:`compact`: a paper table lined up against ours, like for like
  (the paper's validation accuracy against ours evaluated as the authors did, its training
  accuracy against our running training accuracy), with the other evaluation beside it and
  the columns formatted so that the table fits the page;
* :func:`complexity_table`, :func:`complexity_sentence`: accuracy per relational complexity,
  and a sentence that says what this table shows (not what people do);
* :func:`pe_kernels`: the position x position cosine of learned PEs;
* :func:`noise_loss`: accuracy per noise level and the accuracy lost to the largest one;
* :func:`human_table`, :func:`constant_cosine`, :func:`human_summary`: the models-and-humans
  table in a few columns, the cosine any constant model reaches, the chapter's "this run" line;
* :func:`outside_paper_interval`, :func:`explain_rows`: which rows of the reproduction report
  fall outside the paper's 95% interval, and the reason the evidence gives for each;
* :func:`paper_report`, :func:`both_evaluations`, :func:`outside_rows`,
  :func:`report_summary`: the reproduction report (chapter 11): every paper table against our
  runs like for like, both evaluations of the PEs with dropout, the rows outside the paper's
  interval grouped by reason, and its verdict in words;
* :func:`run_summary`: the "this run" line of a chapter's takeaways;
* :func:`describe_setup`: the chapter's setup line without local paths.

Accuracy columns are the history's (:data:`lstpe.results.HISTORY_COLUMNS`); comparisons are
:func:`lstpe.analysis.stats.compare_to_paper` tables.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

__all__ = [
    "CHANCE", "N_VAL_PUZZLES", "PAPER_EPOCHS", "SPLIT_LABELS", "chance_test", "caveats",
    "warn", "say", "compare_splits", "compact", "summary", "complexity_table",
    "complexity_sentence",
    "pe_kernel", "pe_kernels", "noise_loss", "human_table", "constant_cosine", "human_summary",
    "outside_paper_interval", "explain_rows", "REPORT_ROWS", "paper_report", "verdict_table",
    "both_evaluations",
    "outside_rows", "report_summary", "run_summary", "describe_setup",
]

CHANCE = 0.25
"""Accuracy of guessing one of the four shapes."""

N_VAL_PUZZLES = 108
"""Validation puzzles (the ones people solved)."""

PAPER_EPOCHS = 4000
"""Epochs the authors trained every model."""

PAPER_SEEDS = 15

SPLIT_LABELS: dict[str, str] = {
    "val_dropout": "dropout on",
    "val": "eval mode",
    "train_running": "running",
    "train": "eval mode",
    "test": "held out",
}
"""How the chapters name each split of the history."""

SHORT_VERDICT = {"too few seeds (n<5)": "no test (n<5)"}


# --------------------------------------------------------------------------- noise and scale


def chance_test(final: pd.DataFrame, chance: float = CHANCE, n_items: int = N_VAL_PUZZLES,
                by: str = "pe", value: str = "accuracy", alpha: float = 0.05) -> pd.DataFrame:
    """Is each group's accuracy above chance, beyond what guessing gives?

    Pools the group's seeds: ``k`` correct answers out of ``n_items * seeds`` (each seed's
    accuracy times ``n_items``, rounded) and a one-sided binomial test of ``k`` against
    ``chance``. A group is ``at_chance`` when that test does not reject at ``alpha``: its
    accuracy is within noise of guessing, and any ranking or correlation built on it is noise.

    Args:
        final: one row per model (e.g. ``Run.final("val")``).
        n_items: puzzles behind each accuracy (108 validation puzzles).
    Returns:
        ``by, seeds, mean, k, trials, p_above_chance, at_chance`` in first-seen order.
    Raises:
        ValueError: empty table, missing columns, accuracies outside [0, 1], ``n_items < 1``.
    """
    if final.empty:
        raise ValueError("the table is empty")
    missing = [c for c in (by, value) if c not in final]
    if missing:
        raise ValueError(f"table lacks columns {missing}; has {', '.join(final.columns)}")
    if n_items < 1:
        raise ValueError(f"n_items must be >= 1, got {n_items}")
    acc = final[value].to_numpy(float)
    if not np.all((acc >= 0) & (acc <= 1)):
        raise ValueError(f"{value} must lie in [0, 1]")
    rows = []
    for key, g in final.groupby(by, sort=False):
        correct = np.rint(g[value].to_numpy(float) * n_items).astype(int)
        k, n = int(correct.sum()), n_items * len(g)
        p = float(sps.binomtest(k, n, chance, alternative="greater").pvalue)
        rows.append({by: key, "seeds": len(g), "mean": float(g[value].mean()), "k": k,
                     "trials": n, "p_above_chance": p, "at_chance": p >= alpha})
    return pd.DataFrame(rows)


def _cfg(exp: Any) -> dict:
    return getattr(exp, "config", None) or {}


def _names(labels: Iterable[Any], limit: int = 12) -> str:
    labels = [str(x) for x in labels]
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more


def caveats(exp: Any, final: pd.DataFrame | None = None, by: str = "pe",
            min_seeds: int = 5) -> list[str]:
    """Why the numbers of a run cannot (fully) test the paper, one sentence each.

    * ``preview`` scale: the run is a pipeline check (its size named);
    * fewer seeds than ``min_seeds``: no confidence interval and no verdict;
    * fewer epochs than the paper's 4000 (at paper scale): the epochs and why (the run's
      :data:`lstpe.experiments.REGISTRY` entry);
    * with ``final`` (one validation row per model): the groups whose accuracy is within noise
      of chance (:func:`chance_test`), or that every group is.

    Args:
        exp: an :class:`lstpe.results.Run` (anything with ``config`` and ``name``).
    Returns:
        The sentences; empty when the run is a full-scale run above chance.
    """
    from lstpe.experiments import REGISTRY

    cfg = _cfg(exp)
    name = getattr(exp, "name", "this run")
    seeds = cfg.get("seeds") or []
    epochs = cfg.get("epochs")
    out = []
    if cfg.get("preset") == "preview":
        model = cfg.get("model") or {}
        out.append(
            f"{name} is a PREVIEW-scale run ({len(seeds)} seed(s), {epochs} epochs, "
            f"d_model={model.get('d_model')}, {model.get('n_layers')} blocks, "
            f"{cfg.get('n_train') or 'all'} training puzzles): it checks that the pipeline "
            f"runs end to end; its numbers cannot test the paper ({PAPER_SEEDS} seeds, d_model=160,"
            f" 4 blocks, {PAPER_EPOCHS} epochs).")
    if 0 < len(seeds) < min_seeds:
        out.append(f"{name} has {len(seeds)} seed(s): no confidence interval and no verdict "
                   f"(those need {min_seeds}).")
    if cfg.get("preset") == "paper" and epochs is not None and epochs < PAPER_EPOCHS:
        spec = REGISTRY.get(name)
        why = f" ({spec.why})" if spec is not None else ""
        out.append(f"{name} trained {epochs} epochs, not the paper's {PAPER_EPOCHS}{why}.")
    if final is not None and not final.empty:
        ct = chance_test(final, by=by)
        low = ct[ct["at_chance"]]
        what = "PE" if by == "pe" else by
        if len(low) == len(ct):
            out.append(f"every {what} of {name} is within noise of chance ({CHANCE}; one-sided "
                       f"binomial test over seeds x puzzles, p >= 0.05): these models guess, "
                       f"and any ranking, difference or correlation computed from their "
                       f"answers reflects guessing (noise and answer biases), not the task.")
        elif len(low):
            out.append(f"{len(low)} of {len(ct)} ({_names(low[by])}) of {name} are within "
                       f"noise of chance ({CHANCE}): their rankings and correlations reflect "
                       f"guessing, not the task.")
    return out


PRINT_WIDTH = 76
"""Characters per printed line: a chapter's output box shows about this many without
scrolling."""


def say(text: str, width: int = PRINT_WIDTH, prefix: str = "") -> None:
    """Print ``text`` wrapped to ``width`` characters (continuation lines indented), so that
    the book's output boxes show all of it without scrolling; existing line breaks are kept."""
    import textwrap

    for para in str(text).split("\n"):
        print(textwrap.fill(prefix + para, width=width, subsequent_indent="  ",
                            break_on_hyphens=False))


def source_note(run: Any) -> str:
    """What a run's source can and cannot show, in plain sentences (the chapters print it
    under every run: paper > cpu > preview, see :func:`lstpe.runs.get_run`)."""
    cfg = _cfg(run)
    scale, seeds = cfg.get("preset"), len(cfg.get("seeds") or [])
    length = f"{cfg['epochs']} epochs" if "epochs" in cfg else f"{cfg.get('steps')} steps"
    stored = getattr(run, "source", "") == "stored"
    where = "stored under results/" if stored else "trained in this kernel"
    if scale == "paper":
        return (f"Source: the paper-scale run ({where}; {seeds} seeds, {length}, the authors' "
                "model and data). Its numbers can be set against the paper's tables; the "
                "report (chapter 11) does so row by row.")
    if scale == "cpu":
        return (f"Source: the paper's model, data and learning rate trained on a CPU "
                f"({where}; {seeds} seeds, {length}, bf16 autocast) - not the paper's 4000 "
                "epochs on a GPU. It shows which encodings learn the task early and in which "
                "order; it cannot show the converged accuracies of the paper's tables, and a "
                "slow starter such as 2d-fixed is still rising when it stops.")
    if scale == "preview":
        return (f"Source: a preview {where} (a small model on part of the data, {seeds} "
                f"seed(s), {length}). It shows that the pipeline runs end to end; where it sits "
                "at chance its rankings are noise and prove nothing about the paper. A run "
                "stored under results/paper (GPU) or results/cpu replaces it when there is one.")
    return f"Source: a custom configuration ({where}; {seeds} seeds, {length})."


def show_run(run: Any, final: pd.DataFrame | None = None, by: str = "pe") -> None:
    """Print where a run's numbers come from (:meth:`lstpe.results.Run.describe`), what that
    source can show (:func:`source_note`) and its caveats (:func:`warn`; ``final``: the
    validation table, default ``run.final("val")``)."""
    say(run.describe())
    say(source_note(run))
    if "epochs" in _cfg(run):  # an LST run (the brain's has steps and no accuracy)
        warn(run, run.final("val") if final is None else final, by=by)


def warn(exp: Any, final: pd.DataFrame | None = None, by: str = "pe") -> None:
    """Print :func:`caveats`, wrapped (nothing when there are none)."""
    for line in caveats(exp, final, by=by):
        say(line, prefix="WARNING: ")


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
        :func:`lstpe.analysis.stats.compare_to_paper`'s columns plus ``split`` (the first) and
        ``mean_<split>`` for the others.
    """
    from lstpe.analysis import stats

    def final(split: str) -> pd.DataFrame:
        f = exp.final(split)
        return f[f["pe_name"] == pe_name] if pe_name is not None else f

    cmp = stats.compare_to_paper(final(splits[0]), table, metric=metric, setting=setting)
    cmp.insert(cmp.columns.get_loc("mean"), "split", splits[0])
    for s in splits[1:]:
        means = final(s).groupby("pe")["accuracy"].mean()
        cmp.insert(cmp.columns.get_loc("ci_low"), f"mean_{s}", cmp["pe"].map(means).to_numpy())
    return cmp


def _pm(mean: float, sd: float, digits: int) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    if sd is None or (isinstance(sd, float) and math.isnan(sd)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def compact(cmp: pd.DataFrame, index: str = "pe", names: Mapping[str, str] | None = None,
            digits: int = 3) -> pd.DataFrame:
    """A comparison table formatted to fit a page: a few short text columns.

    Columns: ``n``; ``ours (<split>)`` (mean ± SD over seeds; the split the verdict is
    about); one column ``ours (<split>)`` per ``mean_<split>`` of :func:`compare_splits`
    (splits named by ``names`` or :data:`SPLIT_LABELS`); ``95% CI`` (``-``
    without one); ``paper`` (mean ± SD, 15 seeds); ``diff`` (ours - paper); ``verdict``
    (``no test (n<5)`` for too few seeds). ``index`` (``pe`` or ``sigma``) becomes the index.
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
    out["95% CI"] = ["-" if math.isnan(lo) else f"[{lo:.{digits}f}, {hi:.{digits}f}]"
                     for lo, hi in zip(cmp["ci_low"], cmp["ci_high"], strict=True)]
    out["paper"] = [_pm(m, s, digits) for m, s in zip(cmp["paper_mean"], cmp["paper_sd"],
                                                      strict=True)]
    out["diff"] = [f"{d:+.{digits}f}" for d in cmp["diff"]]
    out["verdict"] = [SHORT_VERDICT.get(v, v) for v in cmp["verdict"]]
    return out


def summary(table: pd.DataFrame, value: str = "accuracy", by: str = "pe", digits: int = 3,
            min_seeds: int = 5) -> pd.DataFrame:
    """Per group: ``n``, ``mean ± SD`` and the 95% t interval as text (``-`` under
    ``min_seeds`` seeds, where an interval from so few values says nothing)."""
    from lstpe.analysis import stats

    s = stats.summarize(table, value, by)
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
        noise: :func:`lstpe.noise.noise_robustness` table (``noise, pe, condition, accuracy``).
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
                  human: Sequence[float] | None = None) -> str:
    """The "this run" line of chapter 9: the PE with the highest composite, where
    ``learn-0.2`` ranks, how many cosines beat the constant-model floor, and the caveats."""
    t = sim.dropna(subset=["composite"]).sort_values("composite", ascending=False)
    parts = []
    if t.empty:
        parts.append("No PE has a composite score (every rank correlation is undefined).")
    else:
        best = t.iloc[0]
        parts.append(f"Highest composite on this run: {best['pe']} ({best['composite']:.3f}: "
                     f"cosine {best['cosine']:.3f}, Spearman {best['spearman']:.3f}).")
        if "learn-0.2" in set(t["pe"]):
            rank = list(t["pe"]).index("learn-0.2") + 1
            parts.append(f"learn-0.2 ranks {rank} of {len(t)}.")
    if human is not None:
        floor = constant_cosine(human)
        above = int((sim["cosine"] > floor).sum())
        parts.append(f"{above} of {len(sim)} cosines exceed {floor:.3f}, the cosine of a model "
                     f"that finds every puzzle equally hard.")
    cav = caveats(exp, final)
    if cav:
        parts.append("Caveats: " + " ".join(cav))
    return " ".join(parts)


# --------------------------------------------------------------------------- the report


PAPER_ROUNDING = 0.0005
"""Half a unit of the paper's third decimal: its tables are rounded, so an SD of 0.000 means
less than this, and no interval is narrower than ± this."""


def outside_paper_interval(cmp: pd.DataFrame, level: float = 0.95,
                           n_paper: int = PAPER_SEEDS) -> pd.Series:
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

    ``report`` holds :func:`lstpe.analysis.stats.compare_to_paper` rows with a ``run`` column
    (the key of ``runs``) and ``metric``; rows inside the paper's interval get ``""``.
    Reasons, first match wins: the run is at preview scale; too few seeds; ``rope`` (the
    published row cannot come from the authors' public module, deviation 6); 2d-fixed or
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
            from lstpe.experiments import REGISTRY

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
        attention: layer-averaged attention similarity of the ``table2`` run
            (:func:`lstpe.analysis.attention.similarity_to_reference`, then ``average_layers``)
            for Table 3; None skips Table 3.
    Returns:
        One row per (table, metric, setting, PE), in :data:`REPORT_ROWS` order (Table 3 after
        Table 2): ``run, table, setting, metric, split, pe, sigma, n, mean, sd, mean_<split>``
        (the other evaluations), ``ci_low, ci_high, paper_mean, paper_sd, diff, p_equiv,
        p_diff, verdict``, ``outside`` (:func:`outside_paper_interval`) and ``why``
        (:func:`explain_rows`).
    """
    from lstpe.analysis import stats

    parts = []
    for run, table, metric, splits, pe_name, setting in REPORT_ROWS:
        if run not in runs:
            continue
        cmp = compare_splits(runs[run], table, splits=splits, metric=metric, pe_name=pe_name,
                             setting=setting)
        parts.append(cmp.assign(run=run, metric=metric))
        if table == "2" and metric == "train_acc" and attention is not None:
            learn = attention[attention["pe_name"] == "learn"]
            t3 = stats.compare_to_paper(learn, 3, metric="attention_cosine", value="cosine")
            parts.append(t3.assign(run="table2", metric="attention_cosine", split="val"))
    rep = pd.concat(parts, ignore_index=True)
    rep["outside"] = outside_paper_interval(rep)
    rep["why"] = explain_rows(rep, runs)
    first = ["run", "table", "setting", "metric", "split", "pe", "sigma", "n", "mean", "sd"]
    others = [c for c in rep.columns if c.startswith("mean_")]
    rest = [c for c in rep.columns if c not in first + others]
    return rep[first + others + rest]


def verdict_table(report: pd.DataFrame) -> pd.DataFrame:
    """Per paper table and metric (index like ``T4 val (sgd)``): the number of rows, the mean
    absolute difference from the paper, and how many rows get each verdict -- seven narrow
    columns."""
    from lstpe.analysis import stats

    short = {"val_acc": "val", "train_acc": "train", "attention_cosine": "attention"}
    rows = []
    for (t, st, m), g in report.groupby(["table", "setting", "metric"], sort=False):
        label = f"T{t} {short.get(m, m)}" + (f" ({st})" if str(t) == "4" else "")
        counts = g["verdict"].value_counts()
        rows.append({"table": label, "rows": len(g),
                     "mean |diff|": round(float(g["diff"].abs().mean()), 3),
                     **{SHORT_VERDICT.get(v, v): int(counts.get(v, 0))
                        for v in stats.VERDICTS}})
    return pd.DataFrame(rows).set_index("table")


def both_evaluations(report: pd.DataFrame) -> pd.DataFrame:
    """The validation rows of the PEs with dropout (2d-fixed, 1d-fixed): our accuracy with
    dropout on (the authors' evaluation) and in eval mode, beside the paper's."""
    r = report[(report["metric"] == "val_acc") & (report["split"] == "val_dropout")
               & report["pe"].isin(["2d-fixed", "1d-fixed"])]
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


def report_summary(report: pd.DataFrame, runs: Mapping[str, Any]) -> str:
    """The report's verdict in a few sentences: what the runs are, the verdict counts, how many
    rows fall outside the paper's interval and why, and -- for preview runs -- that preview
    numbers cannot test the paper."""
    names = list(dict.fromkeys(report["run"]))
    cfgs = {n: _cfg(runs.get(n)) for n in names}
    preview = [n for n in names if cfgs[n].get("preset") == "preview"]
    counts = report["verdict"].value_counts()
    known = report["outside"].apply(lambda v: v is not None and not (isinstance(v, float)
                                                                     and math.isnan(v)))
    outside = int(report["outside"].apply(lambda v: v is True or v is np.True_).sum())
    parts = [f"{len(report)} rows from {len(names)} runs ("
             + ", ".join(f"{n}: {cfgs[n].get('preset')}, {len(cfgs[n].get('seeds') or [])} "
                         f"seeds, {cfgs[n].get('epochs')} epochs" for n in names) + ").",
             "Verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".",
             f"Outside the paper's 95% interval: {outside} of the {int(known.sum())} rows with "
             f"enough seeds to say."]
    if preview:
        parts.append(f"{', '.join(preview)} ran at PREVIEW scale: small models, few seeds and "
                     f"epochs, accuracies near chance. Preview numbers cannot test the paper; "
                     f"these tables only show that every comparison can be computed. The "
                     f"reproduction needs the paper-scale runs (scripts/reproduce.py).")
    return " ".join(parts)


def run_summary(cmp: pd.DataFrame, exp: Any, final: pd.DataFrame | None = None,
                what: str = "validation accuracy") -> str:
    """One paragraph for a chapter's takeaways: the range of our means, the rank correlation
    with the paper's means (left out, with the reason, when every PE of ``final`` is at
    chance), the verdict counts, and the run's :func:`caveats`."""
    lo, hi = cmp["mean"].min(), cmp["mean"].max()
    parts = [f"This run ({getattr(exp, 'name', 'run')}): {what} {lo:.3f}-{hi:.3f} across "
             f"{len(cmp)} rows (paper: {cmp['paper_mean'].min():.3f}-"
             f"{cmp['paper_mean'].max():.3f})."]
    noise = final is not None and not final.empty and bool(chance_test(final)["at_chance"].all())
    if noise:
        parts.append("No rank correlation with the paper: every model's validation accuracy "
                     "is at chance, so these models have not learned the task and their "
                     "ranking cannot test the paper's.")
    elif len(cmp) >= 3 and cmp["mean"].nunique() > 1:
        rho = sps.spearmanr(cmp["mean"], cmp["paper_mean"]).statistic
        parts.append(f"Spearman correlation of our means with the paper's: {rho:.2f}.")
    counts = cmp["verdict"].value_counts()
    parts.append("Verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".")
    cav = caveats(exp, final)
    if cav:
        parts.append("Caveats: " + " ".join(cav))
    return " ".join(parts)


def describe_setup(S: Any) -> str:
    """The chapter's setup line: scale, device, torch, python; the results folder relative to
    the repository (a relative path as given; an absolute one outside the repository, or with
    no repository at all as on Colab, is called a custom folder), never a local absolute path."""
    import torch

    from lstpe.runtime import repo_root

    rd = Path(S.results_dir)
    root = repo_root()
    if not rd.is_absolute():
        where = rd.as_posix()
    elif root is not None and rd.resolve().is_relative_to(root.resolve()):
        where = rd.resolve().relative_to(root.resolve()).as_posix()
    else:
        where = "custom folder (results_dir)"
    return (f"scale={S.scale}  device={S.device}  torch={torch.__version__}  "
            f"python={platform.python_version()}  stored runs from: {where}")
