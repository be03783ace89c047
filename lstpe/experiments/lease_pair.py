"""The stored-unit precision pair: a GPU lease judges a faster precision against fp32 units
already stored, at its start (:func:`in_lease`).

The pair (:func:`run_stored_pair`) trains :func:`pair_units`: Table 2's 2d-fixed, learn-0.2,
learn-1 and learn-2 at the paper's first three seeds, 12 models of the campaign's 200-epoch
recipe (2,400 model-epochs), in the **candidate** precision (``tf32``: fp32 with TF32 matmuls;
``bf16``: autocast), on the lease's device, as one chunk. Each model has the recipe of its
stored fp32 unit ``results/paper/table2/<pe>/<seed>/`` (but for ``amp``, attention maps, which
it does not keep, and how it is executed); a stored unit that is missing, damaged, not fp32,
cut short, diverged or of another recipe is named, and the pair cannot decide (nothing is
trained). It trains under a deadline: a pair that cannot finish records "not finished" and
clears nothing (no partial decision). The candidate's runs and the verdict
(:data:`VERDICT`) are stored under ``results/precision_pair/<tag>/stored-pair/``, ``<tag>``
the card's :func:`lstpe.experiments.precision.candidate_tag`.

The judgement (:func:`judge`): per unit, d = candidate minus stored fp32 validation accuracy
(:data:`lstpe.experiments.precision.PAIR_METRIC`, as the authors evaluated it) at the recipe's
last epoch; the two one-sided t-tests of equivalence on mean(d)
(:func:`lstpe.stats.formulas.tost_p`) with the margin of :func:`authors_margin`: the authors'
seed SD at epoch 200, pooled over the pair's 4 PEs (0.106: 2d-fixed and learn-2 spread
widely at 200). Cleared iff the 90% interval of mean(d) lies inside (-margin, +margin). The
verdict keeps n, mean(d), the interval, the margin and its source, the smallest difference
the n resolves (:func:`lstpe.stats.power.mdd` of the one-sample test of d) and the largest
|d|.

What d measures: the stored units trained on CPUs (fp32, eager), the candidate on the card, so
d holds the candidate's rounding *and* the platform's own drift (another device's kernels and
order of sums, a CUDA graph). A cleared pair means "equivalent to what we stored, at the
authors' seed-spread scale", not "equal to fp32 on this card".

:func:`stored_pair_decision` reads a verdict back (checking its runs);
:func:`lstpe.experiments.lease_tune.gpu_precisions` clears a candidate on a card when this
pair or the older two-precision pair (:mod:`lstpe.experiments.precision`) of that card clears
it.
"""

from __future__ import annotations

import functools
import math
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lstpe.experiments import fragments as fr
from lstpe.experiments import precision as pr
from lstpe.experiments.units import Unit
from lstpe.runtime import PAPER_SEEDS
from lstpe.stats.seed_tests import ALPHA
from lstpe.store import results as res

PAIR_RUN = "table2"
STORED_PES: tuple[str, ...] = ("2d-fixed", "learn-0.2", "learn-1", "learn-2")
"""Table 2's core: the fixed 2-D reference, a small, a middle and a large sigma (learn-2
still near chance at 200 epochs in the authors' logs, where rounding could tip a model)."""

STORED_SEEDS: tuple[int, ...] = PAPER_SEEDS[:3]

LEASE_CANDIDATES: tuple[str, ...] = ("tf32", "bf16")
"""The candidates a lease pairs, in order (one per lease): TF32 first, which long packed
chunks can use (they train fp32), then bf16."""

FOLDER = "stored-pair"
VERDICT = "verdict.json"
MARGIN_EPOCH = 200
"""The authors' logged epoch whose seed SD sets the margin (the campaign's units' length)."""

SHARE = 0.4
"""The largest share of a call's time left that the pair may take (predicted, and its
deadline)."""

IGNORED: tuple[str, ...] = ("amp", "save_attention", *res.EXECUTION_KEYS)
"""Config keys in which the candidate may differ from its stored unit."""

TrainFn = Callable[[list, list[Path], Path, "float | None", str], list]


