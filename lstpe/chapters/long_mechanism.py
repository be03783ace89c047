"""The mechanism's long units read for a page: chapter 7 draws them, chapter 6 and the
scorecard state what they show in a line.

The long units (:data:`lstpe.experiments.long_units.LONG_PLAN`, chunk ``mechanism``) train
``learn-0.1``, ``learn-0.2`` and ``learn-2`` (seed 2235) past the stored units' 200 epochs.
:func:`long_mechanism` loads their published segments and measures them over epochs
(:func:`lstpe.analysis.long_runs.over_epochs`) and at epoch 200 beside the last
(:func:`lstpe.analysis.long_runs.long_summary`); :func:`long_line` is the sentence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lstpe.analysis import long_runs
from lstpe.experiments import long_units as lu
from lstpe.nn.encodings import parse_pe
from lstpe.store.results import Run

AT = 200
"""The epoch the long units are read against: the stored units' length."""


@dataclass
class LongMechanism:
    """The mechanism's long units as a page reads them."""

    chunk: lu.LongChunk            # the chunk's first target (1000)
    goal: int                      # its last target (4000)
    reached: int                   # the smallest published epoch over its units (0: none)
    longs: dict[str, dict]         # load_long's dict per PE, units with a segment only
    over: pd.DataFrame             # over_epochs rows of every unit
    summary: pd.DataFrame          # long_summary (empty until every unit is past AT)

    @property
    def seeds(self) -> list[int]:
        return sorted({u.seed for u in self.chunk.units})


def _only(long: Mapping[str, Any], keep: Sequence[int]) -> dict[str, Any]:
    """``long`` with its PE and attention snapshots cut to the epochs in ``keep``."""
    out = dict(long)
    for ek, ak in (("pe_epochs", "pe"), ("attention_epochs", "val_attention")):
        eps = [int(e) for e in long.get(ek) or []]
        idx = [i for i, e in enumerate(eps) if e in keep]
        if ak in long and long[ak] is not None and eps:
            out[ek], out[ak] = [eps[i] for i in idx], long[ak][idx]
    return out


def long_mechanism(results_dir: str | Path | None = None, reference: Run | None = None,
                   every: bool = True) -> LongMechanism:
    """Load and measure the mechanism's long units.

    Args:
        results_dir: the results folder (default: the repository's).
        reference: the ``table2`` run whose ``2d-fixed`` unit of the same seed is Table 3's
            reference (its maps at initialisation for epoch 0, after its epochs for later
            ones); None: no attention cosine.
        every: measure every snapshot (chapter 7's figure); False: only epochs 0, 200 and the
            last, enough for :func:`long_line` (each snapshot costs a permutation null).
    """
    chunk = next(c for c in lu.LONG_PLAN if c.name == "mechanism")
    goal = max(c.target for c in lu.LONG_PLAN if c.name == chunk.name)
    longs = {u.pe: d for u in chunk.units if (d := lu.load_long(u, results_dir)) is not None}
    arts = {} if reference is None else reference.artifacts
    row = {k: i for i, k in enumerate(zip(arts.get("labels", []), arts.get("seeds", []),
                                          strict=True))}

    def ref(key: str, seed: int, like: Any) -> Any:  # None unless shaped like the unit's maps
        i = row.get(("2d-fixed", seed))
        ok = i is not None and like is not None and tuple(arts[key][i].shape) == \
            tuple(like.shape[1:])
        return arts[key][i] if ok else None

    parts = []
    for u in chunk.units:
        if u.pe not in longs:
            continue
        d = longs[u.pe] if every else _only(longs[u.pe], (0, AT, max(longs[u.pe]["pe_epochs"])))
        maps = d.get("val_attention")
        parts.append(long_runs.over_epochs(
            d, {"pe": u.pe, "sigma": parse_pe(u.pe).sigma, "seed": u.seed},
            ref("val_attention", u.seed, maps), ref("val_attention_init", u.seed, maps)))
    over = pd.concat(parts, ignore_index=True) if parts else \
        pd.DataFrame(columns=["pe", "sigma", "seed", "epoch"])
    past = len(longs) == len(chunk.units) and all(d["epoch"] > AT for d in longs.values())
    summary = long_runs.long_summary(over, longs, at=AT) if past else \
        pd.DataFrame(columns=list(long_runs.SUMMARY_COLUMNS))
    return LongMechanism(chunk, goal, lu.chunk_epoch(chunk, results_dir), longs, over, summary)


