"""A published fragment drops its attention maps at initialisation and gets them back on load.

The independent fact: training computes the maps at initialisation itself, from the model it
then trains (``val_attention_init`` of :func:`lstpe.training.train.train`'s artefacts). What a
fragment gives back after dropping them must be those maps, and a change of the package's
initialisation must be refused, not read.
"""

from __future__ import annotations

import json
import shutil
import threading

import pytest
import torch

from lstpe.campaign import scheduler as cr
from lstpe.experiments import fragments as fr
from lstpe.experiments import init_maps as im
from lstpe.experiments import units as un
from lstpe.experiments.runs import get_run
from lstpe.runtime import cache_dir
from lstpe.store import results as res
from lstpe.store.rundir import RunLock
from lstpe.training.train import train
from tests.test_campaign import tiny  # noqa: F401 (the fixture)

KEYS = ["table2/2d-fixed/2235", "table2/learn-0.2/6312"]


@pytest.fixture(autouse=True)
def _fresh_memo(tmp_path, monkeypatch):
    """Each test recomputes: the memo of maps already checked and the cache folder start empty
    (identical tiny fragments of two tests have the same artefact file)."""
    monkeypatch.setenv("LSTPE_CACHE", str(tmp_path / "cache"))
    im._MEMO.clear()
    yield
    im._MEMO.clear()


def _forget() -> None:
    """Forget every map checked so far: in this process and in the cache folder."""
    im._MEMO.clear()
    shutil.rmtree(cache_dir() / im.CACHE, ignore_errors=True)


@pytest.fixture
def published(tmp_path, tiny):  # noqa: F811
    results = tmp_path / "results"
    cr.run(5, results, device="cpu", units=KEYS, log=lambda m: None)
    return results


def _stored(results, key):
    return torch.load(un.find_unit(key).path(results) / "artifacts.pt", weights_only=False)


def test_published_fragments_drop_the_maps_and_load_gives_trainings_own_back(published,
                                                                              monkeypatch):
    for key in KEYS:
        unit = un.find_unit(key)
        stored = _stored(published, key)
        assert im.KEY not in stored
        assert stored[im.HEAD_KEY].shape == (1, im.HEAD, 1, 16, 16)  # TINY has 1 block
        man = json.loads((unit.path(published) / "manifest.json").read_text())
        assert man["init_maps"]["stored"] is False
        assert man["init_maps"]["max_abs_diff"] == 0.0  # recomputed on the CPU that trained it
        alone = train(unit.config(), progress=False)  # training's own maps at initialisation
        got = fr.load_fragment(unit, published).artifacts[im.KEY]
        assert torch.equal(got, alone.artifacts[im.KEY])
    calls = []
    real = im.initial_maps
    monkeypatch.setattr(im, "initial_maps", lambda cfg, models=None: calls.append(
        len(models or [])) or real(cfg, models))
    _forget()
    merged = get_run("table2", "preview", results_dir=published)  # one batched recomputation
    assert calls == [2]
    assert get_run("table2", "preview", results_dir=published).artifacts[im.KEY].shape[0] == 2
    assert calls == [2]  # asked again in the same process: not recomputed
    for m, key in enumerate(KEYS):
        one = fr.load_fragment(un.find_unit(key), published).artifacts[im.KEY][0]
        assert (merged.artifacts[im.KEY][m].float() - one.float()).abs().max() <= im.MAP_ATOL


@pytest.mark.parametrize("what", ["pe", "maps"])
def test_a_changed_initialisation_is_refused_naming_the_fragment(published, monkeypatch, what):
    real = im.initial_maps

    def changed(cfg, models=None):  # the PE by a hair, or the other weights: another seed
        if what == "pe":
            pe, maps = real(cfg, models)
            return pe + 1e-6, maps
        return real(cfg, [(spec, seed + 1) for spec, seed in models])

    monkeypatch.setattr(im, "initial_maps", changed)
    unit = un.find_unit(KEYS[0])  # 2d-fixed: its PE does not depend on the seed
    with pytest.raises(im.InitMismatch, match=str(unit.path(published))):
        fr.load_fragment(unit, published)
    with pytest.raises(im.InitMismatch):
        get_run("table2", "preview", results_dir=published)


def test_maps_this_code_does_not_recompute_stay_stored(tmp_path, tiny, monkeypatch):  # noqa: F811
    unit = un.find_unit(KEYS[0])
    run = train(unit.config(), run_dir=tmp_path / "run", progress=False)
    before = res.sha256_file(run.path / "artifacts.pt")
    real = im.initial_maps
    monkeypatch.setattr(im, "initial_maps", lambda cfg, models=None: (
        real(cfg, models)[0], (real(cfg, models)[1].float() + 2 * im.MAP_ATOL).half()))
    assert im.drop_maps(run.path) is None
    assert res.sha256_file(run.path / "artifacts.pt") == before
    monkeypatch.setattr(im, "initial_maps", real)
    assert im.drop_maps(run.path) == 0.0
    assert im.drop_maps(run.path) is None  # nothing left to drop
    back = res.load(run.path)
    im.restore([back])
    assert torch.equal(back.artifacts[im.KEY], run.artifacts[im.KEY])


