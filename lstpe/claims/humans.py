"""Fig. 6 of the first version: learn-0.2's accuracy over the puzzles follows people's most
closely, of the learnable PEs and of the common ones.

The measure (the same as chapter 9's evidence table): per model, the correlation ``r`` of its
right (1) and wrong (0) answers over the 108 validation puzzles with people's per-puzzle
accuracy (:func:`lstpe.evidence.claim_tables.model_human_agreement`; 0 in expectation for a
model whose errors fall on random puzzles). Why this one and not the paper's (Spearman's rho
of a PE's seed-mean accuracy with people's): the paper's gives one number per PE, so "learn-0.2
highest" could only be read off point estimates, and it has the ceiling the paper itself warns
of (a seed-mean of a few 0/1 vectors takes few values; a PE whose every model solves every
puzzle has no rho). Per model, the seeds give each PE a spread and learn-0.2 can be tested
against every other PE. These tests are ours; the paper's own measure decides the paper's
rows first (:func:`checks`).

Tests, from the paper's sentences (:data:`QUOTES`), on
:func:`lstpe.evidence.claim_tables.human_evidence`:

* learn-0.2's errors follow people's (its ``r`` above 0, the one-sample t-test Holm-adjusted
  over every PE tested, as chapter 9 reads them);
* learn-0.2 follows people most strongly of the learnable PEs: above each one (exact
  permutation tests, a conjunction: each at alpha); any learnable PE shown above it
  contradicts;
* the same of the common PEs.
"""

from __future__ import annotations

import pandas as pd

from lstpe.claims.inputs import Inputs, have
from lstpe.claims.paper import Quote, label
from lstpe.claims.verdicts import Check, Test, Verdict, untestable, weigh
from lstpe.evidence import claim_tables as ct
from lstpe.stats.seed_stats import holm, p_text
from lstpe.stats.seed_tests import ALPHA

CLAIM = "humans"
LINE = f"models and people find the same puzzles hard, learn-0.2 most ({label('humans')})"
WHERE = "09_models_and_humans.ipynb"
QUOTES: tuple[Quote, ...] = (
    Quote("Overall, we found that across the learnable PEs, the highest performing model – "
          "learn-0.2 – matched the variation in human performance most strongly", "v1",
          "§3.6, Fig. 6D"),
    Quote("Likewise, when examining the other common PEs, learn-0.2 demonstrated the highest "
          "correspondence with human performance (Fig. 6G).", "v1", "§3.6, Fig. 6G"),
    Quote("3) many of the correlations with human behavior were statistically significant when "
          "compared to zero.", "v1", "§3.6"),
)
"""The paper's sentences this claim tests (the first version only: the later one has no
comparison with people)."""
PAPER_RHO = 0.45
"""The paper's rank correlation for learn-0.2."""


def _highest(con: pd.DataFrame, best: str, which: str, quote: Quote) -> Test | None:
    """``best`` above each PE of ``con`` (its contrasts with them), as one conjunction."""
    if con.empty:
        return None
    con = con.assign(p_holm=holm(con["p_perm"].to_numpy(float)))
    up = con[(con["p_perm"] < ALPHA) & (con["diff"] > 0)]  # a conjunction: each at alpha
    down = con[(con["p_holm"] < ALPHA) & (con["diff"] < 0)]  # one of many: Holm over them
    low = con[(con["p_perm"] < ALPHA) & (con["diff"] < 0) & ~(con["p_holm"] < ALPHA)]
    outcome = ("contradicts" if len(down) else "supports" if len(up) == len(con) else "open")
    return Test(f"{best} closest of the {which}", outcome,
                f"{best}'s r shown above {len(up) or 'none'} of the {len(con)} {which} with "
                f"an r (exact p < {ALPHA:g} each)"
                + (f", below {', '.join(down['b'])} (Holm over {len(con)})" if len(down) else "")
                + (f"; below {', '.join(low['b'])} before Holm only" if len(low) else ""),
                float(con["p_floor"].max()), quote, ours_only=True)


def _papers_measure(sim: pd.DataFrame | None, best: str) -> str:
    """The paper's measure (Spearman of the seed-mean), in a phrase: shown, not tested."""
    if not have(sim) or best not in set(sim["pe"]):
        return ""
    s = sim.dropna(subset=["spearman"])
    mine = sim.set_index("pe").loc[best, "spearman"]
    top = s.loc[s["spearman"].idxmax()] if len(s) else None
    return (f"; the paper's measure (Spearman of the seed-mean accuracy), shown, not tested: "
            f"{best} ρ = {mine:.2f} (the paper: {PAPER_RHO})"
            + (f", highest {top['pe']} ρ = {top['spearman']:.2f}" if top is not None else ""))


