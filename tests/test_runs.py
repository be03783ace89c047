"""The run layer: what a name means at each scale, and which stored run a chapter may show."""

from __future__ import annotations

import pytest

from lstpe import experiments as ex
from lstpe.experiments import runs
from lstpe.nn.architecture import ModelConfig
from lstpe.runtime import PAPER_SEEDS


def test_cpu_scale_is_the_papers_model_data_and_learning_rate():
    paper, cpu = ex.run_config("table1", "paper"), ex.run_config("table1", "cpu")
    assert cpu.model == paper.model == ModelConfig()  # d=160, 4 blocks, one head
    assert cpu.n_train is None and cpu.split == paper.split == "code"  # all 8100 puzzles
    assert cpu.lr == paper.lr == 1e-4 and cpu.batch_size == paper.batch_size == 128
    assert cpu.pes == paper.pes and cpu.optimizer == paper.optimizer == "adam"
    assert cpu.amp is False and cpu.seeds == list(PAPER_SEEDS[:3])  # fp32 unless a pair says
    assert cpu.epochs < paper.epochs
    assert cpu.checkpoint_every == 1  # a background run loses at most one epoch
    preview = ex.run_config("table1", "preview")
    assert preview.model.d_model < 160 and preview.lr == 10 * paper.lr


def test_sigmas_replace_the_sweep_for_lst_and_brain():
    assert ex.run_config("table2", "cpu", sigmas=[0.3]).pes == ["2d-fixed", "learn-0.3"]
    brain = ex.run_config("brain", "preview", sigmas=[0.3, 2])
    assert brain.pes == ["1d-fixed", "relative", "rope", "random", "learn-0.3", "learn-2"]
    assert ex.run_config("brain", "cpu").preset == "cpu"


def test_a_stored_run_with_more_masks_or_pes_fits():
    stored = {"pes": ["learn-0.1", "1d-fixed"], "train_masks": [0.15, 0.5, 0.75, 0.9],
              "seeds": [3, 1, 2], "steps": 50_000}
    wanted = {"pes": ["1d-fixed"], "train_masks": [0.5, 0.75], "seeds": [1, 2, 3],
              "steps": 50_000}
    assert runs.conflicts(stored, wanted, asked=["train_masks"]) == ([], [])
    mine, other = runs.conflicts(stored, {**wanted, "train_masks": [0.6]}, ["train_masks"])
    assert mine == ["train_masks: stored [0.15, 0.5, 0.75, 0.9], wanted [0.6]"] and not other


def test_unknown_names_and_scales_are_named():
    with pytest.raises(ValueError, match="unknown run 'table9'; valid runs: table1"):
        runs.get_run("table9")
    with pytest.raises(ValueError, match="unknown scale 'huge'; valid scales: preview, cpu"):
        runs.get_run("table1", "huge")


def test_cache_key_follows_config_and_code():
    a = ex.run_config("table1", "preview").to_dict()
    b = ex.run_config("table1", "preview", seeds=[1]).to_dict()
    assert runs.cache_key(a) == runs.cache_key(dict(a)) != runs.cache_key(b)
    assert all(p.endswith(".py") or p.endswith(".csv") for p in runs.TRAINING_SOURCES)


def test_source_hash_covers_every_training_module_and_refuses_a_dead_pattern(monkeypatch):
    from pathlib import Path

    import lstpe

    root = Path(lstpe.__file__).parent
    covered = {p for pat in runs.TRAINING_SOURCES for p in root.glob(pat)}
    for pkg in ("lst", "nn", "store", "training", "brain"):  # every module training runs
        assert set((root / pkg).glob("*.py")) <= covered, pkg
    runs.source_hash.cache_clear()
    monkeypatch.setattr(runs, "TRAINING_SOURCES", (*runs.TRAINING_SOURCES, "gone/*.py"))
    with pytest.raises(FileNotFoundError, match="'gone/\\*.py' matches no file"):
        runs.source_hash()
    runs.source_hash.cache_clear()
