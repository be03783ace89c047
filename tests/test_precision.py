"""The precision pair and the campaign's one decision on precision
(:mod:`lstpe.campaign.precision`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from lstpe.campaign import precision as pr
from lstpe.nn.model import ModelConfig

TINY = dict(model=ModelConfig(d_model=16, n_layers=1), n_train=64, epochs=3, eval_train_max=64,
            eval_test_max=64)


def _fake_flags(monkeypatch, bf16: bool) -> None:
    flags = ["avx2", "fma", "avx512_bf16", "amx_bf16"] if bf16 else ["avx2", "fma"]
    monkeypatch.setattr(pr, "cpu_flags", lambda *a, **k: flags)
    monkeypatch.setattr(pr, "has_bf16", lambda *a, **k: bf16)
    # training asks the runtime too (choose_amp): without this, a CPU without bf16 instructions
    # trains the pair's bf16 runs in fp32, records so, and the pair rightly cannot decide
    monkeypatch.setattr("lstpe.runtime.has_bf16", lambda *a, **k: bf16)


def test_cpu_tag_names_the_bf16_flags():
    assert pr.cpu_tag(["avx2", "avx512_bf16", "amx_bf16"]) == "bf16-avx512_bf16-amx_bf16"
    assert pr.cpu_tag(["avx2", "fma"]) == "fp32-only"


def test_no_pair_on_a_cpu_without_bf16(monkeypatch, tmp_path):
    _fake_flags(monkeypatch, False)
    with pytest.raises(ValueError, match="no bf16 instructions"):
        pr.run_pair(tmp_path, **TINY)
    amp, name, why = pr.decide(torch.device("cpu"), tmp_path)
    assert (amp, name) == (False, "fp32") and "emulated" in why


def test_fp32_until_a_pair_is_stored(monkeypatch, tmp_path):
    _fake_flags(monkeypatch, True)
    amp, name, why = pr.decide(torch.device("cpu"), tmp_path)
    assert (amp, name) == (False, "fp32") and "no precision pair" in why


def test_no_pair_line_counts_the_units_on_bf16_cpus():
    flags = pd.Series(["avx2 fma", "avx2 avx512_bf16 amx_bf16", "-", "avx512f amx_bf16", None])
    line = pr.no_pair_line(flags)
    assert "2 of the 5 units" in line and "fp32" in line
    assert "No CPU with bf16" in pr.no_pair_line(pd.Series(["avx2 fma", "-"]))


def test_pair_table_against_hand_numbers():
    """diff, max_abs_diff and seed_spread from a hand-made history of one PE."""
    def run(precision_shift: float):
        class R:
            pass
        out = []
        for seed, base in ((1, 0.5), (2, 0.7)):
            r = R()
            r.history = pd.DataFrame({"split": "val_dropout", "condition": "all", "pe": "p",
                                      "seed": seed, "epoch": [1, 2],
                                      "accuracy": [base + precision_shift * seed,
                                                   base + 0.1]})
            out.append(r)
        return out
    t = pr.pair_table({"fp32": run(0.0), "bf16": run(0.01)})
    e1 = t[t.epoch == 1].iloc[0]
    assert e1["diff"] == pytest.approx((0.01 + 0.02) / 2)
    assert e1["max_abs_diff"] == pytest.approx(0.02)
    assert e1["seed_spread"] == pytest.approx(0.2)
    assert t[t.epoch == 2].iloc[0]["diff"] == pytest.approx(0.0)
    v = pr.pair_verdict(t, last=2)
    assert v["ok"] and v["epochs"] == (1, 2)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN")
def test_pair_trains_stores_and_decides(monkeypatch, tmp_path):
    """The tiny pair trains both precisions from the same seeds, stores them under the CPU's
    tag and is read back; the decision then follows the verdict."""
    _fake_flags(monkeypatch, True)
    monkeypatch.setattr(pr, "PAIR_EPOCHS", 3)
    pair = pr.run_pair(tmp_path, **TINY)
    assert {r.config["amp"] for r in pair["bf16"]} == {True}
    assert {r.config["amp"] for r in pair["fp32"]} == {False}
    stored = pr.load_pair(tmp_path)
    assert stored is not None
    t = pr.pair_table(stored)
    assert set(t["pe"]) == {pe for _, pe in pr.PAIR_PES}
    assert sorted(t["epoch"].unique()) == [0, 1, 2, 3]
    # epoch 0 is the same initial weights, evaluated under autocast in bf16: close, not equal
    assert t[t.epoch == 0]["max_abs_diff"].max() <= 0.1
    amp, name, why = pr.decide(torch.device("cpu"), tmp_path)
    assert name == ("bf16" if pr.pair_verdict(t)["ok"] else "fp32") and why
    # the same pair filed under a GPU's tag: it decides that GPU's precision and never the CPU's
    gpu = pr.gpu_tag("NVIDIA H200")
    assert gpu == "gpu-NVIDIA-H200-tf32off-bf16" and gpu != pr.cpu_tag()
    monkeypatch.setattr(pr, "device_tag", lambda device="cpu", gpu_name=None:
                        gpu if torch.device(device).type == "cuda" else pr.cpu_tag())
    cuda = torch.device("cuda")
    assert pr.decide(cuda, tmp_path)[1] == "fp32"  # a CPU's pair does not decide a GPU's
    assert "no precision pair is stored for gpu-NVIDIA-H200" in pr.decide(cuda, tmp_path)[2]
    pr.pair_dir(tmp_path).rename(pr.pair_dir(tmp_path, gpu))
    assert pr.load_pair(tmp_path) is None and pr.load_pair(tmp_path, gpu) is not None
    assert pr.decide(torch.device("cpu"), tmp_path)[1:] == (
        "fp32", f"fp32: this CPU has bf16 instructions ({pr.cpu_tag()}), but no precision "
        "pair is stored for it (lstpe campaign pair)")
    assert pr.decide(cuda, tmp_path)[1] == name and gpu in pr.decide(cuda, tmp_path)[2]


# --------------------------------------------------------------------------- a GPU's candidates


def _runs(name: str, shift: float, tf32: bool | None = None) -> list[SimpleNamespace]:
    """Crafted stored runs of the pair in precision ``name``: every (PE, seed), validation
    accuracy 0.5 + 0.02 x seed index (a seed spread of 0.02) plus ``shift``."""
    out = []
    for _, pe in pr.PAIR_PES:
        for i, seed in enumerate(pr.PAIR_SEEDS):
            epochs = list(range(pr.PAIR_EPOCHS + 1))
            hist = pd.DataFrame({"split": "val_dropout", "condition": "all", "pe": pe,
                                 "seed": seed, "epoch": epochs, "loss": 1.0,
                                 "accuracy": [0.5 + 0.02 * i + shift] * len(epochs),
                                 "diverged": False})
            cfg = {"amp": name == "bf16", "epochs": pr.PAIR_EPOCHS, "pes": [pe],
                   "seeds": [seed], "lr": 1e-3}
            man = {"config": cfg, "precision": "fp32" if name == "tf32" else name,
                   "tf32": name == "tf32" if tf32 is None else tf32}
            out.append(SimpleNamespace(history=hist, manifest=man,
                                       path=Path("pair") / name / f"{pe}__{seed}", name=pe))
    return out


def test_a_candidate_inside_the_margin_is_cleared_under_its_own_tag():
    """(Moved from the GPU lease's tuning tests, which read these decisions per card.)"""
    h200_bf16 = pr.candidate_tag("NVIDIA H200", "bf16")
    h200_tf32 = pr.candidate_tag("NVIDIA H200", "tf32")
    assert h200_tf32 == "gpu-NVIDIA-H200-tf32on-fp32" != h200_bf16
    assert pr.tag_candidate(h200_tf32) == "tf32" and pr.tag_candidate(h200_bf16) == "bf16"
    assert pr.candidate_tag("NVIDIA H100", "tf32") != h200_tf32  # another card, another tag
    ok, why = pr.pair_decision({"fp32": _runs("fp32", 0.0), "tf32": _runs("tf32", 0.005)},
                               h200_tf32)
    assert ok and "0.005 vs seed spread 0.020" in why


def test_a_candidate_outside_the_margin_is_refused_with_its_numbers():
    tag = pr.candidate_tag("NVIDIA H200", "bf16")
    ok, why = pr.pair_decision({"fp32": _runs("fp32", 0.0), "bf16": _runs("bf16", -0.05)}, tag)
    assert not ok and "by 0.050, more than its seed spread 0.020" in why


def test_a_tf32_pair_trained_without_tf32_clears_nothing():
    tag = pr.candidate_tag("NVIDIA H200", "tf32")
    ok, why = pr.pair_decision({"fp32": _runs("fp32", 0.0),
                                "tf32": _runs("tf32", 0.0, tf32=False)}, tag)
    assert not ok and "not with TF32 matmuls" in why
