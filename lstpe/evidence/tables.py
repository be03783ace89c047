"""One evidence table per claim of the paper: our seeds per cell against the authors' logs at
the same epoch and the paper's 4000-epoch tables, with a verdict at each row's n.

Generic constructors (any claim, any metric; other modules build their claims' tables with
them):

* :class:`Reference`: a reference distribution (mean, SD, n seeds, label).
* :func:`evidence_rows`: per cell, our values against a reference: n, values, mean and t
  95% CI, the authors' and the paper's numbers, the difference with its CI, t-test p, TOST p,
  MDD, ``verdict`` and ``why``.
* :func:`contrast_rows`: within our units, pairs of cells: difference with the interval of the
  exact permutation test that gives the verdict and Welch's CI beside it, exact p and its
  floor, Welch p, ``verdict`` and ``why``.
* :func:`trend_row`: a trend over sigma across units (Kendall tau-b, slope per doubling).

The paper's claims on per-model accuracy (``final``: one row per model with ``pe``, ``seed``,
``accuracy`` and optionally ``epoch``, e.g. ``run.final("val_dropout")``, the validation
accuracy as the authors evaluated it):

* :data:`CLAIMS`; :func:`claim_table`, :func:`contrast_table`: one claim's cells / contrasts.
* :func:`stack_claims`: every claim's table in one long frame (chapter 11, ``lstpe batch``).
* :func:`evidence_from_collected`: the same from ``lstpe batch``'s collected rows.

The forest plot of every cell is :func:`lstpe.figures.forest.plot_forest`.

Choices: the reference of a cell is the authors' logs at our units' epoch (their 15 seeds,
``ref`` ``authors@200``) where they logged it (2d-fixed, learn-sigma), else the paper's table
at 4000 epochs (``paper@4000``; not like for like, and ``why`` says so). The equivalence margin
is :data:`MARGIN` = 0.03 accuracy: 3.2 of the 108 validation puzzles, about one of the authors'
seed-to-seed SDs at small sigma (0.026-0.05 at epoch 200); a fixed number, so that a noisy cell
cannot earn "equivalent" by a wide margin, and narrower than the smallest gap the paper calls
significant (learn-0.2 vs relative, 0.036), so that "equivalent" never covers one.
A row's test against the reference's seeds is Student's pooled test and Welch's, each p the
larger (why: :func:`~lstpe.stats.seed_tests.vs_reference`); a contrast's verdict is the
exact permutation test's (:func:`contrast_rows`), as is the interval the pages quote with it
(:func:`~lstpe.stats.seed_tests.shift_interval`); a trend over sigma is Kendall's tau-b with
a permutation p (:func:`trend_row`). The minimum detectable difference (``mdd``: alpha 0.05,
power 0.8, :mod:`lstpe.stats.power`) is that of the test that gives the verdict: a row's at
the reference's SD (15 seeds estimate it better than our 3-5), a contrast's at our pooled SD
(infinite where the test's floor is at or above alpha). No multiplicity correction: "beats
every fixed PE" is a conjunction, shown only where each of its contrasts is (an
intersection-union test, of level alpha as it stands). Tied seeds get no t-test certainty: no
interval, Welch's p NaN beside the exact test (seed_tests.NO_SPREAD).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lstpe.evidence.verdict import row_verdict
from lstpe.stats import power as pw
from lstpe.stats import seed_tests as st
from lstpe.stats.formulas import pooled_sd
from lstpe.stats.seed_stats import check_range, mean_ci, t_half, tau_text
from lstpe.stats.seed_tests import ALPHA
from lstpe.stats.trend import trend_test

__all__ = [
    "Reference", "evidence_rows", "contrast_rows", "trend_row", "CLAIMS", "claim_table",
    "contrast_table", "stack_claims", "evidence_from_collected", "MARGIN", "SIGMA_PAIRS",
    "ROW_COLUMNS", "CONTRAST_COLUMNS", "EVIDENCE_VERDICTS", "CHANCE_LINE",
]

MARGIN = st.EQUIVALENCE_MARGIN
"""Equivalence margin in accuracy (module docstring): the TOST's default, 0.03."""
CHANCE_LINE = 0.25
"""Chance accuracy of the 4-way validation puzzles."""

