"""Reliability of what decides and prepares the campaign's training: the precision pair
(finding 3) and the plans' numbers and folders (finding 9) of the adversarial trial on the
landed head.

A pair is written here by hand (:func:`write_pair`): ``PAIR_PES`` x ``PAIR_SEEDS`` in fp32 and
bf16, where bf16 moves accuracy far less than a change of seed, so that a sound pair earns
bf16 and every test spoils one thing of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from lstpe import cli
from lstpe.campaign import precision as pr
from lstpe.experiments.plan import plan_table
from lstpe.store import results as res

CPU = torch.device("cpu")


def _fake_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU with bf16 instructions, as the precision module sees it."""
    flags = ["avx2", "fma", "avx512_bf16", "amx_bf16"]
    monkeypatch.setattr(pr, "cpu_flags", lambda *a, **k: flags)
    monkeypatch.setattr(pr, "has_bf16", lambda *a, **k: True)


def _history(pe: str, seed: int, epochs: int, shift: float) -> pd.DataFrame:
    """One model's history: validation accuracy (val_dropout, all) rising from chance, one
    offset per seed (the seed spread: 0.05) plus ``shift``."""
    e = np.arange(epochs + 1)
    acc = 0.25 + 0.5 * (1 - np.exp(-e / 5)) + 0.05 * PAIR_SEED_INDEX[seed] + shift
    return pd.DataFrame({"model": 0, "pe": pe, "pe_name": pe, "sigma": np.nan, "seed": seed,
                         "optimizer": "adam", "epoch": e, "split": "val_dropout",
                         "condition": "all", "accuracy": acc, "loss": 1.0 - acc,
                         "diverged": False})


PAIR_SEED_INDEX = {s: i for i, s in enumerate(pr.PAIR_SEEDS)}

Mutate = Callable[[str, str, int, pd.DataFrame, dict], "tuple[pd.DataFrame, dict] | None"]


def write_pair(results: Path, tag: str | None = None, epochs: int | None = None,
               mutate: Mutate | None = None) -> Path:
    """Store a hand-made pair under ``results/precision_pair/<tag>`` (default: this CPU's tag);
    ``mutate(name, pe, seed, history, manifest)`` may return a changed (history, manifest)."""
    epochs = pr.PAIR_EPOCHS if epochs is None else epochs
    base = pr.pair_dir(results, tag or pr.cpu_tag())
    for name in ("fp32", "bf16"):
        for _, pe in pr.PAIR_PES:
            for seed in pr.PAIR_SEEDS:
                hist = _history(pe, seed, epochs, 0.0 if name == "fp32" else 0.002)
                cfg = {"amp": name == "bf16", "epochs": epochs, "pes": [pe], "seeds": [seed],
                       "device": "cpu", "lr": 1e-4, "optimizer": "adam"}
                man = res.make_manifest(cfg, "cpu", 1.0, precision=name, diverged_models=[],
                                        kind="lst-train", n_models=1)
                if mutate is not None:
                    hist, man = mutate(name, pe, seed, hist, man) or (hist, man)
                res.save_run(base / name / f"{pe}__{seed}", hist, man)
    return base


def test_a_sound_pair_earns_bf16(monkeypatch, tmp_path):
    """The hand-made pair itself: bf16 within the seed spread, so bf16 (the baseline of every
    test below)."""
    _fake_flags(monkeypatch)
    write_pair(tmp_path)
    assert pr.check_pair(pr.load_pair(tmp_path)) == []
    amp, name, why = pr.decide(CPU, tmp_path)
    assert (amp, name) == (True, "bf16") and "less than a change of seed" in why


# --------------------------------------------------------------------------- finding 3


def _nan_late(name, pe, seed, hist, man):
    """bf16's learn-0.2, seed 1, turns NaN at epoch 25 (its loss too: it diverged)."""
    if name == "bf16" and pe == "learn-0.2" and seed == pr.PAIR_SEEDS[0]:
        late = hist["epoch"] >= pr.PAIR_EPOCHS - 5
        hist.loc[late, ["accuracy", "loss"]] = np.nan
        hist.loc[late, "diverged"] = True
        man["diverged_models"] = [0]
    return hist, man


def _diverged_flag_only(name, pe, seed, hist, man):
    """bf16's 2d-fixed, seed 2, is flagged diverged (non-finite logits) from epoch 28; its
    accuracy column still holds numbers."""
    if name == "bf16" and pe == "2d-fixed" and seed == pr.PAIR_SEEDS[1]:
        hist.loc[hist["epoch"] >= pr.PAIR_EPOCHS - 2, "diverged"] = True
        man["diverged_models"] = [0]
    return hist, man


def _nan_everywhere(name, pe, seed, hist, man):
    """bf16's c-nope is NaN at every epoch, both seeds."""
    if name == "bf16" and pe == "c-nope":
        hist["accuracy"] = np.nan
    return hist, man


