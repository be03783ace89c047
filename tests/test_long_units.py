"""Long units (:mod:`lstpe.experiments.long_units`): segments, snapshots, and a resume that
continues the same trajectory, also from a fresh clone holding only what git tracks."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch

from lstpe.campaign import long_progress as lp
from lstpe.campaign import long_train as lt
from lstpe.campaign import resume as rs
from lstpe.experiments import long_units as lu
from lstpe.nn.model import ModelConfig
from lstpe.store import model as mf
from lstpe.store import results as res

TINY = dict(model=ModelConfig(d_model=16, n_layers=1), n_train=64, eval_train_max=64,
            eval_test_max=64)
UNITS = (lu.LongUnit("table2", "learn-0.2", 2235), lu.LongUnit("tables56", "learn-2", 2235))


@pytest.fixture
def short(monkeypatch):
    """A long unit of 6 epochs in segments of 2."""
    monkeypatch.setattr(lu, "LONG_EPOCHS", 6)
    monkeypatch.setattr(lu, "SEGMENT", 2)


def chunk(target: int) -> lu.LongChunk:
    return lu.LongChunk("t", UNITS, target, 2, "test")


def train(target: int, results: Path) -> bool:
    return lt.train_chunk(chunk(target), time.monotonic() + 600, results, log=lambda m: None,
                          **TINY)


def test_snapshot_schedule():
    pe, att = lu.snapshot_epochs(1000)
    assert pe[:12] == [0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 40, 50]
    assert pe[-3:] == [900, 950, 1000] and len(pe) == 11 + 20
    assert att == [0, 1, 3, 10, 30, *range(100, 1001, 100)]


def test_a_chunk_resumed_under_the_sparse_schedule_publishes_what_it_took_then_thins(
        short, tmp_path):
    """As the mechanism, paused under the dense schedule and resumed under the sparse one: the
    segments published before stay, the snapshot its checkpoint held (epoch 3) is published,
    then only the sparse schedule's (the PE at segment ends); the chain joins."""
    assert train(3, tmp_path)
    sparse = lu.LongChunk("t", UNITS, 6, 2, "test", "sparse")
    assert lt.train_chunk(sparse, time.monotonic() + 600, tmp_path, log=lambda m: None, **TINY)
    for u in UNITS:
        whole = lu.load_long(u, tmp_path)
        assert whole["epoch"] == 6
        assert whole["pe_epochs"] == [0, 1, 2, 3, 4, 6]  # dense: 0, 1, 2, 3, 5
        assert whole["attention_epochs"] == [0, 1, 3]
        assert whole["pe"].shape[0] == 6 and whole["val_attention"].shape[0] == 3


def test_the_mechanisms_last_leg_keeps_a_shallow_clone_small():
    """Its 1183 epochs from the checkpoint at 2817 to 4000 publish about 2 MB of snapshots for
    its 3 models (dense, they would be 11 MB: a shallow clone past the issue's 100 MB)."""
    leg = lu.find_chunk("mechanism", 4000)
    pe_at, att_at = (lu.sparse_snapshot_epochs if leg.snapshots == "sparse"
                     else lu.snapshot_epochs)()
    pes = [e for e in pe_at if 2817 < e <= 4000]
    atts = [e for e in att_at if 2817 < e <= 4000 and e in pe_at]
    assert pes == list(range(3000, 4001, 200)) and atts == [3000, 4000]
    per_pe, per_maps = 4 * 16 * 160 * 4, 108 * 4 * 16 * 16 * 2  # float32 PE, float16 maps
    assert len(leg.units) * (len(pes) * per_pe + len(atts) * per_maps) < 2.2e6


def test_segments_join_into_the_whole_run(short, tmp_path):
    assert train(6, tmp_path)
    for u in UNITS:
        assert [s.epoch for s in mf.segments(u.path(tmp_path))] == [2, 4, 6]
        folder = u.path(tmp_path)  # one model folder: one history, a snapshot per segment
        assert sorted(p.name for p in folder.iterdir()) == ["history.csv", "manifest.json",
                                                            "snapshots"]
        assert sorted(p.name for p in (folder / "snapshots").iterdir()) == \
            ["e0002.pt", "e0004.pt", "e0006.pt"]
        whole = lu.load_long(u, tmp_path)
        assert whole["epoch"] == 6
        assert sorted(whole["history"]["epoch"].unique()) == list(range(7))
        assert whole["pe_epochs"] == [0, 1, 2, 3, 5]  # the schedule, up to epoch 6
        assert whole["pe"].shape == (5, 1, 16, 16)
        assert whole["attention_epochs"] == [0, 1, 3]
        assert whole["val_attention"].shape == (3, 108, 1, 16, 16)
    # the AdamW unit and the Adam unit kept their own recipes in one batch
    m = [lu.load_long(u, tmp_path)["manifests"][0]["config"] for u in UNITS]
    assert (m[0]["optimizer"], m[1]["optimizer"]) == ("adam", "adamw")