def listed(values: Sequence[Any], fmt: str = "") -> str:
    """``values`` formatted with ``fmt`` and joined as "a, b and c"."""
    vals = [format(v, fmt) for v in values]
    return f"{', '.join(vals[:-1])} and {vals[-1]}" if len(vals) > 1 else "".join(vals)


def long_facts(lm: LongMechanism, paper: Mapping[float, float] | None = None
               ) -> dict[str, Any] | None:
    """What chapter 7's paragraph glues in; None until every unit is past epoch :data:`AT`.

    Each summary column as a list in order of sigma (:func:`listed`, formatted for prose),
    ``last`` (the epoch read), ``seeds``, ``goal``, ``slower`` (every PE moved less after
    epoch 200 than before it) and ``than`` (its phrase), ``dominated`` (the sigmas whose init
    carries less than half the final PE) and ``dominance`` (its sentence), ``paper`` (the
    paper's Table 3 cosine at those sigmas, from ``paper``: sigma -> value). Nothing here reads
    one model's p against another's: one model per sigma gives each a p, not a test of whether
    the sigmas differ."""
    s = lm.summary
    if s.empty:
        return None
    fmt = {"sigma": "g", "fit_epoch": ".0f", "val_at": ".3f", "val_last": ".3f",
           "moved_at": ".1%", "moved_after": ".1%", "init_share_at": ".0%",
           "init_share": ".0%", "p_final": ".3f", "cosine_at": ".3f", "cosine": ".3f"}
    out: dict[str, Any] = {c: listed(s[c], fmt.get(c, ".2f")) for c in s.columns
                           if c not in ("pe", "seed")}
    out["p_final"] = listed(["< 0.001" if p < 0.001 else f"{p:.3f}" for p in s["p_final"]])
    slower = bool((s["moved_after"] < s["moved_at"]).all())
    dominated = listed(s.loc[s["init_share"] < 0.5, "sigma"], "g")
    out.update(last=int(s["epoch"].min()), seeds=listed(lm.seeds), goal=lm.goal,
               slower=slower, than="less than" if slower else "not less than",
               dominated=dominated,
               dominance=(f"the learned part has come to dominate the PE at σ = {dominated}"
                          if dominated else "the learned part has not come to dominate any PE "
                          f"in these long runs (one model per σ, seed {listed(lm.seeds)}), "
                          "which by themselves cannot say how often that holds"),
               paper=listed([(paper or {}).get(x, float("nan")) for x in s["sigma"]], ".3f"))
    return out


def match_stored(lm: LongMechanism, reference: Run, epoch: int = AT) -> pd.DataFrame | None:
    """Each long unit's first ``epoch`` epochs against the stored unit of its PE and seed in
    ``reference`` (:func:`lstpe.analysis.long_runs.fragment_match`), indexed by (``model``:
    ``"<pe> (long: <device>)"``, ``quantity``); None when no long unit has both a stored twin
    and ``epoch`` epochs."""
    arts = reference.artifacts
    row = {k: i for i, k in enumerate(zip(arts["labels"], arts["seeds"], strict=True))}
    seed_of = {u.pe: u.seed for u in lm.chunk.units}
    match = {}
    for pe, d in lm.longs.items():
        i, s = row.get((pe, seed_of[pe])), seed_of[pe]
        if i is None or d["epoch"] < epoch:
            continue
        h = reference.history
        got = long_runs.fragment_match(d, h[(h["pe"] == pe) & (h["seed"] == s)],
                                       arts["pe_init"][i], arts["pe_final"][i], epoch)
        match[f"{pe} (long: {d['manifests'][0].get('device', '?')})"] = got.set_index("quantity")
    return pd.concat(match, names=["model"]) if match else None


