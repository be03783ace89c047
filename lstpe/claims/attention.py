"""Table 3 / Fig. 2A-C: small-sigma models attend like 2d-fixed, and that similarity tracks
accuracy; both measured after training and at initialisation.

The paper's sentences (:data:`QUOTES`) make two claims, each one test here, on the learnable
PEs' attention maps against the 2d-fixed model of the same seed (the paper's cosine,
:func:`lstpe.analysis.attention.table3`):

* "learned PEs with small σ tended to learn attention representations that were most aligned
  with the ground truth": the cosine falls as sigma grows (Kendall's tau over units,
  permutation p);
* the agreement "predicted improved generalization (ρ = 0.96)": Spearman's rho of the cosine
  with accuracy over the per-sigma means (the paper's Fig. 2B).

Both are orderings a model may have learned or inherited: each is computed on the trained maps
and on the maps at initialisation (``table3_init``; accuracy stays the trained one), and
:func:`lstpe.claims.verdicts.ordering` counts as support only an ordering the initialisation
did not already show ("inherited from the initialisation" where it did). The change of the
small-sigma cosine from initialisation is no test: untrained attention is near uniform, so the
cosine starts near 1 whatever the weights (measured against another seed's 2d-fixed too,
``table3_init_other``), and the text gives it as such. Our cells at sigma 0.1 and 0.2 against
the paper's Table 3 (4000 epochs; ours the stored units' epoch) are shown beside the tests,
not tested: the paper's sentences are about the order over sigma, not a level.

In this repository the models of one seed share every weight but the PE
(``lstpe.nn.architecture.PE_STREAM``); in the authors' code a learnable PE draws from the global
generator before its block's weights and 2d-fixed does not, so their learn-sigma and 2d-fixed
models of one seed start from different attention weights.
"""

from __future__ import annotations

import pandas as pd
from scipy import stats

from lstpe.claims._common import SMALL_SIGMAS, correlation, rho_text, trend
from lstpe.claims.inputs import Inputs, have
from lstpe.claims.paper import Quote, label
from lstpe.claims.verdicts import (
    AT_INIT,
    Check,
    Verdict,
    explanation_of_ordering,
    result_of_contrast,
    untestable,
    weigh,
)
from lstpe.evidence import tables as ev
from lstpe.references.paper_tables import load_paper_tables
from lstpe.stats.seed_stats import p_text, rank_correlation, sign_flip_test
from lstpe.stats.seed_tests import no_spread

CLAIM = "attention"
LINE = ("small-sigma models learn to attend like 2d-fixed, and the similarity tracks accuracy "
        f"({label('attention')})")
QUOTES: tuple[Quote, ...] = (
    Quote("Importantly, learned PEs with small σ tended to learn attention representations that "
          "were most aligned with the ground truth.", "v2", "§3.3, Fig. 2A, Table A3"),
    Quote("We found that the degree of agreement of learned attention maps with the ground "
          "truth (`2d-fixed`) predicted improved generalization ($\\rho = 0.96$, $p < "
          "0.0001$; Fig. 2B).", "v2", "§3.3, Fig. 2B"),
    Quote("We found that learnable models that had greater similarity to the attention maps "
          "identified in the 2d-fixed model had greater generalization performance … Fig. 4B)",
          "v1", "§3.4, Fig. 4B"),
    Quote("These results indicate that 1) low-norm initializations better support the "
          "discoverability of ground truth PEs and their derivative attention maps",
          "v1", "§3.4"),
    Quote("We found that aside from the 1d-fixed model (which does not generalize well), "
          "*learn-0.2* learned the closest attention map to the 2d-fixed model.", "v2",
          "Fig. A8C,D"),
)
"""The paper's sentences this claim tests, from each version."""
WHERE = "07b_alignment.ipynb"


def paper_table3() -> pd.DataFrame:
    """The paper's Table 3: ``sigma, mean, sd, n`` of the attention cosine."""
    p = load_paper_tables().query("table == '3' and metric == 'attention_cosine'")
    return p[["sigma", "mean", "sd", "n"]].astype({"sigma": float}).reset_index(drop=True)


