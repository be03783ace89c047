"""The fourth adversarial trial (issue 66), findings 7-17: no stored unit is read as what it is
not, no untrusted pack writes more than its manifests list, every refusal names its file.

Each test failed before its fix (finding numbers in the docstrings). Fragments are tiny units
of the campaign's recipe (``tests.test_campaign.TINY``: 2 epochs), trained once per module.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
import socket
import subprocess
import tarfile
import time

import pandas as pd
import pytest
import torch

from lstpe.campaign import items as cp
from lstpe.campaign import long_train as lt
from lstpe.campaign import resume as rs
from lstpe.campaign import scheduler as cr
from lstpe.campaign import status as cs
from lstpe.experiments import fragments as fr
from lstpe.experiments import long_units as lu
from lstpe.experiments import units as un
from lstpe.experiments.runs import get_run
from lstpe.nn.architecture import ModelConfig
from lstpe.store import pack
from lstpe.store import results as res
from lstpe.store.rundir import _boot_id
from lstpe.training.train import train
from tests.test_campaign import TINY, tiny  # noqa: F401 (a fixture)
from tests.test_pack import cli, make_run, write_pack

A, B = "table2/2d-fixed/2235", "table2/learn-0.2/2235"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A results folder holding the fragments of A and B, imported from one tiny 2-epoch run
    of the campaign's recipe; and that run (``bundle``)."""
    root = tmp_path_factory.mktemp("fourth")
    real = un.Unit.config
    with pytest.MonkeyPatch.context() as m:
        m.setattr(un.Unit, "config", lambda self, device="cpu", **o:
                  real(self, device=device, **{**TINY, **o}))
        cfg = un.find_unit(A).config(pes=["2d-fixed", "learn-0.2"], seeds=[2235])
        train(cfg, run_dir=root / "bundle", progress=False)
        fr.import_run(root / "bundle", root / "results")
    return root


@pytest.fixture
def results(base, tmp_path):
    """A copy of the module's results folder (two stored units, A and B)."""
    shutil.copytree(base / "results", tmp_path / "results")
    return tmp_path / "results"


def _reseal(path, history=None, **manifest) -> None:
    """Rewrite the run at ``path`` with ``history`` and manifest entries replaced, every
    checksum recomputed (a hand edit that verification cannot see)."""
    run = res.load(path)
    man = {k: v for k, v in run.manifest.items() if k not in ("files", res.MANIFEST_HASH_KEY)}
    man.update(manifest)
    shutil.rmtree(path)
    res.save_run(path, run.history if history is None else history, man, run.artifacts,
                 run.tables)


# --------------------------------------------------------------------------- 7, 8, 13


@pytest.mark.usefixtures("tiny")
def test_a_merged_run_names_the_precision_of_every_fragment(results):
    """Finding 7: one bf16 unit among fp32 ones was described as "fp32" (the first
    fragment's config only)."""
    path = un.find_unit(B).path(results)
    camp = res.load(path).manifest["campaign"]
    _reseal(path, config={**res.load(path).config, "amp": True},
            campaign={**camp, "precision": "bf16"})
    run = get_run("table2", "paper", results_dir=results, require_stored=True,
                  pes=["2d-fixed", "learn-0.2"], seeds=[2235])
    line = run.describe().splitlines()[0]
    assert "fp32 (1), bf16 (1)" in line or "bf16 (1), fp32 (1)" in line, line


def _cut(results, key: str, upto: int):
    path = un.find_unit(key).path(results)
    h = res.load(path).history
    _reseal(path, h[h["epoch"] <= upto].reset_index(drop=True))
    return path


