"""The reproduction as a campaign: the plan of the paper's runs, grown one unit at a time.

The paper-size model costs about 8e11 FLOPs per model-epoch, a 200-epoch model 20-30 minutes
of a 2-core CPU (this project has no GPU; a reader with a GPU or a cluster trains the
paper's runs whole with :mod:`lstpe.experiments.reproduce`). So the paper's runs are cut
into **units** (:class:`lstpe.experiments.units.Unit`: a registry run, one PE, one seed),
each trained with the authors' recipe for :data:`~lstpe.experiments.units.CAMPAIGN_EPOCHS`
epochs and stored as its own **fragment** ``results/paper/<run>/<pe>/<seed>/``
(:mod:`lstpe.experiments.fragments`: load, verify, merge,
import, publish). What a unit is and which units exist (:func:`lstpe.experiments.units.plan`)
live in :mod:`lstpe.experiments.units`, where the chapters read them.

This module is the plan's order: :data:`ITEMS` in the campaign's order, :data:`WHY` each has
its place, and :data:`NOT_TRAINED` (the long units' legs are
:data:`lstpe.experiments.long_units.LONG_PLAN`, their costs and the CPU's order
:mod:`lstpe.campaign.long_plan`). :mod:`lstpe.campaign.scheduler` trains the units,
:mod:`lstpe.campaign.status` says what is done.
"""

from __future__ import annotations

ITEMS: dict[int, str] = {
    1: "Table 2 core: 2d-fixed and six sigmas, seeds 1-3",
    2: "Table 1's other PEs, seeds 1-3",
    3: "Tables 1-2 at seeds 4-5",
    11: "Table 4, Adam at sigma 0.01 and 0.05, seeds 1-5",
    7: "the other 14 sigmas of Table 2, seeds 1-3",
    12: "the other 14 sigmas of Table 2, seeds 4-5",
    9: "Tables 4-6 at 200 epochs (not trained)",
    4: "mechanism: 3 long units to 1000 epochs",
    5: "weight decay: 2 AdamW long units to 1000",
    6: "mechanism: item 4 extended to 4000 epochs",
    10: "Table 1 at 1000: its 8 PEs, seeds 1-3",
    13: "Table 4 at 1000: SGD and Adam at sigma 0.01-0.2, seeds 1-3",
    14: "Table 6 at 1000: the 8 PEs with AdamW, seeds 1-3",
    15: "Table 5 at 1000: AdamW at sigma 1.6-2.0, seeds 1-3",
    16: "Table 1 at 1000, seeds 4-5",
    17: "Tables 4-6 at seed 1 to 4000",
}
"""Each item of the plan (:data:`WHY`: why there); numbers are names. The 200-epoch items
(:func:`lstpe.experiments.units.plan`) in the campaign's order (item 11 before 7, item 12 after
it), then the long plan's (:data:`lstpe.experiments.long_units.LONG_PLAN`, ordered by what a
model-epoch shows; costs in :mod:`lstpe.campaign.long_plan`)."""

WHY: dict[int, str] = {
    1: "the paper's central table, first seeds",
    2: "the paper's comparison of every PE",
    3: "five seeds per cell of Tables 1-2, for the intervals and tests of their claims",
    4: "learn-0.1, learn-0.2, learn-2 (Adam, seed 2235) with PE and attention snapshots: does "
       "a small-sigma PE's learned 2-D structure come to dominate it after 200 epochs?",
    5: "learn-0.2 and learn-2 with AdamW (wd 0.1, Table 5's recipe), seed 2235: decoupled "
       "decay shrinks every weight to 0.88 of its value by epoch 200 but 0.53 by 1000, so "
       "Table 5's rescue of large sigma can only show late; its resume state then leaves",
    6: "the paper's length for the mechanism's figures: a GPU call finishes it (3 models)",
    11: "the paper's 0.588 and 0.836 against 0.925 at sigma 0.1; the authors logged no Adam "
        "sigma below 0.1, so whether these settle by epoch 200 is itself a finding",
    7: "the sigma curve between the core's six points (the authors' logs show every sigma "
       "settled by epoch 200)",
    12: "five seeds at every sigma, as the core has: at three, a row resolves no difference "
        "from the authors' 15 seeds smaller than about three of their SDs (1.8 at five); "
        "still shorter work than any long unit",
    9: "at 200 epochs AdamW's decay and SGD's slow start show nothing the paper claims; listed "
       "so that a finished run of their recipe can still be imported",
    10: "the registry trains Table 1 to 1000 and 1d-fixed, nope and c-nope still rise at 200; "
        "without 2d-fixed and learn-0.2 beside the six others it cannot be read at 1000 "
        "(learn-0.2 at seed 1 is the mechanism's)",
    13: "Table 4's SGD column has no unit at all and is the only optimizer claim no unit "
        "speaks to; Adam beside it at the same epochs (sigma 0.1 and 0.2 where Table 1 or "
        "the mechanism trains the same model)",
    14: "Table 6 has no unit: every PE with AdamW (learn-0.2 at seed 1 is the weight-decay "
        "pair's)",
    15: "the sigmas that decide Table 5's claim: 0.98 or more up to sigma 1.6, then 0.93, "
        "0.90, 0.71 and 0.59 (learn-2 at seed 1 is the weight-decay pair's)",
    16: "five seeds per cell of Table 1 at its length, after every table has three",
    17: "the paper's length, one seed: each continues its model's final state at 1000, kept "
        "in the tree for it (and only for it) while the resume budget allows",
}
"""Why each item of :data:`ITEMS` has its place."""

NOT_TRAINED: tuple[int, ...] = (9,)
"""Items the campaign lists but never trains (:data:`WHY` says why)."""
