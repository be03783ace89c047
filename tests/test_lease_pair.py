"""The stored-unit precision pair inside a lease (issue 63, item 2), on the CPU with a tiny
recipe.

Twelve fp32 units (Table 2's 2d-fixed, learn-0.2, learn-1, learn-2 at 3 seeds) are trained
once into a results folder with the tiny recipe, and the pair is run once against them with
the ``tf32`` candidate: on a CPU TF32 does not exist, so the candidate is plain fp32 and
reproduces the stored units bit for bit (d = 0, cleared). The other tests inject that
candidate's runs (``train_fn``) and tamper copies of the stored units (resealing their
manifests as the store does): a shift beyond the margin is refused with its numbers; a stored
unit missing, not fp32, of another recipe, cut short or diverged leaves the pair undecided
(naming it, nothing trained); a pair short of its deadline clears nothing; another card's tag
clears nothing; a lease runs the pair before its tuning, and skips it (saying why) when its
predicted seconds exceed 40% of the time left.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lstpe.experiments import lease as ls
from lstpe.experiments import lease_pair as lp
from lstpe.experiments import lease_tune as lt
from lstpe.experiments import long_units as lu
from lstpe.experiments import precision as pr
from lstpe.experiments import units as un
from lstpe.nn.model import ModelConfig
from lstpe.store import storage as st
from lstpe.training.train import train_many

TINY = dict(model=ModelConfig(d_model=16, n_layers=1), n_train=64, epochs=2, eval_train_max=64,
            eval_test_max=64, noise_levels=[0.05])
H200, H100 = "NVIDIA H200", "NVIDIA H100"
TAG = pr.candidate_tag(H200, "tf32")
AUTHORS_SD = {"2d-fixed": 0.1298, "learn-0.2": 0.0410, "learn-1": 0.0472, "learn-2": 0.1560}
"""The authors' epoch-200 validation SDs (15 seeds each), read off
lstpe/data/authors_logs_summary.csv by hand."""
MARGIN = math.sqrt(sum(s**2 for s in AUTHORS_SD.values()) / 4)  # equal n: the mean variance


@pytest.fixture(scope="module")
def tiny_units():
    """Every unit's recipe shrunk to TINY, for the whole module."""
    mp = pytest.MonkeyPatch()
    real = un.Unit.config

    def config(self, device="cpu", **overrides):
        return real(self, device=device, **{**TINY, **overrides})

    mp.setattr(un.Unit, "config", config)
    yield
    mp.undo()


@pytest.fixture(scope="module")
def trained(tiny_units, tmp_path_factory):
    """(results folder, verdict): the 12 stored fp32 units, and the pair of ``tf32`` run
    against them on the CPU (the default training)."""
    root = tmp_path_factory.mktemp("pair")
    results = root / "results"
    units = lp.pair_units()
    train_many([u.config() for u in units], [u.path(results) for u in units], progress=False,
               work_dir=root / "work")
    verdict = lp.run_stored_pair(results, "cpu", "tf32", TAG, log=lambda m: None)
    return results, verdict


@pytest.fixture()
def results(trained, tmp_path):
    """A copy of the stored fp32 units (without the pair) to tamper with."""
    out = tmp_path / "results"
    shutil.copytree(trained[0] / "paper", out / "paper")
    return out


def copy_candidate(trained):
    """A ``train_fn`` that "trains" the candidate by copying the runs the module's pair
    trained (plain fp32 on this CPU)."""
    src = lp.pair_folder(trained[0], TAG)

    def fn(cfgs, dirs, work, deadline, candidate):
        for d in dirs:
            shutil.copytree(src / d.name, d)
        return []
    return fn


def never(*args):
    raise AssertionError("the candidate was trained")


def reseal(path: Path, history=None, manifest=None) -> None:
    """Edit a stored unit's history and/or manifest, and reseal it as the store does (the
    file's size, rows and SHA-256, then the manifest's own checksum)."""
    m = st.read_manifest(path, verify=False)
    if history is not None:
        h = history(pd.read_csv(path / "history.csv"))
        h.to_csv(path / "history.csv", index=False)
        m["files"]["history.csv"] = st.file_record(path / "history.csv", len(h))
    if manifest is not None:
        manifest(m)
    st.save_json(st.seal_manifest(m), path / "manifest.json")