def learned_change(t3: pd.DataFrame, t3_init: pd.DataFrame, col: str = "cosine_paper"
                   ) -> pd.DataFrame:
    """Per small-sigma model: ``init``, ``final`` and ``change`` of ``col`` (shown, not
    tested: module docstring)."""
    keys = ["pe", "sigma", "seed"]
    m = t3[keys + [col]].merge(t3_init[keys + [col]], on=keys, suffixes=("", "_init"))
    m = m[m["sigma"].isin(SMALL_SIGMAS)]
    return m.assign(init=m[col + "_init"], final=m[col], change=m[col] - m[col + "_init"])


def _why_near_one(x: Inputs) -> str:
    """Why the cosine starts near 1: measured against another seed's 2d-fixed too."""
    o = x.table3_init_other
    if not have(o):
        return ""
    o = o[o["sigma"].isin(SMALL_SIGMAS)]
    return (f"; against another seed's 2d-fixed (independent attention weights, as in the "
            f"authors' code) it starts at {o['cosine_paper'].mean():.3f} too: untrained "
            "attention is near uniform, so the cosine starts near 1 whatever the weights")


def _sigma_rho(t: pd.DataFrame, col: str) -> dict | None:
    """Spearman of the per-sigma mean ``col`` with sigma (the paper's Table 3 read as an
    ordering over sigma); None below 3 sigmas."""
    if t is None or t["sigma"].nunique() < 3:
        return None
    return rank_correlation(t.assign(_s=t["sigma"]), col, "_s")


def checks(x: Inputs, rho: dict | None = None, rho0: dict | None = None) -> list[Check]:
    """The paper's own analysis: its Table 3 read as an ordering of the per-sigma mean cosine
    over sigma (Spearman over sigmas), and its Fig. 2B, Spearman of the per-sigma mean cosine
    with the per-sigma mean accuracy (``rho``); the first sentence credits training
    ("learned"), so it is judged at initialisation too; then Fig. A8C,D (:func:`a8_check`)."""
    p = paper_table3()
    paper_rho = rank_correlation(p.rename(columns={"mean": "cos"}).assign(_s=p["sigma"]),
                                 "cos", "_s")
    t = x.table3.dropna(subset=["cosine_paper"]) if have(x.table3) else None
    t0 = x.table3_init.dropna(subset=["cosine_paper"]) if have(x.table3_init) else None
    if t is None or t["sigma"].nunique() < 3:
        return [*(Check(q, "", "fewer than three stored sigmas", "not testable yet")
                  for q in QUOTES[:2]), a8_check(x)]
    r, r0 = _sigma_rho(t, "cosine_paper"), _sigma_rho(t0, "cosine_paper")
    small = t[t["sigma"].isin(SMALL_SIGMAS)]["cosine_paper"].mean()
    order = Check(
        QUOTES[0], f"Table 3: {p.loc[p['sigma'] == 0.1, 'mean'].iloc[0]:.3f} and "
        f"{p.loc[p['sigma'] == 0.2, 'mean'].iloc[0]:.3f} at σ = 0.1 and 0.2, down to "
        f"{p.loc[p['sigma'] == 2.0, 'mean'].iloc[0]:.3f} at σ = 2, 4000 epochs (its means "
        f"ranked against σ: ρ = {paper_rho['rho']:+.2f}, ours of its table)",
        rho_text(r, "cosine against σ:", x.epoch) + f"; the level at σ ≤ 0.2: {small:.3f}, "
        "lower than the paper's"
        + (f"; at initialisation ρ = {r0['rho']:+.2f} ({p_text(r0['pvalue'])})" if r0 else ""),
        result_of_contrast(r["rho"], r["pvalue"], -1) if r else "not testable yet",
        *_trained(explanation_of_ordering(r["rho"], r["pvalue"], -1, r0["rho"] if r0 else
                                          None, r0["pvalue"] if r0 else None), t, t0))
    tracks = Check(QUOTES[1], "ρ = 0.96, p < 0.0001 (Fig. 2B in the text, panel C in its "
                   "caption; over σ)",
                   rho_text(rho, "cosine against accuracy:", x.epoch)
                   + (f"; at initialisation ρ = {rho0['rho']:+.2f} ({p_text(rho0['pvalue'])})"
                      if rho0 else ""),
                   result_of_contrast(rho["rho"], rho["pvalue"], +1) if rho else
                   "not testable yet")
    return [order, tracks, a8_check(x)]


