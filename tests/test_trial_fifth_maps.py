"""The fifth adversarial trial (issue 80), the maps at initialisation: findings 02, 03, 12, 14
and 28. Neither the cache folder nor a stored fragment's witness is read as what it is not.

The independent facts: training computes the maps at initialisation itself (the tiny 2-epoch
run the fragments are imported from holds them whole, ``val_attention_init``), and attention
rows are probability distributions. A cache file is the user's own folder: anything in it may
be stale or damaged, so what a loader gives back must be training's own maps, or a refusal.
Each test failed before its fix (the finding in its docstring).
"""

from __future__ import annotations

import contextlib
import io
import shutil

import pytest
import torch

from lstpe.campaign import status as cs
from lstpe.cli import main
from lstpe.experiments import fragments as fr
from lstpe.experiments import init_maps as im
from lstpe.experiments import units as un
from lstpe.experiments.runs import get_run
from lstpe.nn import model as nn_model
from lstpe.runtime import cache_dir
from lstpe.store import results as res
from lstpe.training.train import train
from tests.test_campaign import TINY, tiny  # noqa: F401 (a fixture)

A, B = "table2/2d-fixed/2235", "table2/learn-0.2/2235"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A results folder holding the fragments of A and B (maps dropped on import), imported
    from one tiny 2-epoch run of the campaign's recipe that keeps them (``bundle``)."""
    root = tmp_path_factory.mktemp("fifth")
    real = un.Unit.config
    with pytest.MonkeyPatch.context() as m:
        m.setattr(un.Unit, "config", lambda self, device="cpu", **o:
                  real(self, device=device, **{**TINY, **o}))
        m.setenv("LSTPE_CACHE", str(root / "cache"))
        cfg = un.find_unit(A).config(pes=["2d-fixed", "learn-0.2"], seeds=[2235])
        train(cfg, run_dir=root / "bundle", progress=False)
        fr.import_run(root / "bundle", root / "results")
    return root


@pytest.fixture
def results(base, tmp_path, monkeypatch):
    """A copy of the module's results folder, an empty cache folder and an empty memo."""
    monkeypatch.setenv("LSTPE_CACHE", str(tmp_path / "cache"))
    im._MEMO.clear()
    shutil.copytree(base / "results", tmp_path / "results")
    yield tmp_path / "results"
    im._MEMO.clear()


def _training_maps(base, key: str) -> torch.Tensor:
    """Training's own maps at initialisation of ``key``'s model (the bundle kept them)."""
    bundle = res.load(base / "bundle")
    m = bundle.artifacts["labels"].index(un.find_unit(key).pe)
    return bundle.artifacts[im.KEY][m:m + 1]


def _cached(results, key: str):
    sha = res.read_manifest(un.find_unit(key).path(results))["files"]["artifacts.pt"]["sha256"]
    return cache_dir() / im.CACHE / f"{sha}.pt"


def _reseal(path, **artifacts) -> None:
    """Rewrite the fragment at ``path`` with artefacts replaced (None: removed), every
    checksum recomputed (a hand edit that verification cannot see)."""
    run = res.load(path)
    man = {k: v for k, v in run.manifest.items() if k not in ("files", res.MANIFEST_HASH_KEY)}
    arts = dict(run.artifacts)
    for k, v in artifacts.items():
        if v is None:
            arts.pop(k, None)
        else:
            arts[k] = v
    shutil.rmtree(path)
    res.save_run(path, run.history, man, arts, run.tables)


def _load(results, key: str = B) -> torch.Tensor:
    im._MEMO.clear()  # a new kernel: only the cache folder remembers
    return fr.load_fragment(un.find_unit(key), results).artifacts[im.KEY]


# --------------------------------------------------------------------------- 02, 03


@pytest.mark.usefixtures("tiny")
@pytest.mark.parametrize("what", ["uniform after the witness", "all NaN",
                                  "NaN after the witness", "one bit of puzzle 50"])
def test_a_cache_file_is_read_only_if_it_is_what_this_code_wrote(base, results, what):
    """Findings 02 and 03: a cache file whose first 4 puzzles match the witness but whose other
    104 hold uniform attention was returned as is; so was an all-NaN file (``NaN > MAP_ATOL``
    is False) and one with NaN after the witness."""
    want = _training_maps(base, B)
    assert torch.equal(_load(results), want)
    path = _cached(results, B)
    assert torch.equal(torch.load(path, weights_only=True), want)  # the cache holds it
    bad = want.clone()
    if what == "uniform after the witness":
        bad[:, im.HEAD:] = 1 / 16
    elif what == "all NaN":
        bad[:] = float("nan")
    elif what == "NaN after the witness":
        bad[:, im.HEAD:] = float("nan")
    else:
        bad.view(torch.int16)[0, 50, 0, 3, 7] ^= 1
    assert not torch.equal(bad, want)
    torch.save(bad, path)  # as the trial wrote it: in place of the file
    got = _load(results)
    assert torch.equal(got, want), what
    assert torch.equal(torch.load(path, weights_only=True), want), what  # written again