CLAIMS: dict[str, str] = {
    "learnable_beats_fixed": "a learnable PE beats every fixed PE (Table 1)",
    "small_sigma_generalises": "small sigma generalises, large sigma does not (Table 2)",
}
"""Claim ids of :func:`claim_table` and the paper's claim in words."""

SIGMA_PAIRS: tuple[tuple[str, str], ...] = (
    ("learn-0.2", "learn-2"), ("learn-0.2", "learn-1"), ("learn-0.1", "learn-0.2"))
"""The contrasts the paper reads off Table 2: small against large sigma, against the default
sigma 1 (its practical point), and the two smallest sigmas (level in the paper)."""

ROW_COLUMNS: tuple[str, ...] = (
    "claim", "cell", "n", "values", "seeds", "epoch", "mean", "ci_low", "ci_high",
    "authors_mean", "authors_sd", "authors_n", "paper_mean", "paper_sd", "ref", "diff",
    "diff_low", "diff_high", "p_diff", "p_equiv", "margin", "mdd", "test", "verdict", "why")
"""Columns of :func:`evidence_rows`."""

CONTRAST_COLUMNS: tuple[str, ...] = (
    "claim", "a", "b", "n_a", "n_b", "mean_a", "mean_b", "diff", "diff_low", "diff_high",
    "exact_low", "exact_high", "statistic", "p_welch", "p_perm", "p_floor", "mdd", "test",
    "verdict", "why")
"""Columns of :func:`contrast_rows` and :func:`trend_row`."""

EVIDENCE_VERDICTS: dict[str, str] = {
    "equivalent": "TOST: within the margin of the reference",
    "differs": "t-test p < alpha (pooled and Welch; n=1: single-case), not equivalent",
    "inconclusive": "neither shown at this n",
    "n=1": "one model, inside the reference spread: no interval",
    "not run": "no unit yet", "no reference": "no authors' log or paper value",
    "higher": "contrast: a > b (exact permutation p < alpha)",
    "lower": "contrast: a < b", "no difference shown": "contrast: neither direction shown",
    "falls": "trend: y falls over x", "rises": "trend: y rises over x",
    "no trend shown": "trend: neither direction shown",
}
"""Every ``verdict`` code and what it means."""


@dataclass(frozen=True)
class Reference:
    """A reference of one cell: ``mean``, ``sd`` over ``n`` seeds, ``label`` (``paper@4000``);
    ``seeds`` False: a null of another kind (:func:`~lstpe.stats.seed_tests.vs_reference`)."""

    mean: float
    sd: float
    n: int
    label: str
    seeds: bool = True

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """The t interval of the reference's mean."""
        half = t_half(self.sd, self.n, level)
        return self.mean - half, self.mean + half


def _fmt(xs: Sequence[float]) -> str:
    return " ".join(f"{x:.3f}" for x in xs)