def final_rows(h: pd.DataFrame, epoch: int = 2) -> pd.Series:
    return (h["split"] == "val_dropout") & (h["condition"].astype(str) == "all") & \
        (h["epoch"] == epoch)


def quiet(m: str) -> None:
    pass


# --------------------------------------------------------------------------- the judgement


def test_the_margin_is_the_authors_pooled_epoch_200_seed_sd():
    margin, source = lp.authors_margin()
    assert margin == pytest.approx(MARGIN, abs=1e-9)
    assert "2d-fixed 0.1298" in source and "learn-2 0.1560" in source and "15 seeds" in source


def test_the_interval_is_the_paired_t_interval_of_the_differences():
    stored = [0.5] * 12
    d = np.array([0.01, -0.02, 0.03, 0.0, 0.015, -0.005, 0.02, 0.01, -0.01, 0.0, 0.025, 0.005])
    v = lp.judge(stored, list(0.5 + d), [f"u{i}" for i in range(12)], 0.05)
    lo, hi = stats.t.interval(0.90, 11, loc=d.mean(), scale=d.std(ddof=1) / math.sqrt(12))
    assert v["interval"] == pytest.approx([lo, hi]) and v["n"] == 12
    assert v["cleared"] and v["max_abs_d"] == pytest.approx(0.03) and v["max_abs_d_unit"] == "u2"
    # the same differences against a margin inside the interval's far end: refused
    assert not lp.judge(stored, list(0.5 + d), [f"u{i}" for i in range(12)], hi - 1e-6)["cleared"]


# --------------------------------------------------------------------------- the pair


def test_a_candidate_that_reproduces_the_stored_units_is_cleared_for_its_card_only(trained):
    results, v = trained
    assert v["decision"] == "cleared" and v["cleared"] is True and v["finished"]
    assert v["n"] == 12 and v["mean_d"] == 0 and v["interval"] == [0, 0]
    assert v["max_abs_d"] == 0 and v["mdd"] == 0
    assert v["margin"] == pytest.approx(MARGIN) and "authors' logs" in v["margin_source"]
    assert v["model_epochs"] == 12 * TINY["epochs"]
    runs = sorted(p.name for p in lp.pair_folder(results, TAG).glob("*__*"))
    assert runs == sorted(f"{pe}__{s}" for pe in lp.STORED_PES for s in lp.STORED_SEEDS)
    man = json.loads((lp.pair_folder(results, TAG) / "learn-1__2235" / "manifest.json").read_text())
    assert man["config"]["save_attention"] is False and man["config"]["amp"] is False
    assert not (lp.pair_folder(results, TAG) / ".work").exists()
    assert lp.stored_pair_decision(results, TAG)[0] is True
    h200 = {r["precision"]: r for r in lt.gpu_precisions(H200, results)}
    assert h200["tf32"]["cleared"] and "stored-unit pair" in h200["tf32"]["why"]
    assert not h200["bf16"]["cleared"]  # the other candidate: nothing
    h100 = {r["precision"]: r["cleared"] for r in lt.gpu_precisions(H100, results)}
    assert h100 == {"fp32": True, "bf16": False, "tf32": False}  # another card: nothing


def test_a_stored_accuracy_shifted_beyond_the_margin_is_refused_with_its_numbers(trained,
                                                                                 results):
    for u in lp.pair_units():
        def up(h):
            h.loc[final_rows(h), "accuracy"] += 0.25
            return h
        reseal(u.path(results), history=up)
    v = lp.run_stored_pair(results, "cpu", "tf32", TAG, train_fn=copy_candidate(trained),
                           log=quiet)
    assert v["decision"] == "refused" and v["cleared"] is False
    assert v["mean_d"] == pytest.approx(-0.25) and v["max_abs_d"] == pytest.approx(0.25)
    assert "mean d -0.2500" in v["why"] and f"not inside +-{MARGIN:.4f}" in v["why"]
    ok, why = lp.stored_pair_decision(results, TAG)
    assert ok is False and "-0.2500" in why
    assert not {r["precision"]: r["cleared"] for r in lt.gpu_precisions(H200, results)}["tf32"]


