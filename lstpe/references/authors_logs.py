"""Our short runs against the authors' own training logs (like for like) and the paper's tables.

The vendored ``lstpe/data/authors_logs_summary.csv`` (see ``lstpe/data/PROVENANCE.md``) holds
the mean and SD over the authors' 15 seeds of every 200th epoch of their 4000-epoch Adam runs,
for 2d-fixed and learn-0.1 ... learn-2.0 only. Their "epoch e" is logged after e + 1 passes
over the data; our epoch e after e passes, a difference of one pass that is ignored here.

* :func:`authors_logs`: the table.
* :func:`authors_at`: one epoch / phase / condition of it, indexed by PE.
* :func:`compare_with_authors`: our final per-seed accuracies against the authors' logs at the
  same epoch (Student's pooled t-test and Welch's, the larger p, as
  :func:`lstpe.stats.seed_tests.vs_reference` explains), with the paper's 4000-epoch table
  values beside them.
* :func:`rank_order`: whether our σ curve ranks the σ as the authors' curve does at the same
  epoch (Kendall τ, exact p, and the pairs ranked the other way).
* :func:`possible_range`, :func:`authors_range_check`: the interval every one of the
  authors' seeds must lie in, given only their mean and SD (Samuelson's inequality), and each
  of our units against it: a unit there lies outside the range of all their seeds, whatever the
  shape of their distribution.
"""

from __future__ import annotations

import functools
import math
from importlib import resources

import pandas as pd

from lstpe.nn.encodings import parse_pe
from lstpe.references.paper_tables import load_paper_tables
from lstpe.stats.seed_stats import MIN_SEEDS_FOR_CI
from lstpe.stats.seed_tests import equivalence_test_from_summary

__all__ = ["authors_logs", "authors_at", "compare_with_authors", "lagging_seeds", "rank_order",
           "possible_range", "authors_range_check", "LOG_ROUNDING", "AUTHORS_LOGS_FILE",
           "AUTHORS_LOGS_COLUMNS", "SPLIT_TO_PHASE"]

LOG_ROUNDING = 5e-5
"""Half the last digit of the vendored means and SDs (4 decimals): :func:`possible_range`
widens its bounds by it."""

AUTHORS_LOGS_FILE = "authors_logs_summary.csv"
"""Name of the vendored table under ``lstpe/data/``."""

AUTHORS_LOGS_COLUMNS: tuple[str, ...] = ("pe", "phase", "condition", "epoch", "acc_mean",
                                         "acc_sd", "n_seeds")

SPLIT_TO_PHASE: dict[str, str] = {"val": "validation", "val_dropout": "validation",
                                  "test": "test", "train_running": "train"}
"""Our history's split names -> the authors' phases (``train_running`` is, like theirs, the
running mean over the epoch's minibatches in train mode; our eval-mode ``train`` has no
counterpart)."""

_CONDITION = {"all": "average"}
_PAPER_METRIC = {"validation": "val_acc", "train": "train_acc"}  # the paper has no test table
_NOTE_FEW = "n=1: no SD, no test"
_NOTE_NO_LOG = "no authors' log for this PE"


def _label(pe: str) -> str:
    """lstpe's canonical PE label (``learn-1.0`` -> ``learn-1``); unknown names unchanged."""
    try:
        return parse_pe(str(pe)).label
    except ValueError:
        return str(pe)


@functools.lru_cache(maxsize=1)
def _load() -> pd.DataFrame:
    path = resources.files("lstpe").joinpath("data", AUTHORS_LOGS_FILE)
    if not path.is_file():
        raise FileNotFoundError(f"vendored table lstpe/data/{AUTHORS_LOGS_FILE} is missing "
                                "(reinstall lstpe; see lstpe/data/PROVENANCE.md)")
    try:
        with path.open("r") as f:
            t = pd.read_csv(f, dtype={"pe": str, "phase": str, "condition": str})
        missing = [c for c in AUTHORS_LOGS_COLUMNS if c not in t.columns]
        if missing or t.empty:
            raise ValueError(f"missing columns {missing}" if missing else "no rows")
        t = t[list(AUTHORS_LOGS_COLUMNS)]
        t = t.astype({"epoch": "int64", "acc_mean": "float64", "acc_sd": "float64",
                      "n_seeds": "int64"})
        if t.isna().any().any() or t.duplicated(["pe", "phase", "condition", "epoch"]).any():
            raise ValueError("NaN values or duplicated (pe, phase, condition, epoch) rows")
    except (ValueError, TypeError, pd.errors.ParserError) as e:
        raise ValueError(f"vendored table lstpe/data/{AUTHORS_LOGS_FILE} is malformed: {e} "
                         f"(expected columns {', '.join(AUTHORS_LOGS_COLUMNS)})") from e
    t["pe"] = t["pe"].map(_label)
    return t