def match_facts(match: pd.DataFrame | None, lm: LongMechanism, epoch: int = AT
                ) -> dict[str, str] | None:
    """Chapter 7's paragraph on :func:`match_stored`'s table; None without one. Keys:
    ``devices`` (where the long units ran), ``pe0`` (the largest PE difference at epoch 0),
    ``val_before`` (validation accuracy's largest difference before ``epoch``), ``pe_at`` (the
    PE's at ``epoch``, relative to its largest entry), ``at`` (each unit's validation accuracy
    with dropout, long and stored, at ``epoch``) and ``epoch``."""
    if match is None:
        return None
    pe0, pe_at = match.xs("PE at 0", level=1), match.xs(f"PE at {epoch}", level=1)
    val, vd = (match.xs(f"accuracy: {k}", level=1) for k in ("val", "val_dropout"))
    devices = sorted({d["manifests"][0].get("device", "?") for d in lm.longs.values()})
    return {"devices": listed(devices), "pe0": f"{pe0['diff_last'].max():.2g}",
            "val_before": f"{val['diff_before'].max():.3f}",
            "pe_at": f"{(pe_at['diff_last'] / pe_at['scale']).max():.1%}",
            "at": "; ".join(f"`{u.split()[0]}` {r.long_at:.3f} long, {r.stored_at:.3f} stored"
                            for u, r in vd.iterrows()), "epoch": str(epoch)}


def long_line(lm: LongMechanism) -> str:
    """One sentence: how far the long units have got and, past epoch 200, what changed."""
    pes = ", ".join(f"`{u.pe}`" for u in lm.chunk.units)
    seeds = ", ".join(map(str, lm.seeds))
    head = (f"The long runs ({pes}, seed {seeds}; one model each, trained past epoch {AT}) "
            f"have saved epoch {lm.reached} of {lm.goal}")
    if lm.summary.empty:
        return head + f": nothing past epoch {AT} is measured yet."
    s, last = lm.summary, int(lm.summary["epoch"].min())

    def col(c: str, fmt: str) -> str:
        return listed(s[c], fmt)

    ruled = s[s["init_share"] < 0.5]
    where = listed(ruled["sigma"], "g")
    verdict = ("the learned part has not come to dominate the PE at any of them" if ruled.empty
               else f"the learned part dominates it at σ = {where}")
    return (f"{head}. From epoch {AT} to {last}, at σ = {col('sigma', 'g')}, the PE of block 0 "
            f"moves a further {col('moved_after', '.1%')} of its initial norm (by epoch {AT}: "
            f"{col('moved_at', '.1%')}); at epoch {last} the initial draw still carries "
            f"{col('init_share', '.0%')} of it, so {verdict}, and the final PE's grid score is "
            f"{col('score_final', '.2f')} (at epoch {AT}: {col('score_final_at', '.2f')}).")


WITNESS_COLUMNS = ("pe", "sigma", "seed", "optimizer", "epoch", "norm_ratio", "decay_only",
                   "accuracy")
"""Columns of :func:`weight_decay_witness`."""


def weight_decay_witness(results_dir: str | Path | None = None) -> pd.DataFrame:
    """Weight decay's witness (the campaign's item 5, ours): each AdamW long unit beside the
    Adam long unit of the same PE and seed, at every PE snapshot both have published.

    Returns:
        One row per (unit, snapshot epoch), :data:`WITNESS_COLUMNS`: ``optimizer`` ``adam`` or
        ``adamw``; ``norm_ratio`` the PE's norm over its norm at epoch 0 (mean over blocks);
        ``decay_only`` what AdamW's decoupled decay alone would leave
        (:func:`lstpe.analysis.long_runs.decay_factor` at the unit's lr and weight decay, 64
        steps per epoch; 1 under Adam); ``accuracy`` validation accuracy as the authors
        evaluated it (dropout on, ``val_dropout``, as chapter 8's curves and tables). Empty
        when no AdamW long unit is published; else ``attrs["decay"]`` holds the AdamW recipe's
        ``lr``, ``weight_decay`` and ``steps_per_epoch`` (the arguments of
        :func:`lstpe.analysis.long_runs.decay_factor`).
    """
    from lstpe.experiments.units import STEPS_PER_EPOCH

    wd = next(c for c in lu.LONG_PLAN if c.name == "weight-decay")
    adam = {u.pe: u for c in lu.LONG_PLAN if c.name == "mechanism" for u in c.units}
    rows, decay_args = [], {}
    for u in wd.units:
        d, twin = lu.load_long(u, results_dir), adam.get(u.pe)
        d0 = lu.load_long(twin, results_dir) if twin is not None and twin.seed == u.seed \
            else None
        if d is None:
            continue
        for opt, unit, long in (("adamw", u, d), ("adam", twin, d0)):
            if long is None:
                continue
            t = long_runs.norm_over_epochs(long, split="val_dropout")
            t = t[t["epoch"] <= d["epoch"]]
            decay = 1.0
            if opt == "adamw":
                cfg = unit.config()
                decay_args = {"lr": cfg.lr, "weight_decay": cfg.weight_decay,
                              "steps_per_epoch": STEPS_PER_EPOCH}
                decay = long_runs.decay_factor(t["epoch"], **decay_args)
            rows.append(t.assign(pe=u.pe, sigma=parse_pe(u.pe).sigma, seed=u.seed,
                                 optimizer=opt, decay_only=decay))
    if not rows:
        return pd.DataFrame(columns=list(WITNESS_COLUMNS))
    out = pd.concat(rows, ignore_index=True)[list(WITNESS_COLUMNS)]
    out.attrs["decay"] = decay_args
    return out