@pytest.mark.usefixtures("tiny")
def test_a_unit_cut_short_of_its_epochs_is_refused_and_named(results):
    """Finding 8: a unit whose history stops at epoch 1 of its config's 2 (resealed, the
    checksums pass) was read as done, its epoch-1 accuracy labelled epoch 2."""
    path = _cut(results, B, 1)
    table = cs.status(results).set_index("unit")
    assert table.loc[B, "state"] == "damaged" and table.loc[A, "state"] == "done"
    with pytest.raises(res.DamagedFileError, match=str(path)) as e:
        get_run("table2", "paper", results_dir=results, require_stored=True,
                pes=["2d-fixed", "learn-0.2"], seeds=[2235])
    assert "ends at epoch 1, where its config says 2 epochs" in str(e.value)
    # status keeps the same message whole: what is wrong and what to do
    assert table.loc[B, "error"] == " ".join(str(e.value).split())
    assert "delete the folder to retrain the unit" in table.loc[B, "error"]


def test_a_long_refusal_keeps_what_is_wrong_and_what_to_do():
    """A refusal longer than the status line's limit keeps its head and its tail."""
    msg = "unit X is damaged: " + "y" * 3000 + " restore it, or delete the folder"
    short = cs.brief(msg)
    assert len(short) <= 1000 and short.startswith("unit X is damaged:")
    assert short.endswith("restore it, or delete the folder")
    assert cs.brief("a  short\nmessage") == "a short message"


@pytest.mark.usefixtures("tiny")
def test_a_unit_with_a_nan_accuracy_is_named_with_its_path(results):
    """Finding 13: a unit whose final accuracy is NaN (loss finite, not flagged diverged)
    stopped the sigma claim with "final has NaN in 'accuracy'", naming no unit."""
    path = un.find_unit(B).path(results)
    h = res.load(path).history.copy()
    last = h["epoch"] == h["epoch"].max()
    h.loc[last, "accuracy"] = math.nan
    _reseal(path, h)
    with pytest.raises(res.DamagedFileError, match=f"(?=.*{path})(?=.*{B})(?=.*accuracy nan)"):
        get_run("table2", "paper", results_dir=results, require_stored=True,
                pes=["2d-fixed", "learn-0.2"], seeds=[2235])
    assert cs.status(results).set_index("unit").loc[B, "state"] == "damaged"


# --------------------------------------------------------------------------- 11, 12, 16


@pytest.mark.usefixtures("tiny")
def test_import_refuses_a_diverged_history_whatever_the_manifest_says(base, tmp_path):
    """Finding 11: a run whose history has a NaN loss was imported as a done unit when its
    manifest said ``diverged_models: []``."""
    src = tmp_path / "bundle"
    shutil.copytree(base / "bundle", src)
    h = res.load(src).history.copy()
    bad = (h["model"] == 1) & (h["epoch"] == h["epoch"].max())
    h.loc[bad, "loss"] = math.nan
    if "diverged" in h:
        h["diverged"] = False
    _reseal(src, h, diverged_models=[])
    with pytest.raises(ValueError, match="(?=.*model 1)(?=.*not imported)"):
        fr.import_run(src, tmp_path / "results")
    assert not (tmp_path / "results" / "paper" / "table2").exists()


@pytest.mark.usefixtures("tiny")
@pytest.mark.parametrize("wall, bad", [(math.nan, "B"), (-5.0, "B"), (math.nan, "B measured"),
                                       (math.nan, "A and B")])
def test_a_unit_with_an_unusable_wall_time_is_named_and_left_out_of_the_rate(results, wall,
                                                                             bad):
    """Finding 12: ``unit_wall_s: NaN`` printed "nan min per unit" and 0.0 hours left,
    naming no unit. ``bad``: whose wall time is unusable: B beside A's good one; B, the
    only unit the campaign trained itself (its rate was B's alone); every stored unit (no
    rate at all: said so, never "nan min" or 0.0 hours left)."""
    keys = [A, B] if bad == "A and B" else [B]
    for key in keys:
        man = res.load(un.find_unit(key).path(results)).manifest
        probe = {"probe": {"s_per_model_epoch": 1.0}} if bad == "B measured" else {}
        _reseal(un.find_unit(key).path(results),
                campaign={**man["campaign"], "unit_wall_s": wall, **probe})
    table = cs.status(results)
    texts = cs.status_text(table), cs.progress_text(table)
    for text in texts:
        assert "nan min" not in text and "nan machine" not in text and "nan hours" not in text
    for key in keys:
        assert f"wall time unusable: {key}" in texts[0]
        assert str(un.find_unit(key).path(results) / "manifest.json") in texts[0]
    if bad == "A and B":
        assert math.isnan(cs.progress(table).loc["all", "hours left"])  # not 0.0
        assert all("no rate to estimate the hours left" in t for t in texts), texts
        assert "machine-hours" not in texts[0]
        return
    good = fr.unit_seconds(res.load(un.find_unit(A).path(results)).manifest)
    assert cs.unit_rate(table)[0] == pytest.approx(good)
    assert f"{good / 60:.1f} min per unit" in texts[0]
    left = cs.progress(table).loc["all"]
    assert left["hours left"] == pytest.approx(left["left"] * good / 3600, abs=0.01)


