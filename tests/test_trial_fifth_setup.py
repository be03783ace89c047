"""The fifth adversarial trial (issue 80), a chapter's first cell and the benchmark: findings
11, 29, 30, 31 and the benchmark's mislabel.

A chapter's parameters (papermill writes them into its ``parameters`` cell) are checked by
:func:`lstpe.chapters.notebook.setup` before anything trains, each by name; a missing home
folder (HOME unset, a uid without a passwd entry: a container) costs the cache, never the
chapter; ``--mode compiled`` times the compiled step. Each test failed before its fix.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import pwd
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lstpe import runtime
from lstpe.chapters import notebook as nb

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- 11


@pytest.fixture
def homeless(monkeypatch):
    """No home folder: HOME unset, no $LSTPE_CACHE, and a uid without a passwd entry (what
    ``pwd.getpwuid`` says in a container run as an arbitrary uid). IPython is imported first,
    as in a chapter's kernel (its own import of parso needs a home folder)."""
    import IPython  # noqa: F401

    for var in ("HOME", "LSTPE_CACHE", "LSTPE_RESULTS"):
        monkeypatch.delenv(var, raising=False)

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    with pytest.raises(RuntimeError, match="home directory"):  # the setup is what it says
        Path.home()


def test_without_a_home_folder_the_cache_is_a_private_temporary_folder(homeless):
    """Finding 11: with HOME unset and no passwd entry, ``cache_dir()`` raised "Could not
    determine home directory" (matplotlib copes with the same setup)."""
    where = runtime.cache_dir()
    assert where.is_dir() and os.access(where, os.W_OK)
    assert where.stat().st_mode & 0o077 == 0  # private: no other user reads or plants files
    assert runtime.cache_dir() == where  # one folder for the process
    assert runtime.find_results(REPO)[1] == "repository"
    runtime_dirs = runtime.find_results(Path("/"))  # the clone folders under "~" are skipped
    assert runtime_dirs[1] in ("package", "clone", "none")


@pytest.mark.usefixtures("homeless")
def test_without_a_home_folder_a_chapter_sets_up_and_reads_a_stored_run(capsys, monkeypatch):
    """Finding 11 as a reader meets it: a chapter's setup and a stored run's load (its maps
    at initialisation recomputed, :mod:`lstpe.experiments.init_maps`) work without a home."""
    from lstpe.experiments import init_maps as im

    monkeypatch.setattr(im, "_MEMO", {})
    S = nb.setup("cpu", "cpu", REPO / "results", verbose=True)
    assert "stored runs:" in capsys.readouterr().out
    run = S.get_run("table2", require_stored=True, epochs=12, progress=False)
    maps = run.artifacts[im.KEY]
    assert maps.shape[1] == 108 and bool(torch.isfinite(maps.float()).all())
    assert (maps[:, :im.HEAD].float() - run.artifacts[im.HEAD_KEY].float()).abs().max() \
        <= im.MAP_ATOL


# --------------------------------------------------------------------------- 29


@pytest.mark.parametrize("value", [0, "", 1.5, b"results", ["results"]])
def test_results_dir_is_none_or_a_folder_path(value):
    """Finding 29: ``results_dir=0`` gave a TypeError naming nothing, ``results_dir=''``
    silently meant the default folder."""
    with pytest.raises(ValueError, match=r"(?=.*results_dir)(?=.*None or a folder)"):
        nb.setup("preview", "cpu", value, verbose=False)


def test_results_dir_given_as_a_path_or_a_string_is_used(tmp_path):
    assert nb.setup("preview", "cpu", tmp_path, verbose=False).results_dir == tmp_path
    assert nb.setup("preview", "cpu", str(tmp_path), verbose=False).results_dir == tmp_path
    assert nb.setup("preview", "cpu", None, verbose=False).results_dir == \
        runtime.default_results_dir()


# --------------------------------------------------------------------------- 30, 31