TABLE1_LONG_COLUMNS: tuple[str, ...] = (
    "pe", "seeds", "epoch", "val_200", "val_last", "train_200", "train_last", "paper_val",
    "paper_val_sd", "paper_train")


def table1_long(results_dir: str | Path | None = None, at: int = AT) -> pd.DataFrame:
    """Table 1's PEs past the stored units' epochs: every Adam long unit of
    :data:`lstpe.experiments.long_units.LONG_PLAN` of a Table 1 PE (the chunks
    ``table1-<seed>``, ``2d-fixed`` and ``learn-0.2`` on their own, and a model another leg
    trains with the same recipe, e.g. the mechanism's ``learn-0.2`` at seed 2235), each PE at
    the furthest epoch one of its published units reached, at most Table 1's length (1000),
    over the units that reached it (a seed still on its way joins once it gets there).

    Returns:
        :data:`TABLE1_LONG_COLUMNS`, one row per PE with a published unit (in Table 1's
        order): ``seeds`` the units' number; ``val_*`` the authors' validation accuracy
        (dropout on) and ``train_*`` their running training accuracy, means over the units at
        ``at`` and at ``epoch``; ``paper_*`` the paper's Table 1 (4000 epochs, 15 seeds).
        Empty until a unit is published.
    """
    from lstpe.experiments.registry import REGISTRY, TABLE1_PES
    from lstpe.references.paper_tables import load_paper_tables

    paper = load_paper_tables().query("table == '1'").set_index(["pe", "metric"])
    units: dict[str, dict[int, lu.LongUnit]] = {pe: {} for pe in TABLE1_PES}
    for c in lu.LONG_PLAN:
        for u in c.units:
            if u.pe in units and REGISTRY[u.run].optimizer == "adam":
                units[u.pe].setdefault(u.seed, u)
    rows = []
    for pe, us in units.items():
        longs = [x for x in (lu.load_long(u, results_dir) for u in us.values()) if x is not None]
        if not longs:
            continue
        last = min(max(x["epoch"] for x in longs), REGISTRY["table1"].paper_epochs)
        longs = [x for x in longs if x["epoch"] >= last]  # a seed still on its way waits
        acc = pd.concat([long_runs.accuracy_at(x, [at, last]) for x in longs])
        mean = acc.groupby(["split", "epoch"])["accuracy"].mean()
        rows.append({"pe": pe, "seeds": len(longs), "epoch": last,
                     "val_200": mean.get(("val_dropout", at)),
                     "val_last": mean.get(("val_dropout", last)),
                     "train_200": mean.get(("train_running", at)),
                     "train_last": mean.get(("train_running", last)),
                     "paper_val": paper.loc[(pe, "val_acc"), "mean"],
                     "paper_val_sd": paper.loc[(pe, "val_acc"), "sd"],
                     "paper_train": paper.loc[(pe, "train_acc"), "mean"]})
    return pd.DataFrame(rows, columns=list(TABLE1_LONG_COLUMNS))