@pytest.mark.usefixtures("tiny")
def test_status_names_a_manifest_with_a_5000_digit_integer_and_goes_on(results, capsys):
    """Finding 16: a fragment manifest with a 5000-digit integer: ``campaign status`` exited 2
    with an error naming no file, and dropped the long-units section."""
    from lstpe.cli import main

    man = un.find_unit(B).path(results) / "manifest.json"
    text = man.read_text()
    man.write_text(text.replace('"n_models": 1', '"n_models": 1' + "0" * 5000, 1))
    assert man.read_text() != text
    rc = main(["campaign", "status", "--results", str(results.parent / "results")])
    out, err = capsys.readouterr()
    assert rc == 1, err  # marked damaged, not an error exit
    assert str(man) in out and "Traceback" not in err
    assert "item 4 (long): mechanism" in out  # the long-units section is still there
    assert "1/" in out  # the other unit is still counted done


# --------------------------------------------------------------------------- 9, 14, 15


@pytest.mark.parametrize("case", ["unlisted", "oversized"])
def test_unpack_bounds_every_member_by_its_manifest_before_writing(tmp_path, monkeypatch, case):
    """Finding 9: a member the manifest does not list (3 GiB in the trial) was written whole
    into the staging folder before the pack was refused; one larger than its listed size
    too. Every byte ``unpack`` extracts goes through ``shutil.copyfileobj`` (counted here);
    the count is checked before the message, so the old code fails on the bytes it wrote."""
    make_run(tmp_path / "src" / "table2", "a")
    run = tmp_path / "src" / "table2"
    files = sorted(p for p in run.rglob("*") if p.is_file() and "checkpoints" not in p.parts)
    members = [(tarfile.TarInfo(f"table2/{p.relative_to(run).as_posix()}"), p.read_bytes())
               for p in files]
    written: list[int] = []
    real = shutil.copyfileobj

    def counted(src, dst, *a, **k):
        before = dst.tell()
        real(src, dst, *a, **k)
        written.append(dst.tell() - before)

    monkeypatch.setattr(shutil, "copyfileobj", counted)
    big = b"\0" * (4 << 20)
    if case == "unlisted":
        members.append((tarfile.TarInfo("table2/big.bin"), big))
    else:  # history.csv as listed, with 4 MiB of zeros behind it
        members = [(i, d + big) if i.name.endswith("history.csv") else (i, d)
                   for i, d in members]
    out = tmp_path / case
    write_pack(out, members, ["table2"])
    what = "big.bin" if case == "unlisted" else "history.csv"
    with pytest.raises(pack.PackError, match=what) as e:
        pack.unpack(out, tmp_path / "results")
    assert sum(written) == 0, f"{sum(written)} bytes extracted before the refusal"
    assert "before extracting" in str(e.value)
    assert not any((tmp_path / "results").glob(".unpack-*"))
    # the same pack without the extra bytes is unpacked whole (the count sees real writes)
    if case == "oversized":
        members = [(i, d[:-len(big)]) if i.name.endswith("history.csv") else (i, d)
                   for i, d in members]
    else:
        members = members[:-1]
    write_pack(tmp_path / "whole", members, ["table2"])
    pack.unpack(tmp_path / "whole", tmp_path / "results")
    assert sum(written) == sum(len(d) for _, d in members)
    assert (tmp_path / "results" / "table2" / "history.csv").read_bytes() == next(
        d for i, d in members if i.name.endswith("history.csv"))


