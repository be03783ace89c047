"""The paper's claims, one line each, scored on the units stored today (chapter 11, the intro).

:func:`scorecard` turns the evidence of each claim into one row: ``claim`` (the paper's claim in
a line), ``verdict`` and ``evidence`` (the numbers it rests on), ``where`` (the chapter that
shows them). Verdicts:

* ``shown``: every test the claim needs is passed at today's n;
* ``partly shown``: some are (``evidence`` says which);
* ``not shown``: none is, at today's n (``evidence`` gives the numbers and, where there is one,
  the smallest difference the n could have resolved);
* ``not testable yet``: no stored unit of the recipe the claim needs.

Each claim's rule is in its function's docstring; the statistics are those of
:mod:`lstpe.analysis.evidence` (exact permutation tests within our units) and
:mod:`lstpe.analysis.pe_structure` (permutation p of a 2-D structure score).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from lstpe.analysis import evidence as ev

__all__ = ["CLAIM_LINES", "SCORE_VERDICTS", "SMALL_SIGMAS", "scorecard", "score_fixed",
           "score_sigma", "score_mechanism", "score_optimizers", "score_humans", "score_brain",
           "verdict_counts"]

CLAIM_LINES: dict[str, tuple[str, str]] = {
    "learnable_beats_fixed": ("a learnable PE (learn-0.2) beats every common fixed PE",
                              "05_training.ipynb"),
    "small_sigma_generalises": ("small sigma generalises, large sigma does not",
                                "06_sigma_sweep.ipynb"),
    "learns_2d": ("small-sigma PEs learn the task's 2-D structure (Table 3, Fig. 3)",
                  "07_inside_the_models.ipynb"),
    "optimizers": ("SGD and weight decay reduce the dependence on sigma (Tables 4-6)",
                   "08_robustness.ipynb"),
    "humans": ("models and humans find the same puzzles hard (learn-0.2 closest)",
               "09_models_and_humans.ipynb"),
    "brain": ("learnable PEs recover the brain's network modularity when initialised small",
              "10_brain.ipynb"),
}
"""Claim id: (the paper's claim in one line, the chapter with its evidence)."""

SCORE_VERDICTS = ("shown", "partly shown", "not shown", "not testable yet")

SMALL_SIGMAS: tuple[float, ...] = (0.1, 0.2)
"""The paper's small sigmas (its Table 3's 'sigma <= 0.2')."""


def _row(claim: str, verdict: str, evidence: str) -> dict[str, str]:
    line, where = CLAIM_LINES[claim]
    return {"claim": line, "verdict": verdict, "evidence": evidence, "where": where}


def score_fixed(final: pd.DataFrame) -> dict[str, str]:
    """"A learnable PE beats every fixed PE": learn-0.2 against each common fixed PE (every
    Table 1 PE but 2d-fixed, the ground truth it is meant to approach), exact permutation tests.
    ``shown`` when it is higher than all of them, ``partly shown`` when than some."""
    c = ev.contrast_table("learnable_beats_fixed", final)
    others = c[(c["a"] == "learn-0.2") & (c["b"] != "2d-fixed")]
    if others.empty:
        return _row("learnable_beats_fixed", "not testable yet", "no stored units")
    hi = others[others["verdict"] == "higher"]
    rest = others[others["verdict"] != "higher"]
    verdict = "shown" if rest.empty else "partly shown" if len(hi) else "not shown"
    text = f"learn-0.2 higher than {len(hi)} of {len(others)} fixed PEs"
    if len(hi):
        text += f" (exact p <= {hi['p_perm'].max():.3f})"
    if len(rest):
        text += "; not shown against " + ", ".join(
            f"{r.b} ({r.diff:+.3f}, exact p = {r.p_perm:.3f})" for r in rest.itertuples())
    gt = c[(c["a"] == "learn-0.2") & (c["b"] == "2d-fixed")]
    if len(gt):
        g = gt.iloc[0]
        text += f"; against 2d-fixed {g['diff']:+.3f} ({g['verdict']}, exact p = {g['p_perm']:.3f})"
    return _row("learnable_beats_fixed", verdict, text)


def score_sigma(final: pd.DataFrame) -> dict[str, str]:
    """"Small sigma generalises, large does not": learn-0.2 above learn-2 (exact permutation
    test) and accuracy falling over sigma (Kendall's tau over units, permutation p); ``shown``
    when both are, ``partly shown`` when one is."""
    c = ev.contrast_table("small_sigma_generalises", final)
    pair = c[(c["a"] == "learn-0.2") & (c["b"] == "learn-2")]
    trend = c[c["a"].astype(str).str.startswith("trend")]
    if pair.empty and trend.empty:
        return _row("small_sigma_generalises", "not testable yet", "no stored units")
    parts, ok = [], []
    if len(pair):
        p = pair.iloc[0]
        ok.append(p["verdict"] == "higher")
        parts.append(f"learn-0.2 - learn-2 = {p['diff']:+.3f} [{p['exact_low']:+.3f}, "
                     f"{p['exact_high']:+.3f}] (exact p = {p['p_perm']:.4f})")
    if len(trend):
        t = trend.iloc[0]
        ok.append(t["verdict"] == "falls")
        pt = "p < 0.0001" if t["p_perm"] < 1e-4 else f"p = {t['p_perm']:.4f}"
        parts.append(f"Kendall tau = {t['statistic']:.2f} over {int(t['n_a'])} units ({pt}), "
                     f"{t['diff']:+.3f} per doubling of sigma")
    verdict = "shown" if all(ok) else "partly shown" if any(ok) else "not shown"
    return _row("small_sigma_generalises", verdict, "; ".join(parts))


def score_mechanism(structure: pd.DataFrame, long_epoch: int = 0, block: int = 0,
                    long: pd.DataFrame | None = None) -> dict[str, str]:
    """"Small-sigma PEs learn the task's 2-D structure": per small-sigma unit
    (:data:`SMALL_SIGMAS`), whether the learned update dPE and the final PE of ``block`` score
    2-D structure above their permutation null (:func:`lstpe.analysis.pe_structure.pe_structure`
    grid score, p < 0.05). ``shown`` when the final PEs are (the paper's claim is about the
    trained PE), ``partly shown`` when only the learned part is (its init still dominates the
    PE), ``not shown`` when neither is. ``long_epoch``: how far the long units have got;
    ``long``: their :func:`lstpe.analysis.long_runs.long_summary` (block 0), whose last epoch
    the evidence reports (the verdict stays with the stored units, at every seed)."""
    t = structure[(structure["block"] == block) & structure["sigma"].isin(SMALL_SIGMAS)]
    if t.empty:
        return _row("learns_2d", "not testable yet", "no stored learnable units")
    n = len(t)
    dpe = int((t["p_dpe"] < ev.ALPHA).sum())
    fin = int((t["p_final"] < ev.ALPHA).sum())
    big = structure[(structure["block"] == block) & (structure["sigma"] >= 0.5)]
    verdict = "shown" if fin == n else "partly shown" if dpe else "not shown"
    text = (f"sigma <= 0.2, block {block}: the learned part dPE has 2-D structure in {dpe} of "
            f"{n} units (grid score {t['score_dpe'].min():.2f} to {t['score_dpe'].max():.2f}), "
            f"the final PE in {fin} of {n} (its init carries "
            f"{t['init_share'].min():.0%} to {t['init_share'].max():.0%} of it)")
    if len(big):
        text += (f"; sigma >= 0.5: dPE in {int((big['p_dpe'] < ev.ALPHA).sum())} of {len(big)} "
                 f"units (grid score {big['score_dpe'].min():.2f} to "
                 f"{big['score_dpe'].max():.2f})")
    epoch = int(t["epoch"].max()) if "epoch" in t and t["epoch"].notna().any() else 0
    text += f"; at epoch {epoch}" + (f", long units at epoch {long_epoch} of 4000"
                                     if long_epoch else ", no long unit yet")
    if long is not None and len(long):
        text += (f" (seed {', '.join(str(int(x)) for x in sorted(set(long['seed'])))}: at epoch "
                 f"{int(long['epoch'].min())} the init still carries "
                 f"{long['init_share'].min():.0%} to {long['init_share'].max():.0%} of the PE, "
                 f"the final PE is 2-D in {int((long['p_final'] < ev.ALPHA).sum())} of "
                 f"{len(long)}, and after epoch 200 it moved at most "
                 f"{long['moved_after'].max():.1%} of its initial norm)")
    return _row("learns_2d", verdict, text)


def score_optimizers(stored_units: Mapping[str, int],
                     witness: pd.DataFrame | None = None) -> dict[str, str]:
    """Tables 4-6 (SGD, AdamW): ``not testable yet`` while none of their SGD or AdamW units is
    stored (``stored_units``: units per run name, e.g. ``{"table4/sgd": 0, "tables56": 0}``;
    ``table4/adam``'s units are counted in the text, since the Adam side alone tests none of
    the paper's contrasts).
    ``witness`` (``lstpe.chapters.long_mechanism.weight_decay_witness``: AdamW long units
    beside their Adam twins, one seed per sigma) adds what it shows at its last epoch at the
    largest sigma; it cannot test the claim, which is about the whole sweep."""
    have = {k: v for k, v in stored_units.items() if v and k != "table4/adam"}
    adam = stored_units.get("table4/adam", 0)  # Table 4's Adam side alone tests no contrast
    if not have:
        text = "no 200-epoch unit of SGD or AdamW" + (
            f" (Table 4's Adam side: {adam} unit{'s' if adam != 1 else ''} at sigma 0.01 and "
            "0.05, chapter 8)" if adam else "")
        if witness is not None and len(witness):
            w = witness[witness["sigma"] == witness["sigma"].max()]
            at = int(w.loc[w["optimizer"] == "adamw", "epoch"].max())
            w = w[w["epoch"] == at].set_index("optimizer")
            text += (f"; weight decay's long witness (ours, one seed per sigma) at epoch {at}, "
                     f"sigma = {w['sigma'].iloc[0]:g}: AdamW {w.loc['adamw', 'accuracy']:.3f} "
                     f"against Adam {w.loc['adam', 'accuracy']:.3f}, its PE shrunk to "
                     f"{w.loc['adamw', 'norm_ratio']:.2f} of its initial norm; SGD's and the "
                     "other sigmas' long units are planned (lstpe campaign plan, item 8)")
        else:
            text += "; their long units are planned (lstpe campaign plan, items 5 and 8)"
        return _row("optimizers", "not testable yet", text)
    return _row("optimizers", "not shown",
                "stored: " + ", ".join(f"{k} {v}" for k, v in have.items())
                + "; too few cells for the paper's contrasts yet")


def score_humans(similarity: pd.DataFrame) -> dict[str, str]:
    """Per puzzle, learn-0.2's accuracy (mean over its seeds) against people's (Spearman rho
    over the 108 validation puzzles, :func:`lstpe.analysis.humans.human_similarity`). ``shown``
    when rho > 0 at p < 0.05 and no other PE's rho is higher, ``partly shown`` when only the
    first holds."""
    s = similarity.dropna(subset=["spearman"])
    me = s[s["pe"] == "learn-0.2"]
    if me.empty:
        return _row("humans", "not testable yet", "no stored learn-0.2 unit")
    r = me.iloc[0]
    top = s.loc[s["spearman"].idxmax()]
    pos = r["spearman"] > 0 and r["spearman_p"] < ev.ALPHA
    verdict = ("shown" if pos and top["pe"] == "learn-0.2" else "partly shown" if pos
               else "not shown")
    return _row("humans", verdict,
                f"learn-0.2 rho = {r['spearman']:.2f} (p = {r['spearman_p']:.3f}; the paper: "
                f"0.45); highest: {top['pe']} {top['spearman']:.2f}")


def score_brain(paper_scale_runs: int) -> dict[str, str]:
    """The brain experiment: ``not testable yet`` without paper-scale runs (the book trains a
    preview of it)."""
    if not paper_scale_runs:
        return _row("brain", "not testable yet",
                    "preview runs only: they show the analysis on real HCP data, not the claim")
    return _row("brain", "not shown", f"{paper_scale_runs} paper-scale runs stored")


def scorecard(final: pd.DataFrame, structure: pd.DataFrame, similarity: pd.DataFrame,
              long_epoch: int = 0, optimizer_units: Mapping[str, int] | None = None,
              brain_runs: int = 0, paper_scale: bool = True,
              long: pd.DataFrame | None = None,
              witness: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every claim of :data:`CLAIM_LINES`, one row each: ``claim, verdict, evidence, where``.

    Args:
        final: one row per stored model (``pe, seed, accuracy``), Tables 1-2, validation
            accuracy as the authors evaluated it.
        structure: :func:`lstpe.analysis.pe_structure.stored_structure` of the Table 2 units.
        similarity: :func:`lstpe.analysis.humans.human_similarity` of the stored units.
        long_epoch: the mechanism's long units' published epoch (0: none).
        long: their :func:`lstpe.analysis.long_runs.long_summary` (None: not measured).
        optimizer_units: stored units of Tables 4-6 per run name.
        witness: weight decay's long witness (:func:`score_optimizers`; None: none).
        brain_runs: paper-scale brain runs stored.
        paper_scale: the runs are the authors' recipe; previews (False) test no claim, and
            every row then says so.
    """
    if not paper_scale:
        return pd.DataFrame([_row(c, "not testable yet", "preview runs only: they show that "
                                  "the analysis runs, not the claim") for c in CLAIM_LINES])
    rows = [score_fixed(final), score_sigma(final),
            score_mechanism(structure, long_epoch, long=long),
            score_optimizers(optimizer_units or {}, witness), score_humans(similarity),
            score_brain(brain_runs)]
    out = pd.DataFrame(rows)
    out["verdict"] = pd.Categorical(out["verdict"], categories=list(SCORE_VERDICTS))
    return out


def verdict_counts(card: pd.DataFrame) -> dict[str, int]:
    """How many claims have each verdict (every verdict listed, zeros included)."""
    counts = card["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in SCORE_VERDICTS}