def evidence_rows(values: Mapping[str, Sequence[float]],
                  authors: Mapping[str, Reference] | None = None,
                  paper: Mapping[str, Reference] | None = None, *, claim: str = "",
                  cells: Sequence[str] | None = None,
                  seeds: Mapping[str, Sequence[int]] | None = None,
                  epochs: Mapping[str, float] | None = None, margin: float = MARGIN,
                  alpha: float = ALPHA, level: float = 0.95,
                  value_range: tuple[float, float] = (0.0, 1.0)) -> pd.DataFrame:
    """One row per cell: our values against the cell's reference, with a verdict at its n.

    Args:
        values: per cell (e.g. a PE label), our per-seed values (n,).
        authors: the authors' distribution per cell at our epoch; the reference where present.
        paper: the paper's per cell; the reference where ``authors`` has none; else shown.
        claim: written in the ``claim`` column.
        cells: the rows, in order (default: ``values``' keys); a cell without values is a
            ``not run`` row.
        seeds, epochs: per cell, the seed ids (n,) and our units' epoch, shown.
        margin: TOST margin; alpha: level of every test; level: of the intervals; our CI is
            clipped to ``value_range``, and a value outside it is an error.
    Returns:
        :data:`ROW_COLUMNS`: ``n``, ``values`` (ours, 3 decimals, by seed), ``seeds``,
        ``epoch``, ``mean``, ``ci_low``, ``ci_high`` (t interval; NaN for n < 2 or when
        every value is equal, not a zero-width interval, and ``why`` says so),
        ``authors_mean/sd/n``, ``paper_mean/sd``, ``ref`` (the reference tested against),
        ``diff`` (ours - ref) with ``diff_low/high``, ``p_diff`` (the t-test of
        :func:`~lstpe.stats.seed_tests.vs_reference`; single-case for n=1),
        ``p_equiv`` (TOST within ``margin``), ``mdd`` (that test's, :func:`_row_mdd`),
        ``test``, ``verdict`` (:data:`EVIDENCE_VERDICTS`) and ``why`` (a short phrase with
        the numbers). No spread in our values nor the reference: the exact sign-flip test
        (:class:`~lstpe.stats.seed_tests.Diff`), its floor in ``why``.
    Raises:
        ValueError: a value outside ``value_range``, naming it, its cell and seed.
    """
    authors, paper, seeds, epochs = authors or {}, paper or {}, seeds or {}, epochs or {}
    rows = []
    for cell in (list(values) if cells is None else list(cells)):
        x = np.asarray(values.get(cell, ()), dtype=np.float64)
        ids = list(seeds.get(cell, ()))
        check_range(x, *value_range, "evidence_rows", [f"cell {cell!r}, " + (
            f"seed {ids[i]}" if len(ids) == x.size else f"value {i + 1}") for i in range(x.size)])
        a, p = authors.get(cell), paper.get(cell)
        ref = a if a is not None else p
        row = dict.fromkeys(ROW_COLUMNS, math.nan)
        row.update(claim=claim, cell=cell, n=int(x.size), values=_fmt(x),
                   seeds=" ".join(str(int(s)) for s in seeds.get(cell, ())),
                   epoch=epochs.get(cell, math.nan), margin=margin, test="",
                   ref="" if ref is None else ref.label)
        if a is not None:
            row.update(authors_mean=a.mean, authors_sd=a.sd, authors_n=a.n)
        if p is not None:
            row.update(paper_mean=p.mean, paper_sd=p.sd)
        flat = x.size > 1 and st.no_spread(x)  # no zero-width interval from tied seeds
        if x.size:
            m, lo, hi = mean_ci(x, level) if x.size > 1 and not flat else (float(x.mean()),
                                                                           math.nan, math.nan)
            row.update(mean=m, ci_low=max(lo, value_range[0]), ci_high=min(hi, value_range[1]))
        if x.size == 0:
            row.update(verdict="not run", why="not run yet")
        elif ref is None:
            row.update(verdict="no reference", why="no authors' log or paper value")
        else:
            d = st.vs_reference(x, ref.mean, ref.sd, ref.n, margin, level, ref.seeds)
            row.update(diff=d.diff, diff_low=d.low, diff_high=d.high, p_diff=d.p,
                       p_equiv=d.p_equiv, test=d.test, mdd=_row_mdd(x, ref, alpha))
            row.update(_verdict(d, x.size, margin, alpha, row["mdd"]))
            if a is None and authors:
                row["why"] += f" (vs {ref.label}: no authors' log)"
            if flat and d.test != "sign-flip":
                row["why"] += f"; all {x.size} values equal: no interval for our mean"
        rows.append(row)
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))


def _row_mdd(x: np.ndarray, ref: Reference, alpha: float) -> float:
    """A row's MDD, that of :func:`st.vs_reference`'s test: the reference's SD, our n against
    its n (Welch's alone for a null of another kind); against an exact reference (SD 0: no
    loss, errors at random) the one-sample test's with our SD (NaN for one model)."""
    if ref.sd > 0:
        rule = "both" if ref.seeds else "welch"
        return pw.mdd_vs_reference(ref.sd, x.size, ref.n, alpha, rule=rule)
    flat = x.size < 2 or st.no_spread(x)  # no SD to size it by: not an MDD of 0
    return math.nan if flat else pw.mdd(float(x.std(ddof=1)), x.size, None, alpha)


