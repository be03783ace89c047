"""Fault injection: what a careless or unlucky user does to runs, and what must not happen.

Each case of the safety issue has a test here: SIGKILL during a checkpoint write and while
holding a run folder's lock, two concurrent writers, truncated and empty files, a read-only
or mistyped output folder, a diverging run, and a stored run under a ``lstpe batch`` grid.
Training runs are tiny (d=16, one block, 64 puzzles, one epoch).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import torch

from lstpe import runtime
from lstpe.chapters import notebook as nb
from lstpe.cli import main
from lstpe.experiments import runs
from lstpe.store import results as res

REPO = Path(__file__).resolve().parents[1]
TINY = ["--epochs", "1", "--d-model", "16", "--n-layers", "1", "--n-train", "64",
        "--no-progress"]
TINY_MODEL = {"d_model": 16, "n_layers": 1}


def env() -> dict[str, str]:
    """The environment of subprocesses and kernels: this checkout's lstpe first."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [e.get("PYTHONPATH")])])
    return e


def spawn(code: str, *args: str) -> subprocess.Popen:
    """A Python subprocess running ``code`` (stdout piped, line-buffered)."""
    return subprocess.Popen([sys.executable, "-u", "-c", textwrap.dedent(code), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO, env=env())


def wait_for_line(proc: subprocess.Popen, expected: str, timeout: float = 120) -> None:
    """Block until ``proc`` prints ``expected`` (fail if it exits first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if expected in line:
            return
        if not line and proc.poll() is not None:
            raise AssertionError(f"process exited ({proc.returncode}): {proc.stderr.read()}")
    raise AssertionError(f"no {expected!r} within {timeout} s")


def kill9(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)  # reaped: a zombie would still look alive
    proc.stdout.close()
    proc.stderr.close()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[Path, list[str]]:
    """One tiny finished run (with a checkpoint) and the argv that trained it."""
    out = tmp_path_factory.mktemp("finished") / "run"
    argv = ["train", "--pe", "learn-0.2", "--pe", "2d-fixed", "--seeds", "2235",
            "--checkpoint-every", "1", *TINY, "--out", str(out)]
    assert main(argv) == 0
    return out, argv


def copy_run(finished_run, tmp_path) -> tuple[Path, list[str]]:
    src, argv = finished_run
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return dst, [str(dst) if a == str(src) else a for a in argv]


# --------------------------------------------------------------------------- SIGKILL


def test_sigkill_during_a_checkpoint_write_keeps_the_previous_checkpoint(tmp_path):
    ckpt = tmp_path / "run" / "checkpoints" / "chunk0.pt"
    proc = spawn("""
        import sys, time, torch
        from lstpe.store import results as res
        ckpt = sys.argv[1]
        res.save_torch({"epoch": 1, "w": torch.arange(1000.)}, ckpt)
        def slow(p):
            torch.save({"epoch": 2, "w": torch.zeros(1000)}, p)
            data = p.read_bytes()
            p.write_bytes(data[: len(data) // 2])  # half written when the kill comes
            print("writing", flush=True)
            time.sleep(600)
        res.atomic_write(ckpt, slow)
    """, str(ckpt))
    wait_for_line(proc, "writing")
    kill9(proc)
    state = res.load_torch(ckpt, "checkpoint")  # the old, complete checkpoint
    assert state["epoch"] == 1 and torch.equal(state["w"], torch.arange(1000.))
    leftovers = list(ckpt.parent.glob(".chunk0.pt.*.tmp"))
    assert len(leftovers) == 1  # a SIGKILLed process cannot clean up ...
    with res.RunLock(ckpt.parent.parent):  # ... the next process that locks the folder does
        assert not leftovers[0].exists()
    assert res.check_run_dir(ckpt.parent.parent, {}) == "resume"


def test_sigkilled_trainer_leaves_a_stale_lock_that_is_reported_and_taken_over(tmp_path):
    proc = spawn("""
        import sys, time
        from lstpe.store import results as res
        with res.RunLock(sys.argv[1]):
            print("locked", flush=True)
            time.sleep(600)
    """, str(tmp_path))
    wait_for_line(proc, "locked")
    pid = proc.pid
    with pytest.raises(res.RunLockedError, match=f"pid {pid} on host"):
        res.RunLock(tmp_path).acquire()  # alive: refused
    kill9(proc)
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == pid  # left behind
    with pytest.warns(res.StaleLockWarning, match=f"pid {pid} is no longer running"), \
            res.RunLock(tmp_path):
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    assert not (tmp_path / ".lock").exists()


# --------------------------------------------------------------------------- concurrent writers


def test_train_into_a_folder_another_process_is_training_into_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    proc = spawn("""
        import sys, time
        from lstpe.store import results as res
        with res.RunLock(sys.argv[1]):
            print("locked", flush=True)
            time.sleep(600)
    """, str(out))
    try:
        wait_for_line(proc, "locked")
        assert main(["train", "--seeds", "29", *TINY, "--out", str(out)]) == 2
        printed, err = capsys.readouterr()
        assert f"{out} is in use: locked by pid {proc.pid} on host" in err
        assert "training" not in printed and not (out / "history.csv").exists()
    finally:
        kill9(proc)


def test_two_concurrent_train_commands_never_replace_a_finished_run(tmp_path):
    out = tmp_path / "run"
    procs = {seed: subprocess.Popen(
        [sys.executable, "-m", "lstpe.cli", "train", "--pe", "2d-fixed", "--seeds", seed,
         *TINY, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=REPO, env=env()) for seed in ("29", "195")}
    done = {seed: (p.wait(timeout=600), *p.communicate()) for seed, p in procs.items()}
    codes = sorted(rc for rc, _, _ in done.values())
    assert codes == [0, 2], done
    (winner,) = [seed for seed, (rc, _, _) in done.items() if rc == 0]
    (loser,) = [seed for seed, (rc, _, _) in done.items() if rc == 2]
    err = done[loser][2]
    # Overlapping: the lock refuses the second; one after the other: the finished run of
    # another configuration is not replaced. Either way the loser says why.
    assert "is in use: locked by pid" in err or "different configuration" in err, err
    run = res.load(out)
    assert run.manifest["config"]["seeds"] == [int(winner)]
    assert set(run.history["seed"]) == {int(winner)}
    assert not (out / ".lock").exists()


def test_python_train_call_into_a_finished_run_of_another_config_is_refused(finished_run,
                                                                           tmp_path):
    out, argv = copy_run(finished_run, tmp_path)
    before = (out / "manifest.json").read_bytes()
    other = [a if a != "2235" else "29" for a in argv]
    assert main(other) == 2
    assert (out / "manifest.json").read_bytes() == before
    # the check every entry point makes before training (lstpe.training.train.train included)
    cfg = json.loads(before)["config"]
    with pytest.raises(res.ConfigMismatchError, match="seeds: \\[2235\\] there, \\[29\\] now"):
        res.check_run_dir(out, {**cfg, "seeds": [29]})


# --------------------------------------------------------------------------- damaged files


def test_truncated_history_of_a_finished_run_is_not_accepted(finished_run, tmp_path, capsys):
    out, argv = copy_run(finished_run, tmp_path)
    rows = json.loads((out / "manifest.json").read_text())["files"]["history.csv"]["rows"]
    text = (out / "history.csv").read_text().splitlines()
    (out / "history.csv").write_text("\n".join(text[: len(text) // 2]) + "\n")
    assert main(argv) == 2
    printed, err = capsys.readouterr()
    assert "history.csv does not match manifest.json" in err and f"manifest: {rows}" in err
    assert "already holds" not in printed
    with pytest.raises(res.DamagedFileError, match="history.csv"):
        res.load(out)


@pytest.mark.parametrize("name, what", [
    ("manifest.json", "manifest .*manifest.json is not valid JSON"),
    ("artifacts.pt", "artifacts.pt does not match manifest.json"),
    ("tables/noise.csv", "noise.csv does not match manifest.json"),
])
def test_empty_files_of_a_finished_run_are_named(finished_run, tmp_path, capsys, name, what):
    out, argv = copy_run(finished_run, tmp_path)
    (out / name).write_bytes(b"")
    assert main(argv) == 2
    assert re.search(what, capsys.readouterr().err)


def test_damaged_artifacts_are_named_when_loaded_without_checks(finished_run, tmp_path):
    out, _ = copy_run(finished_run, tmp_path)
    data = (out / "artifacts.pt").read_bytes()
    (out / "artifacts.pt").write_bytes(data[: len(data) // 3])
    with pytest.raises(res.DamagedFileError, match="artifacts .*artifacts.pt is damaged"):
        res.load(out, verify=False)


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_damaged_checkpoint_is_named_before_training(finished_run, tmp_path, capsys, damage):
    out, argv = copy_run(finished_run, tmp_path)
    (out / "manifest.json").unlink()  # an unfinished run with a checkpoint
    (ckpt,) = (out / "checkpoints").glob("*.pt")
    data = ckpt.read_bytes()
    ckpt.write_bytes(b"" if damage == "empty" else data[: len(data) // 2])
    assert main(argv) == 2
    printed, err = capsys.readouterr()
    assert f"checkpoint {ckpt}" in err and f"delete {ckpt} to restart the run" in err
    assert "training" not in printed and "resuming" not in printed
    with pytest.raises(res.DamagedFileError, match="restart the run"):
        res.load_torch(ckpt, "checkpoint")  # what train() uses to read a checkpoint


def test_checkpoint_with_altered_numbers_is_not_resumed(finished_run, tmp_path, capsys):
    """Issue case 2: bytes flipped in 16 floats of one tensor of a checkpoint. The digest
    catches it: the chunk trains again from the start, saying so, to the same numbers."""
    out, argv = copy_run(finished_run, tmp_path)
    before = pd.read_csv(out / "history.csv")
    (out / "manifest.json").unlink()  # an unfinished run with a checkpoint
    (ckpt,) = (out / "checkpoints").glob("*.pt")
    state = torch.load(ckpt, weights_only=False)
    name = sorted(state["model"])[0]
    t = state["model"][name].view(-1)
    raw = t[:16].clone().view(torch.uint8)
    raw[::4] ^= 0xFF
    t[:16] = raw.view(t.dtype)
    torch.save(state, ckpt)  # digest kept: it now describes other numbers
    with pytest.warns(UserWarning, match="does not match the digest"):
        assert main(argv) == 0
    assert list((out / "checkpoints").glob("chunk0.pt.damaged-*"))
    after = res.load(out).history
    pd.testing.assert_frame_equal(after[["model", "epoch", "split", "condition", "accuracy"]],
                                  before[["model", "epoch", "split", "condition", "accuracy"]],
                                  check_dtype=False)


# --------------------------------------------------------------------------- output folders


def _unwritable_dir(tmp_path: Path) -> Path:
    """A folder this process cannot write into (chmod 555, or /sys for root)."""
    if os.geteuid() != 0:
        d = tmp_path / "readonly"
        d.mkdir()
        d.chmod(0o555)
        return d
    d = Path("/sys/kernel")
    try:
        tempfile.mkstemp(dir=d)
    except OSError:
        return d
    pytest.skip("running as root with no read-only folder to test with")


@pytest.mark.parametrize("where", ["inside", "itself"])
def test_read_only_out_fails_before_training(tmp_path, capsys, where):
    ro = _unwritable_dir(tmp_path)
    out = ro / "run" if where == "inside" else ro
    try:
        assert main(["train", "--seeds", "29", *TINY, "--out", str(out)]) == 2
    finally:
        if ro.is_relative_to(tmp_path):
            ro.chmod(0o755)
    printed, err = capsys.readouterr()
    assert str(out) in err and ("not writable" in err or "cannot create" in err)
    assert "training" not in printed


def test_out_that_is_a_file_fails_before_training(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("x")
    for out in (tmp_path / "notes.txt", tmp_path / "notes.txt" / "run"):
        assert main(["train", "--seeds", "29", *TINY, "--out", str(out)]) == 2
        printed, err = capsys.readouterr()
        assert "notes.txt" in err and "training" not in printed
    assert (tmp_path / "notes.txt").read_text() == "x"


# --------------------------------------------------------------------------- divergence


def test_diverging_run_is_detected_warned_about_and_left_out(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--pe", "learn-0.2", "--seeds", "2235", "--optimizer", "sgd", "--lr",
            "1e6", "--batch-size", "8", *TINY, "--out", str(out)]
    assert main(argv) == 0
    printed, err = capsys.readouterr()
    assert "1 model(s) diverged" in err and "model 0 (learn-0.2, seed 2235" in err
    line = next(ln for ln in printed.splitlines() if ln.startswith("learn-0.2"))
    assert line.split()[1:] == ["0", "1", "1", "NaN", "NaN"]  # no accuracy reported
    run = res.load(out)
    assert run.diverged()["model"].tolist() == [0]
    with pytest.raises(ValueError, match="every model diverged"):
        run.final()
    assert len(run.final(include_diverged=True)) == 1
    assert main([*argv, "--include-diverged"]) == 0  # the finished run, shown again
    printed, err = capsys.readouterr()
    line = next(ln for ln in printed.splitlines() if ln.startswith("learn-0.2"))
    assert line.split()[1:4] == ["1", "1", "1"] and "kept in the table" in err
    exp = res.Run(run.history, run.manifest, name="demo")
    assert "WARNING: 1 model(s) diverged" in exp.describe()


# --------------------------------------------------------------------------- stored runs


def fake_stored_run(results_dir: Path, name: str, seeds: list[int], epochs: int = 1,
                    scale: str = "paper") -> Path:
    """A finished run under ``results_dir/<scale>/name`` with recognisable accuracy 0.999:
    the registry's ``name`` at ``scale`` with 2d-fixed only, the tiny model and data."""
    from lstpe.experiments.registry import run_config

    cfg = run_config(name, scale, pes=["2d-fixed"], seeds=seeds, epochs=epochs, n_train=64,
                     model=TINY_MODEL).to_dict()
    rows = [{"model": i, "pe": "2d-fixed", "pe_name": "2d-fixed", "sigma": float("nan"),
             "seed": s, "optimizer": "adam", "epoch": e, "split": "val", "condition": "all",
             "accuracy": 0.999, "loss": 0.1, "diverged": False}
            for i, s in enumerate(seeds) for e in (0, epochs)]
    hist = pd.DataFrame(rows, columns=res.HISTORY_COLUMNS)
    return res.save_run(runs.full_run_dir(name, scale, epochs, results_dir), hist,
                        res.make_manifest(cfg, "cpu", 1.0), {"labels": ["2d-fixed"]})


def test_conflicts_split_what_was_asked_from_what_changed():
    from lstpe.experiments.runs import conflicts

    stored = {"pes": ["2d-fixed", "learn-0.1", "learn-0.5"], "seeds": [1, 2], "epochs": 200,
              "optimizer": "adam", "n_train": None, "device": "cuda", "amp": True,
              "model": {"d_model": 160, "n_layers": 4}}
    same = {**stored, "pes": ["learn-0.5", "2d-fixed"], "device": "cpu", "amp": False}
    assert conflicts(stored, same, asked=["pes"]) == ([], [])  # a subset; execution keys
    wanted = {**stored, "pes": ["learn-0.3"], "seeds": [29], "epochs": 5,
              "model": {"d_model": 16, "n_layers": 4}}
    mine, other = conflicts(stored, wanted, asked=["seeds", "epochs"])
    assert mine == ["epochs: stored 200, wanted 5", "seeds: stored [1, 2], wanted [29]"]
    assert other == ["model.d_model: stored 160, wanted 16",
                     'pes: stored ["2d-fixed", "learn-0.1", "learn-0.5"], wanted ["learn-0.3"]']


def setup(tmp_path, monkeypatch, scale="preview") -> nb.Setup:
    monkeypatch.setenv("LSTPE_CACHE", str(tmp_path / "cache"))
    runs._USED.clear()
    return nb.Setup(scale, torch.device("cpu"), tmp_path / "results")


def test_stored_run_is_used_only_when_it_fits(tmp_path, monkeypatch, capsys):
    S = setup(tmp_path, monkeypatch)
    stored = fake_stored_run(S.results_dir, "table2", [2235])
    kw = dict(pes=["2d-fixed"], epochs=1, n_train=64, model=TINY_MODEL, cache=False)
    assert S.get_run("table2", seeds=[2235], **kw).source == "stored"
    with pytest.raises(runs.StoredRunMismatch, match=r"seeds: stored \[2235\], wanted \[29, 195"):
        S.get_run("table2", seeds=None, **kw)  # the registry's 15 seeds: not this run
    with pytest.raises(FileNotFoundError, match="no stored run of 'table2' fits"):
        S.get_run("table2", seeds=[29], require_stored=True, **kw)
    assert "seeds: stored [2235], wanted [29]" in capsys.readouterr().out
    live = S.get_run("table2", seeds=[29], **kw)
    assert "does not fit what was asked (seeds: stored [2235], wanted [29])" \
        in capsys.readouterr().out
    assert live.source == "live" and set(live.history["seed"]) == {29}
    assert live.config["seeds"] == [29] and 0.999 not in set(live.history["accuracy"])
    assert res.load(stored).manifest["config"]["seeds"] == [2235]


def test_stored_run_of_another_config_than_the_registry_is_refused(tmp_path, monkeypatch):
    S = setup(tmp_path, monkeypatch)
    stored = fake_stored_run(S.results_dir, "table2", [2235], epochs=3)
    assert S.get_run("table2", pes=["2d-fixed"], n_train=64, model=TINY_MODEL, seeds=[2235],
                     epochs=3).source == "stored"
    # a 3-epoch run where the registry's 200-epoch run belongs (results/paper-e200/): the
    # chapter asks for the tiny model but not for 3 epochs, so the registry's epochs differ
    home = runs.full_run_dir("table2", "paper", 200, S.results_dir)
    home.parent.mkdir(parents=True)
    stored.rename(home)
    with pytest.raises(runs.StoredRunMismatch, match=r"table2.*epochs: stored 3, wanted 200"):
        S.get_run("table2", pes=["2d-fixed"], n_train=64, model=TINY_MODEL, seeds=[2235])


def test_best_stored_scale_is_shown_first(tmp_path, monkeypatch):
    S = setup(tmp_path, monkeypatch)
    kw = dict(pes=["2d-fixed"], epochs=1, n_train=64, model=TINY_MODEL, seeds=[2235])
    cpu = fake_stored_run(S.results_dir, "table2", [2235], scale="cpu")
    assert S.get_run("table2", **kw).path == cpu
    paper = fake_stored_run(S.results_dir, "table2", [2235])
    assert S.get_run("table2", **kw).path == paper
    assert nb.Setup("paper", torch.device("cpu"), S.results_dir).get_run(
        "table2", **kw).path == paper
    shutil.rmtree(paper)  # a paper-scale chapter never shows the CPU run as the paper's
    with pytest.raises(FileNotFoundError):
        runs.get_run("table2", "paper", results_dir=S.results_dir, require_stored=True, **kw)


def test_paper_scale_live_run_never_trains_into_the_stored_folder(tmp_path, monkeypatch):
    S = setup(tmp_path, monkeypatch, scale="paper")
    stored = fake_stored_run(S.results_dir, "table2", [2235])
    before = (stored / "manifest.json").read_bytes()
    kw = dict(pes=["2d-fixed"], seeds=[29], epochs=1, n_train=64, model=TINY_MODEL,
              checkpoint_every=0, noise_levels=[])
    live = S.get_run("table2", **kw)
    assert live.source == "live" and live.path is not None
    assert live.path.is_relative_to(tmp_path / "cache")
    assert (stored / "manifest.json").read_bytes() == before
    again = S.get_run("table2", **kw)
    assert again.source == "cached" and again.config["seeds"] == [29]


def test_save_tables_carries_source_and_actual_config(tmp_path, monkeypatch):
    S = setup(tmp_path, monkeypatch)
    fake_stored_run(S.results_dir, "table2", [2235, 6312])
    exp = S.get_run("table2", pes=["2d-fixed"], n_train=64, model=TINY_MODEL, epochs=1,
                    seeds=[6312, 2235])
    t = pd.DataFrame({"pe": ["2d-fixed"], "source": ["model"]})
    (path,) = nb.save_tables(tmp_path / "out", final=t)
    got = pd.read_csv(path)
    assert got["source"].tolist() == ["model"]  # the table's own column is kept
    assert got["run_source"].tolist() == ["stored"] and got["run"].tolist() == ["table2"]
    assert json.loads(got["run_seeds"][0]) == [2235, 6312] and got["run_epochs"][0] == 1
    other = res.Run(exp.history, {"config": {"seeds": [1]}}, name="table1")
    (path,) = nb.save_tables(tmp_path / "out", exp, other, final=t.drop(columns="source"))
    got = pd.read_csv(path)
    assert got["source"][0] == "table2=stored; table1=live"
    assert got["run"][0] == "table2; table1"
    assert nb.save_tables(None, final=t) == []


def _chapter_like_notebook(path: Path) -> Path:
    """A chapter in miniature: parameters cell, S.get_run, nb.save_tables."""
    book = nbformat.v4
    params = book.new_code_cell("seeds = None\nresults_dir = None\nresults_out = None")
    params.metadata["tags"] = ["parameters"]
    body = book.new_code_cell(textwrap.dedent(f"""
        from lstpe.chapters import notebook as nb
        S = nb.setup("preview", "cpu", results_dir)
        exp = S.get_run("table2", pes=["2d-fixed"], seeds=seeds, epochs=1, n_train=64,
                        model={TINY_MODEL!r}, cache=False)
        print(exp.describe())
        nb.save_tables(results_out, final_val=exp.final()[["pe", "seed", "accuracy"]])
    """))
    doc = book.new_notebook(cells=[params, body])
    doc.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                  "language": "python"}
    nbformat.write(doc, path)
    return path


def test_stored_run_under_a_batch_grid_does_not_replace_the_grid_points(tmp_path, monkeypatch,
                                                                         capsys):
    pytest.importorskip("papermill")
    monkeypatch.setenv("PYTHONPATH", env()["PYTHONPATH"])  # the kernels import this checkout
    results_dir = tmp_path / "results"
    fake_stored_run(results_dir, "table2", [2235])
    chapter = _chapter_like_notebook(tmp_path / "chapter.ipynb")
    out = tmp_path / "batch"
    rc = main(["batch", str(chapter), "--grid", "seeds=[2235],[29]", "-p",
               f"results_dir={str(results_dir)!r}", "--out", str(out)])
    capsys.readouterr()
    assert rc == 0
    got = pd.read_csv(out / "collected.csv").set_index("point")
    # every row carries its grid point's seeds and the seeds of the run it actually shows
    assert got.loc["seeds=2235", "source"] == "stored"
    assert json.loads(got.loc["seeds=2235", "run_seeds"]) == [2235]
    assert got.loc["seeds=2235", "seed"] == 2235 and got.loc["seeds=2235", "accuracy"] == 0.999
    assert got.loc["seeds=29", "source"] == "live"
    assert json.loads(got.loc["seeds=29", "run_seeds"]) == [29]
    assert got.loc["seeds=29", "seed"] == 29 and got.loc["seeds=29", "accuracy"] != 0.999
    assert (got["status"] == "ok").all()
    assert [json.loads(s) for s in got["seeds"]] == [[2235], [29]]


# --------------------------------------------------------------------------- devices


def test_pick_device_names_devices_this_machine_lacks():
    if not torch.backends.mps.is_available():
        with pytest.raises(ValueError, match="'mps' was asked for but MPS"):
            runtime.pick_device("mps")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            runtime.pick_device("cuda:1")
    else:
        with pytest.raises(ValueError, match="CUDA device"):
            runtime.pick_device(f"cuda:{torch.cuda.device_count()}")
    with pytest.raises(ValueError, match="'meta' is not supported"):
        runtime.pick_device("meta")
    assert runtime.pick_device("cpu").type == "cpu"


# --------------------------------------------------------------------------- reproduce.py


def test_reproduce_refuses_a_finished_part_of_another_configuration(tmp_path, capsys,
                                                                     monkeypatch):
    args = ["reproduce", "run", "--scale", "preview", "--parts", "long4000", "--epochs", "1",
            "--d-model", "16",
            "--n-layers", "1", "--n-train", "64", "--out", str(tmp_path), "--no-progress"]
    assert main([*args, "--seeds", "2235"]) == 0
    manifest = (tmp_path / "long4000" / "manifest.json").read_bytes()
    assert main([*args, "--seeds", "2235", "--max-models", "1"]) == 0  # same run
    assert "finished run of this configuration exists, skipped" in capsys.readouterr().out
    assert main([*args, "--seeds", "29"]) == 2  # before any training
    err = capsys.readouterr().err
    assert "long4000 already holds a finished run with a different configuration" in err
    assert "seeds: [2235] there, [29] now" in err
    assert (tmp_path / "long4000" / "manifest.json").read_bytes() == manifest


# --------------------------------------------------------------------------- disk full


def test_disk_full_while_locking_leaves_no_lock(tmp_path, monkeypatch):
    import errno

    from lstpe.store.rundir import RunLock

    real = os.write

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(res.NotWritableError, match="No space left.*no lock was left"):
        RunLock(tmp_path / "run").acquire()
    monkeypatch.setattr(os, "write", real)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == []
    with RunLock(tmp_path / "run"):  # a rerun is not blocked
        pass


def test_disk_full_while_saving_artifacts_names_the_file(tmp_path, monkeypatch):
    path = tmp_path / "run" / "artifacts.pt"
    res.save_torch({"x": torch.zeros(2)}, path)

    def full(obj, f, *a, **k):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(res.WriteError, match=r"artifacts.pt: no space left.*keeps its previous"):
        res.save_torch({"x": torch.ones(2)}, path)
    monkeypatch.undo()
    assert torch.equal(res.load_torch(path)["x"], torch.zeros(2))
    assert sorted(p.name for p in path.parent.iterdir()) == ["artifacts.pt"]
