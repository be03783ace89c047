"""Fig. 5 (A9 of the first version): learnable PEs initialised at small sigma are the most
robust to embedding noise; learn-0.2 is more robust than the common fixed PEs.

Per model, the validation accuracy lost between no noise and the largest noise std
(:func:`lstpe.analysis.claim_tables.noise_loss_per_model`). Tests (a − b in loss: negative
means a is more robust), Holm-adjusted over the pairs: learn-0.1 and learn-0.2 against
learn-2, learn-0.2 against 2d-fixed, 1d-fixed and random; and the trend of the loss over sigma
(the claim says it rises with sigma). A significant effect the other way contradicts the claim.
A PE near chance without noise has little to lose: the text gives each PE's clean accuracy.
"""

from __future__ import annotations

from lstpe.analysis import claim_tables as ct
from lstpe.claims._common import adjust, contrast, trend
from lstpe.claims.inputs import Inputs, have
from lstpe.claims.verdicts import Verdict, untestable, weigh

CLAIM = "noise"
LINE = "small-sigma learnable PEs are the most robust to embedding noise (Fig. 5)"
WHERE = "08_robustness.ipynb"
PAIRS: tuple[tuple[str, str], ...] = (
    ("learn-0.1", "learn-2"), ("learn-0.2", "learn-2"), ("learn-0.2", "2d-fixed"),
    ("learn-0.2", "1d-fixed"), ("learn-0.2", "random"))
"""The contrasts read, each claimed negative (a loses less)."""


def judge(x: Inputs) -> Verdict:
    """The verdict (module docstring); ``numbers``: ``cells`` (each PE's loss against none),
    ``rows`` (the contrasts with Holm's p), ``worst`` (the PE that loses most)."""
    if not have(x.noise):
        return untestable(CLAIM, LINE, WHERE, "no noise evaluation stored")
    cells, con = ct.noise_evidence(x.noise, pairs=PAIRS)
    tr = con[con["b"] == ""]
    rows = adjust(con[(con["b"] != "") & (con["verdict"] != "not run")])
    tests = [contrast(r, -1, f"{r['a']} loses less than {r['b']}")
             for _, r in rows.iterrows()]
    if len(tr):
        tests.append(trend(tr.iloc[0], "rises", "the loss rises with sigma",
                           "the learnable PEs' loss over σ"))
    if not tests:
        return untestable(CLAIM, LINE, WHERE, "none of the contrasted PEs stored")
    c = cells.set_index("cell")
    worst = c["mean"].idxmax()
    clean = x.noise.groupby("pe")["clean"].mean()
    noise_max = x.noise.attrs.get("noise_max")
    text = (f"at noise std {noise_max:g}, " if noise_max is not None else "") + (
        f"the largest loss is {worst}'s ({c.loc[worst, 'mean']:.3f}); "
        + "; ".join(t.text for t in tests)
        + (f"; learn-2 starts from {clean['learn-2']:.3f} without noise (chance 0.25)"
           if "learn-2" in clean else ""))
    verdict, part = weigh(tests)
    return Verdict(CLAIM, LINE, WHERE, verdict, x.epoch, part, tests, text,
                   {"cells": cells, "rows": rows, "worst": worst})