def checks(x: Inputs, best: str = "learn-0.2") -> list[Check]:
    """The paper's own analysis (Fig. 6 of the first version): per PE, Spearman's rho of its
    seed-mean accuracy with people's accuracy over the 108 puzzles; learn-0.2's rho against
    the paper's 0.45 (its p over puzzles), and whether it is the highest of the learnable
    PEs and of the common PEs."""
    sim = x.similarity
    if not have(sim) or best not in set(sim["pe"]):
        return [Check(q, "ρ = 0.45 (learn-0.2)", f"no stored {best} model", "not testable yet")
                for q in (QUOTES[0], QUOTES[1], QUOTES[2])]
    s = sim.set_index("pe")
    mine, p = float(s.loc[best, "spearman"]), float(s.loc[best, "spearman_p"])
    n = int(s.loc[best, "n_seeds"]) if "n_seeds" in s else 0
    out = []
    for which, keep, q in (("learnable PEs", True, QUOTES[0]), ("common PEs", False, QUOTES[1])):
        idx = [pe for pe in s.index if str(pe).startswith("learn-") == keep and pe != best
               and (keep or pe != "2d-fixed")]
        others = s.loc[idx, "spearman"].dropna()
        if others.empty or pd.isna(mine):
            out.append(Check(q, "learn-0.2 the highest", f"no {which} with a ρ stored",
                             "not testable yet"))
            continue
        top = others.idxmax()
        out.append(Check(q, (f"learn-0.2 ρ = {PAPER_RHO}, cos = 0.99, the highest of the "
                             "learnable PEs (Fig. 6D of the first version)") if keep else
                         "learn-0.2 the highest of the common PEs (Fig. 6G of the first "
                         "version)",
                         f"{best} ρ = {mine:+.2f} over 108 puzzles ({p_text(p)}; seed mean of "
                         f"{n} models, epoch {x.epoch}); the highest other of the "
                         f"{len(others)} {which}: {top} ρ = {others.max():+.2f}",
                         "reproduced" if mine > others.max() else "not reproduced",
                         what=f"learn-0.2 closest to people of the {which}"))
    p_all = s["spearman_p"].dropna()
    k = int((p_all < ALPHA).sum())
    k_holm = int((holm(p_all.to_numpy(float)) < ALPHA).sum()) if len(p_all) else 0
    out.append(Check(QUOTES[2], "a caution against over-reading the comparison, not a finding: "
                     "many PEs' ρ significant against 0 (no count given)",
                     f"{k} of {len(p_all)} PEs' ρ at p < {ALPHA:g} against 0, {k_holm} after Holm "
                     f"(epoch {x.epoch})",
                     "not testable yet" if p_all.empty else "reproduced" if 2 * k >= len(p_all)
                     else "same direction, smaller" if k else "not reproduced",
                     what="the caution that many PEs' correlations with people are significant"))
    return out


def judge(x: Inputs, best: str = "learn-0.2") -> Verdict:
    """The verdict (module docstring); ``numbers``: ``cells`` and ``contrasts`` (chapter 9's
    tables, :func:`~lstpe.evidence.claim_tables.human_evidence`) and ``n_differs`` (the PEs
    whose r differs from 0 after Holm)."""
    if not have(x.agreement):
        return untestable(CLAIM, LINE, WHERE, "no model's agreement with people measured",
                          quotes=QUOTES)
    if best not in set(x.agreement["pe"]):
        return untestable(CLAIM, LINE, WHERE, f"no stored {best} model", quotes=QUOTES)
    cells, con = ct.human_evidence(x.agreement, best=best)
    c = cells.set_index("cell")
    mine = c.loc[best]
    if mine["verdict"] == "ceiling" or pd.isna(mine["mean"]):
        return untestable(CLAIM, LINE, WHERE, f"{best} against people: every model solves "
                          "every puzzle, no errors to place", quotes=QUOTES)
    ph = mine["p_holm"]
    outcome = ("open" if not ph < ALPHA else "supports" if mine["mean"] > 0 else "contradicts")
    tested = cells[cells["cell"] != ct.POOLED]
    tests = [Test(f"{best} follows people", outcome,
                  f"{best} r = {mine['mean']:+.3f} over its {int(mine['n'])} models (one-sample "
                  f"{p_text(mine['p_diff'])}, Holm over {int(tested['p_diff'].notna().sum())} "
                  f"PEs {p_text(ph)})", quote=QUOTES[0], ours_only=True)]
    learnable = con["b"].astype(str).str.startswith("learn-")
    for part, which, q in ((con[learnable], "learnable PEs", QUOTES[0]),
                           (con[~learnable], "common PEs", QUOTES[1])):
        t = _highest(part, best, which, q)
        if t is not None:
            tests.append(t)
    n_diff = int(((tested["p_holm"] < ALPHA) & (tested["verdict"] != "ceiling")).sum())
    verdict, part = weigh(tests)
    text = ("; ".join(t.text for t in tests)
            + f"; {n_diff} of {int(tested['p_diff'].notna().sum())} PEs' r differs from 0 "
              "after Holm" + _papers_measure(x.similarity, best))
    return Verdict(CLAIM, LINE, WHERE, verdict, x.epoch, part, tests, text,
                   {"cells": cells, "contrasts": con, "n_differs": n_diff}, QUOTES, checks(x))
