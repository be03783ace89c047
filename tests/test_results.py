"""Tests of lstpe.store.results: atomic writes, run directories, manifests, final tables, file
checks, divergence, run-folder checks and locks."""

from __future__ import annotations

import json
import math
import os
import socket
import stat
import threading
import warnings

import pandas as pd
import pytest
import torch

from lstpe.store import results, rundir


class WriterFailed(RuntimeError):
    pass


def failing_writer(path):
    path.write_text("half of a fi")
    raise WriterFailed("disk full")


def test_atomic_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "sub" / "table.csv"
    with pytest.raises(WriterFailed):
        results.atomic_write(target, failing_writer)
    assert not target.exists()
    assert list(target.parent.iterdir()) == []  # no temporary file left behind either


def test_atomic_write_keeps_old_content_when_writer_raises(tmp_path):
    target = tmp_path / "manifest.json"
    target.write_text("old")
    with pytest.raises(WriterFailed):
        results.atomic_write(target, failing_writer)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_atomic_write_success(tmp_path):
    target = tmp_path / "a" / "b" / "x.txt"
    out = results.atomic_write(target, lambda p: p.write_text("hello"))
    assert out == target and target.read_text() == "hello"
    assert [p.name for p in target.parent.iterdir()] == ["x.txt"]
    results.atomic_write(target, lambda p: p.write_text("again"))
    assert target.read_text() == "again"


def history_frame() -> pd.DataFrame:
    rows = []
    for model, (pe, sigma) in enumerate([("learn-0.2", 0.2), ("2d-fixed", math.nan)]):
        for epoch in (0, 5, 10 if model == 0 else 7):
            for split in ("train", "val"):
                for cond in ("all", "1", "2", "3"):
                    rows.append({"model": model, "pe": pe, "pe_name": pe.split("-0")[0],
                                 "sigma": sigma, "seed": 3, "optimizer": "adam",
                                 "epoch": epoch, "split": split, "condition": cond,
                                 "accuracy": epoch / 10 + model / 100, "loss": 1.0 - epoch / 20,
                                 "diverged": False})
    return pd.DataFrame(rows, columns=results.HISTORY_COLUMNS)


def test_save_run_and_load_roundtrip(tmp_path):
    hist = history_frame()
    manifest = results.make_manifest({"epochs": 10, "seeds": [3]}, "cpu", 1.23456, n_models=2)
    arts = {"labels": ["learn-0.2", "2d-fixed"], "val_logits": torch.randn(2, 108, 4)}
    results.save_run(tmp_path / "run", hist, manifest, arts)
    run = results.load(tmp_path / "run")
    pd.testing.assert_frame_equal(run.history, hist)
    assert run.history["condition"].tolist()[:4] == ["all", "1", "2", "3"]  # strings kept
    assert run.manifest == json.loads(json.dumps(manifest))
    assert run.manifest["wall_time_s"] == 1.235 and run.manifest["n_models"] == 2
    files = run.manifest["files"]
    assert sorted(files) == ["artifacts.pt", "history.csv"]
    assert files["history.csv"]["rows"] == len(hist)
    assert files["history.csv"]["sha256"] == results.sha256_file(tmp_path / "run" / "history.csv")
    assert torch.equal(run.artifacts["val_logits"], arts["val_logits"])
    assert run.artifacts["labels"] == arts["labels"]
    assert results.load(tmp_path / "run", artifacts=False).artifacts == {}
    assert run.describe().startswith("[run: stored run, custom scale; device cpu")
    assert "10 epochs, 1 seed," in run.describe()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "artifacts.pt", "history.csv", "manifest.json"]


def test_manifest_fields():
    m = results.make_manifest({"a": 1}, torch.device("cpu"), 2.0, kind="test")
    for key in ("git_commit", "device", "torch_version", "python_version", "platform",
                "config", "wall_time_s", "finished_at", "kind", "segments", "resumed"):
        assert key in m
    assert m["torch_version"] == torch.__version__ and m["config"] == {"a": 1}
    assert m["device"].startswith("cpu: ")
    assert isinstance(m["git_commit"], str) and m["git_commit"]
    assert m["resumed"] is False and [seg["wall_s"] for seg in m["segments"]] == [2.0]


def test_load_raises_naming_the_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no results folder at .*nowhere"):
        results.load(tmp_path / "nowhere")
    run = tmp_path / "run"
    results.save_table(history_frame(), run / "history.csv")
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        results.load(run)
    (run / "history.csv").unlink()
    results.save_json({"x": 1}, run / "manifest.json")
    with pytest.raises(FileNotFoundError, match="history.csv"):
        results.load(run)