def test_resume_in_a_fresh_clone_continues_bit_for_bit(short, tmp_path):
    """Train to epoch 3 (mid-segment), keep only what git would track (segments and the
    resume folder; no work folder), continue to 6 there; compare with an uninterrupted run."""
    whole, part, clone = tmp_path / "whole", tmp_path / "part", tmp_path / "clone"
    assert train(6, whole)
    assert train(3, part)  # stops at its target, epoch 3, with a checkpoint
    assert rs.resume_epoch(chunk(3), part) == 3
    assert (part / "long" / ".work").exists()
    shutil.copytree(part / "long", clone / "long", ignore=shutil.ignore_patterns(".work"))
    assert train(6, clone)
    for u in UNITS:
        a, b = lu.load_long(u, whole), lu.load_long(u, clone)
        assert torch.equal(a["pe"], b["pe"])
        assert torch.equal(a["val_attention"], b["val_attention"])
        cols = ["epoch", "split", "condition", "accuracy", "loss"]
        assert a["history"][cols].equals(b["history"][cols])


def test_a_chunk_without_its_checkpoint_is_refused_not_retrained(short, tmp_path,
                                                                  monkeypatch):
    """Published segments without the resume checkpoint (a clone without the resume state):
    train_chunk refuses, naming the file, and next_chunk passes the chunk over."""
    assert train(3, tmp_path)
    assert not rs.unresumable(chunk(6), tmp_path)
    monkeypatch.setattr(lu, "LONG_PLAN", (chunk(6),))
    assert rs.next_chunk(tmp_path) == chunk(6)
    (rs.resume_dir(chunk(6), tmp_path) / "chunk0.pt").unlink()
    assert rs.unresumable(chunk(6), tmp_path) and rs.next_chunk(tmp_path) is None
    with pytest.raises(FileNotFoundError, match="chunk0.pt is missing .* epoch 2") as e:
        train(6, tmp_path)
    # the hint never promises a checkpoint git never held (segments without one)
    assert "none was ever written" in str(e.value)
    assert "git checkout -- results/long)" not in str(e.value)
    assert [s.epoch for s in mf.segments(UNITS[0].path(tmp_path))] == [2]  # untouched


def test_segments_another_trajectory_published_past_a_checkpoint_are_reported(short, tmp_path):
    """A checkpoint at epoch 1 here, and model folders to epoch 6 that the chunk trained from
    epoch 0 elsewhere: ``chunk_problems`` names each unit's segments past the checkpoint; a
    folder that ends at the end of the checkpoint's open segment (a process killed between its
    publish and its next checkpoint) is no problem. (Moved from the GPU lease's trial tests.)"""
    here, there = tmp_path / "here", tmp_path / "there"
    assert train(1, here)
    assert train(2, there)
    unit = UNITS[0]
    shutil.copytree(unit.path(there), unit.path(here))
    assert rs.chunk_problems(chunk(6), here) == []  # the open segment's end: compared on resume
    assert train(6, there)
    for u in UNITS:
        shutil.rmtree(u.path(here), ignore_errors=True)
        shutil.copytree(u.path(there), u.path(here))
    problems = rs.chunk_problems(chunk(6), here)
    assert len(problems) == 2  # one per unit
    assert all("past the resume checkpoint" in p and "epoch 1" in p for p in problems)
    assert f"the segment to epoch 4 of {unit.path(here)}" in problems[0]


def test_the_resume_folder_is_tracked_by_git(tmp_path):
    """.gitignore ignores *.pt but not results/**: the resume checkpoint is committed, the
    work folder (claims, staging) is not."""
    root = Path(__file__).resolve().parents[1]
    tracked = "results/long/_resume/mechanism/chunk0.pt"
    work = "results/long/.work/staging/x/artifacts.pt"
    out = subprocess.run(["git", "check-ignore", "--no-index", tracked, work], cwd=root,
                         capture_output=True, text=True)
    assert out.stdout.split() == [work]


def test_a_broken_chain_is_refused(short, tmp_path):
    """A segment that names another one before it (a manifest edited and sealed again) is
    refused by the reader and named by ``chunk_problems``."""
    import json

    from lstpe.store import storage as stg

    assert train(6, tmp_path)
    u = UNITS[0]
    path = u.path(tmp_path) / "manifest.json"
    man = json.loads(path.read_text())
    man["segments"][1]["manifest"]["long"]["previous"] = "0" * 64
    path.write_text(json.dumps(stg.seal_manifest(man)))
    with pytest.raises(res.DamagedFileError, match="does not follow"):
        lu.load_long(u, tmp_path)
    assert any("segment to epoch 4 of" in p and "does not follow" in p
               for p in rs.chunk_problems(chunk(6), tmp_path))


