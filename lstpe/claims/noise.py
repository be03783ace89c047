"""Fig. A9 (Fig. 5 of the first version): learnable PEs initialised small are the most robust
to embedding noise, and besides 2d-fixed, learn-0.2 is the most robust PE.

The paper's sentences (:data:`QUOTES`) make three claims, each read here as its sentence says:

* "models that were most robust to noise were those initialized from a low-norm distribution"
  (v2): among the learnable PEs, the loss rises with sigma (Kendall's tau over units,
  permutation p);
* "models that were most robust to noise were those initialized from a low-norm distribution
  σ ∈ [0.1, 0.6]" (v1): each sigma of that range against the learnable units above it
  (Kendall's tau-b of the loss on the two groups, i.e. a rank test, permutation p), Holm over
  the sigmas of the range; a sigma of the range that loses more contradicts the sentence;
* "besides the 2d-fixed model, the learn-0.2 was most robust to noise relative to other
  commonly-used PEs": learn-0.2 against each common PE (exact permutation test, Holm over
  them); 2d-fixed is no test (the sentence sets it apart), its contrast is shown beside.

The loss is measured relative to each model's clean accuracy above chance: ``(clean - noisy)
/ (clean - chance)``, the share of what the model knows that the largest noise takes (0: no
loss, 1: down to chance), so that a PE near chance, with little to lose, does not look robust.
Models whose clean accuracy is within :data:`ABOVE_CHANCE` of chance have no such share to
measure and are left out of every test; the text names them.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from lstpe.claims._common import adjust, contrast, rho_text, student, trend, values_by_pe
from lstpe.claims.inputs import Inputs, have
from lstpe.claims.paper import Quote, label
from lstpe.claims.table1 import COMMON  # the common PEs; 2d-fixed set apart, as the paper does
from lstpe.claims.verdicts import Check, Test, Verdict, result_of_contrast, untestable, weigh
from lstpe.evidence import tables as ev
from lstpe.stats.seed_stats import holm, p_text, rank_correlation, tau_text
from lstpe.stats.seed_tests import ALPHA

CLAIM = "noise"
LINE = ("small-sigma learnable PEs are the most robust to embedding noise, and after 2d-fixed "
        f"learn-0.2 is ({label('noise')})")
WHERE = "08_robustness.ipynb"
QUOTES: tuple[Quote, ...] = (
    Quote("Finally when performing a perturbation analysis, where we systematically injected "
          "noise to the token embeddings and evaluated downstream performance, we found that "
          "models that were most robust to noise were those initialized from a low-norm "
          "distribution (Fig. A9).", "v2", "§3.2, Fig. A9"),
    Quote("Amongst the models with learnable PEs, we found that models that were most robust to "
          "noise were those initialized from a low-norm distribution … σ ∈ [ 0.1 , 0.6 ] "
          "(Fig. 5B,D).", "v1", "§3.5, Fig. 5B,D"),
    Quote("In addition, besides the 2d-fixed model, the learn-0.2 was most robust to noise "
          "relative to other commonly-used PEs (Fig. 5C,E).", "v1", "§3.5, Fig. 5C,E"),
    Quote("E) Besides the ground truth model (2d-fixed), the learn-0.2 model was most robust to "
          "perturbation compared to common PEs.", "v2", "Fig. A9E"),
)
"""The paper's sentences this claim tests, from each version."""
BAND: tuple[float, float] = (0.1, 0.6)
"""The first version's range of the most robust sigmas."""
ABOVE_CHANCE = 0.1
"""A model's clean accuracy must exceed chance (:data:`lstpe.evidence.tables.CHANCE_LINE`)
by more than this for its relative loss to be measured (module docstring)."""