@pytest.mark.parametrize("mutate, words", [(_nan_late, ["learn-0.2", "diverged"]),
                                           (_diverged_flag_only, ["2d-fixed", "diverged"]),
                                           (_nan_everywhere, ["c-nope", "accuracy"])])
def test_a_diverged_or_nan_bf16_run_never_gives_bf16(monkeypatch, tmp_path, mutate, words):
    """Finding 3: the NaN epochs vanished in ``.mean()``, the ``diverged`` column was never
    read and a PE NaN everywhere dropped out of the pivot, so bf16 was chosen."""
    _fake_flags(monkeypatch)
    write_pair(tmp_path, mutate=mutate)
    amp, name, why = pr.decide(CPU, tmp_path)
    assert (amp, name) == (False, "fp32")
    assert all(w in why for w in words), why
    assert not pr.pair_verdict(pr.pair_table(pr.load_pair(tmp_path)))["ok"]


def test_pair_table_keeps_nan_and_diverged_epochs_and_the_verdict_refuses_them():
    """Finding 3, on hand-made histories: a diverged epoch counts as NaN, a PE NaN everywhere
    keeps its rows, and the verdict is not ok."""
    def runs(shift: float, nan_pe: str | None = None, diverge: bool = False) -> list:
        out = []
        for seed in (1, 2):
            frames = []
            for pe in ("a", "b"):
                h = pd.DataFrame({"split": "val_dropout", "condition": "all", "pe": pe,
                                  "seed": seed, "epoch": [1, 2, 3], "model": 0,
                                  "accuracy": [0.5 + 0.1 * seed + shift] * 3,
                                  "diverged": [False, False, diverge and pe == "a"]})
                if pe == nan_pe:
                    h["accuracy"] = np.nan
                frames.append(h)
            out.append(type("R", (), {"history": pd.concat(frames)})())
        return out

    t = pr.pair_table({"fp32": runs(0.0), "bf16": runs(0.001, nan_pe="b")})
    assert set(t["pe"]) == {"a", "b"} and t[t.pe == "b"]["diff"].isna().all()
    assert not pr.pair_verdict(t, last=3)["ok"]
    t = pr.pair_table({"fp32": runs(0.0), "bf16": runs(0.001, diverge=True)})
    assert math.isnan(t[(t.pe == "a") & (t.epoch == 3)]["diff"].iloc[0])
    assert not pr.pair_verdict(t, last=3)["ok"]


def _fp32_in_bf16(name, pe, seed, hist, man):
    """The bf16 folder holds fp32 runs (amp off, recorded fp32), identical to fp32's."""
    if name == "bf16":
        man["config"]["amp"], man["precision"] = False, "fp32"
        hist["accuracy"] = _history(pe, seed, man["config"]["epochs"], 0.0)["accuracy"]
    return hist, man


def _bf16_recorded_fp32(name, pe, seed, hist, man):
    """amp asked, but the run recorded fp32 (a CPU without bf16 instructions fell back)."""
    if name == "bf16":
        man["precision"] = "fp32"
    return hist, man


def _short_bf16(name, pe, seed, hist, man):
    """bf16's runs stopped at epoch 12 of the pair's 30 (configured for 30)."""
    if name == "bf16":
        hist = hist[hist["epoch"] <= 12].reset_index(drop=True)
    return hist, man


@pytest.mark.parametrize("mutate, words", [
    (_fp32_in_bf16, ["bf16", "amp"]),
    (_bf16_recorded_fp32, ["bf16", "fp32"]),
    (_short_bf16, ["epoch 12", str(pr.PAIR_EPOCHS)])])
def test_the_pair_is_checked_against_its_own_config(monkeypatch, tmp_path, mutate, words):
    """Finding 3: the folder names were trusted, so fp32 runs filed under bf16/ (no
    difference at all) gave bf16."""
    _fake_flags(monkeypatch)
    base = write_pair(tmp_path, mutate=mutate)
    amp, name, why = pr.decide(CPU, tmp_path)
    assert (amp, name) == (False, "fp32")
    assert all(w in why for w in words) and str(base / "bf16") in why, why


def test_a_pair_of_the_wrong_length_gives_fp32(monkeypatch, tmp_path):
    """Finding 3: a 1-epoch pair (both precisions) gave bf16."""
    _fake_flags(monkeypatch)
    write_pair(tmp_path, epochs=1)
    amp, name, why = pr.decide(CPU, tmp_path)
    assert (amp, name) == (False, "fp32")
    assert f"1 epochs, not the pair's {pr.PAIR_EPOCHS}" in why, why


