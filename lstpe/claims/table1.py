"""Table 1: a learnable PE (learn-0.2) beats the common fixed PEs and matches 2d-fixed.

The paper's sentences (:data:`QUOTES`): learn-0.2 is the next highest after 2d-fixed,
"followed by the relative, random, rope, and 1d-fixed PE models" (and the two PEs that did not
converge, nope and c-nope, below them all in Table 1), and no robust difference between
2d-fixed and learn-0.2. Here: learn-0.2 against each of the six common fixed PEs at the
stored units' epoch (exact permutation tests). "Above every one" is a conjunction: shown when
each is at alpha (an intersection-union test needs no adjustment); where some are not, the
ones that hold are read one by one, and then with Holm's adjustment over the six. Against
2d-fixed, the paper's "no difference" is read by the one rule of
:func:`lstpe.claims.verdicts.no_difference`: TOST within the margin and the difference with its
exact p, side by side. PEs still training at that epoch (the long units of Table 1 show them
rising) are named, with their accuracy at the long units' epoch, so that a contrast with a PE
that has not converged says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lstpe.claims._common import (
    adjust,
    contrast,
    means_text,
    n_of,
    student,
    t_text,
    values_by_pe,
    with_equivalence,
)
from lstpe.claims.inputs import Inputs, have
from lstpe.claims.paper import Quote, label
from lstpe.claims.verdicts import (
    Check,
    Verdict,
    result_of_contrast,
    result_of_no_difference,
    result_of_order,
    untestable,
    weigh,
)
from lstpe.evidence import tables as ev
from lstpe.stats.seed_stats import holm
from lstpe.stats.seed_tests import ALPHA

CLAIM = "table1"
LINE = ("a learnable PE (learn-0.2) beats every common fixed PE and matches 2d-fixed "
        f"({label('table1')})")
QUOTES: tuple[Quote, ...] = (
    Quote("Remarkably, the next highest performing model was the `learn-0.2` model ($\\sigma = "
          "0.2$), followed by the `relative`, `random`, `rope`, and `1d-fixed` PE models, "
          "respectively.", "v2", "§3.2, Table 1"),
    Quote("While we did not find a robust statistical difference between the ground truth "
          "`2d-fixed` model (97.7%) and the `learn-0.2` model (95.6%) (`2d-fixed` vs. "
          "`learn-0.2`, t-test, $t(13) = 0.96$, $p = 0.35$), there was a significant difference "
          "between the `learn-0.2` model with the next highest-performing model (`relative`) "
          "($t(13) = 2.51$, $p = 0.03$).", "v2", "§3.2"),
    Quote("Remarkably, the next highest performing model was the learn-0.2 model … followed by "
          "the relative, random, rope, and 1d-fixed PE models, respectively.", "v1",
          "§3.2, Table 1"),
    Quote("While we did not find a robust statistical difference between the ground truth "
          "2d-fixed model (97.7%) and the learn-0.2 model (95.6%) (2d-fixed vs. learn-0.2, "
          "t-test, … there was a significant difference between the learn-0.2 model with the "
          "next highest-performing model (relative)", "v1", "§3.2"),
    Quote("While we did not find a robust statistical difference between the ground truth "
          "`2d-fixed` model (97.7%) and the `learn-0.2` model (95.6%) (`2d-fixed` vs. "
          "`learn-0.2`, t-test, $t(13) = 0.96$, $p = 0.35$)", "v2", "§3.2"),
    Quote("there was a significant difference between the `learn-0.2` model with the next "
          "highest-performing model (`relative`) ($t(13) = 2.51$, $p = 0.03$).", "v2", "§3.2"),
    Quote("All models, except for the `nope` and `c-nope` models converged (accuracy after "
          "4000 epochs, `c-nope`=0.56, `nope`=0.51).", "v2", "§3.2"),
)
"""The paper's sentences this claim tests, from each version."""
WHERE = "05_training.ipynb"
EVIDENCE = "learnable_beats_fixed"
"""The evidence table whose contrasts this claim reads (:func:`lstpe.evidence.tables.
contrast_table`): chapter 5 shows them from ``numbers["contrasts"]``."""
COMMON: tuple[str, ...] = ("relative", "random", "rope", "1d-fixed", "nope", "c-nope")
"""Table 1's common fixed PEs, the paper's best (relative) first."""
RISING = 0.02
"""A PE whose long units gain more than this in validation accuracy after the stored units'
epoch has not converged there."""