def _missing(path):
    shutil.rmtree(path)


def _bf16(path):
    def m(man):
        man["precision"] = "bf16"
        man["config"]["amp"] = True
    reseal(path, manifest=m)


def _recipe(path):
    reseal(path, manifest=lambda man: man["config"].update(lr=1e-3))


def _short(path):
    reseal(path, history=lambda h: h[h["epoch"] < 2])


def _diverged(path):
    def m(h):
        h.loc[h["epoch"] == 2, "diverged"] = True
        return h
    reseal(path, history=m)


@pytest.mark.parametrize("damage, words", [
    (_missing, "is not stored"), (_bf16, "trained in bf16"),
    (_recipe, "of another recipe: its lr differ"), (_short, "cut short: it reaches epoch 1"),
    (_diverged, "diverged")], ids=["missing", "not-fp32", "recipe", "cut-short", "diverged"])
def test_a_stored_unit_that_cannot_judge_is_named_and_nothing_trains(results, damage, words):
    unit = un.Unit("table2", "learn-1", lp.STORED_SEEDS[1])
    damage(unit.path(results))
    v = lp.run_stored_pair(results, "cpu", "tf32", TAG, train_fn=never, log=quiet)
    assert v["decision"] == "cannot decide" and v["cleared"] is None
    assert str(unit.path(results)) in v["why"] and words in v["why"]
    ok, why = lp.stored_pair_decision(results, TAG)
    assert ok is None and words in why
    assert not {r["precision"]: r["cleared"] for r in lt.gpu_precisions(H200, results)}["tf32"]


def test_a_bf16_candidate_trained_in_fp32_cannot_decide(trained, results):
    """On a CPU without bf16 instructions autocast falls back to fp32: those runs are not a
    bf16 pair."""
    tag = pr.candidate_tag(H200, "bf16")
    v = lp.run_stored_pair(results, "cpu", "bf16", tag, train_fn=copy_candidate(trained),
                           log=quiet)
    assert v["decision"] == "cannot decide" and "not bf16" in v["why"]
    assert lp.stored_pair_decision(results, tag)[0] is None


def test_a_pair_short_of_its_deadline_clears_nothing(results):
    """A deadline already passed: the real training pauses after its first epoch."""
    v = lp.run_stored_pair(results, "cpu", "tf32", TAG, deadline=time.monotonic() - 1,
                           log=quiet)
    assert v["decision"] == "not finished" and v["cleared"] is None and not v["finished"]
    assert not (lp.pair_folder(results, TAG) / ".work").exists()
    ok, why = lp.stored_pair_decision(results, TAG)
    assert ok is None and "did not finish" in why
    assert not {r["precision"]: r["cleared"] for r in lt.gpu_precisions(H200, results)}["tf32"]


def test_a_verdict_moved_to_another_cards_folder_clears_nothing_there(trained, tmp_path):
    h100 = pr.candidate_tag(H100, "tf32")
    shutil.copytree(lp.pair_folder(trained[0], TAG), lp.pair_folder(tmp_path, h100))
    ok, why = lp.stored_pair_decision(tmp_path, h100)
    assert ok is None and f"holds the pair of {TAG}" in why
    assert not {r["precision"]: r["cleared"] for r in lt.gpu_precisions(H100, tmp_path)}["tf32"]


# --------------------------------------------------------------------------- in the lease


@pytest.fixture()
def on_h200(monkeypatch):
    """The lease's device record names an H200 (the lease runs on this CPU)."""
    real = ls.device_record
    monkeypatch.setattr(ls, "device_record", lambda d: {**real(d), "gpu": H200})


FIT = {"a": 0.01, "b": 0.001, "e": 0.001, "capture": 0.1}


