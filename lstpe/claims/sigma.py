"""Table 2: small sigma generalises, large sigma does not.

The contrasts the paper reads off Table 2 (:data:`lstpe.analysis.evidence.SIGMA_PAIRS`, in
the chapter's evidence table): learn-0.2 against learn-2 (0.956 against 0.377), against the
default sigma 1 (0.894: its practical point), and learn-0.1 against learn-0.2 (0.925 against
0.956, within each other's spread: equivalence within the margin supports it), each an exact
permutation test, Holm-adjusted over the three. The curve's shape is described, not fitted
with a line: the paper's accuracies hold near their best up to sigma about 1 and then fall
steeply, so a slope per doubling of sigma averages a plateau with a cliff. :func:`shape`
names the largest sigma whose mean stays within :data:`PLATEAU` of the best and the largest
fall between neighbouring stored sigmas, over the sigmas with at least
:data:`~lstpe.analysis.seed_stats.MIN_SEEDS_FOR_CI` units (one seed's accuracy is no point of
a curve: a single unit 0.05 low would end the plateau).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lstpe.analysis import evidence as ev
from lstpe.analysis.seed_stats import MIN_SEEDS_FOR_CI
from lstpe.claims._common import adjust, contrast, values_by_pe, with_equivalence
from lstpe.claims.inputs import Inputs
from lstpe.claims.verdicts import Verdict, untestable, weigh

CLAIM = "sigma"
LINE = "small sigma generalises, large sigma does not (Table 2)"
WHERE = "06_sigma_sweep.ipynb"
WANT: dict[tuple[str, str], int] = dict(zip(ev.SIGMA_PAIRS, (+1, +1, 0), strict=True))
"""What the paper's Table 2 says of a − b for each of
:data:`lstpe.analysis.evidence.SIGMA_PAIRS`: +1 higher, 0 no difference."""
PLATEAU = 0.05
"""Accuracy within this of the best sigma's counts as the plateau (the equivalence margin)."""


def shape(final: pd.DataFrame) -> dict[str, float]:
    """The sigma curve of the learnable PEs' mean accuracy over the sigmas with at least
    :data:`~lstpe.analysis.seed_stats.MIN_SEEDS_FOR_CI` units: ``best`` (its sigma and mean),
    ``plateau_to`` (how far the plateau reaches: the largest sigma up to which every mean from
    the best sigma on stays within :data:`PLATEAU` of the best), ``drop`` (the largest fall
    between neighbouring stored sigmas) with ``drop_from`` and ``drop_to``."""
    learn = final[final["pe"].astype(str).str.startswith("learn-")]
    g = learn.groupby(learn["pe"].str.split("-").str[1].astype(float))["accuracy"]
    m = g.mean()[g.size() >= MIN_SEEDS_FOR_CI].sort_index()  # sigmas with 2 or more units
    if len(m) < 2:
        return {}
    best, top = float(m.max()), int(np.argmax(m.to_numpy()))
    within = (m.iloc[top:] >= best - PLATEAU).to_numpy()  # from the best sigma upwards
    plateau = m.index[top + (len(within) if within.all() else int(np.argmin(within))) - 1]
    falls = -np.diff(m.to_numpy())
    i = int(np.argmax(falls))
    return {"best_sigma": float(m.idxmax()), "best": best, "plateau_to": float(plateau),
            "drop": float(falls[i]), "drop_from": float(m.index[i]),
            "drop_to": float(m.index[i + 1]), "at_from": float(m.iloc[i]),
            "at_to": float(m.iloc[i + 1])}


def judge(x: Inputs) -> Verdict:
    """The verdict (module docstring); ``numbers``: ``rows`` (the three contrasts with
    Holm's p) and ``shape``."""
    vals = values_by_pe(x.final)
    c = ev.contrast_table("small_sigma_generalises", x.final)
    rows = c[[(a, b) in WANT for a, b in zip(c["a"], c["b"], strict=True)]]
    rows = with_equivalence(adjust(rows[rows["verdict"] != "not run"]), vals)
    if rows.empty:
        return untestable(CLAIM, LINE, WHERE, "no two of learn-0.1, 0.2, 1, 2 stored")
    tests = [contrast(r, WANT[(r["a"], r["b"])],
                      f"{r['a']} {'above' if WANT[(r['a'], r['b'])] else 'level with'} "
                      f"{r['b']}") for _, r in rows.iterrows()]
    s = shape(x.final)
    verdict, part = weigh(tests)
    text = "; ".join(t.text for t in tests)
    if s:
        text += (f"; the curve (σ with 2 or more units): within {PLATEAU} of its best "
                 f"({s['best']:.3f} at σ = "
                 f"{s['best_sigma']:g}) up to σ = {s['plateau_to']:g}, its largest fall "
                 f"{s['drop']:.3f} from σ = {s['drop_from']:g} to {s['drop_to']:g} "
                 f"({s['at_from']:.3f} → {s['at_to']:.3f})")
    return Verdict(CLAIM, LINE, WHERE, verdict, x.epoch, part, tests, text,
                   {"rows": rows, "shape": s})
