"""The GPU lease, pre-flighted on the CPU with a tiny model: the exact lease path (measure, fit,
choose, train, publish, pack), a wrong prediction pausing cleanly at the deadline, and the
plan fitted to a measured lease record."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time

import pytest

from lstpe.experiments import lease as ls
from lstpe.experiments import long_train as lt
from lstpe.experiments import long_units as lu
from lstpe.experiments.registry import run_config


@pytest.fixture()
def tiny(monkeypatch):
    """Long units of a 2-layer, d=64 model with 2-epoch segments and small evaluations."""
    def config(self, device="cpu", **ov):
        kw = dict(pes=[self.pe], seeds=[self.seed], epochs=lu.LONG_EPOCHS, checkpoint_every=5,
                  device=device, amp=False, noise_levels=[], save_attention=True,
                  eval_train_max=32, eval_test_max=32)
        kw.update(ov)
        return run_config(self.run, "preview", **kw)

    monkeypatch.setattr(lu.LongUnit, "config", config)
    monkeypatch.setattr(lu, "SEGMENT", 2)


def test_the_lease_trains_what_finishes_and_packs_it(tiny, tmp_path):
    results, out = tmp_path / "results", tmp_path / "out"
    groups = [g for g in ls.open_groups(results) if g.name in ("table1-2235", "table1-6312")]
    assert [g.name for g in groups] == ["table1-2235", "table1-6312"]
    s = ls.lease(20, out, results, device="cpu", models=(1,), groups=groups, epochs=4,
                 table_scale="preview", log=lambda m: None)
    assert s["groups"] == ["table1-2235", "table1-6312"]  # 20 minutes: both fit
    assert s["finished"] and s["model_epochs"] == 4 * len(s["units"]) == 48
    for key in s["units"]:
        run, pe, seed = key.rsplit("/", 2)
        long = lu.load_long(lu.LongUnit(run, pe, int(seed)), results)  # verified, chained
        assert long["epoch"] == 4 and long["pe_epochs"] == [0, 2, 4]
        assert long["manifests"][-1]["long"]["precision"] == "fp32"
        assert long["manifests"][-1]["long"]["bitwise"] == {"ok": True,
                                                           "why": "bit for bit on cpu"}
    assert json.loads((out / "lease.json").read_text())["units"] == s["units"]
    table = json.loads(open(s["record"]).read())  # the record beside the table
    assert table["fit"]["b"] >= 0 and (results / "benchmarks").is_dir()
    pieces = sorted(out.glob("results.tgz.*"))
    assert 1 <= len(pieces) <= 4 and all(p.stat().st_size <= ls.PIECE_BYTES for p in pieces)
    names = subprocess.run(f"cat {' '.join(map(str, pieces))} | tar tzf -", shell=True,
                           capture_output=True, text=True, check=True).stdout.split()
    assert any(n.endswith("table1/rope/2235/e0004/manifest.json") for n in names)
    assert not any("_resume" in n or ".work" in n for n in names)
    assert [g.name for g in ls.open_groups(results)][:1] == ["table1-2d-fixed-2235"]  # done


def test_the_lease_packs_a_paused_chunk_beside_new_units_and_brings_its_checkpoint_back(
        tiny, tmp_path):
    """The mechanism paused at epoch 3 (its checkpoint in the tree, as a tree trimmed for it
    carries) trains on in the lease's one chunk beside Table 1's six new units, each model
    at its own epoch; the mechanism's checkpoint is written back at the segment's end the
    lease reached and comes back with the new segments, not with what was sent."""
    results, out = tmp_path / "results", tmp_path / "out"
    mech = lu.find_chunk("mechanism", 1000)
    assert lt.train_chunk(dataclasses.replace(mech, target=3), time.monotonic() + 600,
                          results, log=lambda m: None)
    for p in results.rglob("*"):  # sent to the device before the lease starts
        os.utime(p, (time.time() - 600,) * 2)
    src = ls.paused_sources(results, epochs=4)
    assert [(c.name, c.target) for c in src] == [("mechanism", 6)]  # 3 + 4, a segment's end
    s = ls.lease(20, out, results, device="cpu", models=(1,),
                 groups=ls.open_groups(results)[:1], epochs=4, skip_table=True,
                 log=lambda m: None, reach=4)
    assert s["groups"] == ["mechanism", "table1-2235"] and s["finished"]  # paused first
    assert s["continued"] == {"mechanism": [3, 6]} and s["model_epochs"] == 3 * 3 + 6 * 4
    assert lu.resume_epoch(mech, results) == 6 and lu.chunk_problems(mech, results) == []
    for u in mech.units:
        assert lu.load_long(u, results)["epoch"] == 6
    names = subprocess.run(f"cat {out}/results.tgz.* | tar tzf -", shell=True,
                           capture_output=True, text=True, check=True).stdout.split()
    assert "long/_resume/mechanism/chunk0.pt" in names
    assert any(n.endswith("learn-0.2/2235/e0006/manifest.json") for n in names)
    assert not any(n.endswith("e0002/manifest.json") and "table2" in n for n in names)
    assert not any(".work" in n for n in names)


def test_a_call_too_short_for_a_group_takes_the_paused_chunk_as_far_as_it_reaches(
        tiny, tmp_path, monkeypatch):
    """No group of 1000 epochs fits, so the paused mechanism trains towards its own target
    until the deadline pauses it; its checkpoint is written back there and comes back."""
    results, out = tmp_path / "results", tmp_path / "out"
    mech = lu.find_chunk("mechanism", 1000)
    every = list(range(lu.LONG_EPOCHS + 1))  # a snapshot in every 2-epoch segment
    monkeypatch.setattr(lu, "snapshot_epochs", lambda upto=None: (every, every[::2]))
    assert lt.train_chunk(dataclasses.replace(mech, target=3), time.monotonic() + 600,
                          results, log=lambda m: None)
    fit = {"a": 0.0, "b": 1.0, "e": 0.0, "capture": 0.0}  # 1 s per model-step
    assert ls.affordable_epochs(3, fit, 3 * 64 * 4.5, 64, 0.0) == 4
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ls, "fit_steps", lambda small, large: fit)
        mp.setattr(ls, "LEASE_MARGIN_S", 0.0)
        mp.setattr(ls, "step_seconds", lambda cfgs, dev, **kw: {"models": len(cfgs)})
        s = ls.lease(0.25, out, results, device="cpu", groups=ls.open_groups(results)[:1],
                     skip_table=True, log=lambda m: None)
    assert s["groups"] == ["mechanism"] and not s["finished"] and s["predicted_epochs"] == 0
    first, last = s["continued"]["mechanism"]
    assert first == 3 < last == lu.resume_epoch(mech, results) < 1000
    assert lu.chunk_problems(mech, results) == []
    names = subprocess.run(f"cat {out}/results.tgz.* | tar tzf -", shell=True,
                           capture_output=True, text=True, check=True).stdout.split()
    assert "long/_resume/mechanism/chunk0.pt" in names


def test_a_wrong_prediction_pauses_at_the_deadline_with_segments_kept(tiny, tmp_path):
    """The fit says everything fits, the deadline says otherwise: the chunk pauses, what was
    published stays verified, and the lease still packs."""
    results = tmp_path / "results"
    groups = ls.open_groups(results)[:1]
    fast = {"a": 0.0, "b": 0.0, "e": 0.0, "capture": 0.0}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ls, "fit_steps", lambda small, large: fast)
        mp.setattr(ls, "LEASE_MARGIN_S", 0.0)
        s = ls.lease(1.5, tmp_path / "out", results, device="cpu", groups=groups,
                     epochs=400, skip_table=True, log=lambda m: None)
    assert s["finished"] is False and 0 < s["model_epochs"] < 6 * 400
    unit = groups[0].units[0]
    assert lu.load_long(unit, results)["epoch"] == lu.published_epoch(unit, results)
    assert list((tmp_path / "out").glob("results.tgz.*"))


def test_choose_takes_each_group_in_order_while_the_chunk_still_finishes():
    fit = {"a": 0.002, "b": 0.0007, "e": 0.006, "capture": 0.2}
    groups = [lu.LongChunk(n, (1,) * k, 1000, 0, "test") for n, k in (("a", 6), ("b", 6), ("c", 4))]
    one = ls.predict_seconds(6, fit, 145, 1000, 64)
    assert one == pytest.approx(1000 * 64 * (0.002 + 0.0042) + 145 * 0.036 + 0.2)
    assert ls.choose(groups, fit, one, 145, 64) == [0]
    # too short for 6 models: the 4 of group c still fit, rather than nothing
    assert ls.choose(groups, fit, one - 1, 145, 64) == [2]
    four = ls.predict_seconds(4, fit, 145, 1000, 64)
    assert ls.choose(groups, fit, four - 1, 145, 64) == []
    assert ls.choose(groups, fit, 1e9, 145, 64) == [0, 1, 2]


def test_choose_prices_a_chunk_at_its_longest_leg():
    """A paused chunk's leg to its own target (1183 epochs: the mechanism from 2817 to 4000)
    sets the time of every group taken with it, evaluations in proportion."""
    fit = {"a": 0.00224, "b": 0.000696, "e": 0.00629, "capture": 0.17}
    groups = [lu.LongChunk(n, (1,) * k, 1000, 0, "test") for n, k in (("m", 3), ("t", 1))]
    legs = [1183, 1000]
    alone = ls.predict_seconds(3, fit, round(145 * 1183 / 1000), 1183, 64)
    both = ls.predict_seconds(4, fit, round(145 * 1183 / 1000), 1183, 64)
    assert ls.choose(groups, fit, alone, 145, 64, legs=legs) == [0]
    assert ls.choose(groups, fit, both, 145, 64, legs=legs) == [0, 1]
    # priced at 1000 epochs both would seem to fit in less: the longer leg is what counts
    assert ls.choose(groups, fit, both - 1, 145, 64, legs=[1000, 1000]) == [0, 1]
    assert ls.choose(groups, fit, both - 1, 145, 64, legs=legs) == [0]


def test_a_lease_without_the_pair_finishes_the_mechanism_first():
    """Issue 67's GPU order on this repository's tree: the paused mechanism comes first and
    goes to 4000 in one 9.35-minute call at the H100's fit, Table 1's 2d-fixed legs beside
    it; with the pair first, the pair's 151 s leave it no room and it waits."""
    mech = lu.find_chunk("mechanism", lu.LONG_EPOCHS)
    if not lu.resume_checkpoint(mech, None).exists():
        pytest.skip("the mechanism is finished: its checkpoint left the tree")
    t = ls.lease_plan(9.35, None, log=lambda m: None, pair=False)
    first = t.iloc[0]
    assert first["chunk"] == "mechanism" and first["state"] == "trains"
    assert "to 4000" in first["why"] and t.attrs["pair"] is None
    assert t.attrs["model_epochs"] >= 3 * (4000 - lu.resume_epoch(mech, None))
    with_pair = ls.lease_plan(9.35, None, log=lambda m: None)
    if with_pair.attrs["pair"] and with_pair.attrs["pair"]["runs"]:
        assert with_pair.iloc[0]["chunk"] == "mechanism"
        assert with_pair.iloc[0]["state"] == "waits"