def test_find(tmp_path):
    assert results.find("missing", tmp_path) is None
    results.save_table(history_frame(), tmp_path / "partial" / "history.csv")
    # run files without a manifest (deleted, or a save cut off): named, never used or ignored
    with pytest.raises(results.DamagedFileError, match="partial/manifest.json is missing"):
        results.find("partial", tmp_path)
    results.save_run(tmp_path / "done", history_frame(), {"config": {}})
    run = results.find("done", tmp_path)
    assert run is not None and run.path == tmp_path / "done"


def test_final_table_takes_each_models_last_epoch():
    hist = history_frame()
    fin = results.final_table(hist, "val", "all")
    assert fin["model"].tolist() == [0, 1] and fin["epoch"].tolist() == [10, 7]
    assert fin["accuracy"].tolist() == pytest.approx([1.0, 0.71])
    assert results.final_table(hist, "train", "2")["condition"].tolist() == ["2", "2"]
    with pytest.raises(ValueError, match="split='test'"):
        results.final_table(hist, "test")
    with pytest.raises(ValueError, match="empty"):
        results.final_table(hist.iloc[:0])


def test_save_json_and_table(tmp_path):
    p = results.save_json({"b": 1, "a": [1, 2]}, tmp_path / "x.json")
    assert p.read_text().index('"a"') < p.read_text().index('"b"')
    assert json.loads(p.read_text()) == {"a": [1, 2], "b": 1}
    df = pd.DataFrame({"x": [1, 2], "y": ["u", "v"]})
    pd.testing.assert_frame_equal(pd.read_csv(results.save_table(df, tmp_path / "t.csv")), df)


# --------------------------------------------------------------------------- permissions


def test_written_files_get_ordinary_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        for p in (results.save_json({"a": 1}, tmp_path / "m.json"),
                  results.save_table(pd.DataFrame({"x": [1]}), tmp_path / "t.csv"),
                  results.save_torch({"x": 1}, tmp_path / "a.pt")):
            assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    finally:
        os.umask(old)


