"""Values are checked by type in the config classes: the command line, the Python API and a
chapter's papermill parameters give the same ValueError naming the parameter and the value;
epochs, steps and the evaluation schedules are bounded before anything is allocated."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from lstpe.brain import config as brain_config
from lstpe.experiments.registry import run_config
from lstpe.training.config import MAX_EPOCHS, TrainConfig, preset


def _cfg(**kw) -> TrainConfig:
    return TrainConfig(**{"pes": ["2d-fixed"], "seeds": [1], **kw})


BAD_TRAIN = [
    ({"seeds": "26"}, "seeds", "'26' (str)"),
    ({"seeds": [2235.9]}, "seeds", "2235.9 (float)"),
    ({"seeds": [True]}, "seeds", "True (bool)"),
    ({"seeds": 2235}, "seeds", "2235 (int)"),
    ({"seeds": {1, 2}}, "seeds", "(set)"),
    ({"epochs": True}, "epochs", "True (bool)"),
    ({"epochs": "abc"}, "epochs", "'abc' (str)"),
    ({"epochs": 2.5}, "epochs", "2.5 (float)"),
    ({"epochs": float("inf")}, "epochs", "inf (float)"),
    ({"batch_size": "8"}, "batch_size", "'8' (str)"),
    ({"n_train": 64.5}, "n_train", "64.5 (float)"),
    ({"n_train": False}, "n_train", "False (bool)"),
    ({"max_models": "2"}, "max_models", "'2' (str)"),
    ({"checkpoint_every": 1.5}, "checkpoint_every", "1.5 (float)"),
    ({"lr": "0.1"}, "learning rate", "'0.1' (str)"),
    ({"lr": True}, "learning rate", "True (bool)"),
    ({"weight_decay": "0"}, "weight decay", "'0' (str)"),
    ({"pes": "rope"}, "pes", "'rope' (str)"),
    ({"pes": ["rope", 3]}, "pes", "3 (int)"),
    ({"amp": 1}, "amp", "1 (int)"),
    ({"save_attention": "yes"}, "save_attention", "'yes' (str)"),
    ({"device": 0}, "device", "0 (int)"),
    ({"eval_epochs": [1, "2"]}, "eval_epochs", "'2' (str)"),
    ({"noise_levels": 0.1}, "noise_levels", "0.1 (float)"),
    ({"dense_until": -1}, "dense_until", "-1"),
    ({"sparse_every": 0}, "sparse_every", "0"),
]


@pytest.mark.parametrize("kw, name, shown", BAD_TRAIN)
def test_train_config_refuses_a_value_of_the_wrong_type_naming_it(kw, name, shown):
    with pytest.raises(ValueError) as e:
        _cfg(**kw)
    assert name in str(e.value) and shown in str(e.value)


@pytest.mark.parametrize("kw, name, shown", [
    ({"seeds": "26"}, "seeds", "'26' (str)"),
    ({"seeds": [2235.9]}, "seeds", "2235.9 (float)"),
    ({"epochs": True}, "epochs", "True (bool)"),
    ({"epochs": "abc"}, "epochs", "'abc' (str)"),
    ({"epochs": 2.5}, "epochs", "2.5 (float)"),
    ({"sigmas": "12"}, "sigmas", "'12' (str)"),
    ({"sigmas": ["abc"]}, "sigmas", "'abc' (str)"),
    ({"epoch": 3}, "'epoch'", "valid: pes, seeds"),
])
def test_python_api_gives_the_same_errors(kw, name, shown):
    """The issue's cases: ``run_config`` (what chapters and ``get_run`` call)."""
    with pytest.raises(ValueError) as e:
        run_config("table2", "preview", **kw)
    assert name in str(e.value) and shown in str(e.value)


@pytest.mark.parametrize("kw, name, shown", [
    ({"seeds": "26"}, "BrainConfig.seeds", "'26' (str)"),
    ({"steps": True}, "BrainConfig.steps", "True (bool)"),
    ({"steps": "abc"}, "BrainConfig.steps", "'abc' (str)"),
    ({"steps": 2.5}, "BrainConfig.steps", "2.5 (float)"),
    ({"train_masks": 0.5}, "BrainConfig.train_masks", "0.5 (float)"),
    ({"lr": "1e-3"}, "BrainConfig.lr", "'1e-3' (str)"),
    ({"compile": 1}, "BrainConfig.compile", "1 (int)"),
    ({"pes": "rope"}, "BrainConfig.pes", "'rope' (str)"),
    ({"stepz": 3}, "'stepz'", "valid: pes, seeds"),
])
def test_brain_config_refuses_a_value_of_the_wrong_type_naming_it(kw, name, shown):
    with pytest.raises(ValueError) as e:
        run_config("brain", "preview", **kw)
    assert name in str(e.value) and shown in str(e.value)


def test_brain_train_mask_of_a_chapter_is_checked():
    with pytest.raises(ValueError, match=r"train_mask must be a real number, got '0.5' \(str\)"):
        brain_config.masks_for("preview", "0.5")