def pair_units() -> list[Unit]:
    """The 12 units of the pair, PE by PE."""
    return [Unit(PAIR_RUN, pe, s) for pe in STORED_PES for s in STORED_SEEDS]


def candidate_configs(device: torch.device | str, candidate: str) -> list[Any]:
    """The candidate's configurations: each unit's recipe (:meth:`Unit.config`), autocast for
    ``bf16``, no attention maps, no periodic checkpoint.

    Raises:
        ValueError: an unknown candidate (naming it and the known ones).
    """
    if candidate not in pr.CANDIDATES:
        raise ValueError(f"unknown precision candidate {candidate!r}; valid: "
                         f"{', '.join(pr.CANDIDATES)}")
    return [u.config(device=str(device), amp=candidate == "bf16", save_attention=False,
                     checkpoint_every=0) for u in pair_units()]


def pair_folder(results_dir: str | Path | None, tag: str) -> Path:
    """``<results>/precision_pair/<tag>/stored-pair``."""
    return pr.pair_dir(results_dir, tag) / FOLDER


def final_accuracy(history: Any, epoch: int) -> float:
    """The validation accuracy (:data:`~lstpe.experiments.precision.PAIR_METRIC`) of a
    one-model history at ``epoch`` (NaN where it has none, or more than one)."""
    split, cond = pr.PAIR_METRIC
    if not {"split", "condition", "epoch", "accuracy"} <= set(history.columns):
        return math.nan
    m = history[(history["split"] == split) & (history["condition"].astype(str) == cond)
                & (history["epoch"] == epoch)]
    return float(m["accuracy"].iloc[0]) if len(m) == 1 else math.nan


def run_problems(run: Any, cfg: Any, where: str, precision: str, tf32: bool | None
                 ) -> list[str]:
    """Why ``run`` (stored at ``where``) is not ``cfg``'s model trained to its last epoch in
    ``precision`` (``fp32``/``bf16``, as its manifest records it) with TF32 ``tf32`` (None:
    not checked, a device without TF32): one sentence per problem."""
    man, conf = run.manifest or {}, run.config or {}
    out = []
    # a fragment records it under "campaign" (the 5 imported from runs before the campaign
    # hold it only there), a lease's run at the top
    recorded = man.get("precision") or fr.precision_of(man)
    if bool(conf.get("amp")) != (precision == "bf16") or recorded != precision:
        out.append(f"{where} trained in {recorded} (amp={conf.get('amp')!r}), "
                   f"not {precision}")
    if tf32 is not None and bool(man.get("tf32")) != tf32:
        out.append(f"{where} trained with TF32 {man.get('tf32')!r}, not {tf32}")
    if diff := res.config_diff(conf, cfg.to_dict(), ignore=IGNORED):
        out.append(f"{where} is of another recipe: its {', '.join(diff)} differ")
    div = res.diverged_models(run.history)
    if len(div) or man.get("diverged_models"):
        out.append(f"{where} diverged ({res.describe_diverged(div) if len(div) else 'manifest'})")
    top = int(run.history["epoch"].max()) if len(run.history) else 0
    if top < cfg.epochs:
        out.append(f"{where} was cut short: it reaches epoch {top} of {cfg.epochs}")
    elif not math.isfinite(final_accuracy(run.history, cfg.epochs)):
        out.append(f"{where} has no finite {pr.PAIR_METRIC[0]} accuracy at epoch {cfg.epochs}")
    return out


def load_runs(paths: Sequence[Path], cfgs: Sequence[Any], precision: str,
              tf32: bool | None) -> tuple[list[float], list[str]]:
    """(each run's accuracy at its last epoch, problems) of the runs in ``paths``, read
    verified (:func:`lstpe.store.results.load`, without ``artifacts.pt``)."""
    accs, problems = [], []
    for path, cfg in zip(paths, cfgs, strict=True):
        accs.append(math.nan)
        if not (path / "manifest.json").exists():
            problems.append(f"{path} is not stored (no manifest.json)")
            continue
        try:
            run = res.load(path, artifacts=False)
        except (OSError, ValueError) as e:  # a damaged file: named in the message
            problems.append(str(e))
            continue
        problems += run_problems(run, cfg, str(path), precision, tf32)
        accs[-1] = final_accuracy(run.history, cfg.epochs)
    return accs, problems