def test_clean_temp_files_removes_leftovers_of_interrupted_writes(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    left = [tmp_path / ".history.csv.abc.tmp", tmp_path / "checkpoints" / ".chunk0.pt.x.tmp"]
    for p in left:
        p.write_text("half")
    (tmp_path / "keep.tmp").write_text("not ours")
    assert sorted(results.clean_temp_files(tmp_path)) == sorted(left)
    assert not any(p.exists() for p in left) and (tmp_path / "keep.tmp").exists()


# --------------------------------------------------------------------------- damaged files


def test_load_torch_names_empty_truncated_and_missing_files(tmp_path):
    good = results.save_torch({"w": torch.randn(500)}, tmp_path / "chunk0.pt")
    assert torch.equal(results.load_torch(good)["w"], torch.load(good)["w"])
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(results.DamagedFileError, match=r"checkpoint .*empty.pt is empty.*"
                       r"delete .*empty.pt to restart the run"):
        results.load_torch(empty, "checkpoint")
    cut = tmp_path / "cut.pt"
    cut.write_bytes(good.read_bytes()[:300])
    with pytest.raises(results.DamagedFileError, match=r"artifacts .*cut.pt is damaged"):
        results.load_torch(cut, "artifacts")
    for bad in (empty, cut):
        with pytest.raises(results.DamagedFileError, match=bad.name):
            results.check_torch_file(bad, "checkpoint")
    results.check_torch_file(good)
    with pytest.raises(results.DamagedFileError, match="nope.pt does not exist"):
        results.load_torch(tmp_path / "nope.pt")


def saved_run(tmp_path, tables=True):
    hist = history_frame()
    manifest = results.make_manifest({"pes": ["learn-0.2", "2d-fixed"], "seeds": [3]}, "cpu",
                                     1.0)
    arts = {"val_logits": torch.randn(2, 108, 4)}
    tabs = {"noise": pd.DataFrame({"model": [0, 1], "accuracy": [0.5, 0.6]})} if tables else None
    return results.save_run(tmp_path / "run", hist, manifest, arts, tabs)


@pytest.mark.parametrize("name", ["history.csv", "artifacts.pt", "tables/noise.csv"])
def test_load_names_a_truncated_file(tmp_path, name):
    run = saved_run(tmp_path)
    path = run / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(results.DamagedFileError, match=f"{name} does not match manifest.json"):
        results.load(run)
    if name == "history.csv":
        with pytest.raises(results.DamagedFileError, match=r"24 rows, manifest: 48"):
            results.load(run)


def test_load_names_a_missing_or_edited_file_and_an_invalid_manifest(tmp_path):
    run = saved_run(tmp_path)
    (run / "tables" / "noise.csv").unlink()
    with pytest.raises(results.DamagedFileError, match="noise.csv is missing"):
        results.load(run)
    run = saved_run(tmp_path)
    art = run / "artifacts.pt"
    art.write_bytes(art.read_bytes()[:-1] + b"x")  # same size, other content
    with pytest.raises(results.DamagedFileError, match="artifacts.pt does not match"):
        results.load(run)
    results.load(run, artifacts=False)  # the artefacts are not needed: not checked
    for text, what in (("", "not valid JSON"), ("{\"config\": ", "not valid JSON"),
                       ("[1, 2]", "JSON object")):
        (run / "manifest.json").write_text(text)
        with pytest.raises(results.DamagedFileError, match=f"manifest .*manifest.json .*{what}"):
            results.load(run)


def test_manifest_without_file_records_or_checksum_is_refused(tmp_path):
    run = saved_run(tmp_path, tables=False)
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["files"]
    results.save_json(results.seal_manifest(manifest), run / "manifest.json")
    with pytest.raises(results.DamagedFileError, match="records no file checksums"):
        results.load(run)
    with pytest.raises(results.DamagedFileError, match="records no file checksums"):
        results.check_run_dir(run, manifest["config"])
    run = saved_run(tmp_path / "b", tables=False)
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest[results.MANIFEST_HASH_KEY]
    results.save_json(manifest, run / "manifest.json")
    with pytest.raises(results.DamagedFileError, match="no checksum of its own"):
        results.load(run)
    assert results.load(run, sealed=False).manifest["config"] == manifest["config"]
    results.seal(run)  # files checked, then sealed
    assert results.load(run).manifest["config"] == manifest["config"]


@pytest.mark.parametrize("edit", [("device", "cuda: H100"), ("wall_time_s", 99.5),
                                  ("config", {"pes": ["2d-fixed", "rope"]})])
def test_edited_manifest_is_refused(tmp_path, edit):
    run = saved_run(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest[edit[0]] = edit[1]
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(results.DamagedFileError, match="does not match its own checksum"):
        results.load(run)


def test_unlisted_table_is_not_loaded(tmp_path):
    run = saved_run(tmp_path)
    results.save_table(pd.DataFrame({"x": [1]}), run / "tables" / "fake.csv")
    assert sorted(results.load(run).tables) == ["noise"]


def test_deleted_manifest_is_named_and_nothing_trains_over_it(tmp_path):
    run = saved_run(tmp_path)
    (run / "manifest.json").unlink()
    with pytest.raises(results.DamagedFileError, match="manifest.json is missing"):
        results.check_run_dir(run, {"epochs": 1})
    with pytest.raises(results.DamagedFileError, match="manifest.json is missing"):
        results.find(run.name, run.parent)


def test_damaged_artifacts_are_named(tmp_path):
    run = saved_run(tmp_path)
    (run / "artifacts.pt").write_bytes(b"")
    with pytest.raises(results.DamagedFileError, match="artifacts.pt"):
        results.load(run, verify=False)


# --------------------------------------------------------------------------- provenance


def test_manifest_of_a_resumed_run_sums_its_segments():
    previous = [{"wall_s": 10.0}, {"wall_s": 5.5}]
    m = results.make_manifest({}, "cpu", 2.25, previous_segments=previous)
    assert m["wall_time_s"] == 17.75 and m["resumed"] is True
    assert [s["wall_s"] for s in m["segments"]] == [10.0, 5.5, 2.25]
    assert results.make_manifest({}, "cpu", 1.0, resumed=True)["resumed"] is True


def test_earlier_segments_keep_who_trained_them():
    """Each earlier process keeps its record (commit, device, host) beside its rounded time;
    a run never resumed has none."""
    segs = [{"wall_s": 10.00049, "git_commit": "abc", "device": "cpu: x (2 threads)"},
            {"wall_s": 5.5}]  # a checkpoint written before processes were recorded
    prev = results.earlier_segments(segs)
    assert prev == [{"wall_s": 10.0, "git_commit": "abc", "device": "cpu: x (2 threads)"},
                    {"wall_s": 5.5}]
    m = results.make_manifest({}, "cpu", 2.25, previous_segments=prev)
    assert m["wall_time_s"] == 17.75 and m["segments"][0]["git_commit"] == "abc"
    assert m["segments"][-1]["git_commit"] == results.git_commit()
    assert results.earlier_segments([]) is None


def test_run_commits_name_every_commit_that_trained_a_run():
    man = {"git_commit": "c", "segments": [{"wall_s": 1.0}, {"wall_s": 2.0, "git_commit": "a"},
                                           {"wall_s": 1.0, "git_commit": "a"},
                                           {"wall_s": 3.0, "git_commit": "c"}]}
    assert results.run_commits(man) == ["?", "a", "c"]
    assert results.run_commits({"git_commit": "c"}) == ["c"]  # a manifest without segments


# --------------------------------------------------------------------------- divergence


def test_nonfinite_models():
    logits = torch.zeros(3, 5, 4)
    logits[1, 2, 0] = float("nan")
    loss = torch.tensor([0.1, 0.2, float("inf")])
    assert results.nonfinite_models(logits).tolist() == [False, True, False]
    assert results.nonfinite_models(logits, loss, None).tolist() == [False, True, True]
    with pytest.raises(ValueError):
        results.nonfinite_models(None)


def diverged_history(column: str = "bool") -> pd.DataFrame:
    h = history_frame()
    bad = (h["model"] == 1) & (h["epoch"] >= 5)
    if column == "bool":
        h["diverged"] = bad
    elif column == "none":
        h = h.drop(columns="diverged")
        h.loc[bad, "loss"] = float("nan")
    elif column == "empty":
        h["diverged"] = float("nan")
        h.loc[bad, "loss"] = float("inf")
    return h


@pytest.mark.parametrize("column", ["bool", "none", "empty"])
def test_final_table_leaves_diverged_models_out_with_a_warning(column):
    h = diverged_history(column)
    div = results.diverged_models(h)
    assert div["model"].tolist() == [1] and div["epoch"].tolist() == [5]
    assert div["pe"].tolist() == ["2d-fixed"]
    with pytest.warns(results.DivergedWarning, match=r"model 1 \(2d-fixed, seed 3, from epoch 5\)"):
        fin = results.final_table(h)
    assert fin["model"].tolist() == [0] and not fin["diverged"].any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = results.final_table(h, include_diverged=True)
    assert both["diverged"].tolist() == [False, True]


def test_final_table_without_divergence_warns_nothing_and_csv_roundtrip(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert results.final_table(history_frame())["diverged"].tolist() == [False, False]
    h = diverged_history("bool")
    results.save_table(h, tmp_path / "h.csv")
    back = pd.read_csv(tmp_path / "h.csv", dtype={"condition": str})
    assert results.diverged_models(back)["model"].tolist() == [1]


def test_final_table_raises_when_every_model_diverged():
    h = history_frame()
    h["diverged"] = h["epoch"] > 0
    with pytest.raises(ValueError, match="every model diverged.*include_diverged=True"):
        results.final_table(h)


# --------------------------------------------------------------------------- run folders


CFG = {"pes": ["learn-0.2", "2d-fixed"], "seeds": [3], "epochs": 10, "device": "auto",
       "model": {"d_model": 16, "n_layers": 1}}


def finished(tmp_path, cfg=CFG):
    return results.save_run(tmp_path / "run", history_frame(),
                            results.make_manifest(cfg, "cpu", 1.0), {"x": torch.ones(2)})


def test_config_diff_names_nested_keys():
    other = {**CFG, "seeds": [4], "model": {"d_model": 32, "n_layers": 1}, "device": "cuda"}
    assert results.config_diff(CFG, other) == ["device", "model.d_model", "seeds"]
    assert results.config_diff(CFG, other, results.EXECUTION_KEYS) == ["model.d_model", "seeds"]
    assert results.config_diff({"a": (1, 2)}, {"a": [1, 2]}) == []


def test_check_run_dir_states(tmp_path):
    assert results.check_run_dir(tmp_path / "new" / "deep", CFG) == "new"
    assert (tmp_path / "new" / "deep").is_dir()
    run = finished(tmp_path)
    assert results.check_run_dir(run, CFG) == "finished"
    assert results.check_run_dir(run, {**CFG, "device": "cuda", "max_models": 4}) == "finished"
    with pytest.raises(results.ConfigMismatchError,
                       match=r"different configuration \(differs in: model.d_model: 16 there, "
                             r"32 now; seeds: \[3\] there, \[4\] now\)"):
        results.check_run_dir(run, {**CFG, "seeds": [4], "model": {"d_model": 32,
                                                                   "n_layers": 1}})
    (run / "history.csv").write_text("model,pe\n")
    with pytest.raises(results.DamagedFileError, match="history.csv does not match"):
        results.check_run_dir(run, CFG)


def test_check_run_dir_with_checkpoints(tmp_path):
    run = tmp_path / "run"
    results.save_torch({"epoch": 3}, run / "checkpoints" / "chunk0.pt")
    assert results.check_run_dir(run, CFG) == "resume"
    results.save_json(CFG, run / "checkpoints" / "config.json")
    assert results.check_run_dir(run, {**CFG, "device": "cpu"}) == "resume"
    with pytest.raises(results.ConfigMismatchError, match=r"checkpoints of a different "
                       r"configuration \(differs in: epochs: 10 there, 20 now\)"):
        results.check_run_dir(run, {**CFG, "epochs": 20})
    (run / "checkpoints" / "chunk1.pt").write_bytes(b"")
    with pytest.raises(results.DamagedFileError, match=r"chunk1.pt is empty.*restart"):
        results.check_run_dir(run, CFG)


def test_check_run_dir_refuses_files_and_foreign_folders(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(results.NotWritableError, match="afile exists and is not a folder"):
        results.check_run_dir(tmp_path / "afile", CFG)
    with pytest.raises(results.NotWritableError, match="a part of that path is a file"):
        results.check_run_dir(tmp_path / "afile" / "run", CFG)
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("x")
    with pytest.raises(results.RunDirError, match=r"home is not empty and holds no run \("
                       r"found: thesis.tex\)"):
        results.check_run_dir(home, CFG)
    (home / "thesis.tex").unlink()
    (home / ".lock").write_text("")  # hidden files do not count
    assert results.check_run_dir(home, CFG) == "new"


# --------------------------------------------------------------------------- locks


def test_run_lock_writes_pid_and_host_and_releases(tmp_path):
    run = tmp_path / "run"
    with results.RunLock(run) as lock:
        info = json.loads((run / ".lock").read_text())
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        assert "started_at" in info and lock.path == run / ".lock"
        with results.RunLock(run):  # re-entrant in one thread
            pass
        assert (run / ".lock").exists()
    assert not (run / ".lock").exists()
    with pytest.raises(RuntimeError, match="boom"), results.RunLock(run):
        raise RuntimeError("boom")
    assert not (run / ".lock").exists()


def test_run_lock_refuses_another_thread(tmp_path):
    errors = []

    def other():
        try:
            with results.RunLock(tmp_path):
                pass
        except results.RunLockedError as e:
            errors.append(str(e))

    with results.RunLock(tmp_path):
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert errors and "another thread" in errors[0]


def write_lock(folder, **info):
    folder.mkdir(parents=True, exist_ok=True)
    base = {"pid": os.getppid(), "host": socket.gethostname(), "started_at": "then",
            "boot_id": rundir._boot_id(), "argv": "lstpe train --out x", "token": "t"}
    (folder / ".lock").write_text(json.dumps({**base, **info}))


def test_run_lock_of_a_live_process_is_refused_naming_pid_and_host(tmp_path):
    write_lock(tmp_path)  # the parent process is alive
    with pytest.raises(results.RunLockedError) as e:
        results.RunLock(tmp_path).acquire()
    msg = str(e.value)
    assert str(tmp_path) in msg and f"pid {os.getppid()}" in msg
    assert f"host {socket.gethostname()}" in msg and "lstpe train --out x" in msg
    assert (tmp_path / ".lock").exists()  # left alone
    write_lock(tmp_path, host="elsewhere", pid=999999999)  # cannot check another host
    with pytest.raises(results.RunLockedError, match="host elsewhere"):
        results.RunLock(tmp_path).acquire()


@pytest.mark.parametrize("info, why", [
    ({"pid": 999999999}, "pid 999999999 is no longer running"),
    ({"boot_id": "another-boot"}, "rebooted"),
])
def test_stale_lock_is_reported_and_taken_over(tmp_path, info, why):
    if "boot_id" in info and rundir._boot_id() is None:
        pytest.skip("no boot id on this system")
    write_lock(tmp_path, **info)
    with pytest.warns(results.StaleLockWarning, match=why), results.RunLock(tmp_path):
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    assert not (tmp_path / ".lock").exists()


def test_empty_lock_file_is_stale_only_when_old(tmp_path):
    (tmp_path / ".lock").write_text("")
    with pytest.raises(results.RunLockedError, match="being written or is unreadable"):
        results.RunLock(tmp_path).acquire()
    os.utime(tmp_path / ".lock", (1, 1))
    with pytest.warns(results.StaleLockWarning, match="empty or unreadable"), \
            results.RunLock(tmp_path):
        pass


def test_lock_removes_temp_files_of_interrupted_writes(tmp_path):
    (tmp_path / ".manifest.json.xyz.tmp").write_text("{")
    with results.RunLock(tmp_path):
        assert not (tmp_path / ".manifest.json.xyz.tmp").exists()