def _verdict(d: st.Diff, n: int, margin: float, alpha: float, mdd: float) -> dict[str, str]:
    """The row's word (:func:`~lstpe.evidence.verdict.row_verdict`) and why, with numbers."""
    word = row_verdict(d.p, d.p_equiv, n, alpha)
    if n == 1:
        why = (f"n=1: one model {d.diff:+.3f} off the reference (p={d.p:.2g})"
               if word == "differs" else "n=1: no interval; inside the reference spread")
    elif d.test == "sign-flip":  # no spread anywhere: the exact test, its floor stated
        why = (f"{d.diff:+.3f} off the reference; no spread in the {n} values nor the exact "
               f"reference, t undefined: exact sign-flip p={d.p:.2g}, TOST p={d.p_equiv:.2g} "
               f"(no lower than {2 / 2**n:.2g} and {1 / 2**n:.2g} at n={n})")
    elif word == "equivalent":
        why = f"equivalent within ±{margin:g} (TOST p={d.p_equiv:.2g})"
        if d.p < alpha:
            why += f"; differs by {d.diff:+.3f} (p={d.p:.2g})"
    elif word == "differs":
        why = f"differs by {d.diff:+.3f} ({d.test} p={d.p:.2g})"
    else:
        why = (f"neither shown at n={n}: diff CI [{d.low:+.2f}, {d.high:+.2f}], "
               f"MDD {mdd:.2f}")
    return {"verdict": word, "why": why}


def _pooled_sd(x: np.ndarray, y: np.ndarray) -> float:
    """NaN below 3 values or with no spread in either group (no MDD of 0)."""
    if x.size + y.size < 3 or (st.no_spread(x) and st.no_spread(y)):
        return math.nan
    return pooled_sd(x.std(ddof=1) if x.size > 1 else 0.0, x.size,
                     y.std(ddof=1) if y.size > 1 else 0.0, y.size)


def contrast_rows(values: Mapping[str, Sequence[float]], pairs: Sequence[tuple[str, str]],
                  *, claim: str = "", alpha: float = ALPHA, level: float = 0.95
                  ) -> pd.DataFrame:
    """Within our units: each pair ``(a, b)`` of cells, ``diff = mean_a - mean_b``.

    Returns:
        :data:`CONTRAST_COLUMNS`: ``diff_low/high`` (Welch t interval), ``exact_low/high``
        (the verdict's interval: the shifts the exact permutation test does not reject,
        :func:`~lstpe.stats.seed_tests.shift_interval`; infinite where its floor is at or
        above ``alpha``, so 0 lies inside it exactly when no difference is shown), ``statistic``
        (Welch t), ``p_welch`` (NaN with a group of 1), ``p_perm`` (exact, two-sided) and
        ``p_floor`` (the smallest p the permutation test can give with these values), ``mdd``
        (the permutation test's at our pooled SD, :func:`~lstpe.stats.power.mdd_permutation`;
        infinite where its floor is at or above alpha), ``verdict`` (``higher``, ``lower``,
        ``no difference shown``, ``not run``) on the exact permutation p: exact at any n and
        free of the normality Welch's t leans on at 2-4 degrees of freedom (its null: the PE
        label does not matter); Welch's p and interval are shown beside it (NaN, and ``why``
        says so, when neither group has a spread: :data:`~lstpe.stats.seed_tests.NO_SPREAD`).
        ``why`` says when the permutation test cannot reach ``alpha`` at this n.
    """
    rows = []
    for a, b in pairs:
        x = np.asarray(values.get(a, ()), dtype=np.float64)
        y = np.asarray(values.get(b, ()), dtype=np.float64)
        row = dict.fromkeys(CONTRAST_COLUMNS, math.nan)
        row.update(claim=claim, a=a, b=b, n_a=int(x.size), n_b=int(y.size), test="")
        if x.size == 0 or y.size == 0:
            row.update(verdict="not run",
                       why="not run yet: " + ", ".join(c for c, v in ((a, x), (b, y))
                                                       if v.size == 0))
            rows.append(row)
            continue
        perm = st.permutation_test(x, y)
        lo, hi = st.shift_interval(x, y, level)
        row.update(mean_a=float(x.mean()), mean_b=float(y.mean()), diff=perm.diff,
                   exact_low=lo, exact_high=hi,
                   p_perm=perm.p, p_floor=perm.floor, test="exact permutation",
                   mdd=math.nan if math.isnan(sd := _pooled_sd(x, y))
                   else pw.mdd_permutation(sd, x.size, y.size, alpha))
        welch = ""
        if x.size >= 2 and y.size >= 2:
            w = st.welch_diff(x, y, level)
            row.update(diff_low=w.low, diff_high=w.high, statistic=w.t, p_welch=w.p,
                       test="exact permutation (verdict) + Welch")
            welch = f"; {w.note}" if w.note else f"; Welch p={w.p:.2g}"
        perm_txt = f"exact p={perm.p:.2g}" + (
            f", can go no lower than {perm.floor:.2g} at n={x.size}+{y.size}"
            if perm.floor >= alpha else "") + welch
        if perm.p < alpha:
            row.update(verdict="higher" if perm.diff > 0 else "lower",
                       why=f"{a} {'>' if perm.diff > 0 else '<'} {b} by {abs(perm.diff):.3f} "
                           f"({perm_txt})")
        else:
            ci = (f", exact CI [{lo:+.2f}, {hi:+.2f}]" if math.isfinite(lo) and
                  math.isfinite(hi) else " (no finite exact CI at this n)")
            row.update(verdict="no difference shown",
                       why=f"diff {perm.diff:+.3f}{ci} ({perm_txt})")
        rows.append(row)
    return pd.DataFrame(rows, columns=list(CONTRAST_COLUMNS))