def test_valid_values_are_kept_and_whole_floats_and_numpy_ints_are_ints():
    cfg = run_config("table2", "preview", seeds=[2235.0, np.int64(6312)], epochs=np.int32(3),
                     n_train=64.0, lr=1, pes=("2d-fixed",), sigmas=None)
    assert cfg.seeds == [2235, 6312] and all(type(s) is int for s in cfg.seeds)
    assert type(cfg.epochs) is int and cfg.epochs == 3 and cfg.n_train == 64
    assert type(cfg.lr) is float and cfg.lr == 1.0 and cfg.pes == ["2d-fixed"]
    assert _cfg(seeds=np.array([3, 4])).seeds == [3, 4]
    assert _cfg(amp=np.bool_(True)).amp is True
    assert run_config("table2", "preview", sigmas=[0.5, np.float64(1)]).pes == [
        "2d-fixed", "learn-0.5", "learn-1"]
    b = run_config("brain", "preview", seeds=[7.0], steps=np.int64(4), eval_every=2)
    assert b.seeds == [7] and type(b.steps) is int


def test_get_run_refuses_a_bad_chapter_parameter_before_training(tmp_path):
    """Chapter 6 passes its papermill parameters to ``S.get_run``: ``epochs="abc"`` and
    ``epochs=2.5`` are a ValueError naming epochs (was a TypeError without a name)."""
    from lstpe.experiments import runs

    for bad, shown in (("abc", "'abc' (str)"), (2.5, "2.5 (float)")):
        with pytest.raises(ValueError, match="epochs") as e:
            runs.get_run("table2", "preview", results_dir=tmp_path, stored=False, cache=False,
                         epochs=bad)
        assert shown in str(e.value)


# --------------------------------------------------------------------------- bounds


def test_epochs_are_bounded_before_anything_is_allocated():
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as e:
        run_config("table2", "preview", epochs=100_000_000_000)
    assert "epochs" in str(e.value) and f"<= {MAX_EPOCHS}" in str(e.value)
    assert "100000000000" in str(e.value)
    assert time.perf_counter() - t0 < 5
    cfg = _cfg(epochs=MAX_EPOCHS, dense_until=2, sparse_every=MAX_EPOCHS // 4)
    assert cfg.schedule() == [0, 1, 2, *(k * MAX_EPOCHS // 4 for k in (1, 2, 3, 4))]


def _old_schedule(c: TrainConfig) -> list[int]:
    """The former set-based schedule, as a reference on small values."""
    if c.eval_epochs is not None:
        ep = {int(e) for e in c.eval_epochs if 0 <= int(e) <= c.epochs}
    else:
        ep = set(range(0, min(c.dense_until, c.epochs) + 1))
        ep |= set(range(0, c.epochs + 1, max(1, c.sparse_every)))
    ep.add(c.epochs)
    return sorted(ep)


def test_schedule_equals_the_reference_without_building_sets():
    for epochs in (1, 2, 7, 10, 12, 31):
        for dense in (0, 1, 3, 10, 50):
            for every in (1, 2, 5, 10, 40):
                c = _cfg(epochs=epochs, dense_until=dense, sparse_every=every)
                assert c.schedule() == _old_schedule(c), (epochs, dense, every)
    c = _cfg(epochs=12)
    for ev in ([], [4, 99, -1], [12, 0, 3, 3]):
        assert replace(c, eval_epochs=ev).schedule() == _old_schedule(replace(c, eval_epochs=ev))
    assert preset("paper").schedule()[-3:] == [180, 190, 200]


def test_brain_steps_rounds_and_data_sizes_are_bounded():
    with pytest.raises(ValueError, match=r"BrainConfig.steps must be <= 10000000"):
        run_config("brain", "preview", steps=100_000_000_000)
    with pytest.raises(ValueError, match=r"steps / eval_every must be <= 1000000"):
        run_config("brain", "preview", steps=brain_config.MAX_STEPS, eval_every=1)
    with pytest.raises(ValueError, match=r"BrainConfig.n_train must be <= 2000000"):
        run_config("brain", "preview", n_train=10**10)
    for steps, every in ((200, 50), (210, 50), (1, 7), (7, 1)):
        b = run_config("brain", "preview", steps=steps, eval_every=every)
        assert b.schedule() == sorted(set(range(0, steps + 1, every)) | {steps})


def test_papermill_parameters_of_a_chapter_get_the_same_error(tmp_path, monkeypatch, capsys):
    """``lstpe batch`` passes ``epochs`` to a chapter-like notebook that calls ``S.get_run``'s
    ``run_config``: each bad value fails its point with the ValueError naming it."""
    import os
    from pathlib import Path

    import nbformat
    import pandas as pd

    from lstpe.cli import main

    repo = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [repo, *filter(None, [os.environ.get("PYTHONPATH")])]))
    params = nbformat.v4.new_code_cell("epochs = None")
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell(
        "from lstpe.experiments.registry import run_config\n"
        "cfg = run_config('table2', 'preview', epochs=epochs)\n")
    doc = nbformat.v4.new_notebook(cells=[params, body])
    doc.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                  "language": "python"}
    nbformat.write(doc, tmp_path / "ch.ipynb")
    out = tmp_path / "out"
    rc = main(["batch", str(tmp_path / "ch.ipynb"), "--grid", "epochs=abc,2.5",
               "--out", str(out)])
    capsys.readouterr()
    assert rc == 1
    status = pd.read_csv(out / "summary.csv")["status"].tolist()
    assert status == [
        "failed: ValueError: TrainConfig.epochs must be an integer, got 'abc' (str)",
        "failed: ValueError: TrainConfig.epochs must be an integer, got 2.5 (float)"]
