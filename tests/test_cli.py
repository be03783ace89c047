"""The ``lstpe`` command line: argument errors, a tiny training run, the grid syntax, batch."""

from __future__ import annotations

import json
import math

import nbformat
import pandas as pd
import pytest
import torch

from lstpe.chapters.batch import grid_points, point_name
from lstpe.chapters.values import parse_grid, parse_params, parse_value, split_top_level
from lstpe.cli import build_config, main
from lstpe.experiments.registry import learn_pes
from lstpe.store import results as res
from lstpe.training.engine import DIGEST_KEY, state_digest

TINY = ["--epochs", "1", "--d-model", "16", "--n-layers", "1", "--n-train", "64",
        "--no-progress"]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("argv, bad", [
    (["train", "--pe", "bogus-pe", "--out", "OUT"], "bogus-pe"),
    (["train", "--preset", "nopreset", "--pe", "2d-fixed", "--out", "OUT"], "nopreset"),
    (["train", "--pe", "2d-fixed", "--optimizer", "rmsprop", "--out", "OUT"], "rmsprop"),
    (["train", "--pe", "learn-0.2", "learn-0.20", "--out", "OUT"],
     "duplicate PEs in ['learn-0.2', 'learn-0.2']"),
    (["sweep", "--sigmas", "0.1", "-0.5", "--out", "OUT"], "-0.5"),
    (["sweep", "--sigmas", "0.1", "0.3", "0.3", "--out", "OUT"], "sigma 0.3 is given twice"),
    (["batch", "no/such/notebook.ipynb", "--grid", "a=1", "--out", "OUT"],
     "no/such/notebook.ipynb"),
    (["train", "--max-models", "0", "--out", "OUT"], "(--max-models) must be >= 1, got 0"),
    (["train", "--checkpoint-every", "-1", "--out", "OUT"], "(--checkpoint-every) must be >= 0"),
    (["train", "--lr", "nan", "--out", "OUT"], "learning rate (--lr) must be a finite"),
    (["train", "--lr", "inf", "--out", "OUT"], "got inf"),
    (["train", "--weight-decay", "nan", "--out", "OUT"], "weight decay"),
    (["train", "--seeds", "1", "18446744073709551616", "--out", "OUT"],
     "seed 18446744073709551616 does not fit in 64 bits"),
    (["train", "--n-train", "0", "--out", "OUT"], "(--n-train) must be >= 1, got 0"),
    (["train", "--n-train", "123456", "--out", "OUT"], "123456"),
    (["train", "--data", "bogus", "--out", "OUT"], "bogus"),
    (["train", "--d-model", "0", "--out", "OUT"], "d_model must be >= 1, got 0"),
    (["train", "--device", "tpu", "--out", "OUT"], "tpu"),
    (["sweep", "--sigmas", "nan", "--out", "OUT"], "nan"),
])
def test_bad_arguments_exit_2_naming_the_value(argv, bad, tmp_path, capsys):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("lstpe: error:")
    assert bad in err
    assert "training" not in out  # every check comes before training starts
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has MPS")
def test_absent_mps_device_is_an_error_before_training(tmp_path, capsys):
    assert main(["train", "--device", "mps", *TINY, "--out", str(tmp_path / "o")]) == 2
    out, err = capsys.readouterr()
    assert "'mps'" in err and "not available" in err and "training" not in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_absent_cuda_device_is_an_error_before_training(tmp_path, capsys):
    assert main(["train", "--device", "cuda", *TINY, "--out", str(tmp_path / "o")]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_argparse_errors_return_2_and_help_returns_0(capsys):
    assert main(["train", "--pe", "2d-fixed"]) == 2  # --out is required
    assert "--out" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert main(["--help"]) == 0


# --------------------------------------------------------------------------- configs


def test_build_config_uses_the_papers_optimizer_settings():
    # Paper: Adam lr 1e-4 no wd; SGD lr 1e-3 (Table 4); AdamW weight decay 0.1 (Tables 5-6).
    assert (build_config("paper").lr, build_config("paper").weight_decay) == (1e-4, 0.0)
    sgd = build_config("paper", optimizer="sgd")
    assert (sgd.optimizer, sgd.lr, sgd.weight_decay) == ("sgd", 1e-3, 0.0)
    adamw = build_config("paper", optimizer="adamw")
    assert (adamw.lr, adamw.weight_decay) == (1e-4, 0.1)
    assert build_config("paper", optimizer="sgd", lr=0.5, weight_decay=0.01).lr == 0.5
    cfg = build_config("preview", {"d_model": 24, "n_layers": 3, "n_heads": None}, epochs=2)
    assert (cfg.model.d_model, cfg.model.n_layers, cfg.epochs) == (24, 3, 2)
    assert cfg.model.n_heads == build_config("preview").model.n_heads


# --------------------------------------------------------------------------- train


def test_tiny_train_writes_a_complete_run_and_reruns_without_retraining(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--preset", "preview", "--pe", "learn-0.2", "--pe", "2d-fixed",
            "--seeds", "2235", "--checkpoint-every", "1", *TINY, "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    run = res.load(out)
    h = run.history
    assert sorted(h["pe"].unique()) == ["2d-fixed", "learn-0.2"]
    assert set(h["seed"]) == {2235} and set(h["epoch"]) == {0, 1}
    assert set(h["split"]) == {"train", "test", "val", "val_dropout", "train_running"}
    assert set(h["condition"]) == {"all", "1", "2", "3"}
    cfg = run.manifest["config"]
    assert (cfg["epochs"], cfg["model"]["d_model"], cfg["n_train"]) == (1, 16, 64)
    a = run.artifacts
    assert a["labels"] == ["learn-0.2", "2d-fixed"]
    assert tuple(a["val_logits"].shape) == (2, 108, 4)
    assert tuple(a["pe_final"].shape) == (2, 1, 16, 16)
    # The printed table is the final validation accuracy of each PE (one seed: SD is NaN).
    fin = h[(h.split == "val") & (h.condition == "all") & (h.epoch == 1)].set_index("pe")
    for pe in ("learn-0.2", "2d-fixed"):
        line = next(ln for ln in printed.splitlines() if ln.split()[:1] == [pe])
        assert line.split()[1:] == ["1", "0", "1", f"{fin.loc[pe, 'accuracy']:.3f}", "NaN"]
    assert str(out.resolve()) in printed
    assert not (out / ".lock").exists()  # the lock is released
    assert run.manifest["resumed"] is False

    before = (out / "history.csv").read_bytes()
    assert main(argv) == 0
    assert "already holds this finished run" in capsys.readouterr().out
    assert (out / "history.csv").read_bytes() == before

    # A run cut off after its last checkpoint (no manifest yet) resumes from the checkpoint:
    # a marker planted in the checkpoint's history shows up in the rerun's history.
    (out / "manifest.json").unlink()
    (ckpt,) = (out / "checkpoints").glob("*.pt")  # one batchable group: one checkpoint
    state = torch.load(ckpt, weights_only=False)
    state.pop(DIGEST_KEY)
    state["history"][0]["loss"] = 123.25
    torch.save({**state, DIGEST_KEY: state_digest(state)}, ckpt)  # a consistent checkpoint
    assert main(argv) == 0
    assert "resuming 2 models" in capsys.readouterr().out
    assert 123.25 in set(res.load(out, artifacts=False).history["loss"])

    changed = [a if a != "2235" else "6312" for a in argv]
    assert main(changed) == 2
    err = capsys.readouterr().err
    assert "different configuration" in err and "seeds" in err


def test_tiny_sweep_trains_learn_sigma_for_each_sigma(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "--sigmas", "0.5", "1", "0.1234567", "--seeds", "29",
                 "--optimizer", "sgd", *TINY, "--out", str(out)]) == 0
    run = res.load(out, artifacts=False)
    # sigma is kept as given (":g" formatting used to round 0.1234567 to 0.123457)
    assert run.manifest["config"]["pes"] == ["learn-0.5", "learn-1", "learn-0.1234567"]
    assert run.manifest["config"]["optimizer"] == "sgd"
    assert sorted(run.history["sigma"].unique()) == [0.1234567, 0.5, 1.0]
    assert "learn-0.5" in capsys.readouterr().out


def test_sweep_pes_keep_sigma_and_reject_duplicates():
    assert learn_pes([0.1234567, 2.0]) == ["learn-0.1234567", "learn-2"]
    with pytest.raises(ValueError, match="sigma 0.3 is given twice"):
        learn_pes([0.3, 0.7, 0.3])
    assert main(["sweep", "--sigmas", "0.3", "0.3", "--out", "unused"]) == 2


@pytest.mark.parametrize("with_checkpoint", [False, True])
def test_ctrl_c_promises_a_resume_only_with_a_checkpoint(tmp_path, capsys, monkeypatch,
                                                         with_checkpoint):
    import lstpe.training.train

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(lstpe.training.train, "train", interrupted)
    out = tmp_path / "run"
    if with_checkpoint:
        res.save_torch({"epoch": 1}, out / "checkpoints" / "chunk0.pt")
    assert main(["train", *TINY, "--out", str(out)]) == 130
    err = capsys.readouterr().err
    if with_checkpoint:
        assert "resume from the last checkpoint" in err
    else:
        assert "before any checkpoint was written" in err and "resume" not in err
    assert not (out / ".lock").exists()


# --------------------------------------------------------------------------- grid syntax


@pytest.mark.parametrize("text, value", [
    ("0.1", 0.1), ("2235", 2235), ("-3", -3), ("[2235]", [2235]), ("[1, 2]", [1, 2]),
    ("'a b'", "a b"), ('"x,y"', "x,y"), ("True", True), ("None", None), ("true", True),
    ("null", None), ("preview", "preview"), ("2d-fixed", "2d-fixed"),
    ("learn-0.2", "learn-0.2"), ("results/a.csv", "results/a.csv"), ("{'k': 1}", {"k": 1}),
    ("  7 ", 7),
])
def test_parse_value(text, value):
    assert parse_value(text) == value
    assert type(parse_value(text)) is type(value)


@pytest.mark.parametrize("text", ["", "  ", "[1, 2", "hello world", "a;b", "f(1)", "{"])
def test_parse_value_rejects(text):
    with pytest.raises(ValueError, match="parameter value"):
        parse_value(text)


def test_split_top_level():
    assert split_top_level("[1,2],[3]") == ["[1,2]", "[3]"]
    assert split_top_level("'a,b',c") == ["'a,b'", "c"]
    assert split_top_level('{"k": [1, 2]},(3, 4),5') == ['{"k": [1, 2]}', "(3, 4)", "5"]
    assert split_top_level(r"'it\'s,x',y") == [r"'it\'s,x'", "y"]
    assert split_top_level("abc") == ["abc"]
    for bad in ("[1,2", "1]", "(1]", "'open"):
        with pytest.raises(ValueError, match="unbalanced|unclosed|unterminated"):
            split_top_level(bad)


def test_parse_grid_and_points():
    grid = parse_grid(["seeds=[2235],[6312]", "sigmas=0.1,0.5", 'pes=["a","b"],c'])
    assert grid == {"seeds": [[2235], [6312]], "sigmas": [0.1, 0.5], "pes": [["a", "b"], "c"]}
    pts = grid_points(grid)
    assert len(pts) == 2 * 2 * 2
    assert pts[0] == {"seeds": [2235], "sigmas": 0.1, "pes": ["a", "b"]}
    assert pts[-1] == {"seeds": [6312], "sigmas": 0.5, "pes": "c"}
    assert len({point_name(p) for p in pts}) == 8
    assert point_name({"seeds": [1, 2], "scale": "preview"}) == "seeds=1+2__scale=preview"
    assert grid_points({}) == [{}]
    assert parse_params(["seeds=[1,2]", "scale=preview"]) == {"seeds": [1, 2],
                                                               "scale": "preview"}


@pytest.mark.parametrize("spec, bad", [
    ("seeds", "seeds"), ("seeds=[1,2", "[1,2"), ("x=1,,2", "x=1,,2"), ("1x=3", "1x"),
    ("a=hello world", "hello world"), ("=3", "=3"),
])
def test_parse_grid_rejects(spec, bad):
    with pytest.raises(ValueError) as e:
        parse_grid([spec])
    assert bad in str(e.value)


def test_parse_grid_rejects_duplicate_keys():
    with pytest.raises(ValueError, match="'a' is given twice"):
        parse_grid(["a=1", "a=2"])


def test_point_name_is_short_and_unique_for_long_values():
    a, b = {"v": list(range(100))}, {"v": list(range(101))}
    assert len(point_name(a)) <= 120 and point_name(a) != point_name(b)


# --------------------------------------------------------------------------- batch


def _write_notebook(path):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('seeds = [0]\nscale = "none"\nresults_out = None')
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell(
        "import csv, os\n"
        "assert sum(seeds) < 100, 'seeds too large'\n"
        "assert scale != 'fail', 'asked to fail'\n"
        "if results_out:\n"
        "    os.makedirs(results_out, exist_ok=True)\n"
        "    with open(os.path.join(results_out, 't.csv'), 'w', newline='') as f:\n"
        "        w = csv.writer(f)\n"
        "        w.writerow(['total', 'scale'])\n"
        "        w.writerow([sum(seeds), scale])\n"
    )
    nb.cells = [params, body]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)
    return path