def _other_seed(name, pe, seed, hist, man):
    """bf16's second seed is another seed than fp32's."""
    if name == "bf16" and seed == pr.PAIR_SEEDS[1]:
        hist["seed"] = 4242
        man["config"]["seeds"] = [4242]
    return hist, man


def _no_metric(name, pe, seed, hist, man):
    """bf16's runs hold no val_dropout rows (another split)."""
    if name == "bf16":
        hist["split"] = "val"
    return hist, man


def _duplicate(name, pe, seed, hist, man):
    """bf16's learn-2 seed 2 folder holds learn-2 seed 1 again."""
    if name == "bf16" and pe == "learn-2" and seed == pr.PAIR_SEEDS[1]:
        hist["seed"] = pr.PAIR_SEEDS[0]
        man["config"]["seeds"] = [pr.PAIR_SEEDS[0]]
    return hist, man


def _other_recipe(name, pe, seed, hist, man):
    """bf16's runs trained at another learning rate."""
    if name == "bf16":
        man["config"]["lr"] = 1e-3
    return hist, man


@pytest.mark.parametrize("mutate, words", [
    (_other_seed, ["4242"]), (_no_metric, ["val_dropout"]),
    (_duplicate, ["learn-2", f"seed {pr.PAIR_SEEDS[0]}"]), (_other_recipe, ["lr"])])
def test_a_degenerate_pair_gives_fp32_with_a_true_reason(monkeypatch, tmp_path, mutate, words):
    """Finding 3: degenerate pairs crashed ("need at least one array to stack", KeyError)
    or gave bf16 / a false reason."""
    _fake_flags(monkeypatch)
    write_pair(tmp_path, mutate=mutate)
    amp, name, why = pr.decide(CPU, tmp_path)
    assert (amp, name) == (False, "fp32")
    assert all(w in why for w in words), why


def test_an_incomplete_pair_is_named_not_called_absent(monkeypatch, tmp_path):
    """A pair with a run missing is said to be incomplete, naming its folder (it used to read
    as "no precision pair is stored")."""
    _fake_flags(monkeypatch)
    base = write_pair(tmp_path)
    gone = base / "bf16" / f"c-nope__{pr.PAIR_SEEDS[1]}" / "manifest.json"
    gone.unlink()
    amp, name, why = pr.decide(CPU, tmp_path)
    assert (amp, name) == (False, "fp32")
    assert "incomplete" in why and str(base / "bf16") in why, why


def test_a_gpu_pair_is_checked_the_same_way(monkeypatch, tmp_path):
    """Finding 3 on CUDA: a GPU's pair with fp32 filed as bf16 never earns bf16."""
    gpu = pr.gpu_tag("NVIDIA H200")
    monkeypatch.setattr(pr, "device_tag", lambda device="cpu", gpu_name=None: gpu)
    write_pair(tmp_path, tag=gpu)
    assert pr.decide(torch.device("cuda"), tmp_path)[1] == "bf16"
    write_pair(tmp_path, tag=gpu, mutate=_fp32_in_bf16)
    amp, name, why = pr.decide(torch.device("cuda"), tmp_path)
    assert (amp, name) == (False, "fp32") and gpu in why and "amp" in why, why


def test_campaign_pair_prints_why_a_pair_cannot_decide(monkeypatch, tmp_path, capsys):
    """``lstpe campaign pair`` said "bf16 within the seed spread: yes" for a diverged pair."""
    _fake_flags(monkeypatch)
    write_pair(tmp_path, mutate=_nan_late)
    monkeypatch.setattr(pr, "run_pair", lambda results, **kw: pr.load_pair(results))
    assert cli.main(["campaign", "pair", "--results", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "yes" not in out and "diverged" in out and "learn-0.2" in out, out


# --------------------------------------------------------------------------- finding 9


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_reproduce_plan_refuses_a_rate_or_memory_that_is_not_positive(value, capsys):
    """Finding 9: ``--memory-gib 0`` (or -5, NaN) was used (one model per chunk)."""
    for opt in ("--rate", "--memory-gib"):
        assert cli.main(["reproduce", "plan", "--parts", "table2", opt, value]) == 2
        err = capsys.readouterr().err
        assert value in err.lower() and opt.lstrip("-").split("-")[0] in err, err


def test_plan_table_refuses_a_memory_budget_below_one_model():
    with pytest.raises(ValueError, match="1e-06"):
        plan_table(["table2"], memory_gib=1e-6)


@pytest.mark.parametrize("extra", [[], ["--keys"]])
def test_campaign_plan_names_a_results_folder_that_does_not_exist(tmp_path, capsys, extra):
    """Finding 9: ``campaign plan --results <typo>`` printed "0 stored" everywhere."""
    typo = tmp_path / "resluts"
    assert cli.main(["campaign", "plan", "--results", str(typo), *extra]) == 2
    err = capsys.readouterr().err
    assert str(typo) in err and "does not exist" in err, err