def relative_loss(noise: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(kept, left_out)``: the models of ``noise`` (``pe, seed, clean, noisy``) with
    ``rel_loss`` and ``sigma`` (NaN for a fixed PE), split by whether their clean accuracy is
    above chance by more than :data:`ABOVE_CHANCE`."""
    d = noise.assign(sigma=pd.to_numeric(noise["pe"].astype(str).str.extract(
        r"^learn-([0-9.]+)$")[0], errors="coerce"))
    above = d["clean"] - ev.CHANCE_LINE
    ok = above > ABOVE_CHANCE
    kept = d[ok].assign(rel_loss=(d["clean"] - d["noisy"])[ok] / above[ok])
    return kept.reset_index(drop=True), d[~ok].reset_index(drop=True)


def _band(kept: pd.DataFrame) -> tuple[list[Test], pd.DataFrame]:
    """Each sigma of :data:`BAND` against the learnable units above it (module docstring)."""
    learn = kept.dropna(subset=["sigma"])
    out = learn[learn["sigma"] > BAND[1]]
    rows = []
    for s, g in learn[learn["sigma"].between(*BAND)].groupby("sigma"):
        if len(g) < 2 or len(out) < 2:
            continue
        r = ev.trend_row([1.0] * len(g) + [2.0] * len(out),
                         [*g["rel_loss"], *out["rel_loss"]], claim=CLAIM).iloc[0]
        rows.append({**r.to_dict(), "a": f"learn-{s:g}", "b": f"σ > {BAND[1]:g}",
                     "mean_a": g["rel_loss"].mean(), "mean_b": out["rel_loss"].mean(),
                     "n_a": len(g), "n_b": len(out)})
    band = pd.DataFrame(rows)
    if band.empty:
        return [], band
    band["p_holm"] = holm(band["p_perm"].to_numpy(float))
    tests = []
    for r in band.itertuples():
        shown = r.p_holm < ALPHA and pd.notna(r.statistic)
        outcome = ("open" if not shown else "supports" if r.statistic > 0 else "contradicts")
        tests.append(Test(f"{r.a} against σ > {BAND[1]:g} (relative loss, ours)", outcome,
                          f"{r.a} loses {r.mean_a:.2f} of its accuracy above chance, the "
                          f"{r.n_b} learnable models at {r.b} {r.mean_b:.2f} (rank test, Kendall "
                          f"{tau_text(r.statistic)}, {p_text(r.p_perm)}, Holm over "
                          f"{len(band)} sigmas {p_text(r.p_holm)})", r.p_floor, QUOTES[1]))
    return tests, band


PAPER_LEVELS: tuple[float, ...] = (0.02, 0.04, 0.06, 0.08, 0.1)
"""The noise stds of the paper (first version, §3.5)."""


def noisy_accuracy(levels: pd.DataFrame) -> pd.DataFrame:
    """The paper's measure (Fig. A9D, first version Fig. 5D): per model, the accuracy
    averaged over :data:`PAPER_LEVELS` (``noisy``), at the largest (``at_max``) and at the
    smallest std stored (``clean``, no noise): ``pe, seed, sigma, noisy, at_max, clean``
    (``sigma`` NaN for a fixed PE)."""
    r = levels[levels["noise"].round(6).isin([round(v, 6) for v in PAPER_LEVELS])]
    g = r.groupby(["pe", "seed"])
    out = g["accuracy"].mean().rename("noisy").to_frame()
    out["at_max"] = r[r["noise"].round(6) == round(max(PAPER_LEVELS), 6)].set_index(
        ["pe", "seed"])["accuracy"]
    clean = levels[levels["noise"] == levels["noise"].min()]
    out["clean"] = clean.drop_duplicates(["pe", "seed"]).set_index(["pe", "seed"])["accuracy"]
    out = out.reset_index()
    return out.assign(sigma=pd.to_numeric(out["pe"].astype(str).str.extract(
        r"^learn-([0-9.]+)$")[0], errors="coerce"))


def checks(x: Inputs) -> list[Check]:
    """The paper's own analysis, on its measure (accuracy under noise, averaged over its noise
    stds, seed means per PE): the ordering over sigma of the learnable PEs (Spearman of the
    per-sigma means with sigma), the most robust sigma against the first version's range
    [0.1, 0.6], and learn-0.2 above every common PE (the paper reads its figure's means; ours
    reproduces it where learn-0.2's lead over the closest is significant, the paper's
    Student's t-test, :func:`~lstpe.claims._common.student`)."""
    if not have(x.noise_levels):
        return [Check(q, "", "no noise evaluation stored", "not testable yet")
                for q in (QUOTES[0], QUOTES[1], QUOTES[3])]
    m = noisy_accuracy(x.noise_levels)
    learn = m.dropna(subset=["sigma"])
    rho = (rank_correlation(learn.assign(_s=learn["sigma"]), "noisy", "_s")
           if learn["sigma"].nunique() >= 3 else None)
    rho_clean = (rank_correlation(learn.assign(_s=learn["sigma"]), "clean", "_s")
                 if rho is not None else None)
    at = x.epoch
    mean = m.groupby("pe")[["noisy", "at_max", "clean"]].mean()
    n = m.groupby("pe").size()
    low = Check(QUOTES[0], "Fig. A9B,D: accuracy under noise highest at small σ (no number)",
                rho_text(rho, "accuracy under noise against σ:", at)
                + " (mean over std 0.02-0.1)" + (
                    "; " + rho_text(rho_clean, "clean accuracy, which that measure contains, "
                                    "against σ:", at) if rho_clean else ""),
                result_of_contrast(rho["rho"], rho["pvalue"], -1) if rho else
                "not testable yet", what="small σ the most robust")
    by_sigma = learn.groupby("sigma")["noisy"].mean()
    best = float(by_sigma.idxmax()) if len(by_sigma) else float("nan")
    band = Check(QUOTES[1], f"the most robust σ in [{BAND[0]:g}, {BAND[1]:g}] (Fig. 5B,D of the "
                 "first version)",
                 f"the most robust σ: {best:g} ({by_sigma.max():.3f} averaged over the noise "
                 f"stds; epoch {at}, {len(by_sigma)} sigmas)" if len(by_sigma) else
                 "no learnable PE stored",
                 ("reproduced" if BAND[0] <= best <= BAND[1] else "not reproduced")
                 if len(by_sigma) >= 3 else "not testable yet",
                 what=f"the most robust σ in [{BAND[0]:g}, {BAND[1]:g}]")
    pes = [p for p in ("learn-0.2", *COMMON) if p in mean.index]
    if "learn-0.2" in mean.index and len(pes) > 1:
        order = sorted(pes, key=lambda p: -mean.loc[p, "noisy"])
        runner = next(p for p in order if p != "learn-0.2")  # the closest common PE
        gap = student(m.loc[m["pe"] == "learn-0.2", "noisy"], m.loc[m["pe"] == runner, "noisy"])
        fixed = (f"; 2d-fixed, set apart by the paper: {mean.loc['2d-fixed', 'noisy']:.2f}"
                 if "2d-fixed" in mean.index else "")
        common = Check(QUOTES[3], "Fig. A9E: learn-0.2 the most robust after 2d-fixed (no "
                       "number)",
                       "averaged over std 0.02-0.1: " + ", ".join(
                           f"{p} {mean.loc[p, 'noisy']:.2f}" for p in order)
                       + "; at std 0.1: " + ", ".join(
                           f"{p} {mean.loc[p, 'at_max']:.2f}" for p in order)
                       + "; the change from clean accuracy to std 0.1 (the paper's "
                       "measure does not take clean accuracy out): " + ", ".join(
                           f"{p} {mean.loc[p, 'at_max'] - mean.loc[p, 'clean']:+.2f}"
                           for p in order)
                       + fixed + f" (epoch {at}, n = {int(n.loc['learn-0.2'])} for learn-0.2; "
                       "the paper reads its figure's means; learn-0.2 minus the closest, "
                       f"{runner}: " + (f"{gap['diff']:+.3f}, Student's t({gap['df']}) "
                                         f"{p_text(gap['p'])})" if gap
                                         else "fewer than 2 models each)"),
                       result_of_contrast(gap["diff"], gap["p"], +1) if gap else
                       ("not reproduced" if order[0] != "learn-0.2" else "not testable yet"),
                       what="learn-0.2 the most robust after 2d-fixed")
    else:
        common = Check(QUOTES[3], "Fig. A9E", "learn-0.2 or the common PEs not stored",
                       "not testable yet")
    return [low, band, common]


def judge(x: Inputs) -> Verdict:
    """The verdict (module docstring); ``numbers``: ``rows`` (learn-0.2 against the common PEs,
    relative loss, Holm's p), ``band`` (the sigmas of :data:`BAND` against those above),
    ``trend`` (the learnable PEs' relative loss over sigma), ``worst`` (the PE that loses the
    largest share), ``left_out`` (PEs with a model at chance) and ``vs_2d`` (learn-0.2
    against 2d-fixed, shown)."""
    if not have(x.noise):
        return untestable(CLAIM, LINE, WHERE, "no noise evaluation stored", quotes=QUOTES)
    kept, out = relative_loss(x.noise)
    vals = values_by_pe(kept, "rel_loss")
    pairs = [("learn-0.2", b) for b in COMMON if b in vals]
    rows = adjust(ev.contrast_rows(vals, pairs, claim=CLAIM)) if "learn-0.2" in vals and pairs \
        else pd.DataFrame(columns=list(ev.CONTRAST_COLUMNS))
    tests = [replace(contrast(r, -1, f"learn-0.2 loses less than {r['b']}", quote=QUOTES[2]),
                     ours_only=True) for _, r in rows.iterrows() if r["verdict"] != "not run"]
    band_tests, band = _band(kept)
    learn = kept.dropna(subset=["sigma"])
    tr = ev.trend_row(learn["sigma"], learn["rel_loss"], claim=CLAIM).iloc[0] \
        if learn["sigma"].nunique() >= 2 else None
    if tr is not None:
        tests.insert(0, replace(trend(tr, "rises", "the relative loss over σ (ours)",
                                      "the learnable PEs' relative loss over σ", QUOTES[0]),
                                ours_only=True))
    tests[1:1] = [replace(t, ours_only=True) for t in band_tests]
    if not tests:
        return untestable(CLAIM, LINE, WHERE, "none of the compared PEs stored above chance",
                          quotes=QUOTES)
    mean = kept.groupby("pe")["rel_loss"].mean()
    worst = str(mean.idxmax())
    vs_2d = (ev.contrast_rows(vals, [("learn-0.2", "2d-fixed")], claim=CLAIM).iloc[0]
             if {"learn-0.2", "2d-fixed"} <= set(vals) else None)
    noise_max = x.noise.attrs.get("noise_max")
    left = sorted(set(out["pe"]))
    text = ((f"at noise std {noise_max:g}, " if noise_max is not None else "")
            + "the loss is the share of a model's clean accuracy above chance (0.25) that the "
            f"noise takes; {worst} loses the largest ({mean[worst]:.2f}); "
            + "; ".join(t.text for t in tests)
            + (f"; shown, not tested (the paper sets 2d-fixed apart): learn-0.2 − 2d-fixed = "
               f"{vs_2d['diff']:+.3f} (exact {p_text(vs_2d['p_perm'])})"
               if vs_2d is not None else "")
            + (f"; left out, clean accuracy within {ABOVE_CHANCE:g} of chance: "
               + ", ".join(left) if left else ""))
    verdict, part = weigh(tests)
    return Verdict(CLAIM, LINE, WHERE, verdict, x.epoch, part, tests, text,
                   {"rows": rows, "band": band, "trend": tr, "worst": worst, "left_out": left,
                    "vs_2d": vs_2d}, QUOTES, checks(x))