def still_rising(x: Inputs, best: float | None = None) -> dict[str, str]:
    """PE -> a note on its long units, for each PE whose validation or running training
    accuracy rises by more than :data:`RISING` between epoch 200 and the long units' last
    epoch; ``best``: learn-0.2's mean at the stored epoch (settled by 200 in the authors'
    logs), whose gap to the PE at that last epoch the note gives."""
    if not have(x.table1_long):
        return {}
    out = {}
    for r in x.table1_long.itertuples():
        if max(r.val_last - r.val_200, r.train_last - r.train_200) > RISING:
            out[r.pe] = (f"{r.pe} still training at epoch 200: {r.val_200:.3f} → "
                         f"{r.val_last:.3f} at epoch {r.epoch} (long runs, n = {r.seeds})"
                         + (f", {abs(best - r.val_last):.3f} "
                            f"{'below' if best > r.val_last else 'above'} learn-0.2's "
                            "epoch-200 mean" if best is not None else ""))
    return out


PAPER_ORDER: tuple[str, ...] = ("2d-fixed", "learn-0.2", "relative", "random", "rope",
                                 "1d-fixed")
"""The order of the paper's sentence (Table 1's means: 0.977, 0.956, 0.920, 0.888, 0.805,
0.781)."""


def checks(x: Inputs) -> list[Check]:
    """The paper's own analysis of its sentences, on our models: the order of the seed means
    (it reads the order off Table 1), and its two t-tests (Student's, pooled: the paper's
    ``t(13)``), each with the difference's interval and the smallest difference our n
    resolves."""
    vals = values_by_pe(x.final)
    at = x.epoch
    have_all = [p for p in PAPER_ORDER if p in vals]
    ours = sorted(have_all, key=lambda p: -vals[p].mean())
    p_adj, steps = adjacent(vals, have_all)
    order = Check(QUOTES[0], "2d-fixed 0.977, learn-0.2 0.956, relative 0.920, random 0.888, "
                  "rope 0.805, 1d-fixed 0.781 (Table 1, 4000 epochs, n = 15 each)",
                  f"{means_text(vals, ours)} (epoch {at}, {n_of(vals, *ours)}){steps}",
                  result_of_order(ours, have_all, p_adj) if len(have_all) == len(PAPER_ORDER)
                  else "not testable yet", what="Table 1's order of the PEs")
    out = [order]
    for (a, b), paper, want, q, what in (
            (("2d-fixed", "learn-0.2"), "t(13) = 0.96, p = 0.35: no robust difference (0.977 "
             "against 0.956)", 0, QUOTES[4], "no difference between learn-0.2 and 2d-fixed"),
            (("learn-0.2", "relative"), "t(13) = 2.51, p = 0.03 (0.956 against 0.920)", +1,
             QUOTES[5], "learn-0.2 above relative")):
        t = student(vals.get(a, ()), vals.get(b, ()))
        if t is None:
            result = "not testable yet"
        elif want == 0:
            result = result_of_no_difference(t["p"])
        else:
            result = result_of_contrast(t["diff"], t["p"], want)
        out.append(Check(q, paper, t_text(a, b, t, at, n_of(vals, a, b)), result, what=what))
    return [*out, converged_check(x, vals)]