def authors_logs() -> pd.DataFrame:
    """The authors' training logs summarised over seeds (a copy of the cached table).

    Returns:
        One row per (pe, phase, condition, epoch), columns ``pe`` (lstpe label: ``2d-fixed``,
        ``learn-0.1`` ... ``learn-2``; the CSV's ``learn-1.0`` / ``learn-2.0`` become
        ``learn-1`` / ``learn-2``), ``phase`` (``train``, ``test``, ``validation``),
        ``condition`` (``average``, ``binary``, ``ternary``, ``quaternary``), ``epoch`` (0, 200,
        ..., 4000), ``acc_mean``, ``acc_sd`` (sample SD over seeds), ``n_seeds``.
    Raises:
        FileNotFoundError: the vendored file is missing. ValueError: it is malformed.
    """
    return _load().copy()


def _check(name: str, value: object, valid: list) -> None:
    if value not in valid:
        raise ValueError(f"{name} {value!r} is not in the authors' logs; valid: "
                         f"{', '.join(str(v) for v in valid)}")


def authors_at(epoch: int, phase: str = "validation", condition: str = "average"
               ) -> pd.DataFrame:
    """The authors' logs at one epoch: index ``pe``, columns ``acc_mean, acc_sd, n_seeds``.

    Raises:
        ValueError: ``epoch``, ``phase`` or ``condition`` not in the table (the message names
            the bad value and lists the valid ones).
    """
    t = _load()
    _check("phase", phase, sorted(t["phase"].unique()))
    _check("condition", condition, sorted(t["condition"].unique()))
    _check("epoch", epoch, sorted(int(e) for e in t["epoch"].unique()))
    sel = t[(t["epoch"] == epoch) & (t["phase"] == phase) & (t["condition"] == condition)]
    return sel.set_index("pe")[["acc_mean", "acc_sd", "n_seeds"]].copy()


def _single(final: pd.DataFrame, col: str, mapping: dict[str, str], default: str) -> str:
    if col not in final.columns:
        return default
    vals = sorted({mapping.get(str(v), str(v)) for v in final[col]})
    if len(vals) != 1:
        raise ValueError(f"final must hold one {col}, got {vals}")
    return vals[0]


def _paper(phase: str) -> pd.DataFrame:
    """Paper's 4000-epoch mean/SD per PE: Table 2 for learn-sigma, Table 1 for the rest."""
    metric = _PAPER_METRIC.get(phase)
    p = load_paper_tables()
    p = p[(p["metric"] == metric) & (p["setting"] == "adam")]
    p = p[((p["table"] == "2") & (p["pe_name"] == "learn"))
          | ((p["table"] == "1") & (p["pe_name"] != "learn"))]
    p = p.assign(paper_table="Table " + p["table"] + " (4000 epochs)")
    p = p.rename(columns={"mean": "paper_mean", "sd": "paper_sd"})
    return p.set_index("pe")[["paper_mean", "paper_sd", "paper_table"]]