def test_the_lease_runs_the_pair_first_and_its_card_then_trains_tf32(trained, results, on_h200,
                                                                     tmp_path):
    lines: list[str] = []
    assert not {r["precision"]: r["cleared"] for r in lt.gpu_precisions(H200, results)}["tf32"]
    s = ls.lease(20, tmp_path / "out", results, device="cpu", groups=[], sources=[],
                 skip_table=True, log=lines.append, pair=True, pair_fit=FIT,
                 pair_train=copy_candidate(trained))
    p = s["pair"]
    assert (p["tag"], p["candidate"], p["decision"], p["cleared"]) == (TAG, "tf32", "cleared",
                                                                      True)
    assert p["model_epochs"] == 24 and p["seconds"] >= 0
    assert p["predicted_s"] == pytest.approx(ls.predict_seconds(12, FIT, 2, 2, 1))
    first = next(i for i, m in enumerate(lines) if "stored pair" in m)
    assert first < lines.index("lease: no open group to train")
    assert {r["precision"]: r["cleared"] for r in lt.gpu_precisions(H200, results)}["tf32"]
    names = subprocess.run(f"cat {tmp_path / 'out'}/results.tgz.* | tar tzf -", shell=True,
                           capture_output=True, text=True, check=True).stdout.split()
    assert f"precision_pair/{TAG}/stored-pair/verdict.json" in names  # it comes back
    # the next lease pairs the next candidate, bf16 (skipped here: no time for it)
    s = ls.lease(20, tmp_path / "out", results, device="cpu", groups=[], sources=[],
                 skip_table=True, log=quiet, pair=True, pair_fit={**FIT, "a": 1e4},
                 pair_train=never)
    assert s["pair"]["candidate"] == "bf16" and s["pair"]["decision"] == "skipped"


def test_the_pair_is_skipped_when_it_would_take_over_40_percent_of_the_time_left(
        trained, results, on_h200, tmp_path):
    fit = {**FIT, "a": 250.0}  # 2 epochs x 1 step x 250 s: 500 s > 40% of 20 minutes
    s = ls.lease(20, tmp_path / "out", results, device="cpu", groups=[], sources=[],
                 skip_table=True, log=quiet, pair=True, pair_fit=fit, pair_train=never)
    p = s["pair"]
    assert p["decision"] == "skipped" and p["candidate"] == "tf32" and p["model_epochs"] == 0
    assert "predicted to take 500 s, more than 40% of the" in p["why"]
    assert not lp.pair_folder(results, TAG).exists()
    assert lp.stored_pair_decision(results, TAG)[0] is None
    fit = {**FIT, "a": 200.0}  # 400 s: under 40% of the 1200 s
    s = ls.lease(20, tmp_path / "out", results, device="cpu", groups=[], sources=[],
                 skip_table=True, log=quiet, pair=True, pair_fit=fit,
                 pair_train=copy_candidate(trained))
    assert s["pair"]["decision"] == "cleared"


def test_a_tree_trimmed_for_a_lease_carries_the_stored_units_without_their_artifacts(
        tmp_path, lease_checkout):
    """scripts/lease_tree.py keeps each pair unit's manifest, history and tables (what the
    pair reads, verified) and leaves out its attention-laden ``artifacts.pt``."""
    import importlib.util

    from lstpe.runtime import repo_root

    spec = importlib.util.spec_from_file_location("lease_tree",
                                                  repo_root() / "scripts" / "lease_tree.py")
    tree = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tree)
    unit = "results/paper/table2/learn-1/6068"
    files = ("manifest.json", "history.csv", "tables/noise.csv", "artifacts.pt")
    repo = lease_checkout(tmp_path, {f"{unit}/{f}": f for f in files})
    tree.trim(repo, "none")
    kept = {str(p.relative_to(repo)) for p in (repo / unit).rglob("*") if p.is_file()}
    assert kept == {f"{unit}/{f}" for f in files[:3]}
    assert not (repo / "results/paper/table1/nope/8880/history.csv").exists()


def test_the_plan_says_which_pair_the_next_lease_runs_and_its_cost(trained):
    """The cleared TF32 pair of the H200 leaves bf16 to pair there; an H100 pairs TF32."""
    fit = {"a": 0.00224, "b": 0.000696, "e": 0.00629, "capture": 0.17}
    for gpu, cand in ((H200, "bf16"), (H100, "tf32")):
        t = ls.lease_plan(9, trained[0], record={"fit": fit, "gpu": gpu, "path": "x.json"})
        p = t.attrs["pair"]
        want = ls.predict_seconds(12, fit, 2, 2, 1)  # the tiny recipe: 2 epochs, 1 step each
        assert (p["candidate"], p["model_epochs"], p["runs"]) == (cand, 24, True)
        assert p["predicted_s"] == pytest.approx(want)
        assert f"precision pair of {cand} ({pr.candidate_tag(gpu, cand)}): 24 model-epochs, " \
               f"{want:.0f} s predicted" in ls.lease_plan_text(t)