def test_the_plan_is_the_measured_fit_applied_to_the_open_chunks(tmp_path):
    rec = {"fit": {"a": 0.00224, "b": 0.000696, "e": 0.00629, "capture": 0.17},
           "gpu": "NVIDIA H200", "path": "x.json"}
    t = ls.lease_plan(9, tmp_path, record=rec)
    assert t["chunk"].tolist() == list(ls.LEASE_ORDER)
    # models: the chunk's size were each group to join the ones taken before it
    sizes = [len(lu.find_chunk(name, 1000).units) for name in ls.LEASE_ORDER]
    assert t["models"].tolist() == [6] + [6 + n for n in sizes[1:]]
    # the H200's fit: one chunk of 6 in 9 min, not one model more
    assert t["fits"].tolist() == [True] + [False] * (len(sizes) - 1)
    assert t.attrs["model_epochs"] == 6000
    with pytest.raises(FileNotFoundError, match="no lease record"):
        ls.lease_plan(9, tmp_path)


def test_the_newest_record_is_the_one_that_started_last_whatever_its_gpu(tmp_path):
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    fit = {"a": 0.002, "b": 0.0007, "e": 0.006, "capture": 0.2}
    for name, started in (("lease_NVIDIA_H200_x.json", "2026-11-26T23:28:44Z"),
                          ("lease_NVIDIA_H100_x.json", "2026-11-27T02:05:05Z"),
                          ("lease_Z_no_fit.json", "2027-01-01T00:00:00Z")):
        rec = {"started": started, "gpu": name.split("_")[2]}
        rec.update({"fit": fit} if "no_fit" not in name else {})
        (bench / name).write_text(json.dumps(rec))
    assert ls.last_record(tmp_path)["gpu"] == "H100"  # not the H200 that sorts after it
    t = ls.lease_plan(9, tmp_path, record=ls.last_record(tmp_path))
    assert t["why"].str.len().gt(0).all()  # every chunk says why it is in the plan