def test_a_target_already_reached_trains_nothing(short, tmp_path):
    assert train(4, tmp_path)
    before = rs.resume_epoch(chunk(4), tmp_path)
    assert train(4, tmp_path) and rs.resume_epoch(chunk(4), tmp_path) == before == 4


def test_campaign_run_trains_a_long_chunk_in_its_place(short, tmp_path, monkeypatch):
    """With items 1-3, 7, 11 and 12 stored (every 200-epoch unit it trains: a CPU trains long
    units only when none is left), ``campaign run`` trains the long chunk (item 4) to its
    target, publishes its segments, and then finds nothing left (item 9 is never trained)."""
    import json

    from lstpe.campaign import items as cp
    from lstpe.campaign import scheduler as cr
    from lstpe.experiments import units as un

    monkeypatch.setattr(lu, "LONG_PLAN", (lu.LongChunk("m", UNITS, 4, 4, "test"),))
    for u in un.plan():
        if u.item not in cp.NOT_TRAINED:
            u.path(tmp_path).mkdir(parents=True)
            (u.path(tmp_path) / "manifest.json").write_text(json.dumps({"config": {}}))
    logs: list[str] = []
    cr.run(5, tmp_path, device="cpu", log=logs.append, **TINY)
    assert any(m.startswith("long: training m") for m in logs)
    assert logs[-1] == "campaign: no free unit left"
    assert all(lu.published_epoch(u, tmp_path) == 4 for u in UNITS)
    # its last planned leg done, its resume state has left the tree, and the log says so
    assert lp.long_status(tmp_path).iloc[0][["epoch", "resume_epoch"]].tolist() == [4, 0]
    assert any("finished its last planned leg" in m for m in logs)


def test_a_later_target_counts_only_its_own_epochs(tmp_path):
    """Item 6 extends item 4's chunk from 1000 to 4000: its hours are for 3000 epochs."""
    t = lp.long_status(tmp_path).set_index(["chunk", "target"])
    assert t.loc[("mechanism", 4000), "from"] == 1000
    assert t.loc[("mechanism", 1000), "from"] == 0


def test_a_chunk_without_a_segment_is_priced_at_the_units_rate(tmp_path):
    """Before its first segment a chunk's hours are its models x epochs x the 200-epoch units'
    rate, and the status line says so; without a rate the hours are unknown, not zero."""
    t = lp.long_status(tmp_path, s_per_model_epoch=10.0).set_index(["chunk", "target"])
    r = t.loc[("mechanism", 1000)]
    assert r["basis"] == "the 200-epoch units' rate"
    assert r["hours_left"] == pytest.approx(r["units"] * 1000 * 10.0 / 3600)
    assert t.loc[("mechanism", 4000), "hours_left"] == pytest.approx(r["units"] * 3000 * 10 / 3600)
    text = lp.long_status_text(lp.long_status(tmp_path, s_per_model_epoch=10.0))
    assert f"{r['hours_left']:.1f} machine-hours left at the 200-epoch units' rate" in text
    assert "mechanism (3 models) at epoch 0 of 1000 (no resume checkpoint)" in text  # not "at 0"
    bare = lp.long_status(tmp_path)
    assert bare["hours_left"].isna().all() and "no rate measured yet" in lp.long_status_text(bare)


def test_hours_left_start_at_the_resume_checkpoint_and_ignore_a_gpu_rate(short, tmp_path,
                                                                         monkeypatch):
    """A chunk paused past its last segment prices only the epochs after its checkpoint; a
    segment trained on a GPU does not price the CPU's hours (the units' rate does)."""
    monkeypatch.setattr(lu, "LONG_PLAN", (lu.LongChunk("t", UNITS, 6, 4, "test"),))
    assert lt.train_chunk(chunk(3), time.monotonic() + 600, tmp_path, log=lambda m: None,
                          **TINY)  # stops at epoch 3: segment 0-2 published, checkpoint at 3
    r = lp.long_status(tmp_path, s_per_model_epoch=10.0).iloc[0]
    assert (r["epoch"], r["resume_epoch"], r["from"]) == (2, 3, 3)
    assert r["basis"] == "its last segment"
    seg_rate = r["s_per_epoch"]
    assert r["hours_left"] == pytest.approx(3 * seg_rate / 3600)
    real = mf.segments
    monkeypatch.setattr(mf, "segments", lambda *a, **k: [dataclasses.replace(s, manifest={
        **s.manifest, "device": "cuda: NVIDIA H100 80GB HBM3"}) for s in real(*a, **k)])
    r = lp.long_status(tmp_path, s_per_model_epoch=10.0).iloc[0]
    assert r["basis"] == "the 200-epoch units' rate"
    assert r["hours_left"] == pytest.approx(3 * len(UNITS) * 10.0 / 3600)


