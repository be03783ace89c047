r"""The comparison of our per-seed results with the paper's tables.

* :func:`equivalence_test_from_summary`: Welch two one-sided tests (TOST) of equivalence
  within a margin.
* :func:`load_paper_tables`, :func:`compare_to_paper`: the paper's Tables 1-6 in long form,
  and our per-seed results lined up against them with a verdict (``equivalent``,
  ``different``, ``inconclusive`` or ``too few seeds (n<5)``) that wide intervals cannot win.

The means, SDs and t intervals over seeds come from :mod:`lstpe.analysis.seed_stats`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from importlib import resources

import pandas as pd
from scipy import stats

from lstpe.analysis.seed_stats import MIN_SEEDS_FOR_CI, summarize
from lstpe.nn.encodings import parse_pe

__all__ = [
    "Equivalence", "equivalence_test_from_summary", "load_paper_tables", "compare_to_paper",
    "PAPER_N_SEEDS", "PAPER_METRICS", "METRIC_RANGE", "EQUIVALENCE_MARGIN", "VERDICTS",
]

PAPER_N_SEEDS = 15
"""Seeds behind every mean and SD of the paper's tables."""

PAPER_METRICS: tuple[str, ...] = ("val_acc", "train_acc", "attention_cosine")

METRIC_RANGE: dict[str, tuple[float, float]] = {
    "val_acc": (0.0, 1.0), "train_acc": (0.0, 1.0), "attention_cosine": (0.0, 1.0),
}
"""Range of each paper metric (accuracies; cosine of non-negative attention weights): our
confidence intervals are clipped to it."""

EQUIVALENCE_MARGIN = 0.05
"""Default equivalence margin of :func:`compare_to_paper`, in units of the metric (0.05 =
5 accuracy points)."""

VERDICTS: tuple[str, ...] = ("equivalent", "different", "inconclusive",
                             f"too few seeds (n<{MIN_SEEDS_FOR_CI})")
"""The values of :func:`compare_to_paper`'s ``verdict`` column (default ``min_seeds``)."""


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
