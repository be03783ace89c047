"""The campaign: its plan, fragments (import, train, publish, verify, merge), claims, resume.

Training tests use the real code path with the recipe shrunk (``Unit.config`` patched to a
16-wide, 1-block model on 64 puzzles for 2 epochs); the recipe itself is checked against the
paper's numbers separately.
"""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest
import torch

from lstpe import runtime
from lstpe.campaign import items as cp
from lstpe.campaign import scheduler as cr
from lstpe.campaign import status as cs
from lstpe.experiments import fragments as fr
from lstpe.experiments import units as un
from lstpe.experiments.runs import get_run
from lstpe.nn.architecture import ModelConfig
from lstpe.runtime import BF16_FLAGS
from lstpe.store import results as res
from lstpe.store.rundir import RunLock
from lstpe.training.train import train

TINY = dict(model=ModelConfig(d_model=16, n_layers=1), n_train=64, epochs=2, eval_train_max=64,
            noise_levels=[0.05])


@pytest.fixture
def tiny(monkeypatch):
    """Every unit's recipe shrunk to TINY (everything else of the recipe kept)."""
    real = un.Unit.config

    def config(self, device="cpu", **overrides):
        return real(self, device=device, **{**TINY, **overrides})

    monkeypatch.setattr(un.Unit, "config", config)


# --------------------------------------------------------------------------- the plan


def test_plan_items_1_and_2_are_the_issue_units_in_order():
    seeds = [2235, 6312, 6068]
    core = ["2d-fixed", "learn-0.1", "learn-0.2", "learn-0.5", "learn-1", "learn-1.5",
            "learn-2"]
    other = ["1d-fixed", "random", "relative", "rope", "nope", "c-nope"]
    units = un.plan()
    keys = [u.key for u in units]
    assert len(keys) == len(set(keys))
    first = [u.key for u in units[:39]]
    assert first == [f"table2/{p}/{s}" for s in seeds for p in core] + \
        [f"table1/{p}/{s}" for s in seeds for p in other]
    rank = [list(cp.ITEMS).index(u.item) for u in units]  # the plan runs in ITEMS's order
    assert rank == sorted(rank)
    assert {u.seed for u in units if u.item == 3} == {9742, 8880}
    adam = [u.key for u in units if u.item == 11]  # Table 4's Adam column, right after 3
    assert adam == [f"table4/adam/learn-{s}/{sd}" for sd in seeds + [9742, 8880]
                    for s in ("0.01", "0.05")]
    assert units[65].item == 11 and units[75].item == 7
    later = [u.key for u in units if u.item == 12]  # item 7's sigmas at seeds 4-5, right after
    assert units[117].item == 12 and later == [
        k.rsplit("/", 1)[0] + f"/{sd}" for sd in (9742, 8880)
        for k in [u.key for u in units if u.item == 7][:14]]


def test_unit_recipe_is_the_authors():
    cfg = un.find_unit("table2/learn-0.2/2235").config()
    m = cfg.model
    assert (m.d_model, m.n_layers, m.n_heads, m.mlp_ratio) == (160, 4, 1, 4)
    assert (cfg.batch_size, cfg.lr, cfg.optimizer, cfg.weight_decay) == (128, 1e-4, "adam", 0.0)
    assert (cfg.split, cfg.data, cfg.variant, cfg.epochs, cfg.amp) == \
        ("code", "paper", "paper", 200, False)
    assert cfg.pes == ["learn-0.2"] and cfg.seeds == [2235]
    sgd = un.find_unit("table4/sgd/learn-0.01/2235").config()
    assert (sgd.optimizer, sgd.lr) == ("sgd", 1e-3)


def test_find_unit_names_a_bad_key():
    with pytest.raises(ValueError, match="tabel2"):
        un.find_unit("tabel2/learn-0.2/2235")
    with pytest.raises(ValueError, match="run/pe/seed"):
        un.find_unit("table2/learn-0.2")


# --------------------------------------------------------------------------- import


def _bundle(tmp_path, pes=("2d-fixed", "learn-0.2"), **over):
    cfg = un.find_unit("table2/2d-fixed/2235").config(pes=list(pes), seeds=[2235], **over)
    return train(cfg, run_dir=tmp_path / "bundle", progress=False)