def _trained(expl: tuple[str, str], t: pd.DataFrame, t0: pd.DataFrame | None
             ) -> tuple[str, str]:
    """``expl`` with what training did to the small-sigma cosine's level (its mean at
    initialisation and trained), where the ordering was already there."""
    if t0 is None or expl[1] != AT_INIT:
        return expl
    ch = learned_change(t, t0)
    if ch.empty:
        return expl
    way = "lowers" if ch["change"].mean() < 0 else "raises"
    return expl[0], (f"{AT_INIT}; training {way} the σ ≤ 0.2 cosine, "
                     f"{ch['init'].mean():.3f} → {ch['final'].mean():.3f}")


A8_OTHERS: tuple[str, ...] = ("relative", "random", "rope", "nope", "c-nope")
"""Fig. A8's common PEs beside ``learn-0.2``, other than 2d-fixed (the reference) and
1d-fixed (which the sentence sets aside)."""


def a8_gap(t: pd.DataFrame) -> tuple[str, float, float, int] | None:
    """``(closest other PE, gap, p, n)`` of one stage of ``table1_attention``: learn-0.2's
    attention cosine to 2d-fixed minus that of the closest of :data:`A8_OTHERS` (by its seed
    mean), the paired t-test over the seeds both have (equal differences have no t: the exact
    sign-flip test, as :mod:`lstpe.stats.seed_tests` does); None without learn-0.2, another PE
    or two common seeds."""
    cos = t.pivot_table(index="seed", columns="pe", values="cosine_paper")
    others = [p for p in A8_OTHERS if p in cos]
    if "learn-0.2" not in cos or not others:
        return None
    closest = cos[others].mean().idxmax()
    pair = cos[["learn-0.2", closest]].dropna()
    if len(pair) < 2:
        return None
    d = pair["learn-0.2"] - pair[closest]
    p = sign_flip_test(d)[1] if no_spread(d) else \
        float(stats.ttest_rel(pair["learn-0.2"], pair[closest]).pvalue)
    return closest, float(d.mean()), p, len(pair)


def a8_check(x: Inputs) -> Check:
    """Fig. A8C,D's sentence: among Table 1's PEs other than 1d-fixed, learn-0.2's trained
    attention is the closest to 2d-fixed's. The paper reads it off its bars (no test); ours
    is the gap to the closest other PE with the paired t-test over seeds (each model against
    the 2d-fixed model of its seed, the book's pairing, which decides the result; against the
    seed-averaged 2d-fixed maps beside it where given, saying when the sign flips), and the
    sentence's "learned" is judged at initialisation too."""
    q = QUOTES[4]
    paper_says = "learn-0.2 the closest after 1d-fixed (bars, 4000 epochs; no test)"
    t = x.table1_attention
    if not have(t):
        return Check(q, paper_says, "no Table 1 attention maps stored", "not testable yet")
    pairing = t["pairing"] if "pairing" in t else pd.Series("seed", index=t.index)
    got = {s: a8_gap(t[(t["stage"] == s) & (pairing == "seed")]) for s in ("final", "init")}
    mean = t[(t["stage"] == "final") & (pairing == "mean")]
    got_mean = a8_gap(mean) if len(mean) else None
    if got["final"] is None:
        return Check(q, paper_says, "learn-0.2 or the other PEs lack two common seeds",
                     "not testable yet")
    closest, gap, p, n = got["final"]
    ours = (f"learn-0.2 minus the closest other PE ({closest}): {gap:+.3f} (paired t-test over "
            f"{n} seeds, {p_text(p)}; epoch {x.epoch})")
    if got_mean is not None:
        flip = (got_mean[1] > 0) != (gap > 0)
        ours += (f"; against 2d-fixed's maps averaged over its seeds (the paper leaves the "
                 f"pairing open) {got_mean[1]:+.3f} against {got_mean[0]} "
                 f"({p_text(got_mean[2])})" + (": the sign depends on the pairing" if flip
                                                 else ""))
    g0 = got["init"]
    if g0 is not None:
        ours += f"; at initialisation {g0[1]:+.3f} against {g0[0]} ({p_text(g0[2])})"
    return Check(q, paper_says, ours, result_of_contrast(gap, p, +1),
                 *explanation_of_ordering(gap, p, +1, g0[1] if g0 else None,
                                          g0[2] if g0 else None),
                 what="learn-0.2 attends most like 2d-fixed of the common PEs")


