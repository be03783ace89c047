"""The numbers a chapter's hand-written paragraph glues in, one function per paragraph.

A results page writes its finding by hand, as an f-string; the lookups, fallbacks and
formatting behind each number live here, so that the page's hidden cells hold prose and not
logic. Each function returns a dict of formatted strings (``"–"`` where a cell is not stored).
Nothing here decides a claim: verdicts come from :mod:`lstpe.claims`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from lstpe.analysis import long_runs
from lstpe.chapters import findings as fd
from lstpe.claims.verdicts import NO_DIFFERENCE_MARGIN
from lstpe.references.authors_logs import lagging_seeds
from lstpe.stats.seed_stats import tau_text
from lstpe.stats.seed_tests import ALPHA

__all__ = ["table1_facts", "table1_long_facts", "sigma_facts", "learned_part_facts",
           "mechanism_facts", "noise_facts", "witness_facts", "adam_column_facts",
           "human_facts", "correlation_facts", "contrast_facts", "reference_facts",
           "UNTRAINED", "SOURCES"]


def table1_facts(verdict: Any, claim: pd.DataFrame, contrasts: pd.DataFrame | None = None,
                 scale: str = "paper", ranges: pd.DataFrame | None = None) -> dict[str, str]:
    """Chapter 5's paragraph: ``verdict`` of :mod:`lstpe.claims.table1`, ``claim`` and
    ``contrasts`` the chapter's evidence tables (:func:`lstpe.evidence.tables.claim_table`,
    ``contrast_table``). Keys: ``above`` (the common fixed PEs learn-0.2 is shown above),
    ``p_above`` (the largest p among them, Holm's where the claim reads them one by one),
    ``open`` (the contrasts not shown, with their intervals; ``none`` when none), ``label``
    (the verdict), ``refs`` (the rows by their verdict against their reference); for the rows
    ``learn-0.2`` (``l_``) and ``2d-fixed`` (``fx_``): ``epoch``, ``ci`` (mean [95% CI]),
    ``n``, ``verdict``, ``ref`` (its reference), ``p_equiv`` (TOST) and ``margin``; and
    ``c2_ci``, ``c2_p``, ``c2_verdict`` (learn-0.2 − 2d-fixed, exact p) and ``c2_equiv``
    (its equivalence test, :func:`reference_facts`' ``gt_equiv``); ``recipe`` (what
    the units are: the authors' recipe, or a run of another ``scale`` that tests no claim);
    ``range``: :func:`~lstpe.chapters.findings.range_line` of ``ranges``
    (:func:`lstpe.references.authors_logs.authors_range_check`; None: not the authors' recipe)."""
    out = {**_row_facts(claim, "learn-0.2", "l_"), **_row_facts(claim, "2d-fixed", "fx_"),
           "recipe": "the authors' recipe" if scale == "paper" else
           f"a `{scale}` run (not the authors' recipe: it tests no claim)",
           "range": fd.range_line(ranges)}
    c = contrasts.set_index("b") if contrasts is not None else pd.DataFrame()
    if "2d-fixed" in c.index:
        c2 = c.loc["2d-fixed"]
        out.update(c2_ci=fd.contrast_ci(c2), c2_p=fd.pval(c2["p_perm"]), c2_verdict=c2["verdict"])
    rows = verdict.numbers.get("rows")
    if rows is None or rows.empty:
        return _Missing({**out, "above": "no other PE", "p_above": "–", "open": "none",
                         "label": verdict.label, "refs": "–"})
    out["c2_equiv"] = reference_facts(rows.set_index("b"))["gt_equiv"]
    common = rows[rows["b"] != "2d-fixed"].set_index("b")
    p = common["p_holm"] if "p_holm" in common and common["p_holm"].notna().any() \
        else common["p_perm"]
    up = verdict.numbers["above"]
    rest = [b for b in common.index if b not in up]
    return _Missing({**out, "above": fd.names(up, "no other PE"),
                     "p_above": fd.pval(p.loc[up].max()) if up else "–",
                     "open": "; ".join(f"`{b}` {fd.contrast_ci(common.loc[b])} (exact "
                                       f"{fd.pval(common.loc[b, 'p_perm'])})" for b in rest)
                     or "none",
                     "label": verdict.label,
                     "refs": fd.grouped({v if v != "inconclusive" else "inconclusive at its n":
                                         fd.having(claim, v)
                                         for v in ("equivalent", "differs", "inconclusive")})})


def _row_facts(claim: pd.DataFrame, cell: str, prefix: str) -> dict[str, str]:
    """One row of an evidence table, formatted: ``epoch``, ``ci``, ``n``, ``verdict``, ``ref``,
    ``p_equiv``, ``margin``, each key with ``prefix``; nothing when the row is missing."""
    c = claim.set_index("cell")
    if cell not in c.index:
        return {}
    r = c.loc[cell]
    got = {"epoch": f"{r['epoch']:.0f}", "ci": fd.ci(r["mean"], r["ci_low"], r["ci_high"]),
           "n": f"{r['n']:.0f}", "verdict": r["verdict"], "ref": fd.reference(r),
           "p_equiv": fd.pval(r["p_equiv"]), "margin": f"{r['margin']:g}"}
    return {prefix + k: v for k, v in got.items()}


def table1_long_facts(t1: pd.DataFrame) -> dict[str, str] | None:
    """Chapter 5's paragraph on Table 1's long units (``t1``:
    :func:`lstpe.chapters.long_mechanism.table1_long` indexed by PE); None when none is
    stored. Keys: ``n`` (seeds per PE in words: ``1 seed``, ``1 to 2 seeds``), ``epoch``
    (the last epoch of each PE's long runs: one number, or a span ``600 to 1000``),
    ``d1_epoch`` (1d-fixed's), ``fit`` (the PEs whose running training accuracy is 0.99 or more
    there), ``d1_200``, ``d1_last``, ``d1_paper`` (1d-fixed's running training accuracy),
    ``moved`` (each PE's validation accuracy at 200 and at ``epoch``, with the paper's),
    ``missing`` (the Table 1 PEs without a long run, in words)."""
    from lstpe.experiments.registry import TABLE1_PES

    if t1.empty:
        return None
    d1 = t1.loc["1d-fixed"] if "1d-fixed" in t1.index else None
    gone = [p for p in TABLE1_PES if p not in t1.index]
    lo, hi = int(t1["seeds"].min()), int(t1["seeds"].max())
    return {"n": f"{lo} seed{'s' if lo > 1 else ''}" if lo == hi else f"{lo} to {hi} seeds",
            "epoch": fd.span_text(str(int(t1["epoch"].min())), str(int(t1["epoch"].max()))),
            "d1_epoch": str(int(d1["epoch"])) if d1 is not None else "–",
            "fit": fd.names(list(t1.index[t1["train_last"] >= 0.99])),
            "d1_200": f"{d1['train_200']:.3f}" if d1 is not None else "–",
            "d1_last": f"{d1['train_last']:.3f}" if d1 is not None else "–",
            "d1_paper": f"{d1['paper_train']:.3f}" if d1 is not None else "–",
            "moved": "; ".join(f"`{pe}` {r.val_200:.3f} → {r.val_last:.3f}"
                               + (f" at epoch {int(r.epoch)}" if t1["epoch"].nunique() > 1
                                  else "")
                               + f" (paper {r.paper_val:.3f} ± {r.paper_val_sd:.3f})"
                               for pe, r in t1.iterrows()),
            "missing": (f"{fd.names(gone)} {'has' if len(gone) == 1 else 'have'} not been "
                        "trained past epoch 200 yet" if gone
                        else "every one has a long run")}


NOISE_NAMED = ("learn-0.1", "learn-0.2", "2d-fixed")
"""The PEs chapter 8's noise paragraph names beside the one that loses the most."""


def noise_facts(cells: pd.DataFrame, con: pd.DataFrame, losses: pd.DataFrame,
                verdict: Any, runs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Chapter 8's noise paragraph: ``cells, con`` from
    :func:`lstpe.evidence.claim_tables.noise_evidence`, ``losses`` its input, ``verdict`` the
    noise claim's (:mod:`lstpe.claims.noise`). Keys: ``x`` (the largest noise std),
    ``worst`` and ``loss`` (PE -> its mean loss with its 95% CI), ``others`` (the losses of
    ``learn-0.1``, ``learn-0.2`` and ``2d-fixed`` but ``worst``, in words), ``equivalent``
    (the PEs whose loss is within the margin of none), ``margin``,
    ``trend``, ``tau``, ``p_trend``, ``clean_2`` (learn-2's accuracy without noise),
    ``label``, ``claim_text`` (the verdict's evidence in words), ``previews`` (the names of
    ``runs``, name -> run, that are previews, not the
    authors' recipe)."""
    c = cells.set_index("cell")
    loss = {pe: fd.ci(*c.loc[pe, ["mean", "ci_low", "ci_high"]]) for pe in c.index}
    tr = con[con["b"] == ""]
    t = tr.iloc[0] if len(tr) else None
    clean = losses.groupby("pe")["clean"].mean()
    worst = c["mean"].idxmax()
    named = [pe for pe in NOISE_NAMED if pe != worst]
    said = [f"`{pe}` {'loses ' if i == 0 else ''}{_Missing(loss)[pe]}"
            for i, pe in enumerate(named)]
    others = ", ".join(said[:-1]) + " and " + said[-1]
    return {"x": f"{losses.attrs['noise_max']:g}", "worst": worst, "others": others,
            "loss": _Missing(loss), "equivalent": fd.names(fd.having(cells, "equivalent")),
            "margin": f"{cells['margin'].iloc[0]:g}",
            "trend": {"falls": "falls", "rises": "rises"}.get(
                t["verdict"] if t is not None else "", "shows no trend"),
            "tau": tau_text(t["statistic"], int(t["n_a"])).removeprefix("τ = ")
            .removeprefix("τ ") if t is not None else "–",
            "p_trend": fd.pval(t["p_perm"]) if t is not None else "–",
            "clean_2": f"{clean.get('learn-2', float('nan')):.3f}", "label": verdict.label,
            "claim_text": _noise_claim_text(verdict),
            "previews": fd.names([n for n, e in (runs or {}).items() if e.scale != "paper"])}


def _noise_claim_text(verdict: Any) -> str:
    """The noise verdict's tests in one sentence a page can hold: the relative loss's trend
    over sigma, learn-0.1 against the learnable units above the first version's range,
    learn-0.2 against the common PEs (how many shown lower, Holm) and the models left out."""
    n = verdict.numbers
    parts = []
    tr = n.get("trend")
    if tr is not None:
        parts.append(f"over the learnable PEs it {tr['verdict']} as σ grows "
                     f"({tau_text(tr['statistic'], int(tr['n_a']))} over {int(tr['n_a'])} "
                     f"models, permutation {fd.pval(tr['p_perm'])})")
    band = n.get("band")
    if band is not None and len(band) and "learn-0.1" in set(band["a"]):
        b = band.set_index("a").loc["learn-0.1"]
        parts.append(f"`learn-0.1` loses {b['mean_a']:.2f} of its accuracy above chance, the "
                     f"learnable PEs at {b['b']} {b['mean_b']:.2f} (rank test, Holm "
                     f"{fd.pval(b['p_holm'])})")
    rows = n.get("rows")
    if rows is not None and len(rows):
        low = rows[(rows["p_holm"] < ALPHA) & (rows["diff"] < 0)]["b"].tolist()
        parts.append(f"`learn-0.2` is shown to lose less than {fd.names(low)} ({len(low)} of the "
                     f"{len(rows)} common PEs, Holm-adjusted)" if low else
                     f"`learn-0.2` is not shown to lose less than any of the {len(rows)} common "
                     "PEs (Holm-adjusted)")
    left = n.get("left_out") or []
    if left:
        parts.append(f"left out, at chance without noise: {fd.names(left)}")
    return "; ".join(parts) or "not tested"


class _Missing(dict):
    """A dict that answers a missing key with a placeholder (a PE these runs lack)."""

    def __init__(self, data: dict, missing: str = "–") -> None:
        super().__init__(data)
        self.missing = missing

    def __missing__(self, key: object) -> str:
        return self.missing


def witness_facts(wit: pd.DataFrame) -> dict[str, str] | None:
    """Chapter 8's weight-decay witness paragraph (``wit``:
    :func:`lstpe.chapters.long_mechanism.weight_decay_witness`). None when no AdamW unit is
    published. Keys: ``at`` (the last AdamW epoch), ``{optimizer}_{sigma}_{column}`` for
    optimizer ``adam`` / ``adamw``, sigma ``02`` (0.2) / ``2`` and column ``norm_ratio`` /
    ``decay_only`` / ``accuracy``, ``shrink`` (how the norm follows the decay alone), ``gap``
    (AdamW − Adam at sigma 2) and ``tenth`` (the epochs the decay alone needs to shrink a PE to
    a tenth, :func:`lstpe.analysis.long_runs.decay_epochs`)."""
    if not len(wit) or not (wit["optimizer"] == "adamw").any():
        return None
    at = int(wit.loc[wit["optimizer"] == "adamw", "epoch"].max())
    w = wit[wit["epoch"] == at].set_index(["optimizer", "sigma"])
    out = {f"{o}_{s:g}_{col}".replace(".", ""): format(w.loc[(o, s), col], ".3f")
           for o in ("adam", "adamw") for s in (0.2, 2.0)
           for col in ("norm_ratio", "decay_only", "accuracy") if (o, s) in w.index}
    off = (wit["norm_ratio"] - wit["decay_only"])[wit["optimizer"] == "adamw"].abs().max()
    d2 = w.loc[("adamw", 2.0), "accuracy"] - w.loc[("adam", 2.0), "accuracy"]
    tenth = long_runs.decay_epochs(0.1, **wit.attrs["decay"])
    out.update(at=str(at), tenth=f"{tenth:.0f}",
               shrink=(f"as the decay alone predicts (within {off:.3f} at every snapshot)"
                       if off < 0.02 else "but not as the decay alone predicts"),
               gap=f", AdamW − Adam {d2:+.3f} at σ = 2"
               + (": no rescue yet" if abs(d2) < 0.05 else ""))
    return _Missing(out)


def adam_column_facts(col: pd.DataFrame, runs: Mapping[str, Any]) -> dict[str, str] | None:
    """Chapter 8's sentence on Table 4's Adam column (``col``:
    :func:`lstpe.chapters.tables.beside_paper` indexed by PE; ``runs``: Table 4's runs by
    optimizer, ``adam`` and ``sgd``). None unless the Adam units are the authors' recipe and
    the column has a small sigma. Keys: ``cells`` (each small sigma's mean with its clipped
    95% CI, n and the paper's value), ``rank`` (``rank`` / ``do not rank``: our means in the
    paper's order), ``sgd`` (whether Table 4's SGD side is stored; ``runs`` without ``sgd``:
    not stored)."""
    small = col.loc[[p for p in ("learn-0.01", "learn-0.05", "learn-0.1") if p in col.index]]
    if runs["adam"].scale != "paper" or not len(small):
        return None

    def cell(x: pd.Series) -> str:
        lo, hi = max(x["ci_low"], 0), min(x["ci_high"], 1)  # an accuracy's interval, clipped
        return fd.ci(x["mean"], lo, hi) if x["n"] > 1 else f"{x['mean']:.3f}"

    return {"cells": "; ".join(f"`{pe}` {cell(x)} (n = {x['n']:.0f}; paper {x['paper']:.3f})"
                               for pe, x in small.iterrows()),
            "rank": "rank" if list(small["mean"]) == sorted(small["mean"]) else "do not rank",
            "sgd": "stored" if runs.get("sgd") is not None and runs["sgd"].scale == "paper"
            else "not stored yet"}


def sigma_facts(claim: pd.DataFrame, contrasts: pd.DataFrame,
                verdict: Any = None, ranges: pd.DataFrame | None = None) -> dict[str, str]:
    """Chapter 6's paragraph: ``claim`` and ``contrasts`` of the sweep
    (:func:`lstpe.evidence.tables.claim_table` / ``contrast_table``), ``verdict`` the sigma
    claim's (:mod:`lstpe.claims.sigma`). Keys: ``trend`` (the trend over sigma in words, or
    that there are too few sigmas), ``vs2d`` (the learnable PEs grouped by their contrast with
    2d-fixed), ``refs`` (grouped by their verdict against the authors' logs); with a verdict,
    ``tests``, ``shape`` and ``label`` (:func:`~lstpe.chapters.findings.tests_line`,
    ``shape_line``, the verdict's label); where 2d-fixed is stored, its row (``fx_ci``,
    ``fx_ref``, ``fx_n``, ``fx_authors_n``) and the model of the authors' spread that explains
    ours (:func:`lstpe.references.authors_logs.lagging_seeds`: ``lag_k`` seeds lagging near
    ``lag_slow``, the mixture's SD ``lag_sd``, ``lag_p`` that our seeds miss every laggard);
    ``range``: :func:`~lstpe.chapters.findings.range_line` of ``ranges``
    (:func:`lstpe.references.authors_logs.authors_range_check`; None: a run not of the authors'
    recipe)."""
    t = contrasts[contrasts["b"] == ""]
    trend = "has too few values of σ for a trend" if t.empty else (
        f"over σ: **{t['verdict'].iloc[0]}** (Kendall "
        f"{tau_text(t['statistic'].iloc[0], int(t['n_a'].iloc[0]))} over "
        f"{t['n_a'].iloc[0]:.0f} models at {t['n_b'].iloc[0]:.0f} values of σ, permutation "
        f"{fd.pval(t['p_perm'].iloc[0])})")
    to2d = contrasts[contrasts["b"] == "2d-fixed"]
    p_low = to2d.loc[to2d["verdict"] == "lower", "p_perm"].max()
    vs2d = fd.grouped({f"below (exact p, the largest {fd.pval(p_low)})":
                       fd.having(to2d, "lower", "a"),
                       "not shown different": fd.having(to2d, "no difference shown", "a"),
                       "above": fd.having(to2d, "higher", "a")})
    learn = claim[claim["cell"] != "2d-fixed"]
    labels = {"equivalent": f"equivalent within ±{learn['margin'].max():g}",
              "differs": "differs", "inconclusive": "inconclusive at its n"}
    refs = fd.grouped({k: fd.having(learn, v) for v, k in labels.items()})
    out = {"trend": trend, "vs2d": vs2d,
           "refs": refs + ("" if fd.having(learn, "differs") else "; none differs")}
    if verdict is not None:
        out.update(tests=fd.tests_line(verdict), shape=fd.shape_line(verdict),
                   label=verdict.label)
    out["range"] = fd.range_line(ranges)
    c = claim.set_index("cell")
    if "2d-fixed" in c.index:
        fx = c.loc["2d-fixed"]
        lag = lagging_seeds(*fx[["authors_mean", "authors_sd", "authors_n", "mean", "n"]]
                            .astype(float))
        out.update(fx_ci=fd.ci(fx["mean"], fx["ci_low"], fx["ci_high"]),
                   fx_ref=fd.reference(fx), fx_n=f"{fx['n']:.0f}",
                   fx_authors_n=f"{fx['authors_n']:.0f}", lag_k=f"{lag['k']}",
                   lag_slow=f"{lag['slow']:.2f}", lag_sd=f"{lag['sd_model']:.3f}",
                   lag_p=f"{lag['p_all_fast']:.2f}")
    return _Missing(out)


def learned_part_facts(part: pd.DataFrame) -> dict[str, str]:
    """Chapter 6's line on the learned part (``part``:
    :func:`lstpe.analysis.learned_part.by_sigma`). Keys: ``where`` (the sigmas whose update
    beats its permutation null in every, some or no unit), ``scores`` (the mean grid score
    where every unit does), ``p_max`` (Fisher's combined p, the largest of those) and
    ``init_min`` (the smallest share of the final PE the init carries from sigma 0.2 up)."""
    every, none = part["n_below"] == part["n"], part["n_below"] == 0
    groups = {"in every model": every, "in some models": ~(every | none), "in none": none}
    where = "; ".join(f"{k} at σ = {fd.names([f'{s:g}' for s in part.loc[m, 'sigma']], code=False)}"
                      for k, m in groups.items() if m.any())
    return {"where": where,
            "scores": ", ".join(f"{r.score_mean:.2f} at σ = {r.sigma:g}"
                                for r in part[every].itertuples()) or "–",
            "p_max": fd.pval(part.loc[every, "p_fisher"].max()) if every.any() else "–",
            "init_min": f"{part.loc[part['sigma'] >= 0.2, 'init_share_min'].min():.0%}"}


def mechanism_facts(mech: pd.DataFrame) -> dict[str, str]:
    """Chapter 7's paragraph on the mechanism table (``mech``:
    :func:`lstpe.analysis.mechanism.mechanism_table`, one row per sigma). Keys (formatted):
    ``s0``, ``s1``, ``sb``, ``sN`` (the smallest, second, third and largest sigma);
    ``dpe0`` / ``dpe1`` (the learned part's median grid score at ``s0`` / ``s1``, with its range
    and the units beating their null, ``x/n``); ``dpe_big`` (its range and count from ``sb``
    up); ``init0`` (the init's share of the final PE at ``s0``), ``init_big`` (its smallest from
    ``sb`` up), ``final0`` (the final PE's median grid score at ``s0``); ``cos_init``,
    ``cos_trained``, ``cos_paper``, ``pr_init``, ``pr_trained`` (Table 3's cosine and the
    Procrustes distance from ``s0`` to ``sN``)."""
    m = mech.set_index("sigma")
    lo, hi, big = m.iloc[0], m.iloc[-1], m.iloc[2:]
    one = m.iloc[min(1, len(m) - 1)]

    def rng(x: pd.Series, c: str) -> str:
        return f"{x[c + '_min']:.2f} to {x[c + '_max']:.2f}"

    def span(c: str, f: str) -> str:
        return f"{format(lo[c], f)} to {format(hi[c], f)}"

    return {"s0": f"{m.index[0]:g}", "s1": f"{m.index[min(1, len(m) - 1)]:g}",
            "sb": f"{m.index[min(2, len(m) - 1)]:g}", "sN": f"{m.index[-1]:g}",
            "dpe0": f"{lo.dpe_median:.2f} ({rng(lo, 'dpe')}; {lo.dpe_below:.0f}/{lo.n:.0f} models)",
            "dpe1": f"{one.dpe_median:.2f} ({one.dpe_below:.0f}/{one.n:.0f})",
            "dpe_big": (f"between {big.dpe_min.min():.2f} and {big.dpe_max.max():.2f} "
                        f"({big.dpe_below.sum():.0f}/{big.n.sum():.0f} models)") if len(big)
            else "–",
            "init0": rng(lo, "init_share"),
            "init_big": f"{big.init_share_min.min():.2f}" if len(big) else "–",
            "final0": f"{lo.final_median:.2f}", "cos_init": span("cos_init", ".3f"),
            "cos_trained": span("cos_trained", ".3f"), "cos_paper": span("cos_paper", ".3f"),
            "pr_init": span("procrustes_init", ".2f"),
            "pr_trained": span("procrustes_trained", ".2f")}


def human_facts(cells: pd.DataFrame, con: pd.DataFrame, agree: pd.DataFrame,
                cx: pd.DataFrame) -> dict[str, str]:
    """Chapter 9's paragraph: ``cells, con`` from
    :func:`lstpe.evidence.claim_tables.human_evidence` on ``agree`` (one row per model:
    ``pe``, ``r``, ``cosine``; ``attrs["constant_cosine"]``), ``cx`` the complexity table
    (:func:`lstpe.chapters.tables.complexity_table`, people last). Keys: ``r_pooled``,
    ``pooled_verdict``, ``p_pooled`` (every model's r against 0, one-sample t),
    ``pooled_equiv`` (whether it is within the margin of 0, by TOST), ``n_holm`` (the PEs
    tested one by one), ``differs`` / ``equivalent`` / ``margin`` (the PEs whose r is shown
    other than 0 / within the margin of 0), ``r`` (PE -> its mean r with the 95% CI), ``vs``
    (learn-0.2's contrasts grouped by verdict), ``above`` / ``models`` / ``floor`` / ``top`` /
    ``top_pe`` (the models whose cosine beats the constant model's), ``h1``-``h3`` (people's
    accuracy by number of vectors) and ``falls`` / ``rest`` (the PEs whose mean falls in the
    same order, and the others)."""
    from lstpe.evidence.claim_tables import POOLED

    c, floor = cells.set_index("cell"), agree.attrs["constant_cosine"]
    r = {pe: fd.ci(*c.loc[pe, ["mean", "ci_low", "ci_high"]]) for pe in c.index}
    pooled = c.loc[POOLED] if POOLED in c.index else None
    top = agree.loc[agree["cosine"].idxmax()]
    models, h = cx.drop(index="people"), cx.loc["people"]
    return {"r_pooled": r.get(POOLED, "–"),
            "pooled_verdict": pooled["verdict"] if pooled is not None else "not tested",
            "p_pooled": fd.pval(pooled["p_diff"]) if pooled is not None else "–",
            "pooled_equiv": "not tested" if pooled is None or pd.isna(pooled.get("p_equiv"))
            else f"{'shown' if pooled['p_equiv'] < ALPHA else 'not shown'} (TOST "
                 f"{fd.pval(pooled['p_equiv'])})",
            "n_holm": str(int(c["p_holm"].notna().sum())),
            "differs": fd.names([p for p in fd.having(cells, "differs") if p != POOLED],
                                "no PE"),
            "equivalent": fd.names([p for p in fd.having(cells, "equivalent") if p != POOLED],
                                   "no PE"),
            "margin": f"{cells['margin'].max():g}", "r": _Missing(r),
            "vs": fd.grouped({"a higher r is shown for": fd.having(con, "lower", "b"),
                              "a lower r for": fd.having(con, "higher", "b")},
                             "no difference is shown at these n"),
            "above": str(int((agree["cosine"] > floor + 1e-9).sum())),
            "models": str(len(agree)), "floor": f"{floor:.3f}", "top": f"{top['cosine']:.3f}",
            "top_pe": str(top["pe"]), **{f"h{v}": f"{h[v]:.2f}" for v in ("1", "2", "3")},
            "falls": fd.names(list(models.index[models["falls"].astype(bool)])),
            "rest": fd.names(list(models.index[~models["falls"].astype(bool)]))}


SOURCES = {"stored": "stored under `results/`", "cached": "trained here earlier (cached)",
           "live": "trained here"}
"""How a page names where its run came from (:attr:`lstpe.store.results.Run.source`)."""


def correlation_facts(cor: pd.DataFrame) -> dict[str, str] | None:
    """Chapter 7's takeaway under "Do the alignment measures predict accuracy?" (``cor``:
    :func:`lstpe.chapters.baselines.accuracy_correlations`, indexed by measure). None when it
    is empty (fewer than three sigmas). Keys: ``n`` (the sigmas), ``cos`` / ``cos0``
    (Spearman's rho of the attention cosine, paper variant, with validation accuracy, after
    training / at initialisation) and ``pr`` / ``pr0`` (the same for the Procrustes
    distance), each signed with 2 decimals (``–`` where a rho is undefined)."""
    if cor.empty:
        return None
    c, p = cor.loc["attention cosine, paper variant"], cor.loc["Procrustes distance"]

    def rho(x: float) -> str:
        return f"{x:+.2f}" if pd.notna(x) else "–"

    return {"n": f"{c['n']:.0f}", "cos": rho(c["rho"]), "cos0": rho(c["rho at init."]),
            "pr": rho(p["rho"]), "pr0": rho(p["rho at init."])}


UNTRAINED = "not trained yet"
"""What a fact says when the units it reads are not stored yet (early in the campaign)."""


def contrast_facts(rows: pd.DataFrame, b: str, prefix: str) -> dict[str, str]:
    """``{prefix}_ci`` and ``{prefix}_p`` of the contrast against ``b`` in ``rows`` (a
    verdict's ``numbers["rows"]`` indexed by ``b``), each ``"<b> not trained yet"`` when the
    tree holds no unit of ``b`` (a tree early in the campaign)."""
    if b not in rows.index:
        return {f"{prefix}_ci": f"{b} {UNTRAINED}", f"{prefix}_p": f"{b} {UNTRAINED}"}
    r = rows.loc[b]
    return {f"{prefix}_ci": fd.contrast_ci(r), f"{prefix}_p": fd.pval(r["p_perm"])}


def reference_facts(rows: pd.DataFrame, b: str = "2d-fixed") -> dict[str, str]:
    """``gt_abs``, ``gt_side`` and ``gt_p``: learn-0.2 against ``b`` in Table 1's contrast
    ``rows``; ``gt_equiv``: the equivalence test beside it, in words ("equivalent within
    ±0.03 (ours; TOST p = ...)" or "not shown equivalent ..."), where the paper finds no
    difference; each ``"<b> not trained yet"`` without a unit of ``b``."""
    if b not in rows.index:
        return dict.fromkeys(("gt_abs", "gt_side", "gt_p", "gt_equiv"), f"{b} {UNTRAINED}")
    r = rows.loc[b]
    pe = r.get("p_equiv", float("nan"))
    equiv = ("no equivalence test at these seeds" if pd.isna(pe) else
             f"{'equivalent' if pe < ALPHA else 'not shown equivalent'} within "
             f"±{NO_DIFFERENCE_MARGIN:g} "
             f"(ours; TOST {fd.pval(pe)})")
    return {"gt_abs": f"{abs(r['diff']):.3f}", "gt_side": "below" if r["diff"] < 0 else "above",
            "gt_p": fd.pval(r["p_perm"]), "gt_equiv": equiv}