def trend_row(sigma: Sequence[float], values: Sequence[float], *, claim: str = "",
              label: str = "trend over sigma", alpha: float = ALPHA, n_perm: int = 20_000,
              seed: int = 0) -> pd.DataFrame:
    """One row in :data:`CONTRAST_COLUMNS` for a trend of ``values`` (N,) over ``sigma`` (N,)
    across units (:func:`lstpe.stats.trend.trend_test`): ``a`` = ``label``, ``n_a`` =
    units, ``n_b`` = sigmas, ``diff`` = slope per doubling of sigma with its t interval,
    ``statistic`` = Kendall's tau-b, ``p_perm`` its permutation p, ``p_floor`` = 1 / (1 +
    n_perm), ``p_welch`` = the slope's t-test p; ``verdict`` ``falls`` / ``rises`` on
    ``p_perm``, else ``no trend shown`` (every value tied: tau undefined, ``p_floor`` 1, and
    ``why`` says so in words)."""
    t = trend_test(sigma, values, n_perm=n_perm, seed=seed)
    row = dict.fromkeys(CONTRAST_COLUMNS, math.nan)
    if t.tied:
        row.update(claim=claim, a=label, b="", n_a=t.n, n_b=t.levels, diff=0.0, p_floor=1.0,
                   statistic=math.nan, test="Kendall tau-b (permutation)",
                   verdict="no trend shown",
                   why=f"{tau_text(t.tau, t.n)} over {t.levels} sigmas: no trend to test; "
                       "slope 0 per doubling of sigma, no interval")
        return pd.DataFrame([row], columns=list(CONTRAST_COLUMNS))
    word = ("falls" if t.tau < 0 else "rises") if t.p_perm < alpha else "no trend shown"
    row.update(claim=claim, a=label, b="", n_a=t.n, n_b=t.levels, diff=t.slope,
               diff_low=t.slope_low, diff_high=t.slope_high, statistic=t.tau,
               p_welch=t.slope_p, p_perm=t.p_perm, p_floor=1 / (1 + n_perm),
               test="Kendall tau-b (permutation); OLS slope per doubling of sigma",
               verdict=word,
               why=f"tau {t.tau:+.2f} over {t.n} models, {t.levels} sigmas (permutation "
                   f"p{'≤' if t.p_perm * (1 + n_perm) < 1.5 else '='}{t.p_perm:.2g}); "
                   f"{t.slope:+.3f} per doubling of sigma "
                   f"[{t.slope_low:+.3f}, {t.slope_high:+.3f}]")
    return pd.DataFrame([row], columns=list(CONTRAST_COLUMNS))


# --------------------------------------------------------------------------- the claims