def test_import_splits_a_run_into_fragments_exactly(tmp_path, tiny):
    src = _bundle(tmp_path)
    results = tmp_path / "results"
    units = fr.import_run(src.path, results)
    assert [u.key for u in units] == ["table2/2d-fixed/2235", "table2/learn-0.2/2235"]
    for m, u in enumerate(units):
        frag = fr.load_fragment(u, results)
        mine = src.history[src.history["model"] == m].drop(columns="model")
        pd.testing.assert_frame_equal(frag.history.drop(columns="model").reset_index(drop=True),
                                      mine.reset_index(drop=True), check_dtype=False)
        assert torch.equal(frag.artifacts["pe_final"][0], src.artifacts["pe_final"][m])
        assert frag.artifacts["labels"] == [u.pe]
        noise = src.tables["noise"]
        assert len(frag.tables["noise"]) == int((noise["model"] == m).sum())
        assert frag.manifest["campaign"]["imported_from"]["model"] == m
    with pytest.raises(FileExistsError, match="never overwritten"):
        fr.import_run(src.path, results)
    table = cs.status(results)
    assert not table.loc[table["state"] == "done", "measured"].any()  # imported, not measured
    assert "median of the 2 stored units" in cs.status_text(table)


def test_import_refuses_another_recipe_naming_the_key(tmp_path, tiny):
    src = _bundle(tmp_path, lr=1e-3)
    with pytest.raises(un.RecipeMismatch, match="lr"):
        fr.import_run(src.path, tmp_path / "results")
    assert not (tmp_path / "results" / "paper" / "table2").exists()


# --------------------------------------------------------------------------- run


def test_run_trains_publishes_and_get_run_merges(tmp_path, tiny):
    results = tmp_path / "results"
    keys = ["table2/2d-fixed/2235", "table2/learn-0.2/6312", "table1/rope/2235"]
    done = cr.run(5, results, device="cpu", units=keys, log=lambda m: None)
    assert [u.key for u in done] == keys
    for k in keys:
        frag = fr.load_fragment(un.find_unit(k), results)
        assert frag.manifest["campaign"]["precision"] == "fp32"
        assert frag.manifest["campaign"]["chunk"] == keys
        assert sorted(frag.history["epoch"].unique()) == [0, 1, 2]
    # the same unit trained alone gives the same numbers: batching is exact
    alone = train(un.find_unit(keys[1]).config(), progress=False)
    frag = fr.load_fragment(un.find_unit(keys[1]), results)
    a = alone.final("val")["accuracy"].to_numpy()
    assert a == pytest.approx(frag.final("val")["accuracy"].to_numpy(), abs=1e-6)
    # table1 borrows table2's 2d-fixed (same recipe); table2's merge has two PEs
    t2 = get_run("table2", "preview", results_dir=results)
    assert t2.manifest["seeds_per_pe"] == {"2d-fixed": [2235], "learn-0.2": [6312]}
    assert sorted(t2.history["model"].unique()) == [0, 1]
    assert t2.artifacts["pe_final"].shape[0] == 2
    t1 = get_run("table1", "preview", results_dir=results)
    assert t1.manifest["seeds_per_pe"] == {"2d-fixed": [2235], "learn-0.2": [6312],
                                           "rope": [2235]}
    only = get_run("table2", "preview", results_dir=results, seeds=[6312])
    assert only.manifest["seeds_per_pe"] == {"learn-0.2": [6312]}
    table = cs.status(results)
    assert set(table.loc[table["state"] == "done", "unit"]) == set(keys)
    assert "item 1: 2/21 units done" in cs.status_text(table)
    assert table.loc[table["state"] == "done", "measured"].all()
    assert "median of the 3 units the campaign trained" in cs.status_text(table)
    assert cr.run(5, results, device="cpu", units=keys, log=lambda m: None) == []