@functools.lru_cache(maxsize=1)
def authors_margin() -> tuple[float, str]:
    """(margin, its source): the authors' SD over seeds of validation accuracy at epoch
    :data:`MARGIN_EPOCH` (their logs, :func:`lstpe.references.authors_logs.authors_at`), pooled
    over :data:`STORED_PES` (Student's pooled SD, one group after the other)."""
    from lstpe.references.authors_logs import authors_at
    from lstpe.stats.formulas import pooled_sd

    t = authors_at(MARGIN_EPOCH)
    sd, n = float(t.loc[STORED_PES[0], "acc_sd"]), int(t.loc[STORED_PES[0], "n_seeds"])
    for pe in STORED_PES[1:]:
        sd = pooled_sd(sd, n, float(t.loc[pe, "acc_sd"]), int(t.loc[pe, "n_seeds"]))
        n += int(t.loc[pe, "n_seeds"]) - 1  # the pooled SD's df + 1
    each = ", ".join(f"{pe} {t.loc[pe, 'acc_sd']:.4f}" for pe in STORED_PES)
    return sd, (f"the authors' logs (lstpe/data/authors_logs_summary.csv): SD over their "
                f"{int(t.loc[STORED_PES[0], 'n_seeds'])} seeds of validation accuracy at epoch "
                f"{MARGIN_EPOCH} ({each}), pooled: {sd:.4f}")


def judge(stored: Sequence[float], candidate: Sequence[float], keys: Sequence[str],
          margin: float) -> dict[str, Any]:
    """The equivalence test of paired differences d = ``candidate`` - ``stored`` (n,) within
    ``margin`` (TOST, each one-sided test at :data:`lstpe.stats.seed_tests.ALPHA`: cleared iff
    the 90% interval lies inside it): ``{"cleared", "why", "n", "mean_d", "interval", "p",
    "mdd", "max_abs_d", "max_abs_d_unit", "d"}``. A non-finite d (a model that diverged)
    clears nothing."""
    from scipy import stats

    from lstpe.stats.formulas import tost_p
    from lstpe.stats.power import mdd

    d = np.asarray(candidate, dtype=float) - np.asarray(stored, dtype=float)
    n, out = d.size, {"n": int(d.size), "d": dict(zip(keys, d.tolist(), strict=True))}
    if n < 2 or not np.isfinite(d).all():
        bad = [k for k, x in zip(keys, d, strict=True) if not np.isfinite(x)]
        return {**out, "cleared": False, "why": f"no finite difference for {', '.join(bad)}"
                if bad else f"{n} unit(s): too few for a test"}
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    se, df = sd / math.sqrt(n), n - 1
    half = float(stats.t.ppf(1 - ALPHA, df)) * se
    p = max(tost_p(mean, se, df, margin))
    worst = int(np.argmax(np.abs(d)))
    cleared = bool(p < ALPHA)
    out.update({"mean_d": mean, "sd_d": sd, "interval": [mean - half, mean + half], "p": p,
                "mdd": mdd(sd, n), "max_abs_d": float(abs(d[worst])),
                "max_abs_d_unit": keys[worst], "cleared": cleared})
    out["why"] = (f"mean d {mean:+.4f}, 90% interval [{mean - half:+.4f}, {mean + half:+.4f}] "
                  f"{'inside' if cleared else 'not inside'} +-{margin:.4f} (TOST p {p:.3g}, "
                  f"n {n}; largest |d| {abs(d[worst]):.4f}, {keys[worst]}; the n resolves "
                  f"{out['mdd']:.4f})")
    return out


def train_candidate(cfgs: list, dirs: list[Path], work: Path, deadline: float | None,
                    candidate: str) -> list:
    """The candidate trained as one chunk (:func:`lstpe.training.train.train_many`), TF32
    matmuls on for ``tf32``; raises :class:`lstpe.training.engine.Paused` at the deadline."""
    from lstpe.training import train as lst_train

    tf32, lst_train.TF32 = lst_train.TF32, candidate == "tf32"
    try:
        return lst_train.train_many(cfgs, dirs, progress=False, work_dir=work,
                                    deadline=deadline)
    finally:
        lst_train.TF32 = tf32