def judge(x: Inputs) -> Verdict:
    """The verdict (module docstring); ``numbers``: ``change`` (per small-sigma model, shown),
    ``level`` (our cells against Table 3, shown), ``rho`` and ``rho_init``, ``trend`` and
    ``trend_init`` (the rows of :func:`lstpe.evidence.tables.trend_row`)."""
    if not have(x.table3) or x.table3["sigma"].nunique() < 2:
        return untestable(CLAIM, LINE, WHERE, "fewer than two stored sigmas", quotes=QUOTES)
    t = x.table3.dropna(subset=["cosine_paper"])
    t0 = x.table3_init.dropna(subset=["cosine_paper"]) if have(x.table3_init) else None
    tr = ev.trend_row(t["sigma"], t["cosine_paper"], claim=CLAIM).iloc[0]
    tr0 = (ev.trend_row(t0["sigma"], t0["cosine_paper"], claim=CLAIM).iloc[0]
           if t0 is not None and t0["sigma"].nunique() >= 2 else None)
    tests = [trend(tr, "falls", "cosine falls over sigma", "the trained cosine over σ",
                   QUOTES[0], tr0)]
    acc = x.final[["pe", "seed", "accuracy"]]
    rho, rho0 = (rank_correlation(m, "cosine_paper") if m["sigma"].nunique() >= 3 else None
                 for m in (t.merge(acc, on=["pe", "seed"]),
                           (t0 if t0 is not None else t.iloc[:0]).merge(acc,
                                                                        on=["pe", "seed"])))
    tests.append(correlation(rho, rho0, +1, "cosine tracks accuracy",
                             "Spearman ρ(cosine, accuracy)", QUOTES[1]))
    tests = [u for u in tests if u is not None]
    ch = learned_change(t, t0) if t0 is not None else pd.DataFrame()
    level = _level(t)
    verdict, part = weigh(tests)
    text = "; ".join(u.text for u in tests)
    if len(ch):
        text += (f"; shown, not tested: σ ≤ 0.2, {ch['init'].mean():.3f} at initialisation → "
                 f"{ch['final'].mean():.3f} trained" + _why_near_one(x))
    if len(level):
        text += "; beside the paper's Table 3 (not tested): " + "; ".join(
            f"{r.cell} {r.mean:.3f} against the paper's {r.authors_mean:.3f} ({r.verdict})"
            for r in level.itertuples()) + _long(x)
    return Verdict(CLAIM, LINE, WHERE, verdict, x.epoch, part, tests, text,
                   {"change": ch, "level": level, "rho": rho, "rho_init": rho0, "trend": tr,
                    "trend_init": tr0}, QUOTES, checks(x, rho, rho0))


def _level(t: pd.DataFrame) -> pd.DataFrame:
    """Our trained cosine at sigma 0.1 and 0.2 against the paper's Table 3
    (:func:`lstpe.evidence.tables.evidence_rows`)."""
    ref = paper_table3().set_index("sigma")
    vals = {s: g["cosine_paper"].to_numpy(float) for s, g in t.groupby("sigma")
            if s in SMALL_SIGMAS}
    if not vals:
        return pd.DataFrame()
    refs = {s: ev.Reference(float(ref.loc[s, "mean"]), float(ref.loc[s, "sd"]),
                            int(ref.loc[s, "n"]), "paper@4000") for s in vals}
    return ev.evidence_rows({f"learn-{s:g}": v for s, v in vals.items()},
                            {f"learn-{s:g}": r for s, r in refs.items()}, claim=CLAIM,
                            value_range=(-1.0, 1.0))


def _long(x: Inputs) -> str:
    """The long units' small-sigma cosine at their last epoch, in a phrase."""
    if not have(x.mechanism_long) or "cosine" not in x.mechanism_long:
        return ""
    ml = x.mechanism_long[x.mechanism_long["sigma"].isin(SMALL_SIGMAS)]
    return "; long runs at epoch {}: {}".format(
        int(ml["epoch"].min()), ", ".join(f"σ = {r.sigma:g} {r.cosine:.3f}"
                                          for r in ml.itertuples()))