def compare_with_authors(final: pd.DataFrame, epoch: int = 200, phase: str = "validation"
                         ) -> pd.DataFrame:
    """Our models at their last epoch against the authors' logs at ``epoch``.

    Args:
        final: one row per model, columns ``pe``, ``seed``, ``accuracy`` and optionally
            ``epoch``, ``split``, ``condition`` (e.g. ``run.final("val")``). ``split`` is mapped
            by :data:`SPLIT_TO_PHASE` and must then equal ``phase``; ``condition`` ``all`` is
            the authors' ``average``.
        epoch: the authors' logged epoch to compare with (0, 200, ..., 4000).
        phase: ``validation``, ``test`` or ``train``.
    Returns:
        One row per PE of ours: ``pe, n_ours, ours_mean, ours_sd`` (ddof=1, NaN for n=1),
        ``ours_epoch`` (our models' epoch, or ``"e1, e2"`` if they differ; NaN without an
        ``epoch`` column), ``like_for_like`` (all our models at ``epoch``), ``authors_mean,
        authors_sd, authors_n`` (NaN where the authors logged no such PE, e.g. rope), ``diff``
        (ours - authors), ``test`` (two-sided p, the larger of the pooled and Welch tests',
        for n_ours >= 2 and a logged PE),
        ``note`` (why ``test`` is NaN, else ""), and the paper's 4000-epoch values
        ``paper_mean, paper_sd, paper_table`` (Table 2 for learn-sigma, Table 1 otherwise;
        NaN for the test phase, which the paper does not tabulate).
    Raises:
        ValueError: missing columns, an empty frame, NaN accuracies, a duplicated (pe, seed),
            several splits / conditions, a split other than ``phase``, or an epoch / phase /
            condition not in the authors' logs.
    """
    missing = [c for c in ("pe", "seed", "accuracy") if c not in final.columns]
    if missing or final.empty:
        raise ValueError(f"final needs columns pe, seed, accuracy and rows; missing {missing}"
                         if missing else "final is empty")
    if final["accuracy"].isna().any():
        raise ValueError("final has NaN accuracies")
    _check("phase", phase, sorted(_load()["phase"].unique()))
    ours = final.assign(pe=final["pe"].map(_label))
    if ours.duplicated(["pe", "seed"]).any():
        raise ValueError("final must hold one row per model: duplicated (pe, seed)")
    split_phase = _single(ours, "split", SPLIT_TO_PHASE, phase)
    if split_phase != phase:
        raise ValueError(f"final holds split {split_phase!r} but phase={phase!r}")
    condition = _single(ours, "condition", _CONDITION, "average")
    ref = authors_at(epoch, phase, condition)
    paper = _paper(phase)
    rows = []
    for pe, g in ours.groupby("pe", sort=False):
        acc = g["accuracy"].astype(float)
        n = len(acc)
        mean, sd = float(acc.mean()), float(acc.std(ddof=1)) if n > 1 else math.nan
        eps = sorted({int(e) for e in g["epoch"]}) if "epoch" in g.columns else []
        a = ref.loc[pe] if pe in ref.index else None
        a_mean, a_sd, a_n = (math.nan,) * 3 if a is None else (
            float(a["acc_mean"]), float(a["acc_sd"]), float(a["n_seeds"]))
        p, note = math.nan, ""
        if a is None:
            note = _NOTE_NO_LOG
        elif n < MIN_SEEDS_FOR_CI:
            note = _NOTE_FEW
        elif not sd == a_sd == 0:  # both without spread: no t-test (p stays NaN)
            p = equivalence_test_from_summary(mean, sd, n, a_mean, a_sd, int(a_n),
                                              variance="both").p_diff
        rows.append({
            "pe": pe, "n_ours": n, "ours_mean": mean, "ours_sd": sd,
            "ours_epoch": (eps[0] if len(eps) == 1 else ", ".join(map(str, eps))) if eps
            else math.nan,
            "like_for_like": eps == [epoch],
            "authors_mean": a_mean, "authors_sd": a_sd, "authors_n": a_n,
            "diff": mean - a_mean, "test": p, "note": note,
        })
    out = pd.DataFrame(rows).join(paper, on="pe")
    out["paper_table"] = out["paper_table"].fillna("")
    return out


def lagging_seeds(mean: float, sd: float, n: float, fast: float, draws: float
                  ) -> dict[str, float]:
    """A reading of a cell whose spread over the authors' ``n`` seeds is a few seeds lagging:
    the two-point mixture of ``n - k`` seeds at ``fast`` (our mean) and ``k`` at the level that
    keeps the authors' ``mean``, with ``k`` the one whose SD comes closest to theirs
    (``sd``); and the chance that ``draws`` seeds drawn from such a mixture miss every lagging
    seed, ``C(n - k, draws) / C(n, draws)``.

    Returns:
        ``k``, ``slow`` (the lagging level), ``sd_model`` (the mixture's SD, ddof = 1) and
        ``p_all_fast``, all NaN where the reference is not below ``fast`` or an input is
        missing. A model of the spread, not a measurement of the authors' seeds (their
        per-seed logs are summarised as means and SDs only).
    """
    none = dict.fromkeys(("k", "slow", "sd_model", "p_all_fast"), math.nan)
    if not all(map(math.isfinite, (mean, sd, n, fast, draws))) or not fast > mean:
        return none  # nothing lags behind a reference at or above ours (or none logged)
    n, draws = int(n), int(draws)
    if not (n >= 2 and 1 <= draws <= n):
        raise ValueError(f"need n >= 2 and 1 <= draws <= n; got n={n}, draws={draws}")
    best: dict[str, float] = {}
    for k in range(1, n):
        slow = (n * mean - (n - k) * fast) / k
        if slow < 0:
            continue
        sd_k = math.sqrt(((n - k) * (fast - mean) ** 2 + k * (slow - mean) ** 2) / (n - 1))
        if not best or abs(sd_k - sd) < abs(best["sd_model"] - sd):
            best = {"k": k, "slow": slow, "sd_model": sd_k,
                    "p_all_fast": math.comb(n - k, draws) / math.comb(n, draws)}
    return best


