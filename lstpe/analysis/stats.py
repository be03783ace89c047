r"""Statistics over seeds and the comparison with the paper's tables.

* :func:`mean_ci`, :func:`summarize`: mean, SD (ddof=1), SEM and the Student-t confidence
  interval :math:`\bar x \pm t_{n-1,\,(1+\ell)/2}\, s/\sqrt n` over seeds.
* :func:`bootstrap_ci`: percentile bootstrap interval of any statistic.
* :func:`ttest`, :func:`compare_pes`, :func:`ttest_from_summary`: Welch, Student and paired
  t-tests (scipy.stats). The paper reports "t-test, t(13) = 0.96, p = 0.35" for 2d-fixed vs
  learn-0.2 over 15 seeds without naming the variant; from Table 1's means and SDs Welch's
  test gives t = 0.98, p = 0.34 (:func:`ttest_from_summary`), close to the report.
* :func:`rank_correlation`: Spearman correlation of an alignment measure with accuracy across
  sigma (per-sigma means, as in the paper's Fig. 4B / 10C) or across models.
* :func:`equivalence_test_from_summary`: Welch two one-sided tests (TOST) of equivalence
  within a margin.
* :func:`load_paper_tables`, :func:`compare_to_paper`: the paper's Tables 1-6 in long form,
  and our per-seed results lined up against them with a verdict (``equivalent``,
  ``different``, ``inconclusive`` or ``too few seeds (n<5)``) that wide intervals cannot win.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources

import numpy as np
import pandas as pd
from scipy import stats

from lstpe.encodings import parse_pe

__all__ = [
    "mean_ci", "summarize", "bootstrap_ci", "TTest", "ttest", "ttest_from_summary",
    "compare_pes", "with_accuracy", "rank_correlation", "Equivalence",
    "equivalence_test_from_summary", "load_paper_tables", "compare_to_paper", "PAPER_N_SEEDS",
    "PAPER_METRICS", "METRIC_RANGE", "MIN_SEEDS_FOR_CI", "EQUIVALENCE_MARGIN", "VERDICTS",
]

PAPER_N_SEEDS = 15
"""Seeds behind every mean and SD of the paper's tables."""

PAPER_METRICS: tuple[str, ...] = ("val_acc", "train_acc", "attention_cosine")

METRIC_RANGE: dict[str, tuple[float, float]] = {
    "val_acc": (0.0, 1.0), "train_acc": (0.0, 1.0), "attention_cosine": (0.0, 1.0),
}
"""Range of each paper metric (accuracies; cosine of non-negative attention weights): our
confidence intervals are clipped to it."""

MIN_SEEDS_FOR_CI = 5
"""Fewer seeds than this: :func:`compare_to_paper` gives no interval, no test and no verdict."""

EQUIVALENCE_MARGIN = 0.05
"""Default equivalence margin of :func:`compare_to_paper`, in units of the metric (0.05 =
5 accuracy points)."""

VERDICTS: tuple[str, ...] = ("equivalent", "different", "inconclusive",
                             f"too few seeds (n<{MIN_SEEDS_FOR_CI})")
"""The values of :func:`compare_to_paper`'s ``verdict`` column (default ``min_seeds``)."""

TTEST_KINDS: tuple[str, ...] = ("welch", "student", "paired")


def _values(x: Sequence[float] | np.ndarray | pd.Series, name: str = "x") -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return a


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")