def _per_cell(final: pd.DataFrame, value: str = "accuracy"
              ) -> tuple[dict[str, np.ndarray], dict[str, list[int]], dict[str, float]]:
    """Values, seeds (by seed) and the epoch (NaN if several or none) of each PE of ``final``;
    an accuracy outside [0, 1] raises ValueError naming it, its PE and seed."""
    from lstpe.nn.encodings import parse_pe

    missing = [c for c in ("pe", "seed", value) if c not in final]
    if missing:
        raise ValueError(f"final lacks columns {missing}; has {', '.join(final.columns)}")
    f = final.assign(pe=[parse_pe(str(p)).label for p in final["pe"]])
    keys = ["pe", "seed"] + (["epoch"] if "epoch" in f else [])
    f = f.drop_duplicates([*keys, value])
    dup = f.duplicated(["pe", "seed"])
    if dup.any():
        raise ValueError(f"final holds two values for {f.loc[dup, ['pe', 'seed']].values[:3]}"
                         " (one row per model)")
    if f[value].isna().any():
        raise ValueError(f"final has NaN in {value!r}")
    if value == "accuracy":  # outside [0, 1] is a fault upstream, not a verdict
        check_range(f[value], 0, 1, "final accuracy", [f"pe {p}, seed {int(k)}" for p, k
                                                       in zip(f["pe"], f["seed"], strict=True)])
    vals, seeds, epochs = {}, {}, {}
    for pe, g in f.sort_values("seed", kind="stable").groupby("pe", sort=False):
        vals[pe], seeds[pe] = g[value].to_numpy(float), [int(s) for s in g["seed"]]
        eps = set(g["epoch"]) if "epoch" in g else set()
        epochs[pe] = float(next(iter(eps))) if len(eps) == 1 else math.nan
    return vals, seeds, epochs


def _paper_refs() -> dict[str, Reference]:
    """The paper's validation accuracy at 4000 epochs: Table 1, and Table 2 for learn-sigma."""
    from lstpe.references.paper_tables import load_paper_tables

    p = load_paper_tables()
    p = p[(p["metric"] == "val_acc") & (p["setting"] == "adam") & p["table"].isin(["1", "2"])]
    out: dict[str, Reference] = {}
    for r in p.itertuples(index=False):
        out.setdefault(r.pe, Reference(r.mean, r.sd, int(r.n), "paper@4000"))
    return out


def _authors_refs(epochs: Mapping[str, float]) -> dict[str, Reference]:
    """The authors' validation logs of each PE at its units' epoch, where logged."""
    from lstpe.references.authors_logs import authors_logs

    t = authors_logs()
    t = t[(t["phase"] == "validation") & (t["condition"] == "average")]
    idx = t.set_index(["pe", "epoch"])
    out = {}
    for pe, e in epochs.items():
        if not math.isnan(e) and (pe, int(e)) in idx.index:
            r = idx.loc[(pe, int(e))]
            out[pe] = Reference(float(r["acc_mean"]), float(r["acc_sd"]), int(r["n_seeds"]),
                                f"authors@{int(e)}")
    return out


def _cells(claim: str, vals: Mapping[str, np.ndarray], all_sigmas: bool) -> list[str]:
    from lstpe.references.paper_tables import load_paper_tables

    if claim not in CLAIMS:
        raise ValueError(f"unknown claim {claim!r}; valid: {', '.join(CLAIMS)}")
    p = load_paper_tables()
    p = p[(p["metric"] == "val_acc") & (p["setting"] == "adam")]
    if claim == "learnable_beats_fixed":
        return list(p.loc[p["table"] == "1", "pe"])
    ours = [c for c in vals if c.startswith("learn-")]
    learn = list(p.loc[p["table"] == "2", "pe"]) if all_sigmas else []
    learn = sorted(set(learn) | set(ours), key=lambda c: float(c.split("-", 1)[1]))
    return ["2d-fixed", *learn]


def claim_table(claim: str, final: pd.DataFrame, *, all_sigmas: bool = False,
                margin: float = MARGIN, alpha: float = ALPHA) -> pd.DataFrame:
    """The evidence table of one claim (:data:`CLAIMS`) on per-model accuracies ``final``.

    Rows: ``learnable_beats_fixed``: Table 1's eight PEs; ``small_sigma_generalises``:
    2d-fixed, then the learnable PEs of ``final`` by sigma (``all_sigmas``: Table 2's twenty
    too, unrun ones as ``not run``). Columns :data:`ROW_COLUMNS` (:func:`evidence_rows`):
    against the authors' logs at the units' epoch where logged, else the paper at 4000.
    """
    vals, seeds, epochs = _per_cell(final)
    cells = _cells(claim, vals, all_sigmas)
    return evidence_rows(vals, _authors_refs(epochs), _paper_refs(), claim=claim, cells=cells,
                         seeds=seeds, epochs=epochs, margin=margin, alpha=alpha)