def rank_order(final: pd.DataFrame, epoch: int, value: str = "accuracy") -> dict[str, object]:
    """Does our σ curve rank the learnable PEs as the authors' does at ``epoch``?

    Args:
        final: one row per model (``pe``, ``sigma``, ``value``); rows without a σ (fixed PEs)
            are left out, each σ is its seeds' mean (n = 1 counts: a rank needs no spread).
        epoch: the epoch of the authors' logs to compare with (:func:`authors_at`).
    Returns:
        ``n`` (σ values both hold), ``tau`` (Kendall's τ-b of the two sets of means; NaN
        below 3 σ or when either set is all tied), ``p`` (two-sided; scipy's exact test where
        it applies), ``flipped``: the pairs of σ (a < b) that the two curves order the other
        way, as ``"0.3/0.4"`` strings, ascending.
    """
    from scipy.stats import kendalltau

    ours = final.dropna(subset=["sigma"]).groupby("pe")[value].mean()
    theirs = authors_at(epoch)["acc_mean"]
    both = sorted(set(ours.index) & set(theirs.index),
                  key=lambda pe: float(final.loc[final["pe"] == pe, "sigma"].iloc[0]))
    a, b = ours[both].to_numpy(), theirs[both].to_numpy()
    sig = [pe.removeprefix("learn-") for pe in both]
    flipped = [f"{sig[i]}/{sig[j]}" for i in range(len(both)) for j in range(i + 1, len(both))
               if (a[i] - a[j]) * (b[i] - b[j]) < 0]
    tau, p = (math.nan, math.nan)
    if len(both) >= 3 and len(set(a)) > 1 and len(set(b)) > 1:
        res = kendalltau(a, b)
        tau, p = float(res.statistic), float(res.pvalue)
    return {"n": len(both), "tau": tau, "p": p, "flipped": flipped}


def possible_range(mean: float, sd: float, n: int, rounding: float = 0.0) -> tuple[float, float]:
    r"""The interval that every one of ``n`` values with this ``mean`` and SD (ddof = 1) lies
    in, whatever their distribution (Samuelson's inequality): :math:`\bar x \pm
    s\,(n - 1)/\sqrt n`. One value :math:`d` from the mean forces the other :math:`n - 1` to
    sum to :math:`-d`, so the squares sum to at least :math:`d^2 n / (n - 1)`; the bound is
    reached by :math:`n - 1` equal values and one apart. ``rounding``: how far the summary's
    mean and SD may be off their exact values (the bounds widen by it).

    Raises:
        ValueError: ``n < 2``, a negative SD or rounding, a non-finite input.
    """
    if not (n >= 2 and sd >= 0 and rounding >= 0
            and all(map(math.isfinite, (mean, sd, rounding)))):
        raise ValueError(f"need n >= 2, a finite sd >= 0 and rounding >= 0; got mean={mean}, "
                         f"sd={sd}, n={n}, rounding={rounding}")
    half = (sd + rounding) * (n - 1) / math.sqrt(n) + rounding
    return mean - half, mean + half


def authors_range_check(final: pd.DataFrame, epoch: int | None = None) -> pd.DataFrame:
    """Each of our models against :func:`possible_range` of the authors' seeds (validation,
    their average condition, the vendored rounding allowed for).

    Args:
        final: one row per model (``pe``, ``seed``, ``accuracy``, and ``epoch`` unless
            ``epoch`` is given), e.g. ``run.final("val_dropout")``.
        epoch: the authors' epoch to check against; None: each model's own epoch.
    Returns:
        ``pe, seed, epoch, accuracy, authors_mean, authors_sd, authors_n, low, high,
        outside`` for each model the authors logged at that epoch (other PEs and epochs are
        left out), by PE and seed. A model ``outside`` lies beyond the range of all their
        seeds, whatever the shape of their distribution.
    """
    t = _load()
    logs = t[(t["phase"] == "validation") & (t["condition"] == "average")].set_index(
        ["epoch", "pe"])  # one lookup for every model and epoch
    rows = []
    for r in final.itertuples(index=False):
        e = int(epoch if epoch is not None else r.epoch)
        pe = _label(str(r.pe))
        if (e, pe) not in logs.index:
            continue
        a = logs.loc[(e, pe)]
        low, high = possible_range(float(a["acc_mean"]), float(a["acc_sd"]),
                                   int(a["n_seeds"]), LOG_ROUNDING)
        acc = float(r.accuracy)
        rows.append({"pe": pe, "seed": int(r.seed), "epoch": e, "accuracy": acc,
                     "authors_mean": float(a["acc_mean"]), "authors_sd": float(a["acc_sd"]),
                     "authors_n": int(a["n_seeds"]), "low": low, "high": high,
                     "outside": not low <= acc <= high})
    cols = ["pe", "seed", "epoch", "accuracy", "authors_mean", "authors_sd", "authors_n", "low",
            "high", "outside"]
    return pd.DataFrame(rows, columns=cols).sort_values(["pe", "seed"], ignore_index=True)