def test_edited_fragment_is_refused_naming_file_or_key(tmp_path, tiny):
    results = tmp_path / "results"
    key = "table2/learn-0.5/2235"
    cr.run(5, results, device="cpu", units=[key], log=lambda m: None)
    unit = un.find_unit(key)
    path = unit.path(results)
    man = json.loads((path / "manifest.json").read_text())
    man["config"]["lr"] = 0.01
    (path / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(res.DamagedFileError, match="its own checksum"):
        get_run("table2", "preview", results_dir=results)
    # a consistent fragment of another recipe (resealed) is refused naming the key
    (path / "manifest.json").write_text(json.dumps(res.seal_manifest(man)))
    with pytest.raises(un.RecipeMismatch, match="lr"):
        get_run("table2", "preview", results_dir=results)
    man["config"]["lr"] = 1e-4
    (path / "manifest.json").write_text(json.dumps(res.seal_manifest(man)))
    hist = path / "history.csv"
    hist.write_text(hist.read_text().replace("learn-0.5", "learn-0.6", 1))
    with pytest.raises(res.DamagedFileError, match="history.csv"):
        fr.load_fragment(unit, results)
    assert cs.status(results).set_index("unit").loc[key, "state"] == "damaged"


def test_claimed_unit_is_not_trained_twice(tmp_path, tiny):
    results = tmp_path / "results"
    key = "table2/learn-1/2235"
    unit = un.find_unit(key)
    with RunLock(un.campaign_work(results) / "claims" / unit.slug):
        assert cs.status(results).set_index("unit").loc[key, "state"] == "claimed"
        assert key not in [u.key for u in cr.free_units(results)]
        assert cr.run(5, results, device="cpu", units=[key], log=lambda m: None) == []
    assert not unit.path(results).exists()


def test_paused_chunk_resumes_to_the_same_numbers(tmp_path, tiny):
    key = "table2/learn-0.1/2235"
    unit = un.find_unit(key)
    ref = tmp_path / "ref"
    cr.run(5, ref, device="cpu", units=[key], log=lambda m: None)
    results = tmp_path / "results"
    spec = {"units": [key], "probe": {}, "estimate_s": 600.0, "machine": cr.machine(),
            "precision": "fp32", "precision_reason": "test"}
    # a deadline already passed: the chunk pauses after its first epoch, with a checkpoint
    assert cr._train_chunk([unit], results, torch.device("cpu"), time.monotonic(), spec,
                           lambda m: None, {}) == []
    assert not unit.path(results).exists()
    table = cs.status(results)
    assert table.set_index("unit").loc[key, ["state", "at_epoch", "epochs"]].tolist() == [
        "paused", 1, TINY["epochs"]]
    assert f"paused: {key} (at epoch 1 of 2;" in cs.status_text(table)
    lines: list[str] = []
    done = cr.run(5, results, device="cpu", units=[key], log=lines.append)
    assert [u.key for u in done] == [key]
    # the estimate left: the spec's 600 s for the chunk times the epochs left (1 of 2)
    assert f"resuming the paused chunk {cr._chunk_dir(results, [key]).name} at epoch 1 of 2, " \
        f"about 5.0 min left: {key}" in lines
    # the rate it logs is over both processes' training time (the manifest's wall time)
    wall = fr.load_fragment(unit, results).manifest["wall_time_s"]
    line = next(x for x in lines if x.startswith("published"))
    assert f"trained in {wall / 60:.1f} min" in line
    assert f"{TINY['epochs'] / wall:.3f} model-epochs/s" in line
    a = fr.load_fragment(unit, results).history
    b = fr.load_fragment(unit, ref).history
    pd.testing.assert_frame_equal(a, b)
    assert fr.load_fragment(unit, results).manifest["resumed"]
    # both processes are named, the one that paused it too (no "?")
    commit = res.git_commit()[:7]
    assert fr.stored_units(results).set_index("unit").loc[key, "commit"] == commit
    assert len(fr.load_fragment(unit, results).manifest["segments"]) == 2


def _chunks_started(monkeypatch, results, minutes, **kw) -> tuple[list[list[str]], list[str]]:
    """The chunks ``cr.run`` starts under a probe of 30 s per model-epoch (tiny recipe: 2
    epochs, so a unit is 60 s + the margin), and its log; nothing is trained."""
    started: list[list[str]] = []
    monkeypatch.setattr(cr, "probe", lambda head, dev, **o: {
        "models": len(head), "step_s": 1.0, "eval_s": 1.0, "s_per_model_epoch": 30.0,
        "n_train": 64})
    monkeypatch.setattr(cr, "floor_of", lambda *a, **k: {})

    def train_chunk(chunk, *args):
        started.append([u.key for u in chunk])
        return []  # as if it paused at the deadline

    monkeypatch.setattr(cr, "_train_chunk", train_chunk)
    lines: list[str] = []
    cr.run(minutes, results, device="cpu", log=lines.append, **kw)
    return started, lines


def test_allow_partial_fills_the_budget_with_a_full_chunk(tmp_path, tiny, monkeypatch):
    first3 = [u.key for u in un.plan()[:3]]
    # 4.2 min = 252 s: 2 units (120 s + 120 s margin) finish, 3 do not (300 s); with
    # --allow-partial all 3 start, since 1 epoch of each (90 s + margin) fits
    monkeypatch.setattr(cr, "MIN_PARTIAL_EPOCHS", 1)
    started, _ = _chunks_started(monkeypatch, tmp_path, 4.2, max_units=3)
    assert started == [first3[:2]]
    started, lines = _chunks_started(monkeypatch, tmp_path, 4.2, max_units=3,
                                     allow_partial=True)
    assert started == [first3]
    assert any("2 of 3 unit(s) would finish" in line for line in lines)
    # 2.5 min = 150 s: the 2 epochs of 3 units (the recipe has fewer than 5) do not fit
    monkeypatch.setattr(cr, "MIN_PARTIAL_EPOCHS", 5)
    started, lines = _chunks_started(monkeypatch, tmp_path, 2.5, max_units=3,
                                     allow_partial=True)
    assert started == [] and "too little time left" in lines[-1]
    started, lines = _chunks_started(monkeypatch, tmp_path, 2.5, max_units=3)
    assert started == [] and "no further unit fits" in lines[-1]


@pytest.mark.parametrize("per_extra, n", [(0.5, 2), (-1 / 3, 4)])
def test_a_chunk_larger_than_the_probe_is_probed_again_at_its_size(tmp_path, tiny, monkeypatch,
                                                                    per_extra, n):
    """A chunk of more models than the first probe held is probed at its own size and sized
    by that rate: where a model costs more beside three others (as on the project's 2-core
    CPUs), only 2 finish at its rate (2 x 2 epochs x 60 s + 120 s <= 390 s < 3 x 120 s +
    120 s); where it costs less, all 4 (never more than the first probe fitted)."""
    probed: list[int] = []

    def rate(models: int) -> float:
        return 30.0 * (1 + per_extra * (models - 2))

    def probe(head, dev, **o):
        probed.append(len(head))
        return {"models": len(head), "step_s": 1.0, "eval_s": 1.0, "n_train": 64,
                "s_per_model_epoch": rate(len(head))}

    monkeypatch.setattr(cr, "probe", probe)
    monkeypatch.setattr(cr, "floor_of", lambda *a, **k: {})
    started: list[list[str]] = []
    monkeypatch.setattr(cr, "_train_chunk",
                        lambda chunk, *a: started.append([u.key for u in chunk]) or [])
    lines: list[str] = []
    # 6.5 min = 390 s: at 30 s per model-epoch (2 epochs) 4 units fit (240 s + 120 s)
    cr.run(6.5, tmp_path, device="cpu", max_units=4, log=lines.append)
    assert probed[-2:] == [2, 4]  # (before them: one SGD leg of the long plan, 1 model)
    assert started == [[u.key for u in un.plan()[:n]]]
    assert f"probe: 4 model(s) -> {rate(4)} s per model-epoch (2: 30.0)" in lines
    assert f"probe: 4 model(s), 1.0 s/step, eval 1.0 s -> {rate(4)} s per model-epoch" in \
        "".join(lines)  # the chunk is priced (and its manifest records) the probe at 4


def test_publish_never_overwrites(tmp_path, tiny):
    results = tmp_path / "results"
    key = "table2/learn-1.5/2235"
    cr.run(5, results, device="cpu", units=[key], log=lambda m: None)
    unit = un.find_unit(key)
    before = (unit.path(results) / "manifest.json").read_bytes()
    stage = tmp_path / "stage"
    cfg = unit.config()
    train(cfg, run_dir=stage, progress=False)
    with pytest.raises(FileExistsError, match="never overwritten"):
        fr.publish(stage, unit, results)
    assert (unit.path(results) / "manifest.json").read_bytes() == before
    assert (stage / "manifest.json").exists()


def test_run_rejects_bad_budget(tmp_path):
    with pytest.raises(ValueError, match="minutes"):
        cr.run(0, tmp_path)
    with pytest.raises(ValueError, match="max-units"):
        cr.run(1, tmp_path, max_units=0)


def test_precision_is_fp32_and_says_why():
    prec, why = cr.choose_precision(torch.device("cpu"))
    assert prec == "fp32"
    flags = runtime.cpu_flags()
    assert ("no bf16 instructions" in why) == (not any(f in flags for f in BF16_FLAGS))


# --------------------------------------------------------------------------- progress


def _manifest(results, key: str, **man) -> None:
    """A synthetic fragment manifest (no files: read with ``verify=False``)."""
    path = un.find_unit(key).path(results)
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"config": {"epochs": 200}, **man}))