def test_pack_refuses_a_run_named_twice_before_writing(tmp_path):
    """Finding 14: ``reproduce pack --runs X X`` wrote a pack its own unpack refuses."""
    make_run(tmp_path / "src" / "table2", "a")
    rc, err = cli(["pack", "--root", str(tmp_path / "src"), "--out", str(tmp_path / "out"),
                   "--runs", "table2", "table2"])
    assert rc == 2 and "'table2' twice" in err and "Traceback" not in err
    assert not any((tmp_path / "out").glob("lstpe-pack.*"))


@pytest.mark.parametrize("text, what", [
    ("[" * 100_000 + "]" * 100_000, "too deeply"),
    ('{"runs": ["a"], "pieces": [], "sha256": "0", "bytes": 1' + "0" * 5000 + "}",
     "no stored file holds"),
    ('{"runs": ["a"], "pieces": [{"file": "p", "bytes": 1' + "0" * 4000 + ', "sha256": "'
     + "0" * 64 + '"}], "sha256": "' + "0" * 64 + '", "bytes": 1}', "larger than any pack")],
    ids=["deep", "5000-digits", "4000-digits"])
def test_unpack_names_an_index_too_deep_or_too_large(tmp_path, text, what):
    """Finding 15: a deeply nested index ended in a RecursionError traceback; a 5000-digit
    ``bytes`` in an int-conversion error naming no file."""
    (tmp_path / "p").mkdir()
    index = tmp_path / "p" / pack.INDEX
    index.write_text(text)
    rc, err = cli(["unpack", str(tmp_path / "p"), "--into", str(tmp_path / "results")])
    assert rc == 2 and "Traceback" not in err and str(index) in err and what in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "results").exists()


# --------------------------------------------------------------------------- 17


def _all_units_stored(results) -> None:
    """Every 200-epoch unit the campaign trains marked stored (a CPU then turns to long
    chunks); nothing is verified on this path."""
    for u in un.plan():
        if u.item not in cp.NOT_TRAINED:
            u.path(results).mkdir(parents=True, exist_ok=True)
            (u.path(results) / "manifest.json").write_text(json.dumps({"config": {}}))


def test_a_results_long_that_is_a_file_is_one_named_error(tmp_path):
    """Finding 17: a ``results/long`` that is a file was passed over in silence ("no free unit
    left", exit 0)."""
    _all_units_stored(tmp_path)
    (tmp_path / "long").write_text("not a folder")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()) as out:
        from lstpe.cli import main

        rc = main(["campaign", "run", "--minutes", "1", "--device", "cpu", "--results",
                   str(tmp_path)])
    assert rc == 2 and str(tmp_path / "long") in err.getvalue(), err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1
    assert "no free unit" not in out.getvalue()


@pytest.mark.parametrize("minutes", ["-1", "0", "nan", "inf"])
def test_campaign_run_refuses_minutes_that_are_not_a_positive_number(tmp_path, minutes):
    """``campaign run --minutes inf`` (or -1, 0, nan) was accepted and trained without a
    deadline; now it is refused, the value named, nothing written."""
    from lstpe.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["campaign", "run", "--minutes", minutes, "--device", "cpu", "--results",
                   str(tmp_path / "r")])
    assert rc == 2 and repr(minutes) in err.getvalue(), err.getvalue()
    assert not (tmp_path / "r").exists()


UNITS = (lu.LongUnit("table2", "learn-0.2", 2235), lu.LongUnit("tables56", "learn-2", 2235))