def test_every_stored_fragment_holds_its_maps_or_says_it_recomputes_them():
    for u in fr.done_units():
        rec = res.read_manifest(u.path(), verify=False).get("init_maps")
        if rec is None:  # Table 4's and Tables 5-6's runs store no attention maps at all
            config = res.read_manifest(u.path(), verify=False)["config"]
            assert (im.KEY in _stored(None, u.key)) == config["save_attention"], u.key
        else:
            assert rec["stored"] is False and 0.0 <= rec["max_abs_diff"] <= im.MAP_ATOL, u.key


def test_fragments_stored_before_are_compacted_in_place_and_read_the_same(tmp_path, tiny,  # noqa: F811
                                                                          monkeypatch):
    results = tmp_path / "results"
    with monkeypatch.context() as m:  # published as before this change: maps kept
        m.setattr(im, "drop_maps", lambda run_dir: None)
        cr.run(5, results, device="cpu", units=KEYS, log=lambda msg: None)
    unit = un.find_unit(KEYS[1])
    before = fr.load_fragment(unit, results)
    assert im.KEY in _stored(results, KEYS[1])
    held, release = threading.Event(), threading.Event()

    def claim():  # a campaign run's claim on the unit (another thread is refused like it)
        with RunLock(un.campaign_work(results) / "claims" / unit.slug):
            held.set()
            release.wait(30)

    t = threading.Thread(target=claim)
    t.start()
    try:
        assert held.wait(30)
        with pytest.raises(res.RunLockedError):
            fr.compact_stored(unit, results)
    finally:
        release.set()
        t.join()
    assert fr.compact_stored(unit, results) == 0.0
    assert im.KEY not in _stored(results, KEYS[1])
    after = fr.load_fragment(unit, results)
    for key in (im.KEY, "val_attention", "pe_final", "val_logits"):
        assert torch.equal(after.artifacts[key], before.artifacts[key])
    assert after.history.equals(before.history)
    assert fr.compact_stored(unit, results) is None  # nothing left to drop
    assert sorted(p.name for p in (un.campaign_work(results) / "staging").iterdir()) == []


def test_a_stored_whole_run_gets_its_maps_back_too():
    """The 12-epoch CPU-scale Table 2 (15 models) dropped its maps like a fragment."""
    run = get_run("table2", "cpu", require_stored=True, epochs=12)
    assert run.config["epochs"] == 12 and run.manifest["init_maps"]["stored"] is False
    maps, head = run.artifacts[im.KEY], run.artifacts[im.HEAD_KEY]
    assert maps.shape == (15, 108, 4, 16, 16) and maps.dtype == torch.float16
    assert (maps[:, :im.HEAD].float() - head.float()).abs().max() <= im.MAP_ATOL
    rows = maps.float().sum(-1)  # attention rows are distributions
    assert (rows - 1).abs().max() < 1e-2


def test_a_second_kernel_reads_the_checked_maps_from_the_cache_and_never_a_wrong_file(
        published, tmp_path, monkeypatch):
    unit = un.find_unit(KEYS[1])
    first = fr.load_fragment(unit, published).artifacts[im.KEY]
    sha = res.read_manifest(unit.path(published))["files"]["artifacts.pt"]["sha256"]
    cached = tmp_path / "cache" / im.CACHE / f"{sha}.pt"
    assert torch.equal(torch.load(cached, weights_only=True), first)
    assert cached.stat().st_size < 2 * first.numel() * 2  # its own maps, not the whole batch's
    calls = []
    real = im.initial_maps
    monkeypatch.setattr(im, "initial_maps", lambda cfg, models=None: calls.append(1) or real(
        cfg, models))
    im._MEMO.clear()  # a new kernel: the maps come from the cache, not from a model
    assert torch.equal(fr.load_fragment(unit, published).artifacts[im.KEY], first)
    assert calls == []
    wrong = {"other maps": (first.float() + 2 * im.MAP_ATOL).half(),  # fails the witness
             "other shape": first[:, :-1].clone(), "float32": first.float(),
             "not a tensor": {"maps": first}}
    for what, content in [*wrong.items(), ("damaged", None)]:
        if content is None:
            cached.write_bytes(b"not a torch file")
        else:
            torch.save(content, cached)
        im._MEMO.clear()
        got = fr.load_fragment(unit, published).artifacts[im.KEY]
        assert torch.equal(got, first), what
        assert len(calls) == 1, what  # recomputed ...
        assert torch.equal(torch.load(cached, weights_only=True), first), what  # ... rewritten
        calls.clear()
    monkeypatch.setenv("LSTPE_CACHE", str(cached))  # a file: no cache, the maps all the same
    im._MEMO.clear()
    assert torch.equal(fr.load_fragment(unit, published).artifacts[im.KEY], first)
    assert calls == [1]


def test_a_page_that_reads_no_maps_at_init_loads_without_running_a_model(monkeypatch):
    """``get_run(..., rebuild_init_maps=False)`` (chapter 6) reads the stored fragments as they
    are: no model is built, and the run holds no maps at initialisation; by default the same
    fragments are restored (their maps rebuilt and checked)."""
    calls = []
    monkeypatch.setattr(im, "restore", lambda runs: calls.append(len(runs)))
    kw = dict(scale="paper", seeds=[2235], sigmas=[0.2, 2.0])
    lean = get_run("table2", rebuild_init_maps=False, **kw)
    assert calls == [] and im.KEY not in lean.artifacts
    assert {"learn-0.2", "learn-2"} <= set(lean.artifacts["labels"])
    get_run("table2", **kw)
    assert calls == [len(lean.artifacts["labels"])]