def adjacent(vals: dict, order: list[str]) -> tuple[list[float], str]:
    """Each pair of neighbours in the paper's ``order`` (a above b), tested as the paper tests
    its one such pair (Student's t), Holm-adjusted over the pairs: their p and a phrase
    naming the pairs our n does not resolve."""
    pairs = [(a, b) for a, b in zip(order, order[1:], strict=False)]
    ts = [student(vals[a], vals[b]) for a, b in pairs]
    if not pairs or any(t is None for t in ts):
        return [], ""
    p = list(holm(np.array([t["p"] for t in ts], float)))
    loose = [f"{a} − {b} = {t['diff']:+.3f} (Holm p = {q:.3f})"
             for (a, b), t, q in zip(pairs, ts, p, strict=True) if not q < ALPHA]
    return p, (f"; each neighbour above the next, Student's t, Holm over {len(pairs)} pairs: "
               + ("all resolved" if not loose else "not resolved: " + ", ".join(loose)))


def converged_check(x: Inputs, vals: dict) -> Check:
    """The paper's "all models converged" but nope and c-nope, read at 4000 epochs: shown,
    not judged, before that epoch (our nope and c-nope at the stored epoch, and the training
    accuracy Table 1's long runs reach)."""
    ours = f"validation accuracy {means_text(vals, ['c-nope', 'nope'])} (epoch {x.epoch}, " \
           f"{n_of(vals, 'c-nope', 'nope')})" if "nope" in vals else "no nope model stored"
    if have(x.table1_long):
        lo = x.table1_long.sort_values("train_last").iloc[0]
        ours += (f"; training accuracy at the long runs' last epoch: lowest {lo.train_last:.3f}"
                 f" ({lo.pe}, epoch {int(lo.epoch)})")
    return Check(QUOTES[6], "training accuracy c-nope 0.56, nope 0.51 after 4000 epochs "
                 "(Table 1; validation 0.31 and 0.33); every other PE converged", ours,
                 "not testable yet", what="every PE but nope and c-nope "
                 "converges (read at 4000 epochs)")


def judge(x: Inputs) -> Verdict:
    """The verdict (module docstring); ``numbers``: ``contrasts`` (the claim's contrast
    table, :func:`lstpe.evidence.tables.contrast_table`: learn-0.2 against each other PE of
    Table 1; chapter 5 shows this object), the contrasts it tests with their TOST and Holm's
    p (``rows``), the PEs still rising (``rising``) and the common fixed PEs learn-0.2 is shown
    above (``above``)."""
    shown = ev.contrast_table(EVIDENCE, x.final)
    vals = values_by_pe(x.final)
    c = with_equivalence(shown[shown["verdict"] != "not run"], vals)
    is_common = c["b"].isin(COMMON)
    if not (c.loc[is_common, "p_perm"] < ALPHA).all():  # read one by one: Holm over the six
        c = pd.concat([adjust(c[is_common]), c[~is_common]], ignore_index=True)
    if c.empty:
        return untestable(CLAIM, LINE, WHERE, "no stored learn-0.2 unit or no fixed PE",
                          quotes=QUOTES, numbers={"contrasts": shown})
    best = vals.get("learn-0.2")
    rising = still_rising(x, float(best.mean()) if best is not None else None)
    by = {r["b"]: r for _, r in c.iterrows()}
    common = [b for b in COMMON if b in by]
    tests = [contrast(by[b], +1, f"above {b}", rising.get(b, ""), QUOTES[0]) for b in common]
    if "2d-fixed" in by:
        tests.append(contrast(by["2d-fixed"], 0, "no difference from 2d-fixed",
                              "the paper: no robust difference, t(13) = 0.96, p = 0.35",
                              QUOTES[1]))
    verdict, part = weigh(tests)
    above = [b for b, t in zip(common, tests, strict=False) if t.outcome == "supports"]
    if verdict == "partly shown":
        part = f"above {len(above)} of {len(common)} fixed PEs"
    text = "; ".join(t.text for t in tests)
    return Verdict(CLAIM, LINE, WHERE, verdict, x.epoch, part, tests, text,
                   {"contrasts": shown, "rows": c, "rising": rising, "above": above}, QUOTES,
                   checks(x))