def test_the_plans_chunks_get_the_time_the_pair_leaves_them(trained):
    """A chunk that fits a call only without the pair is planned as waiting when the pair
    runs first; without stored units to judge against, the pair is skipped, named, and
    the chunk keeps the whole call."""
    fit = {"a": 0.00224, "b": 0.000696, "e": 0.00629, "capture": 0.17}
    rec = {"fit": fit, "gpu": H100, "path": "x.json"}
    first = ls.lease_plan(60, trained[0], record=rec).iloc[0]
    pair_s = ls.lease_plan(60, trained[0], record=rec).attrs["pair"]["predicted_s"]
    cfg = lu.find_chunk(first["chunk"], 1000).units[0].config()
    exact = ls.predict_seconds(first["models"], fit, ls.n_evals(cfg, 0, 1000), 1000,
                               -(-ls._n_train(cfg) // cfg.batch_size))  # what choose() reads
    assert exact == pytest.approx(first["predicted_s"], abs=0.5)
    edge = (ls.SETUP_S + ls.LEASE_MARGIN_S + exact + pair_s / 2) / 60
    t = ls.lease_plan(edge, trained[0], record=rec)
    assert t.attrs["pair"]["runs"] and t.iloc[0]["chunk"] == first["chunk"]
    assert not t.iloc[0]["fits"]
    empty = trained[0].parent / "no-units"
    empty.mkdir(exist_ok=True)
    t = ls.lease_plan(edge, empty, record=rec)
    p = t.attrs["pair"]
    assert not p["runs"] and "table2/2d-fixed/2235" in p["why"]
    assert t.iloc[0]["fits"] and f"skipped: {p['why']}" in ls.lease_plan_text(t)


def test_a_plan_without_the_pair_gives_its_chunks_the_pairs_time(trained, monkeypatch, capsys):
    """``--no-pair``: the plan holds no pair and the chunk that waited for it fits; the lease
    command passes ``pair=False`` on; the pre-flight prints the pair's line per variant."""
    from lstpe import cli
    from lstpe.experiments import lease as lease_mod
    from lstpe.experiments import preflight as pf

    fit = {"a": 0.00224, "b": 0.000696, "e": 0.00629, "capture": 0.17}
    rec = {"fit": fit, "gpu": H100, "path": "x.json"}
    with_pair = ls.lease_plan(60, trained[0], record=rec)
    first, pair_s = with_pair.iloc[0], with_pair.attrs["pair"]["predicted_s"]
    cfg = lu.find_chunk(first["chunk"], 1000).units[0].config()
    exact = ls.predict_seconds(first["models"], fit, ls.n_evals(cfg, 0, 1000), 1000,
                               -(-ls._n_train(cfg) // cfg.batch_size))
    edge = (ls.SETUP_S + ls.LEASE_MARGIN_S + exact + pair_s / 2) / 60
    assert not ls.lease_plan(edge, trained[0], record=rec).iloc[0]["fits"]
    t = ls.lease_plan(edge, trained[0], record=rec, pair=False)
    assert t.attrs["pair"] is None and t.iloc[0]["fits"]
    assert "precision pair" not in ls.lease_plan_text(t)
    seen = {}
    monkeypatch.setattr(lease_mod, "lease", lambda *a, **k: seen.update(k) or
                        {"model_epochs": 0, "wall_s": 0.0})
    for flag, want in (([], None), (["--no-pair"], False)):
        assert cli.main(["campaign", "lease", "--minutes", "1", "--out",
                         str(trained[0].parent / "out"), *flag]) == 0
        assert seen["pair"] is want
    plans = pf.variant_plans(9, trained[0], None, rec)
    assert plans and all(p["pair"] == ls.pair_text(with_pair.attrs["pair"]) for p in plans)
    capsys.readouterr()