def mean_ci(x: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval ``(mean, low, high)``; NaN bounds for n = 1.

    Raises:
        ValueError: empty or non-finite data, level outside (0, 1).
    """
    _check_level(level)
    a = _values(x)
    m = float(a.mean())
    if a.size < 2:
        return m, math.nan, math.nan
    half = stats.t.ppf((1 + level) / 2, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size)
    return m, m - half, m + half


def summarize(table: pd.DataFrame, value: str = "accuracy", by: str | Sequence[str] = "pe",
              level: float = 0.95) -> pd.DataFrame:
    """Mean, SD, SEM and t confidence interval of ``value`` per group (e.g. over seeds).

    Args:
        table: per-seed rows (e.g. ``lstpe.results.final_table(history)``).
        value: the column to summarise.
        by: grouping column(s), kept in first-seen order.
    Returns:
        ``*by, n, mean, sd, sem, ci_low, ci_high`` (sd, sem and the CI NaN for n = 1).
    Raises:
        ValueError: empty table, unknown columns, NaN values.
    """
    by = [by] if isinstance(by, str) else list(by)
    _check_level(level)
    if table.empty:
        raise ValueError("the table is empty")
    missing = [c for c in [value, *by] if c not in table]
    if missing:
        raise ValueError(f"unknown columns {missing}; columns: {', '.join(table.columns)}")
    rows = []
    for key, g in table.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        a = _values(g[value], f"{value} of {dict(zip(by, key, strict=True))}")
        m, lo, hi = mean_ci(a, level)
        sd = float(a.std(ddof=1)) if a.size > 1 else math.nan
        rows.append({**dict(zip(by, key, strict=True)), "n": a.size, "mean": m, "sd": sd,
                     "sem": sd / math.sqrt(a.size), "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def bootstrap_ci(x: Sequence[float], statistic: Callable[..., np.ndarray] = np.mean,
                 level: float = 0.95, n_boot: int = 10_000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval ``(low, high)`` of ``statistic``.

    Args:
        statistic: vectorised statistic called as ``statistic(samples, axis=-1)`` on an
            (n_boot, n) array (``np.mean``, ``np.median``, ...).
        n_boot: bootstrap resamples; seed: for the resampling.
    Raises:
        ValueError: fewer than 2 values, ``n_boot < 1``, level outside (0, 1).
    """
    _check_level(level)
    a = _values(x)
    if a.size < 2:
        raise ValueError(f"bootstrap needs at least 2 values, got {a.size}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    rng = np.random.default_rng(seed)
    boots = statistic(a[rng.integers(0, a.size, size=(n_boot, a.size))], axis=-1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return float(lo), float(hi)


@dataclass(frozen=True)
class TTest:
    """Result of a two-sample or paired t-test (``diff`` = mean_a - mean_b)."""

    kind: str
    statistic: float
    df: float
    pvalue: float
    mean_a: float
    mean_b: float
    diff: float
    n_a: int
    n_b: int

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.kind} t({self.df:.3g}) = {self.statistic:.3f}, p = {self.pvalue:.3g}"


def _check_kind(kind: str) -> None:
    if kind not in TTEST_KINDS:
        raise ValueError(f"unknown t-test {kind!r}; valid: {', '.join(TTEST_KINDS)}")


def ttest(a: Sequence[float], b: Sequence[float], kind: str = "welch") -> TTest:
    """Two-sided t-test of ``a`` against ``b``.

    Args:
        kind: ``welch`` (unequal variances), ``student`` (pooled variance) or ``paired``
            (``a[i]`` and ``b[i]`` belong together, e.g. the same seed).
    Raises:
        ValueError: unknown kind, fewer than 2 values, or unequal lengths for ``paired``.
    """
    _check_kind(kind)
    a, b = _values(a, "a"), _values(b, "b")
    if a.size < 2 or b.size < 2:
        raise ValueError(f"a t-test needs >= 2 values per group, got {a.size} and {b.size}")
    if kind == "paired":
        if a.size != b.size:
            raise ValueError(f"a paired t-test needs equal lengths, got {a.size} and {b.size}")
        r = stats.ttest_rel(a, b)
        df = a.size - 1
    else:
        r = stats.ttest_ind(a, b, equal_var=kind == "student")
        df = float(r.df)
    return TTest(kind, float(r.statistic), float(df), float(r.pvalue), float(a.mean()),
                 float(b.mean()), float(a.mean() - b.mean()), a.size, b.size)


def ttest_from_summary(mean_a: float, sd_a: float, n_a: int, mean_b: float, sd_b: float,
                       n_b: int, kind: str = "welch") -> TTest:
    """Two-sample t-test from means and SDs (e.g. the paper's tables; no paired version).

    Raises:
        ValueError: ``kind="paired"`` (needs the raw pairs), n < 2 or a negative SD.
    """
    _check_kind(kind)
    if kind == "paired":
        raise ValueError("a paired t-test needs the per-seed values, not summaries; "
                         "use kind='welch' or 'student'")
    if n_a < 2 or n_b < 2 or sd_a < 0 or sd_b < 0:
        raise ValueError(f"need n >= 2 and sd >= 0, got n=({n_a}, {n_b}), sd=({sd_a}, {sd_b})")
    equal = kind == "student"
    r = stats.ttest_ind_from_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b, equal_var=equal)
    if equal:
        df = float(n_a + n_b - 2)
    else:
        va, vb = sd_a**2 / n_a, sd_b**2 / n_b
        df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    return TTest(kind, float(r.statistic), float(df), float(r.pvalue), float(mean_a),
                 float(mean_b), float(mean_a - mean_b), int(n_a), int(n_b))


def compare_pes(table: pd.DataFrame, a: str, b: str, value: str = "accuracy",
                kind: str = "welch") -> TTest:
    """t-test of ``value`` between the seeds of PEs ``a`` and ``b`` (e.g. 2d-fixed vs learn-0.2).

    ``kind="paired"`` pairs rows by ``seed`` (both PEs must have the same seeds).

    Raises:
        ValueError: unknown PE or column; mismatched seeds for a paired test.
    """
    for col in ("pe", value) + (("seed",) if kind == "paired" else ()):
        if col not in table:
            raise ValueError(f"table has no {col!r} column; columns: {', '.join(table.columns)}")
    groups = {}
    for pe in (a, b):
        label = parse_pe(pe).label
        g = table[table["pe"] == label]
        if g.empty:
            raise ValueError(f"no rows for PE {pe!r}; PEs present: "
                             f"{', '.join(dict.fromkeys(table['pe'].astype(str)))}")
        groups[pe] = g
    if kind == "paired":
        ga, gb = (groups[p].set_index("seed")[value] for p in (a, b))
        if ga.index.duplicated().any() or gb.index.duplicated().any():
            raise ValueError("a paired test needs one row per (PE, seed)")
        if set(ga.index) != set(gb.index):
            raise ValueError(f"paired test: seeds differ ({sorted(ga.index)} vs "
                             f"{sorted(gb.index)})")
        return ttest(ga.sort_index(), gb.sort_index(), "paired")
    return ttest(groups[a][value], groups[b][value], kind)


def with_accuracy(table: pd.DataFrame, history: pd.DataFrame, split: str = "val",
                  condition: str = "all") -> pd.DataFrame:
    """Add each model's final ``accuracy`` (from the history table) to a per-model table.

    Rows are matched on the ``model`` column (artefact index = history model id).

    Raises:
        ValueError: empty tables, no ``model`` column, or models missing from the history.
    """
    from lstpe.results import final_table

    if table.empty:
        raise ValueError("the table is empty")
    if "model" not in table:
        raise ValueError("the table has no 'model' column")
    final = final_table(history, split, condition)[["model", "accuracy"]]
    missing = sorted(set(table["model"]) - set(final["model"]))
    if missing:
        raise ValueError(f"models {missing[:10]} are not in the history ({split}, {condition})")
    return table.drop(columns=["accuracy"], errors="ignore").merge(final, on="model",
                                                                   how="left")


def rank_correlation(table: pd.DataFrame, x: str, y: str = "accuracy",
                     level: str = "sigma") -> dict[str, float]:
    """Spearman rank correlation of columns ``x`` and ``y``.

    Args:
        level: ``"sigma"`` -- correlate the per-sigma means (rows with NaN sigma dropped; the
            paper's Fig. 4B and 10C); ``"model"`` -- correlate the rows as given (one per model,
            e.g. after :func:`lstpe.analysis.attention.average_layers`).
    Returns:
        ``{"rho", "pvalue", "n"}``.
    Raises:
        ValueError: unknown level or column, fewer than 3 points.
    """
    if level not in ("sigma", "model"):
        raise ValueError(f"unknown level {level!r}; valid: sigma, model")
    need = [x, y] + (["sigma"] if level == "sigma" else [])
    missing = [c for c in need if c not in table]
    if missing:
        raise ValueError(f"unknown columns {missing}; columns: {', '.join(table.columns)}")
    t = table.dropna(subset=need)
    if level == "sigma":
        cols = [c for c in dict.fromkeys((x, y)) if c != "sigma"]  # x may be sigma itself
        t = t.groupby("sigma")[cols].mean().reset_index()
    if len(t) < 3:
        raise ValueError(f"a rank correlation needs at least 3 points, got {len(t)}")
    r = stats.spearmanr(t[x], t[y])
    return {"rho": float(r.statistic), "pvalue": float(r.pvalue), "n": len(t)}


@dataclass(frozen=True)
class Equivalence:
    """Welch TOST of ``|mean_a - mean_b| < margin`` and the two-sided Welch test of equality.

    Attributes:
        diff: ``mean_a - mean_b``; se: its standard error; df: Welch-Satterthwaite degrees of
            freedom (NaN when ``se == 0``).
        p_lower: p of H0 ``diff <= -margin``; p_upper: p of H0 ``diff >= margin``.
        p_equiv: ``max(p_lower, p_upper)``; equivalence is shown at level alpha when
            ``p_equiv < alpha`` (equivalently: the ``1 - 2 alpha`` t interval of ``diff`` lies
            inside ``(-margin, margin)``).
        p_diff: two-sided Welch p of H0 ``diff == 0``.
    """

    diff: float
    se: float
    df: float
    margin: float
    p_lower: float
    p_upper: float
    p_equiv: float
    p_diff: float

    def to_dict(self) -> dict:
        return asdict(self)


def equivalence_test_from_summary(mean_a: float, sd_a: float, n_a: int, mean_b: float,
                                  sd_b: float, n_b: int,
                                  margin: float = EQUIVALENCE_MARGIN) -> Equivalence:
    r"""Two one-sided Welch t-tests (TOST) of equivalence within ``margin``, from summaries.

    With :math:`\delta = \bar a - \bar b`, :math:`s = \sqrt{s_a^2/n_a + s_b^2/n_b}` and the
    Welch-Satterthwaite :math:`\nu`:
    :math:`p_\text{lower} = P(T_\nu \ge (\delta + m)/s)` (H0 :math:`\delta \le -m`),
    :math:`p_\text{upper} = P(T_\nu \le (\delta - m)/s)` (H0 :math:`\delta \ge m`),
    ``p_equiv`` their maximum. Also the two-sided Welch p of :math:`\delta = 0`. When both SDs
    are 0 the difference is known exactly: p values are 0 or 1.

    Raises:
        ValueError: ``margin <= 0``, n < 2, negative SD or non-finite inputs.
    """
    vals = (mean_a, sd_a, mean_b, sd_b, margin)
    if not all(math.isfinite(v) for v in vals):
        raise ValueError(f"non-finite input {vals}")
    if not margin > 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    if n_a < 2 or n_b < 2 or sd_a < 0 or sd_b < 0:
        raise ValueError(f"need n >= 2 and sd >= 0, got n=({n_a}, {n_b}), sd=({sd_a}, {sd_b})")
    diff = float(mean_a - mean_b)
    va, vb = sd_a**2 / n_a, sd_b**2 / n_b
    se = math.sqrt(va + vb)
    if se == 0:
        p_lo, p_up = float(not diff > -margin), float(not diff < margin)
        return Equivalence(diff, 0.0, math.nan, float(margin), p_lo, p_up, max(p_lo, p_up),
                           float(diff == 0))
    df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    p_lo = float(stats.t.sf((diff + margin) / se, df))
    p_up = float(stats.t.cdf((diff - margin) / se, df))
    p_diff = float(2 * stats.t.sf(abs(diff) / se, df))
    return Equivalence(diff, se, float(df), float(margin), p_lo, p_up, max(p_lo, p_up), p_diff)


# --------------------------------------------------------------------------- paper tables


def _read(name: str) -> pd.DataFrame:
    with resources.files("lstpe").joinpath("data", name).open("r") as f:
        return pd.read_csv(f, dtype={"table": str, "setting": str, "pe": str})


def load_paper_tables() -> pd.DataFrame:
    """The paper's Tables 1-6 in long form (vendored ``paper_tables.csv`` and
    ``attention_similarity_table3.csv``).

    Returns:
        ``table`` (``"1"``..``"6"``), ``setting`` (``adam``, ``sgd``, ``adamw-wd0.1``), ``pe``
        (full label, e.g. ``learn-0.2``), ``pe_name``, ``sigma``, ``metric`` (``val_acc``,
        ``train_acc``, ``attention_cosine``), ``mean``, ``sd``, ``n`` (15 seeds).
    """
    t = _read("paper_tables.csv")
    rows = []
    for r in t.itertuples(index=False):
        sigma = None if pd.isna(r.sigma) else float(r.sigma)
        spec = parse_pe(r.pe if r.pe != "learn" else f"learn-{sigma:g}")
        for metric in ("val_acc", "train_acc"):
            mean, sd = getattr(r, metric), getattr(r, metric.replace("acc", "sd"))
            if pd.isna(mean):
                continue
            rows.append({"table": str(r.table), "setting": r.setting, "pe": spec.label,
                         "pe_name": spec.name,
                         "sigma": spec.sigma if spec.sigma is not None else math.nan,
                         "metric": metric, "mean": float(mean), "sd": float(sd)})
    t3 = _read("attention_similarity_table3.csv")
    for r in t3.itertuples(index=False):
        spec = parse_pe(f"learn-{float(r.sigma):g}")
        rows.append({"table": "3", "setting": "adam", "pe": spec.label, "pe_name": spec.name,
                     "sigma": spec.sigma, "metric": "attention_cosine",
                     "mean": float(r.cosine_to_2d_fixed), "sd": float(r.sd)})
    out = pd.DataFrame(rows)
    out["n"] = PAPER_N_SEEDS
    return out


def _verdict(eq: Equivalence, alpha: float) -> str:
    if eq.p_equiv < alpha:
        return "equivalent"
    if eq.p_diff < alpha:
        return "different"
    return "inconclusive"


def compare_to_paper(ours: pd.DataFrame, table: int | str, metric: str = "val_acc",
                     value: str = "accuracy", setting: str | None = None,
                     level: float = 0.95, margin: float = EQUIVALENCE_MARGIN,
                     alpha: float = 0.05, min_seeds: int = MIN_SEEDS_FOR_CI) -> pd.DataFrame:
    """Line our per-seed results up against one of the paper's tables, with a verdict.

    Per PE: our mean and SD over seeds and the Student-t interval at ``level``, clipped to the
    metric's range (:data:`METRIC_RANGE`, [0, 1] for accuracies and attention cosines; the
    clipping is the only change to the t interval). The verdict compares our seeds with the
    paper's mean and SD over its 15 seeds:

    * ``"equivalent"``: the Welch TOST (:func:`equivalence_test_from_summary`) shows
      ``|ours - paper| < margin`` at level ``alpha`` (``p_equiv < alpha``). This needs a
      precise comparison -- small SDs on both sides or many seeds -- so a wide interval cannot
      earn it: with the paper's 15 seeds, an SD of 0.1 on both sides is already too noisy for
      a margin of 0.05. It can coexist with a significant difference smaller than the margin
      (see ``p_diff``).
    * ``"different"``: otherwise, when the two-sided Welch test rejects equal means
      (``p_diff < alpha``).
    * ``"inconclusive"``: neither.
    * ``"too few seeds (n<5)"`` (with the default ``min_seeds``): fewer than ``min_seeds``
      seeds; the interval, both p values and the verdict are left out (NaN).

    Args:
        ours: one row per seed with a ``pe`` label column and ``value`` (e.g. the history's
            final validation rows, or a layer-averaged attention-similarity table).
        table: paper table ``1``-``6``.
        metric: ``val_acc``, ``train_acc`` or ``attention_cosine`` (Table 3).
        value: our column holding the per-seed value.
        setting: optimiser setting of the table (needed for Table 4: ``adam`` or ``sgd``).
        level: of our confidence interval.
        margin: equivalence margin in units of the metric (default
            :data:`EQUIVALENCE_MARGIN` = 0.05, i.e. 5 accuracy points).
        alpha: level of the TOST and the Welch test.
        min_seeds: fewest seeds for an interval and a verdict (default
            :data:`MIN_SEEDS_FOR_CI` = 5, at least 2).
    Returns:
        One row per PE present in both, in the paper's row order: ``table, setting, pe,
        sigma, n, mean, sd`` (ours), ``ci_low, ci_high`` (ours, clipped t interval; NaN under
        ``min_seeds``), ``paper_mean, paper_sd, diff`` (ours - paper), ``p_equiv`` (TOST),
        ``p_diff`` (Welch, two-sided), ``verdict``.
    Raises:
        ValueError: unknown table / metric / setting, empty input, no PE in common, margin
            <= 0, alpha outside (0, 1), min_seeds < 2.
    """
    if not margin > 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if min_seeds < 2:
        raise ValueError(f"min_seeds must be >= 2 (an interval needs an SD), got {min_seeds}")
    paper = load_paper_tables()
    table = str(table)
    if table not in set(paper["table"]):
        raise ValueError(f"unknown paper table {table!r}; valid: "
                         f"{', '.join(sorted(set(paper['table'])))}")
    p = paper[paper["table"] == table]
    if metric not in set(p["metric"]):
        raise ValueError(f"table {table} has no metric {metric!r}; valid: "
                         f"{', '.join(sorted(set(p['metric'])))}")
    p = p[p["metric"] == metric]
    settings = list(dict.fromkeys(p["setting"]))
    if setting is None:
        if len(settings) > 1:
            raise ValueError(f"table {table} has several settings {settings}: pass setting=")
        setting = settings[0]
    if setting not in settings:
        raise ValueError(f"table {table} has no setting {setting!r}; valid: {settings}")
    p = p[p["setting"] == setting]
    if ours.empty:
        raise ValueError("our table is empty")
    for col in ("pe", value):
        if col not in ours:
            raise ValueError(f"our table has no {col!r} column; columns: "
                             f"{', '.join(ours.columns)}")
    ours = ours.assign(pe=[parse_pe(str(x)).label for x in ours["pe"]])
    summ = summarize(ours, value, "pe", level)
    merged = p.merge(summ, on="pe", how="inner")
    if merged.empty:
        raise ValueError(f"no PE in common: ours {sorted(set(ours['pe']))}, paper table "
                         f"{table} {sorted(set(p['pe']))}")
    merged = merged.rename(columns={"mean_x": "paper_mean", "sd_x": "paper_sd",
                                    "n_x": "paper_n", "mean_y": "mean", "sd_y": "sd",
                                    "n_y": "n"})
    merged["diff"] = merged["mean"] - merged["paper_mean"]
    lo, hi = METRIC_RANGE[metric]
    few = merged["n"] < min_seeds
    merged["ci_low"] = merged["ci_low"].clip(lo, hi).mask(few)
    merged["ci_high"] = merged["ci_high"].clip(lo, hi).mask(few)
    p_equiv, p_diff, verdict = [], [], []
    for r in merged.itertuples(index=False):
        if r.n < min_seeds:
            p_equiv.append(math.nan)
            p_diff.append(math.nan)
            verdict.append(f"too few seeds (n<{min_seeds})")
            continue
        eq = equivalence_test_from_summary(r.mean, r.sd, r.n, r.paper_mean, r.paper_sd,
                                           r.paper_n, margin)
        p_equiv.append(eq.p_equiv)
        p_diff.append(eq.p_diff)
        verdict.append(_verdict(eq, alpha))
    merged["p_equiv"], merged["p_diff"], merged["verdict"] = p_equiv, p_diff, verdict
    cols = ["table", "setting", "pe", "sigma", "n", "mean", "sd", "ci_low", "ci_high",
            "paper_mean", "paper_sd", "diff", "p_equiv", "p_diff", "verdict"]
    return merged[cols].reset_index(drop=True)