def test_a_long_chunk_another_run_holds_is_named_with_its_holder(tmp_path, monkeypatch):
    """Finding 17: a second ``campaign run`` while the first trains a long chunk (its segment
    published, its first checkpoint not yet written) said only "no free unit left" (or that
    the chunk had no checkpoint here) instead of naming the chunk the other run holds."""
    monkeypatch.setattr(lu, "LONG_EPOCHS", 6)
    monkeypatch.setattr(lu, "SEGMENT", 2)
    chunk = lu.LongChunk("t", UNITS, 6, 4, "test")
    monkeypatch.setattr(lu, "LONG_PLAN", (chunk,))
    small = dict(model=ModelConfig(d_model=16, n_layers=1), n_train=64, eval_train_max=64,
                 eval_test_max=64)
    assert lt.train_chunk(lu.LongChunk("t", UNITS, 2, 4, "test"), time.monotonic() + 600,
                          tmp_path, log=lambda m: None, **small)
    assert lu.published_epoch(UNITS[0], tmp_path) == 2
    rs.resume_checkpoint(chunk, tmp_path).unlink()  # the first run's checkpoint not yet out
    _all_units_stored(tmp_path)
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        for u in UNITS:
            claim = lu.long_root(tmp_path) / ".work" / "claims" / u.key.replace("/", "__")
            claim.mkdir(parents=True, exist_ok=True)
            (claim / ".lock").write_text(json.dumps({
                "pid": sleeper.pid, "host": socket.gethostname(), "boot_id": _boot_id(),
                "started_at": "2026-01-01T00:00:00+00:00", "argv": "lstpe campaign run"}))
        monkeypatch.setattr(cr, "pick_device", lambda d: torch.device("cuda"))
        monkeypatch.setattr(res, "device_name", lambda d: "cuda: test")
        lines: list[str] = []
        cr.run(5, tmp_path, device="cuda", log=lines.append)
    finally:
        sleeper.kill()
        sleeper.wait()
    held = [x for x in lines if "held by another process" in x and str(sleeper.pid) in x]
    assert held and all("t" in x for x in held), lines
    assert not any("no resume checkpoint here" in x for x in lines), lines
    assert "the long chunk t is held" in lines[-1], lines


# --------------------------------------------------------------------------- 10


def test_report_facts_on_a_tree_without_learn_1(monkeypatch):
    """Finding 10: chapter 11's ``report_facts`` raised ``KeyError 'learn-1'`` on a tree
    early in the campaign (after every claim was judged)."""
    from lstpe import claims as C
    from lstpe.chapters import claims

    acc = {"learn-0.2": 0.95, "learn-2": 0.6, "learn-0.1": 0.9, "2d-fixed": 0.951,
           "relative": 0.5, "random": 0.5, "rope": 0.5, "1d-fixed": 0.5, "nope": 0.4,
           "c-nope": 0.4}
    final = pd.DataFrame([{"pe": pe, "seed": s, "accuracy": a + 0.002 * i, "epoch": 200}
                          for pe, a in acc.items() for i, s in enumerate((1, 2, 3, 4, 5))])
    structure = pd.DataFrame({
        "block": [0] * 4, "sigma": [0.1, 0.1, 0.2, 0.2], "score_dpe": [0.5, 0.6, 0.2, 0.3],
        "p_dpe": [0.01, 0.02, 0.2, 0.3], "score_final": [0.4, 0.5, 0.2, 0.2],
        "p_final": [0.01, 0.02, 0.2, 0.4], "init_share": [0.3, 0.4, 0.6, 0.7],
        "epoch": [200] * 4})
    sim = pd.DataFrame({"pe": list(acc), "spearman": [0.5] * len(acc),
                        "spearman_p": [0.01] * len(acc)})
    x = C.Inputs(final=final, structure=structure, similarity=sim)
    verdicts = C.judge_all(x)
    monkeypatch.setattr(claims, "long_line", lambda lm: "long units: none yet.")
    cl = claims.Claims(C.scorecard(verdicts), verdicts, x, pd.DataFrame(), None)
    rf = claims.report_facts(cl)
    assert rf["one_ci"] == rf["one_p"] == "learn-1 not trained yet"
    rows = next(v for v in verdicts if v.claim == "sigma").numbers["rows"].set_index("b")
    assert "learn-2" in rows.index and rf["pair_ci"] != "learn-2 not trained yet"
    assert rf["rho"] == "0.50"