def contrast_table(claim: str, final: pd.DataFrame, *, alpha: float = ALPHA) -> pd.DataFrame:
    """The within-ours contrasts of one claim (:data:`CONTRAST_COLUMNS`).

    ``learnable_beats_fixed``: learn-0.2 against each other PE of Table 1.
    ``small_sigma_generalises``: the pairs of :data:`SIGMA_PAIRS` that ``final`` holds, each
    learnable PE against 2d-fixed, and the trend over sigma of every learnable unit
    (:func:`trend_row`).
    """
    vals, _, _ = _per_cell(final)
    cells = _cells(claim, vals, False)
    if claim == "learnable_beats_fixed":
        return contrast_rows(vals, [("learn-0.2", c) for c in cells if c != "learn-0.2"],
                             claim=claim, alpha=alpha)
    learn = cells[1:]
    pairs = [p for p in SIGMA_PAIRS if p[0] in vals and p[1] in vals]
    rows = contrast_rows(vals, [*pairs, *((c, "2d-fixed") for c in learn)],
                         claim=claim, alpha=alpha)
    sig = [(float(c.split("-", 1)[1]), v) for c in learn for v in vals.get(c, ())]
    if len({s for s, _ in sig}) >= 2 and len(sig) >= 3:
        rows = pd.concat([rows, trend_row([s for s, _ in sig], [v for _, v in sig],
                                          claim=claim, alpha=alpha)], ignore_index=True)
    return rows


def stack_claims(final: pd.DataFrame, *, contrasts: bool = False, all_sigmas: bool = False,
                 margin: float = MARGIN, alpha: float = ALPHA) -> pd.DataFrame:
    """Every claim's evidence table, one long frame (``claim`` column; chapter 11).

    ``contrasts``: also every claim's contrasts, after its cells (``kind`` ``cell``,
    ``contrast`` or ``trend``; the columns of both tables, NaN where one does not apply).
    """
    parts = []
    for claim in CLAIMS:
        parts.append(claim_table(claim, final, all_sigmas=all_sigmas, margin=margin,
                                 alpha=alpha).assign(kind="cell"))
        if contrasts:
            c = contrast_table(claim, final, alpha=alpha)
            parts.append(c.assign(kind=np.where(c["b"] == "", "trend", "contrast")))
    out = pd.concat(parts, ignore_index=True)
    ints = [c for c in ("n", "authors_n", "n_a", "n_b") if c in out]
    out[ints] = out[ints].astype("Int64")
    return out[["kind", *[c for c in out.columns if c != "kind"]]]


def evidence_from_collected(collected: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`stack_claims` (with contrasts) of the per-model rows of ``lstpe batch``'s
    collected tables: rows with ``pe``, ``seed``, ``accuracy`` and ``split``, the split
    ``val_dropout`` (the authors' evaluation) where present, else ``val``; the split used is
    a column. Where two points hold different values of one (PE, seed) (e.g. a grid over
    epochs), one block per point (its ``point`` column). None, with a warning naming the
    reason if there is one, when there are no such rows or they make no evidence (a batch's
    other outputs must not be lost to it)."""
    need = {"pe", "seed", "accuracy", "split"}
    if collected is None or not need <= set(collected.columns):
        return None
    try:
        return _from_collected(collected)
    except (ValueError, KeyError, TypeError) as e:
        import warnings

        warnings.warn(f"no evidence table: {type(e).__name__}: {e}", stacklevel=2)
        return None


def _from_collected(collected: pd.DataFrame) -> pd.DataFrame | None:
    for split in ("val_dropout", "val"):
        rows = collected[collected["split"] == split].dropna(subset=["pe", "seed", "accuracy"])
        if "condition" in rows:
            rows = rows[rows["condition"].fillna("all") == "all"]
        if rows.empty:
            continue
        one = rows.drop_duplicates(["pe", "seed", "accuracy"])
        point = next((c for c in ("point", "batch_point") if c in rows), None)
        if one.duplicated(["pe", "seed"]).any() and point is not None:
            return pd.concat([stack_claims(g, contrasts=True).assign(**{point: p})
                              for p, g in rows.groupby(point, sort=False)],
                             ignore_index=True).assign(split=split)
        return stack_claims(one, contrasts=True).assign(split=split)
    return None