# --------------------------------------------------------------------------- 12


def _changed(what: str):
    """A changed initialisation of the package: the PE by a hair, or the other weights (the
    first block's query/key/value weights scaled); both go through the model's own init."""
    real = nn_model.init_weights

    def init(spec, seed, cfg):
        w = real(spec, seed, cfg)
        if what == "pe":
            w["pe.learn"] = w["pe.learn"] + 1e-6
            w["pe.fixed"] = w["pe.fixed"] + 1e-6
        else:
            w["blocks.0.qkv.w"] = w["blocks.0.qkv.w"] * 3
        return w

    return init


@pytest.mark.usefixtures("tiny")
@pytest.mark.parametrize("what", ["pe", "other weights"])
def test_a_changed_initialisation_is_refused_with_a_warm_cache_as_with_a_cold_one(
        base, results, what):
    """Finding 12: with a warm cache, a change to the package's initialisation loaded without
    a word; with a cold cache the same change raised InitMismatch naming the fragment."""
    assert torch.equal(_load(results), _training_maps(base, B))  # the cache is warm
    assert _cached(results, B).is_file()
    where = str(un.find_unit(B).path(results))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(nn_model, "init_weights", _changed(what))
        with pytest.raises(im.InitMismatch, match=where):  # warm
            _load(results)
        with pytest.raises(im.InitMismatch):  # a chapter's merged run too
            im._MEMO.clear()
            get_run("table2", "paper", results_dir=results, require_stored=True,
                    pes=["2d-fixed", "learn-0.2"], seeds=[2235])
        shutil.rmtree(cache_dir())
        with pytest.raises(im.InitMismatch, match=where):  # cold: the same refusal
            _load(results)
    assert torch.equal(_load(results), _training_maps(base, B))  # the code restored: read


# --------------------------------------------------------------------------- 14


@pytest.mark.usefixtures("tiny")
def test_status_refuses_a_unit_whose_witness_the_chapters_refuse(results):
    """Finding 14: a fragment whose witness is 2e-3 off made every Table 2 chapter refuse
    (InitMismatch, named) while ``lstpe campaign status`` exited 0 with the unit done."""
    path = un.find_unit(B).path(results)
    head = res.load(path).artifacts[im.HEAD_KEY]
    _reseal(path, **{im.HEAD_KEY: (head.float() + 2e-3).clamp(0, 1).half()})
    with pytest.raises(im.InitMismatch, match=str(path)):  # what a chapter does
        _load(results)
    table = cs.status(results).set_index("unit")
    assert table.loc[A, "state"] == "done"
    assert table.loc[B, "state"] == "damaged"
    assert str(path) in table.loc[B, "error"] and "initialisation" in table.loc[B, "error"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["campaign", "status", "--results", str(results)])
    assert rc == 1
    assert f"damaged: {B}" in out.getvalue() and str(path) in out.getvalue()


@pytest.mark.usefixtures("tiny")
def test_status_still_counts_sound_units_done_and_exits_0(results):
    """The check of finding 14 refuses only what the chapters refuse."""
    table = cs.status(results).set_index("unit")
    assert (table.loc[[A, B], "state"] == "done").all()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["campaign", "status", "--results", str(results)]) == 0


# --------------------------------------------------------------------------- 28


@pytest.mark.usefixtures("tiny")
@pytest.mark.parametrize("missing", ["pe_init", im.HEAD_KEY])
def test_a_fragment_without_a_witness_names_the_fragment_and_what_is_missing(results,
                                                                             missing):
    """Finding 28: a fragment without ``pe_init`` gave a bare ``KeyError 'pe_init'``; one
    that dropped its maps without keeping their witness left them missing in silence."""
    path = un.find_unit(B).path(results)
    _reseal(path, **{missing: None})
    with pytest.raises(res.DamagedFileError, match=f"(?=.*{path})(?=.*{missing})"):
        _load(results)
    table = cs.status(results).set_index("unit")
    assert table.loc[B, "state"] == "damaged" and missing in table.loc[B, "error"]