def test_batch_bad_grid_and_unknown_parameter(tmp_path, capsys):
    nb = _write_notebook(tmp_path / "nb.ipynb")
    assert main(["batch", str(nb), "--grid", "seeds=[1,2", "--out", str(tmp_path / "o")]) == 2
    assert "[1,2" in capsys.readouterr().err
    assert main(["batch", str(nb), "--grid", "sigma=0.1", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "'sigma'" in err and "seeds, scale, results_out" in err
    assert main(["batch", str(nb), "--grid", "results_out=x", "--out",
                 str(tmp_path / "o")]) == 2
    assert main(["batch", str(nb), "--kernel", "no-such-kernel", "--out",
                 str(tmp_path / "o")]) == 2
    assert "no-such-kernel" in capsys.readouterr().err
    assert not list((tmp_path).glob("o/*.ipynb"))


def test_batch_runs_every_point_and_collects_tables(tmp_path, capsys):
    nb = _write_notebook(tmp_path / "nb.ipynb")
    out = tmp_path / "batch"
    rc = main(["batch", str(nb), "--grid", "seeds=[1,2],[5],[100]", "-p", "scale=tiny",
               "--out", str(out)])
    assert rc == 1  # the seeds=[100] point fails its assertion; the others are collected
    captured = capsys.readouterr()
    assert "seeds too large" in captured.out and "1 of 3 point(s) failed" in captured.err
    assert sorted(p.name for p in out.glob("*.ipynb")) == [
        "seeds=1+2.ipynb", "seeds=100.ipynb", "seeds=5.ipynb"]
    executed = nbformat.read(out / "seeds=5.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert "seeds = [5]" in injected[0].source and "results_out" in injected[0].source
    got = pd.read_csv(out / "collected.csv")
    # -p scale is a parameter column too: grid_scale, as the table has its own scale column
    assert sorted(got.columns) == ["csv", "grid_scale", "point", "scale", "seeds", "status",
                                   "total"]
    got = got.set_index("point")
    assert got.loc["seeds=1+2", "total"] == 3 and got.loc["seeds=5", "total"] == 5
    assert [json.loads(s) for s in got["seeds"]] == [[1, 2], [5], [100]]
    assert set(got["grid_scale"]) == {"tiny"}
    assert got["scale"].fillna("-").tolist() == ["tiny", "tiny", "-"]
    assert got["csv"].fillna("-").tolist() == ["t.csv", "t.csv", "-"]
    assert got.loc["seeds=5", "status"] == "ok"
    assert got.loc["seeds=100", "status"].startswith("failed") and \
        math.isnan(got.loc["seeds=100", "total"])
    # integer columns stay integers (the failed point's row has no value, not "3.0")
    lines = (out / "collected.csv").read_text().splitlines()
    assert lines[1].split(",")[0] == "3"
    summary = pd.read_csv(out / "summary.csv").set_index("point")
    assert summary.loc["seeds=5", "status"] == "ok"
    assert summary.loc["seeds=100", "status"].startswith("failed")
    assert summary["csv_files"].tolist() == [1, 1, 0]
    assert not math.isnan(summary["seconds"].sum())


def test_batch_rerun_collects_nothing_stale(tmp_path, capsys):
    nb = _write_notebook(tmp_path / "nb.ipynb")
    out = tmp_path / "batch"
    argv = ["batch", str(nb), "--grid", "seeds=[1]", "--out", str(out)]
    assert main([*argv, "-p", "scale=first"]) == 0
    assert pd.read_csv(out / "collected.csv")["total"].tolist() == [1]
    assert main([*argv, "-p", "scale=fail"]) == 1  # the point fails this time
    capsys.readouterr()
    got = pd.read_csv(out / "collected.csv")
    assert len(got) == 1 and got["status"][0].startswith("failed")
    assert "first" not in (out / "collected.csv").read_text()  # the old table is gone
    assert not list((out / "seeds=1").glob("*.csv"))


def test_batch_refuses_a_folder_it_did_not_write(tmp_path, capsys):
    nb = _write_notebook(tmp_path / "nb.ipynb")
    out = tmp_path / "batch"
    (out / "seeds=1").mkdir(parents=True)
    (out / "seeds=1" / "mine.txt").write_text("precious")
    assert main(["batch", str(nb), "--grid", "seeds=[1]", "--out", str(out)]) == 2
    assert "was not written by lstpe batch" in capsys.readouterr().err
    assert (out / "seeds=1" / "mine.txt").read_text() == "precious"


@pytest.mark.parametrize("content", ["", "hello", '{"cells": 3}'])
def test_batch_names_a_file_that_is_not_a_notebook(tmp_path, capsys, content):
    fake = tmp_path / "fake.ipynb"
    fake.write_text(content)
    assert main(["batch", str(fake), "--grid", "seeds=[1]", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "fake.ipynb is not a Jupyter notebook" in err


# --------------------------------------------------------------------------- reliability


def test_huge_epochs_is_refused_before_anything_is_built(tmp_path, capsys):
    argv = ["train", "--preset", "preview", "--n-train", "64", "--d-model", "16", "--n-layers",
            "1", "--seeds", "1", "--no-progress", "--epochs", "100000000000",
            "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "TrainConfig.epochs must be <= 1000000" in err and "100000000000" in err
    assert "training" not in out and not (tmp_path / "o").exists()


def test_compile_flag_selects_the_compile_step_mode():
    from lstpe.cli import _model_overrides, _train_overrides, build_parser

    args = build_parser().parse_args(["train", "--compile", "--out", "o"])
    cfg = build_config(args.preset, _model_overrides(args), pes=args.pe,
                       **_train_overrides(args))
    assert cfg.step_mode == "compile"


def test_batch_never_replaces_files_it_did_not_write(tmp_path, capsys):
    nb = _write_notebook(tmp_path / "nb.ipynb")
    out = tmp_path / "batch"
    out.mkdir()
    mine = {n: f"my own {n}" for n in ("default.ipynb", "summary.csv", "collected.csv",
                                        "seeds=1.ipynb", "notes.txt")}
    for n, text in mine.items():
        (out / n).write_text(text)
    for grid, named in ((["--grid", "seeds=[1]"], "seeds=1.ipynb"), ([], "default.ipynb")):
        assert main(["batch", str(nb), *grid, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "not written by lstpe batch" in err
        assert all(n in err for n in (named, "summary.csv", "collected.csv"))
        assert "notes.txt" not in err
    assert {p.name: p.read_text() for p in out.iterdir()} == mine  # nothing written
    # Moved away, the batch runs; a file it did not write (notes.txt) stays as it was.
    for n in ("summary.csv", "collected.csv", "seeds=1.ipynb"):
        (out / n).unlink()
    argv = ["batch", str(nb), "--grid", "seeds=[1]", "--out", str(out)]
    assert main(argv) == 0
    assert main(argv) == 0  # its own files are replaced by a rerun
    capsys.readouterr()
    assert (out / "notes.txt").read_text() == mine["notes.txt"]
    assert (out / "default.ipynb").read_text() == mine["default.ipynb"]
    # A file it wrote and the user changed since is the user's now.
    (out / "summary.csv").write_text("my edits")
    assert main(argv) == 2
    assert "summary.csv" in capsys.readouterr().err
    assert (out / "summary.csv").read_text() == "my edits"


def test_batch_kernel_applies_to_a_notebook_without_kernelspec(tmp_path, monkeypatch, capsys):
    """--kernel runs the notebook whether it names a kernel or none (a custom kernel that
    sets an environment variable shows which one ran)."""
    import sys

    spec = tmp_path / "jupyter" / "kernels" / "lstpe-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "lstpe test", "language": "python",
        "env": {"LSTPE_TEST_KERNEL": "custom"}}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("results_out = None")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "import os\n"
        "os.makedirs(results_out, exist_ok=True)\n"
        "with open(os.path.join(results_out, 'k.csv'), 'w') as f:\n"
        "    f.write('kernel\\n' + os.environ.get('LSTPE_TEST_KERNEL', 'default') + '\\n')\n")]
    assert "kernelspec" not in nb.metadata
    bare = tmp_path / "bare.ipynb"
    nbformat.write(nb, bare)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    named = tmp_path / "named.ipynb"
    nbformat.write(nb, named)
    for path in (bare, named):
        out = tmp_path / f"out-{path.stem}"
        rc = main(["batch", str(path), "--kernel", "lstpe-test", "--out", str(out)])
        assert rc == 0, capsys.readouterr()
        assert pd.read_csv(out / "collected.csv")["kernel"].tolist() == ["custom"]
    out = tmp_path / "out-python3"
    assert main(["batch", str(bare), "--kernel", "python3", "--out", str(out)]) == 0
    assert pd.read_csv(out / "collected.csv")["kernel"].tolist() == ["default"]


def test_training_flags_are_declared_once_for_train_sweep_and_reproduce():
    from lstpe.cli import build_parser
    from lstpe.training.flags import TRAINING_FLAGS

    argv = ["--seeds", "1", "2", "--epochs", "3", "--n-train", "64", "--d-model", "16",
            "--n-layers", "1", "--device", "cpu", "--amp", "--max-models", "2",
            "--checkpoint-every", "1", "--no-progress"]
    assert {a.lstrip("-") for a in argv if a.startswith("--")} == set(TRAINING_FLAGS)
    for head in (["train", "--out", "o"], ["sweep", "--out", "o"], ["reproduce", "run"],
                 ["reproduce", "plan"]):
        args = build_parser().parse_args([*head, *argv])
        assert (args.seeds, args.epochs, args.n_train, args.d_model, args.n_layers) == \
            ([1, 2], 3, 64, 16, 1)
        assert (args.device, args.amp, args.max_models, args.checkpoint_every,
                args.no_progress) == ("cpu", True, 2, 1, True)