def run_stored_pair(results_dir: str | Path | None, device: torch.device | str, candidate: str,
                    tag: str, deadline: float | None = None, train_fn: TrainFn | None = None,
                    log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the pair of ``candidate`` on ``device`` (module docstring) unless ``tag`` already
    holds a decision; store and return the verdict (``decision``: cleared, refused, cannot
    decide, not finished; ``cleared``: True, False, None). ``train_fn(cfgs, dirs, work,
    deadline, candidate)`` trains the candidate (default :func:`train_candidate`; tests
    inject another)."""
    from lstpe.store.storage import save_json
    from lstpe.training.engine import Paused

    dev, base = torch.device(device), pair_folder(results_dir, tag)
    if stored_pair_decision(results_dir, tag)[0] is not None:
        return read_verdict(results_dir, tag) or {}
    cfgs, units = candidate_configs(dev, candidate), pair_units()
    keys = [u.key for u in units]
    margin, source = authors_margin()
    v: dict[str, Any] = {"tag": tag, "candidate": candidate, "device": str(dev),
                         "units": keys, "epochs": cfgs[0].epochs, "model_epochs": 0,
                         "margin": margin, "margin_source": source, "finished": False,
                         "started": res.utc_now(), "cleared": None}
    stored, problems = load_runs([u.path(results_dir) for u in units], cfgs, "fp32", False)
    if problems:
        v.update(decision="cannot decide", why="the stored fp32 units cannot judge the pair: "
                 + "; ".join(problems[:4]) + (f" (and {len(problems) - 4} more)"
                                              if len(problems) > 4 else ""))
        return _store(v, base, log, save_json)
    if base.exists():  # an earlier attempt without a decision: start afresh
        shutil.rmtree(base)
    dirs = [base / f"{u.pe}__{u.seed}" for u in units]
    log(f"stored pair: training {candidate} on {dev} ({len(cfgs)} models, {cfgs[0].epochs} "
        f"epochs) to judge against the stored fp32 units")
    t0 = time.monotonic()
    try:
        (train_fn or train_candidate)(cfgs, dirs, base / ".work", deadline, candidate)
    except Paused as e:
        shutil.rmtree(base / ".work", ignore_errors=True)
        v.update(decision="not finished", seconds=time.monotonic() - t0,
                 why=f"the pair did not finish before its deadline ({e}): nothing is cleared")
        return _store(v, base, log, save_json)
    shutil.rmtree(base / ".work", ignore_errors=True)
    v.update(finished=True, seconds=time.monotonic() - t0,
             model_epochs=len(cfgs) * cfgs[0].epochs)
    tf32 = candidate == "tf32" if dev.type == "cuda" else None
    got, problems = load_runs(dirs, cfgs, "bf16" if candidate == "bf16" else "fp32", tf32)
    if problems:
        v.update(decision="cannot decide", why=f"the {candidate} runs are not what the pair "
                 "needs: " + "; ".join(problems[:4]))
        return _store(v, base, log, save_json)
    v.update(judge(stored, got, keys, margin), stored=dict(zip(keys, stored, strict=True)),
             candidate_accuracy=dict(zip(keys, got, strict=True)))
    v["decision"] = "cleared" if v["cleared"] else "refused"
    return _store(v, base, log, save_json)


def _store(v: dict[str, Any], base: Path, log: Callable[[str], None], save: Any
           ) -> dict[str, Any]:
    save(v, base / VERDICT)
    log(f"stored pair of {v['tag']}: {v['decision']}: {v['why']}")
    return v


def read_verdict(results_dir: str | Path | None, tag: str) -> dict[str, Any] | None:
    """The stored verdict of ``tag`` (None where none is stored).

    Raises:
        ValueError: the verdict is not a JSON object (naming the file)."""
    from lstpe.store.storage import read_json_object

    path = pair_folder(results_dir, tag) / VERDICT
    if not path.exists():
        return None
    return read_json_object(path, f"delete {path.parent} to run the pair again")


def stored_pair_decision(results_dir: str | Path | None, tag: str) -> tuple[bool | None, str]:
    """(cleared, why) of the stored-unit pair of ``tag``: None (no decision) where none is
    stored, it did not finish or could not decide, or its verdict or runs do not hold (a
    verdict of another tag, a run missing, damaged, or whose accuracy is not the verdict's)."""
    where = pair_folder(results_dir, tag)
    try:
        v = read_verdict(results_dir, tag)
    except ValueError as e:
        return None, str(e)
    if v is None:
        return None, f"no stored-unit pair is stored for {tag}"
    if v.get("tag") != tag or v.get("candidate") != pr.tag_candidate(tag):
        return None, (f"{where / VERDICT} holds the pair of {v.get('tag')} "
                      f"({v.get('candidate')}), not of {tag}")
    if not isinstance(v.get("cleared"), bool):
        return None, f"the stored-unit pair of {tag} has no decision: {v.get('why')}"
    for key, acc in (v.get("candidate_accuracy") or {}).items():
        run_dir = where / "__".join(key.split("/")[1:])
        try:
            got = final_accuracy(res.load(run_dir, artifacts=False).history, v["epochs"])
        except (OSError, ValueError) as e:
            return None, f"the stored-unit pair of {tag} cannot be trusted: {e}"
        if got != acc:
            return None, (f"the stored-unit pair of {tag} cannot be trusted: {run_dir} holds "
                          f"{got:.4f} at epoch {v['epochs']}, its verdict {acc:.4f}")
    if len(v.get("candidate_accuracy") or {}) != len(pair_units()):
        return None, f"the stored-unit pair of {tag} does not list its {len(pair_units())} runs"
    return v["cleared"], f"the stored-unit pair of {tag} {v['decision']} it: {v['why']}"


def decided(results_dir: str | Path | None, tag: str) -> bool:
    """Whether ``tag`` holds a decision: a complete two-precision pair, or this pair's."""
    return pr.load_pair(results_dir, tag) is not None or \
        stored_pair_decision(results_dir, tag)[0] is not None


def pair_cost(fit: dict[str, float], cfgs: Sequence[Any]) -> tuple[float, int]:
    """(predicted seconds, model-epochs) of the pair's chunk at the step-time ``fit``
    (:func:`lstpe.experiments.lease_fit.predict_seconds`)."""
    from lstpe.experiments.lease_fit import n_evals, n_train, predict_seconds

    cfg = cfgs[0]
    spe = -(-n_train(cfg) // cfg.batch_size)
    return (predict_seconds(len(cfgs), fit, n_evals(cfg, 0, cfg.epochs), cfg.epochs, spe),
            len(cfgs) * cfg.epochs)


def measure_fit(cfgs: Sequence[Any], device: torch.device, candidate: str) -> dict[str, float]:
    """The step-time fit of the pair's chunk in the candidate precision, measured at 3 and
    12 models (:func:`lstpe.experiments.lease_fit.step_seconds`)."""
    from lstpe.experiments.lease_fit import fit_steps, step_seconds
    from lstpe.runtime import tf32_mode

    amp = torch.bfloat16 if candidate == "bf16" else False
    with tf32_mode(device, candidate == "tf32"):
        return fit_steps(step_seconds(cfgs[:3], device, amp), step_seconds(cfgs, device, amp))


def pending(results_dir: str | Path | None, gpu: str) -> str | None:
    """The first of :data:`LEASE_CANDIDATES` without a decision on the card ``gpu``."""
    return next((c for c in LEASE_CANDIDATES
                 if not decided(results_dir, pr.candidate_tag(gpu, c))), None)


def in_lease(device: torch.device, results: Path, gpu: str | None, end: float,
             log: Callable[[str], None], fit: dict[str, float] | None = None,
             train_fn: TrainFn | None = None, share: float = SHARE) -> dict[str, Any]:
    """The lease's pair, before its tuning: the first candidate the card ``gpu`` has no
    decision for, run when its predicted seconds (at ``fit``, else measured:
    :func:`measure_fit`) are at most ``share`` of the time left to ``end`` (a
    ``time.monotonic()``), under that deadline (``share`` 1: a call that runs the pair
    first, whatever it leaves the chunks: ``lstpe campaign lease --pair-first``). Returns the
    lease's record of it: ``tag, candidate, decision, cleared, why, model_epochs, seconds,
    predicted_s``."""
    if not gpu:
        return {"decision": "skipped", "why": "no GPU name: a pair is stored per card"}
    cand = pending(results, gpu)
    if cand is None:
        return {"decision": "skipped", "why": f"every candidate has a decision on {gpu}"}
    tag, cfgs = pr.candidate_tag(gpu, cand), candidate_configs(device, cand)
    if problems := stored_problems(results, cfgs):  # named before a second is measured
        why = f"the stored fp32 units cannot judge the pair: {problems[0]}"
        log(f"lease: stored pair skipped: {why}")
        return {"tag": tag, "candidate": cand, "decision": "skipped", "why": why,
                "model_epochs": 0, "seconds": 0.0, "cleared": None}
    fit = fit if fit is not None else measure_fit(cfgs, device, cand)
    cost, model_epochs = pair_cost(fit, cfgs)
    left = end - time.monotonic()
    rec: dict[str, Any] = {"tag": tag, "candidate": cand, "predicted_s": cost, "fit": fit,
                           "model_epochs": 0, "seconds": 0.0, "cleared": None}
    if cost > share * left:
        rec.update(decision="skipped", why=f"the pair of {cand} ({model_epochs} model-epochs) "
                   f"is predicted to take {cost:.0f} s, more than {share:.0%} of the "
                   f"{left:.0f} s left")
        log(f"lease: stored pair skipped: {rec['why']}")
        return rec
    t0 = time.monotonic()
    try:
        v = run_stored_pair(results, device, cand, tag, t0 + share * left, train_fn, log)
    except Exception as e:  # noqa: BLE001 (a failed pair clears nothing; the lease goes on)
        v = {"decision": "failed", "why": f"{type(e).__name__}: {e}"[:300]}
        log(f"lease: stored pair failed ({v['why']}); training fp32")
    rec.update({k: v.get(k, rec.get(k)) for k in ("decision", "cleared", "why",
                                                  "model_epochs")},
               seconds=time.monotonic() - t0)
    return rec


def travel_files(results_dir: str | Path | None) -> list[Path]:
    """What a lease's tree must carry of the stored units for the pair to judge against them
    (:func:`load_runs` reads them without ``artifacts.pt``): each unit's manifest, history
    and tables."""
    return [u.path(results_dir) / name for u in pair_units()
            for name in ("manifest.json", "history.csv", "tables")]


def plan_pair(record: dict[str, Any], results_dir: str | Path | None, seconds: float,
              share: float = SHARE) -> dict[str, Any] | None:
    """What the next lease on the card of ``record`` (a lease record with ``gpu`` and
    ``fit``) does about the pair, ``seconds`` after its start: the candidate it pairs, its
    predicted seconds at the record's fit and its model-epochs, and whether it ``runs``
    (at most ``share`` of ``seconds``); None where the record names no card or every
    candidate has a decision there."""
    gpu = record.get("gpu")
    cand = pending(results_dir, gpu) if gpu else None
    if cand is None:
        return None
    cfgs = candidate_configs("cpu", cand)
    cost, model_epochs = pair_cost(record["fit"], cfgs)
    problems = stored_problems(results_dir, cfgs)
    why = (f"the stored fp32 units cannot judge it: {problems[0]}" if problems else
           f"more than {share:.0%} of the call" if cost > share * seconds else "")
    return {"candidate": cand, "tag": pr.candidate_tag(gpu, cand), "predicted_s": cost,
            "model_epochs": model_epochs, "runs": not why, "why": why}


def stored_problems(results_dir: str | Path | None, cfgs: Sequence[Any]) -> list[str]:
    """What keeps the stored fp32 units from judging a pair of ``cfgs`` (empty: nothing):
    each unit missing, damaged, not fp32, of another recipe, cut short or diverged, named."""
    return load_runs([u.path(results_dir) for u in pair_units()], cfgs, "fp32", False)[1]