def test_progress_equals_hand_sums_over_manifests(tmp_path):
    units = un.plan()
    item7 = next(u.key for u in units if u.item == 7)
    measured = {"probe": {"s_per_model_epoch": 6.0}, "setting": {"threads": 2}}
    _manifest(tmp_path, "table2/2d-fixed/2235", device="cpu: x (2 threads)",
              campaign={"unit_wall_s": 1200.0, **measured})
    _manifest(tmp_path, "table2/learn-0.1/2235", device="cpu: x (2 threads)",
              campaign={"unit_wall_s": 1800.0, **measured})
    _manifest(tmp_path, "table1/rope/2235", device="cpu: x86_64 (4 threads)",
              campaign={"unit_wall_s": 3600.0, "imported_from": {"model": 0}})
    _manifest(tmp_path, item7, device="cuda", wall_time_s=7200.0, n_models=2)  # 1 thread
    table = cs.status(tmp_path, verify=False)
    assert list(table.loc[table["state"] == "done", "threads"]) == [2, 2, 4, 1]
    p = cs.progress(table)
    assert list(p.index) == ["1", "2", "3", "7", "9", "11", "12", "1-2", "all"]
    rate = (1200 + 1800) / 2  # the median of the units the campaign trained (measured)
    hand = {"1": (21, 2, 1200 + 1800, 2 * 1200 + 2 * 1800),
            "2": (18, 1, 3600, 4 * 3600), "7": (42, 1, 3600, 3600),
            "1-2": (39, 3, 6600, 6000 + 14400), "all": (len(units), 4, 10200, 24000)}
    for item, (n, done, wall, cpu) in hand.items():
        row = p.loc[item]
        assert (row["units"], row["done"], row["left"]) == (n, done, n - done)
        assert row["hours spent"] == pytest.approx(round(wall / 3600, 2))
        assert row["CPU hours spent"] == pytest.approx(round(cpu / 3600, 2))
        assert row["hours left"] == pytest.approx(round((n - done) * rate / 3600, 2))
    assert p.loc["3", "done"] == 0 and p.loc["3", "hours spent"] == 0
    s = cs.progress_text(table)
    assert s.startswith(f"3 of the 39 units of Tables 1-2 at 3 seeds done, 4 of the plan's "
                        f"{len(units)}; 2.83 hours of the machine spent (6.67 CPU core-hours)")
    assert "25.0 min per unit (median of the 2 units the campaign trained; a paused" in s
    assert f"{36 * rate / 3600:.1f} hours left for Tables 1-2" in s
    # a unit paused at epoch 50 of 200 counts the three quarters it has left
    i = table.index[(table["item"] == 2) & (table["state"] == "todo")][0]
    table.loc[i, ["state", "at_epoch", "epochs"]] = ["paused", 50, 200]
    p = cs.progress(table)
    assert p.loc["2", "hours left"] == pytest.approx(round(16.75 * rate / 3600, 2))
    assert p.loc["1-2", "hours left"] == pytest.approx(round(35.75 * rate / 3600, 2))
    assert f"item 2: 17 units left = {16.75 * rate / 3600:.1f} machine-hours" \
        in cs.status_text(table)


def test_progress_before_any_unit(tmp_path):
    table = cs.status(tmp_path, verify=False)
    p = cs.progress(table)
    assert p.loc["all", "done"] == 0 and p.loc["1-2", "units"] == 39
    assert "no rate" in cs.progress_text(table)
    # chapter 11 displays this table: pandas cuts longer cells to "..." by default
    assert p["what"].str.len().max() <= pd.get_option("display.max_colwidth")
    assert p["what"].nunique() == len(p)


def test_stored_units_of_an_empty_folder_keep_their_columns(tmp_path):
    """Chapter 11 on a copy without results/ reads the columns of no units (it failed with
    KeyError 'cpu flags')."""
    from lstpe.campaign import precision

    t = fr.stored_units(tmp_path)
    assert t.empty and list(t.columns) == list(fr.STORED_COLUMNS)
    assert precision.no_pair_line(t["cpu flags"]).startswith("No precision pair is stored")
    assert t.groupby(["cpu flags", "precision"], dropna=False).size().empty