def test_a_segment_resumed_in_its_middle_is_priced_by_the_epochs_it_timed(short, tmp_path,
                                                                           monkeypatch):
    """A segment finished after a resume was timed only from the resume checkpoint: its rate
    divides by those epochs, not by the whole segment; a segment that does not say which
    epochs it timed (published before ``timed_from`` existed) gives no rate."""
    monkeypatch.setattr(lu, "LONG_PLAN", (lu.LongChunk("t", UNITS, 4, 4, "test"),))
    assert lt.train_chunk(chunk(3), time.monotonic() + 600, tmp_path, log=lambda m: None,
                          **TINY)  # segment 0-2, checkpoint at 3
    assert train(4, tmp_path)  # a new writer, resumed at 3: segment 2-4 timed over 1 epoch
    segs = mf.segments(UNITS[0].path(tmp_path))
    infos = [s.manifest["long"] for s in segs]
    assert [(i["from_epoch"], i["timed_from"]) for i in infos] == [(0, 0), (2, 3)]
    r = lp.long_status(tmp_path, s_per_model_epoch=10.0).iloc[0]
    assert r["basis"] == "its last segment"
    assert r["s_per_epoch"] == pytest.approx(segs[-1].manifest["wall_time_s"] / 1)
    real = mf.segments

    def legacy(*a, **k):
        return [dataclasses.replace(s, manifest={**s.manifest, "long": {
            k: v for k, v in s.manifest["long"].items() if k != "timed_from"}})
            for s in real(*a, **k)]

    monkeypatch.setattr(mf, "segments", legacy)
    assert lp.long_status(tmp_path, s_per_model_epoch=10.0).iloc[0]["basis"] == \
        "the 200-epoch units' rate"


def test_the_campaign_trains_fp32_on_a_gpu():
    """No precision pair has been run on a GPU, and the authors' V100 trained in fp32."""
    from lstpe.campaign import precision as pr

    amp, name, why = pr.decide(torch.device("cuda"))
    assert (amp, name) == (False, "fp32") and "TF32 off" in why


def test_the_mechanism_line_reads_the_long_units(short, tmp_path, monkeypatch):
    """Before a segment the line says nothing is measured; after, its numbers are the
    summary's, at the epochs the page names."""
    from lstpe.chapters import long_mechanism as lm

    plan = (lu.LongChunk("mechanism", UNITS, 4, 4, "test"),
            lu.LongChunk("mechanism", UNITS, 6, 6, "test"))
    monkeypatch.setattr(lu, "LONG_PLAN", plan)
    monkeypatch.setattr(lm, "AT", 2)
    before = lm.long_mechanism(tmp_path)
    assert before.summary.empty and before.reached == 0
    assert lm.long_line(before).endswith("saved epoch 0 of 6: nothing past epoch 2 is "
                                         "measured yet.")
    assert lt.train_chunk(plan[0], time.monotonic() + 600, tmp_path, log=lambda m: None, **TINY)
    got = lm.long_mechanism(tmp_path, every=False)
    s = got.summary
    assert (got.reached, got.goal, list(s["pe"]), list(s["epoch"])) == \
        (4, 6, ["learn-0.2", "learn-2"], [3, 3])  # 3: the last PE snapshot up to epoch 4
    line = lm.long_line(got)
    assert "saved epoch 4 of 6. From epoch 2 to 3, at σ = 0.2 and 2," in line
    assert f"a further {s.moved_after[0]:.1%} and {s.moved_after[1]:.1%}" in line
    assert f"carries {s.init_share[0]:.0%} and {s.init_share[1]:.0%} of it" in line
    full = lm.long_mechanism(tmp_path).over
    assert sorted(full["epoch"].unique()) == [0, 1, 2, 3]  # every snapshot, not just 0, 2, 3
    facts = lm.long_facts(got)
    assert (facts["sigma"], facts["last"], facts["seeds"]) == ("0.2 and 2", 3, "2235")
    assert facts["slower"] == bool((s.moved_after < s.moved_at).all())
    assert "like_paper" not in facts  # one model per sigma: no contrast of their p values
    assert s["cosine"].isna().all()  # no reference run: no Table 3 cosine
    assert facts["dominated"] == lm.listed(s.sigma[s.init_share < 0.5], "g")
    assert lm.listed([0.1, 2.0], "g") == "0.1 and 2" and lm.listed([3]) == "3"