def _params_cells() -> dict[str, set[str]]:
    """Every chapter's parameter names, read from its ``parameters`` cell."""
    out = {}
    for f in sorted((REPO / "book").glob("*.ipynb")):
        cells = json.loads(f.read_text())["cells"]
        for c in cells:
            if "parameters" in c.get("metadata", {}).get("tags", []):
                src = "".join(c["source"])
                out[f.name] = {ln.split("=")[0].strip() for ln in src.splitlines()
                               if "=" in ln.split("#")[0]}
    return out


def test_every_parameter_of_every_chapter_has_a_validator():
    names = set().union(*_params_cells().values())
    assert {"seeds", "epochs", "sigmas", "n_perm", "steps", "train_mask"} <= names
    positional = {"scale", "device", "results_dir"}
    assert names - positional <= set(nb.PARAMETERS), names - positional - set(nb.PARAMETERS)


def _setup_keywords(f: Path) -> set[str] | None:
    """The keyword names of the chapter's ``nb.setup(...)`` call (None: it makes none)."""
    for c in json.loads(f.read_text())["cells"]:
        if c["cell_type"] != "code" or "setup(" not in "".join(c["source"]):
            continue
        for node in ast.walk(ast.parse("".join(c["source"]))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "setup":
                return {k.arg for k in node.keywords}
    return None


def test_every_chapter_passes_each_of_its_parameters_to_setup():
    """Finding 30: chapter 10 had its ``n_perm`` validator but never called it, so 2.5 trained
    for 89 s before failing. Each name in a chapter's parameters cell (but the three positional
    ones) reaches ``nb.setup``, which checks it before anything runs."""
    missing = {}
    for name, params in _params_cells().items():
        kws = _setup_keywords(REPO / "book" / name)
        assert kws is not None, f"{name} never calls nb.setup"
        if params - {"scale", "device", "results_dir"} - kws:
            missing[name] = sorted(params - {"scale", "device", "results_dir"} - kws)
    assert not missing, missing


def test_chapter_10_refuses_a_fractional_n_perm_before_it_trains(tmp_path, monkeypatch):
    """Chapter 10's setup cell, run with n_perm = 2.5 over an empty store, stops in setup with
    an error naming n_perm: nothing is trained or loaded."""
    cells = json.loads((REPO / "book" / "10_brain.ipynb").read_text())["cells"]
    params = next("".join(c["source"]) for c in cells
                  if "parameters" in c.get("metadata", {}).get("tags", []))
    setup = next("".join(c["source"]) for c in cells
                 if c["cell_type"] == "code" and "nb.setup(" in "".join(c["source"]))
    head = setup[:setup.index("ASK = ")]  # the imports and the setup call, nothing that loads
    env: dict = {}
    exec(params, env)
    env.update(n_perm=2.5, results_dir=str(tmp_path))
    with pytest.raises(ValueError, match="n_perm = 2.5"):
        exec(head, env)


GOOD = {
    "seeds": [None, [2235], (2235, 6312), [0], [np.int64(7)], [2235.0]],
    "epochs": [None, 1, 5, 200, np.int64(3), 5.0],
    "steps": [None, 1, 50_000],
    "sigmas": [None, [0.1], (0.2, 2), [1e-3, 1e3], [np.float64(0.5)]],
    "pes": [None, ["2d-fixed", "learn-0.2"], ("rope",)],
    "n_perm": [1, 500],
    "train_mask": [0.5, 0.1, 0.9],
    "results_out": [None, "out"],
}

BAD = {  # each value the issue names, and the like
    "seeds": ["2235", 2235, [2.5], [True], [-1], [], [2235, 2235], [2**40],
              [math.nan]],
    "epochs": [0, -5, 2.5, math.nan, math.inf, True, "5", [5]],
    "steps": [0, 2.5, math.inf, False, "100"],
    "sigmas": [[1e39], [1e4], [0], [-0.1], [math.nan], [math.inf], 0.2, "0.2", [True],
               [], [0.2, 0.2]],
    "pes": [["learn"], ["2d-fixd"], "rope", [3], []],
    "n_perm": [2.5, "500", True, 0, -5, None, math.nan],
    "train_mask": [0, 1, 1.5, -0.5, math.nan, "0.5", True, None],
    "results_out": ["", 0, 1.5],
}


@pytest.mark.parametrize("name,value", [(n, v) for n, vs in GOOD.items() for v in vs])
def test_a_good_parameter_passes(name, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    S = nb.setup("preview", "cpu", tmp_path, verbose=False, **{name: value})
    assert name in S.params


@pytest.mark.parametrize("name,value", [(n, v) for n, vs in BAD.items() for v in vs])
def test_a_bad_parameter_is_refused_by_name_before_anything_runs(name, value, monkeypatch):
    """Findings 30 and 31: chapter 10's ``n_perm = 2.5`` trained for 89 s and failed with a
    TypeError not naming it; chapter 4's ``seeds = "2235"`` ran seeds 2, 2, 3, 5."""
    monkeypatch.setattr(nb, "pick_device", lambda d: pytest.fail("went past the checks"))
    with pytest.raises(ValueError) as e:
        nb.setup("preview", "cpu", None, verbose=False, **{name: value})
    msg = str(e.value)
    assert msg.startswith(f"{name} ") or f" {name} " in msg, msg
    assert repr(value)[:20] in msg or str(value)[:20] in msg, msg
    assert "accepts" in msg, msg


def test_an_unknown_parameter_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"(?=.*'seed')(?=.*seeds)"):
        nb.setup("preview", "cpu", None, verbose=False, seed=[2235])


def test_the_positional_call_of_every_chapter_still_works(tmp_path):
    S = nb.setup("preview", "cpu", tmp_path, False)
    assert (S.scale, S.device.type, S.params) == ("preview", "cpu", {})
    with pytest.raises(ValueError, match=r"(?=.*scale)(?=.*'huge')"):
        nb.setup("huge", "cpu", tmp_path, False)
    with pytest.raises(ValueError, match=r"(?=.*device)(?=.*0)"):
        nb.setup("preview", 0, tmp_path, False)


def test_validated_values_are_what_the_chapter_then_uses(tmp_path):
    S = nb.setup("preview", "cpu", tmp_path, False, seeds=(2235.0, 6312), sigmas=(0.2, 2),
                 epochs=5.0, n_perm=np.int64(20))
    assert S.params == {"seeds": [2235, 6312], "sigmas": [0.2, 2.0], "epochs": 5, "n_perm": 20}
    assert all(type(v) is int for v in S.params["seeds"]) and type(S.params["epochs"]) is int


# --------------------------------------------------------------------------- the benchmark


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("train_throughput_fifth",
                                                  REPO / "benchmarks" / "train_throughput.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_benchmark_times_the_step_its_mode_names(bench, monkeypatch, small_splits):
    """The mislabel: ``--mode compiled`` was accepted and timed the eager step under the
    label "compiled"."""
    from lstpe.training.config import preset

    built = []

    def fake(name):
        class Step:
            def __init__(self, *a, **k):
                built.append(name)

            def __call__(self, *a):
                pass
        return Step

    for name in ("EagerStep", "GraphStep", "CompiledStep"):
        monkeypatch.setattr(bench, name, fake(name), raising=False)
    cfg, splits = preset("preview"), small_splits
    cpu = torch.device("cpu")
    for mode, want in (("compiled", "CompiledStep"), ("eager", "EagerStep")):
        built.clear()
        bench.batched_step_fn(1, cfg, splits, cpu, mode=mode)
        assert built == [want], (mode, built)
    with pytest.raises(ValueError, match=r"(?=.*'auto')(?=.*eager)(?=.*compiled)"):
        bench.batched_step_fn(1, cfg, splits, cpu, mode="auto")  # run() resolves it first


def test_the_benchmark_refuses_an_unknown_mode_naming_it(bench, capsys):
    assert bench.main(["--size", "preview", "--models", "1", "--mode", "compiledd"]) == 2
    err = capsys.readouterr().err
    assert "compiledd" in err and "compiled" in err.replace("compiledd", "")
