"""Tests of lstpe.training.train: batched training is sequential training, checkpoints resume
exactly,
configs are validated, and a tiny preview run learns."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from lstpe import runtime
from lstpe.nn.architecture import ModelConfig
from lstpe.nn.model import LSTTransformer
from lstpe.store import results
from lstpe.training import config, train
from lstpe.training import task as lst_task


def tiny_train_cfg(tiny_cfg: ModelConfig, **kw) -> config.TrainConfig:
    base = dict(pes=["learn-0.5", "2d-fixed", "relative"], seeds=[3, 7], epochs=2,
                batch_size=16, model=tiny_cfg, device="cpu", checkpoint_every=0,
                save_attention=False, lr=1e-3, noise_levels=[])
    base.update(kw)
    return config.TrainConfig(**base)


def model_weights(r: results.Run) -> list[dict[str, torch.Tensor]]:
    """Final weights of model i = (pe i // S, seed i % S), whatever chunk it was trained in."""
    found = {}
    for chunk in r.models:
        for m in range(chunk.n_models):
            found[(chunk.labels()[m], chunk.seeds[m])] = chunk.single_weights(m)
    return [found[(p, s)] for p in r.cfg.pes for s in r.cfg.seeds]


def key_bias(name: str, d: int) -> slice | None:
    return slice(d, 2 * d) if name.endswith("qkv.b") else None


# --------------------------------------------------------------------------- batched = sequential


MIXED = ["learn-0.5", "2d-fixed", "relative", "c-nope", "rope"]
"""Every kind of block: MHA with and without dropout, no output projection, no biases, rotary."""


def assert_same_models(r_models, cfg, seq, x, tiny_cfg, val_logits):
    d = tiny_cfg.d_model
    S = len(cfg.seeds)
    moved = 0.0
    found = {}
    for chunk in r_models:
        for m in range(chunk.n_models):
            found[(chunk.labels()[m], chunk.seeds[m])] = chunk.single_weights(m)
    batched = [found[(p, sd)] for p in cfg.pes for sd in cfg.seeds]
    for i, (b, s) in enumerate(zip(batched, seq, strict=True)):
        init = LSTTransformer(cfg.specs[i // S], cfg.seeds[i % S], tiny_cfg).eval()
        for name in b:
            bt, st = b[name], s[name]
            kb = key_bias(name, d)
            if kb is not None:
                # The key bias gets an exactly-zero gradient for these PEs (softmax is invariant
                # to adding q_i . b_k to every score of row i), so what it receives is float
                # rounding, which Adam divides by its own size: it may drift differently in the
                # two runs without changing the function. The model outputs are compared below.
                keep = torch.ones(3 * d, dtype=torch.bool)
                keep[kb] = False
                bt, st = bt[keep], st[keep]
            torch.testing.assert_close(bt, st, atol=1e-5, rtol=0, msg=f"model {i} {name}")
        single = LSTTransformer(cfg.specs[i // S], cfg.seeds[i % S], tiny_cfg).eval()
        single.load_weights(s)
        with torch.no_grad():
            torch.testing.assert_close(val_logits[i], single(x), atol=1e-4, rtol=0)
            moved = max(moved, (single(x) - init(x)).abs().max().item())
    assert moved > 1e-2  # training did change the models


@pytest.mark.parametrize("optimizer, lr", [("adam", 1e-3), ("adamw", 1e-3), ("sgd", 0.05)])
def test_batched_training_equals_sequential(optimizer, lr, tiny_cfg, small_splits):
    """Every PE in one batch, in train mode (2d-fixed with its dropout), equals each model
    trained alone."""
    cfg = tiny_train_cfg(tiny_cfg, pes=MIXED, optimizer=optimizer, lr=lr)
    assert cfg.weight_decay == config.DEFAULT_WD[optimizer]
    r = train.train(cfg, progress=False, splits=small_splits)
    assert len(r.models) == 1 and r.models[0].n_models == 10  # one batch for all PEs
    seq = train.sequential_reference(cfg, splits=small_splits)
    assert_same_models(r.models, cfg, seq, small_splits["val"].x, tiny_cfg,
                       r.artifacts["val_logits"])
    # structural zeros did not move: relative has no output projection, c-nope no biases
    b = r.models[0]
    rel, cn = cfg.pes.index("relative") * 2, cfg.pes.index("c-nope") * 2
    for i in range(tiny_cfg.n_layers):
        assert torch.equal(b.get(f"blocks.{i}.out.w")[rel], torch.zeros(32, 32))
        assert torch.equal(b.get(f"blocks.{i}.qkv.b")[cn], torch.zeros(96))
        assert torch.equal(b.get(f"blocks.{i}.rel")[rel][16:], torch.zeros(15, 32))


def test_mixed_optimizers_train_as_one_batch(tiny_cfg, small_splits):
    """Adam, SGD and AdamW configurations trained together equal each trained alone."""
    cfgs = [tiny_train_cfg(tiny_cfg, pes=["learn-0.5", "2d-fixed"], optimizer="adam"),
            tiny_train_cfg(tiny_cfg, pes=["learn-0.5"], optimizer="sgd", lr=0.05),
            tiny_train_cfg(tiny_cfg, pes=["2d-fixed", "relative"], optimizer="adamw")]
    results_ = train.train_many(cfgs, [None, None, None], progress=False, splits=small_splits)
    assert len(results_[0].models) == 1 and results_[0].models[0].n_models == 10
    for cfg, r in zip(cfgs, results_, strict=True):
        alone = train.train(cfg, progress=False, splits=small_splits)
        torch.testing.assert_close(r.artifacts["val_logits"], alone.artifacts["val_logits"],
                                   atol=1e-4, rtol=0)
        assert r.history["optimizer"].unique().tolist() == [cfg.setting]
        assert r.history["model"].max() == len(cfg.pes) * len(cfg.seeds) - 1
    with pytest.raises(ValueError, match="differ in epochs"):
        train.train_many([cfgs[0], replace(cfgs[1], epochs=3)], [None, None], progress=False,
                         splits=small_splits)


def test_running_training_accuracy_and_dropout_evaluation(tiny_cfg, small_splits):
    cfg = tiny_train_cfg(tiny_cfg, pes=["2d-fixed", "learn-0.5"], epochs=2)
    h = train.train(cfg, progress=False, splits=small_splits).history
    run = h[h["split"] == "train_running"]
    assert sorted(run["epoch"].unique()) == [1, 2] and (run["condition"] == "all").all()
    assert run["accuracy"].between(0, 1).all()
    val = h[h["split"] == "val"].set_index(["model", "epoch", "condition"])["accuracy"]
    vd = h[h["split"] == "val_dropout"].set_index(["model", "epoch", "condition"])["accuracy"]
    same = (val == vd).groupby(level=0).all()
    assert not same[0] or not same[1]  # 2d-fixed (dropout) may differ...
    assert same[2] and same[3]  # ... learn-0.5 (no dropout) never does


def test_diverged_models_are_flagged(tiny_cfg, small_splits):
    cfg = tiny_train_cfg(tiny_cfg, pes=["learn-0.5"], optimizer="sgd", lr=1e6, epochs=2)
    r = train.train(cfg, progress=False, splits=small_splits)
    last = r.history[r.history["epoch"] == 2]
    assert last["diverged"].all()
    assert r.manifest["diverged_models"] == [0, 1]
    ok = train.train(tiny_train_cfg(tiny_cfg, pes=["learn-0.5"]), progress=False,
                     splits=small_splits)
    assert not ok.history["diverged"].any()


def test_max_models_chunks_train_the_same(tiny_cfg, small_splits):
    cfg = tiny_train_cfg(tiny_cfg, pes=["learn-0.5", "2d-fixed", "relative"], epochs=1)
    full = train.train(cfg, progress=False, splits=small_splits)
    chunked = train.train(replace(cfg, max_models=4), progress=False, splits=small_splits)
    assert len(full.models) == 1 and len(chunked.models) == 2
    for a, b in zip(model_weights(full), model_weights(chunked), strict=True):
        for name in a:
            if not name.endswith("qkv.b"):
                torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=0)
    pd.testing.assert_frame_equal(full.history.drop(columns=["accuracy", "loss"]),
                                  chunked.history.drop(columns=["accuracy", "loss"]))


# --------------------------------------------------------------------------- outputs


def test_history_and_artifacts_layout(tiny_cfg, small_splits):
    cfg = tiny_train_cfg(tiny_cfg, pes=["learn-0.5", "rope", "2d-fixed"], seeds=[1, 2],
                         save_attention=True, eval_epochs=[1])
    r = train.train(cfg, progress=False, splits=small_splits)
    h = r.history
    assert list(h.columns) == results.HISTORY_COLUMNS and "diverged" in h.columns
    assert sorted(h["epoch"].unique()) == [0, 1, 2]
    # 6 models x 3 epochs x 4 eval splits (train, test, val, val_dropout) x 4 conditions
    # (all, 1, 2, 3), plus the running training rows of epochs 1, 2 (condition all)
    assert len(h) == 6 * 3 * 4 * 4 + 6 * 2
    labels = ["learn-0.5", "learn-0.5", "rope", "rope", "2d-fixed", "2d-fixed"]
    assert r.artifacts["labels"] == labels and r.artifacts["seeds"] == [1, 2] * 3
    per_model = h.groupby("model")[["pe", "seed"]].first()
    assert per_model["pe"].tolist() == labels and per_model["seed"].tolist() == [1, 2] * 3
    assert h.loc[h["pe"] == "2d-fixed", "sigma"].isna().all()
    assert (h.loc[h["pe"] == "learn-0.5", "sigma"] == 0.5).all()
    M, L = 6, tiny_cfg.n_layers
    a = r.artifacts
    assert a["pe_init"].shape == a["pe_final"].shape == (M, L, 16, tiny_cfg.d_model)
    assert a["val_logits"].shape == (M, 108, 4)
    assert a["val_attention"].shape == a["val_attention_init"].shape == (M, 108, L, 16, 16)
    assert a["val_attention"].dtype == torch.float16
    # the merged artefacts are in model order: recompute each from its chunk
    for chunk in r.models:
        logits = lst_task.predict(chunk, small_splits["val"].x)
        for m in range(chunk.n_models):
            i = [(p, s) for p in cfg.pes for s in cfg.seeds].index(
                (chunk.labels()[m], chunk.seeds[m]))
            torch.testing.assert_close(a["val_logits"][i], logits[m])
    # fixed PEs do not move, learned ones do; rope adds nothing
    assert torch.equal(a["pe_init"][4], a["pe_final"][4])
    assert not torch.equal(a["pe_init"][0], a["pe_final"][0])
    assert (a["pe_final"][2] == 0).all()
    # the history's final val accuracy is that of the stored logits
    fin = r.final("val").sort_values("model")
    acc = (a["val_logits"].argmax(-1) == small_splits["val"].y).float().mean(1)
    np.testing.assert_allclose(fin["accuracy"].to_numpy(), acc.numpy(), atol=1e-6)


def test_score_hand_case():
    logits = torch.tensor([[[2.0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 5.0, 0]]])  # (1, 3, 4)
    y = torch.tensor([0, 1, 3])
    vectors = torch.tensor([1, 1, 2])
    s = lst_task.score(logits, y, vectors)
    assert set(s) == {"all", "1", "2"}
    # argmax of an all-zero row is class 0: sample 0 right, 1 and 2 wrong
    assert s["all"][0][0] == pytest.approx(1 / 3)
    assert s["1"][0][0] == pytest.approx(0.5) and s["2"][0][0] == 0.0
    ce0 = -math.log(math.exp(2) / (math.exp(2) + 3))
    ce1 = math.log(4)
    ce2 = -math.log(1 / (math.exp(5) + 3))
    assert s["1"][1][0] == pytest.approx((ce0 + ce1) / 2, rel=1e-6)
    assert s["all"][1][0] == pytest.approx((ce0 + ce1 + ce2) / 3, rel=1e-6)


# --------------------------------------------------------------------------- checkpoints


class Interrupted(RuntimeError):
    pass


@pytest.mark.parametrize("crash_call", [1, 3], ids=["in-first-chunk", "in-second-chunk"])
def test_resume_after_interruption_matches_uninterrupted(crash_call, tiny_cfg, small_splits,
                                                         tmp_path, monkeypatch):
    """Train 4 epochs with a checkpoint every 2; kill the run at the start of epoch 3 (of the
    first chunk, or of the second chunk after the first finished); rerun the same config on
    the same folder: same weights, history and artefacts as a run never interrupted."""
    cfg = tiny_train_cfg(tiny_cfg, pes=["learn-0.5", "rope"], seeds=[1, 2], epochs=4,
                         checkpoint_every=2, save_attention=True, noise_levels=[0.05],
                         max_models=2)
    ref = train.train(cfg, run_dir=tmp_path / "ref", progress=False, splits=small_splits)

    real = lst_task.epoch_permutation
    calls: list[int] = []

    def crashing(seed, epoch, n):
        if epoch == 3:
            calls.append(seed)
            if len(calls) == crash_call:
                raise Interrupted("simulated kill")
        return real(seed, epoch, n)

    monkeypatch.setattr(lst_task, "epoch_permutation", crashing)
    with pytest.raises(Interrupted):
        train.train(cfg, run_dir=tmp_path / "run", progress=False, splits=small_splits)
    assert not (tmp_path / "run" / "manifest.json").exists()  # no finished run on disk
    with pytest.raises(FileNotFoundError):
        results.load(tmp_path / "run")

    seen: list[int] = []

    def spy(seed, epoch, n):
        seen.append(epoch)
        return real(seed, epoch, n)

    monkeypatch.setattr(lst_task, "epoch_permutation", spy)
    out = train.train(cfg, run_dir=tmp_path / "run", progress=False, splits=small_splits)
    # resumed from epoch 2 of the interrupted chunk (no epoch redone), the rest from scratch
    if crash_call == 1:
        assert seen == [3, 3, 4, 4] + [1, 1, 2, 2, 3, 3, 4, 4]
    else:
        assert seen == [3, 3, 4, 4]
    pd.testing.assert_frame_equal(out.history, ref.history)
    for a, b in zip(out.models, ref.models, strict=True):
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys()
        for k in sa:
            assert torch.equal(sa[k], sb[k]), k
    for k in ("pe_init", "pe_final", "val_logits", "val_attention", "val_attention_init"):
        assert torch.equal(out.artifacts[k], ref.artifacts[k]), k
    assert set(out.tables) == {"noise"}
    pd.testing.assert_frame_equal(out.tables["noise"], ref.tables["noise"])
    loaded = results.load(tmp_path / "run")
    pd.testing.assert_frame_equal(loaded.history, results.load(tmp_path / "ref").history)


def test_checkpoint_of_another_config_is_refused(tiny_cfg, small_splits, tmp_path):
    cfg = tiny_train_cfg(tiny_cfg, pes=["2d-fixed"], seeds=[1], epochs=1, checkpoint_every=1)
    train.train(cfg, run_dir=tmp_path, progress=False, splits=small_splits)
    assert (tmp_path / "checkpoints" / "chunk0.pt").exists()
    with pytest.raises(ValueError, match="different configuration"):
        train.train(replace(cfg, lr=2e-3), run_dir=tmp_path, progress=False,
                    splits=small_splits)


# --------------------------------------------------------------------------- preview learns


@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "bf16-autocast"])
def test_tiny_preview_run_learns_training_set(tiny_cfg, amp, monkeypatch):
    monkeypatch.setattr("lstpe.runtime.has_bf16", lambda *a: True)  # bf16 even if emulated
    cfg = config.preset("preview", model=tiny_cfg, seeds=[1, 2, 3], n_train=128, epochs=40,
                       lr=3e-3, batch_size=32, device="cpu", save_attention=False,
                       eval_epochs=[], pes=["learn-0.2", "2d-fixed"], noise_levels=[],
                       amp=amp)
    assert cfg.preset == "preview" and cfg.lr == 3e-3
    r = train.train(cfg, progress=False)
    start = r.history.query("epoch == 0 and split == 'train' and condition == 'all'")
    final = r.final("train")
    assert len(final) == 6
    assert (final["accuracy"] > 0.4).all(), final[["pe", "seed", "accuracy"]]  # chance: 0.25
    assert final["accuracy"].mean() > start["accuracy"].mean() + 0.2
    assert (final["loss"].to_numpy() < start.sort_values("model")["loss"].to_numpy()).all()


# --------------------------------------------------------------------------- config


def test_preset_values():
    p = config.preset("paper")
    assert p.seeds == list(runtime.PAPER_SEEDS) and len(p.seeds) == 15
    assert (p.optimizer, p.lr, p.weight_decay, p.batch_size) == ("adam", 1e-4, 0.0, 128)
    assert p.model == ModelConfig(d_model=160, n_layers=4, n_heads=1)
    assert config.TrainConfig(pes=["nope"], seeds=[0], optimizer="adamw").weight_decay == 0.1
    assert config.TrainConfig(pes=["nope"], seeds=[0], optimizer="sgd").lr == 1e-3
    assert config.preset("paper", epochs=7, seeds=None).epochs == 7
    assert config.preset("paper", optimizer="sgd").lr == 1e-3  # Table 4
    assert config.preset("paper", optimizer="adamw").weight_decay == 0.1  # Tables 5-6
    # a sigma survives the config's PE labels exactly
    assert config.TrainConfig(pes=["learn-0.123456789"], seeds=[0]).specs[0].sigma == 0.123456789
    assert config.PAPER_SIGMAS[0] == 0.1 and config.PAPER_SIGMAS[-1] == 2.0
    assert len(config.PAPER_SIGMAS) == 20


@pytest.mark.parametrize("kw, needle", [
    ({"optimizer": "rmsprop"}, "'rmsprop'; valid: adam, adamw, sgd"),
    ({"pes": []}, "pes is empty"),
    ({"seeds": []}, "seeds is empty"),
    ({"seeds": [1, 1]}, "duplicate seeds in [1, 1]"),
    ({"pes": ["learn-0.2", "learn-0.20"]}, "duplicate PEs in ['learn-0.2', 'learn-0.2']"),
    ({"epochs": 0}, "epochs must be >= 1, got 0"),
    ({"batch_size": 0}, "batch_size must be >= 1, got 0"),
    ({"lr": -1.0}, "-1.0"),
    ({"weight_decay": -0.5}, "-0.5"),
    ({"lr": float("nan")}, "learning rate (--lr) must be a finite number > 0, got nan"),
    ({"seeds": [2**64]}, "seed 18446744073709551616 does not fit in 64 bits"),
    ({"max_models": 0}, "max_models (--max-models) must be >= 1, got 0"),
    ({"checkpoint_every": -1}, "(--checkpoint-every) must be >= 0 (0 = no checkpoints), got -1"),
    ({"split": "half"}, "unknown split 'half'"),
    ({"step_mode": "fast"}, "unknown step_mode 'fast'"),
    ({"pes": ["learn-0.2", "bogus"]}, "'bogus'"),
])
def test_train_config_errors(kw, needle):
    base = dict(pes=["learn-0.2"], seeds=[0])
    base.update(kw)
    with pytest.raises(ValueError) as e:
        config.TrainConfig(**base)
    assert needle in str(e.value)


def test_preset_unknown_name():
    with pytest.raises(ValueError, match="'huge'; valid presets: preview, cpu, paper"):
        config.preset("huge")


def test_schedule():
    c = config.TrainConfig(pes=["nope"], seeds=[0], epochs=12, dense_until=3, sparse_every=5)
    assert c.schedule() == [0, 1, 2, 3, 5, 10, 12]
    assert replace(c, eval_epochs=[4, 99, -1]).schedule() == [4, 12]


def test_epoch_permutation():
    p = lst_task.epoch_permutation(5, 3, 50)
    assert sorted(p.tolist()) == list(range(50))
    assert torch.equal(p, lst_task.epoch_permutation(5, 3, 50))
    assert not torch.equal(p, lst_task.epoch_permutation(5, 4, 50))
    assert not torch.equal(p, lst_task.epoch_permutation(6, 3, 50))


def test_deadline_pauses_with_a_checkpoint_and_resumes_exactly(tiny_cfg, small_splits,
                                                               tmp_path):
    """A run told to stop by a deadline checkpoints and raises Paused; rerun, it finishes
    with the same history as a run never paused."""
    import time

    from lstpe.training.engine import Paused

    cfg = tiny_train_cfg(tiny_cfg, pes=["2d-fixed", "learn-0.5"], epochs=3, checkpoint_every=0)
    ref = train.train(cfg, progress=False, splits=small_splits)
    with pytest.raises(Paused, match="paused after epoch 1 of 3"):
        train.train_many([cfg], [tmp_path / "run"], progress=False, splits=small_splits,
                         deadline=time.monotonic())
    assert (tmp_path / "run" / "checkpoints" / "chunk0.pt").exists()
    assert not (tmp_path / "run" / "manifest.json").exists()
    out = train.train(cfg, run_dir=tmp_path / "run", progress=False, splits=small_splits)
    pd.testing.assert_frame_equal(out.history, ref.history)
    assert out.manifest["resumed"] and len(out.manifest["segments"]) == 2
    # the paused process is named too: a chunk resumed under other code names both commits
    first, last = out.manifest["segments"]
    assert first["git_commit"] == last["git_commit"] == results.git_commit()
    assert first["device"] == last["device"] and first["host"] == last["host"]
    assert first["checkpointed_at"] <= last["finished_at"] and first["wall_s"] > 0


class _Clock:
    """A ``time.monotonic`` the test drives: each epoch a process trains lasts 10 s, its first
    100 s (a CUDA graph's captures, a compile), as an epoch hook advances it."""

    def __init__(self) -> None:
        self.now, self.first = 0.0, True

    def monotonic(self) -> float:
        return self.now

    def perf_counter(self) -> float:
        return self.now

    def after_epoch(self, epoch: int, model, history) -> None:
        if epoch > 0:
            self.now += 100.0 if self.first else 10.0
            self.first = False

    def state(self) -> dict:
        return {}

    def load(self, state: dict) -> None:
        pass


def test_the_deadline_leaves_out_the_first_epoch_a_process_trains(tiny_cfg, small_splits,
                                                                 tmp_path, monkeypatch):
    """The deadline asks room for 1.5 epochs. With only the first epoch timed it counts that
    one: 100 + 150 > 200 pauses a run after epoch 1. A new process resumes it with 255 s; its
    first epoch (epoch 2) lasts 100 s again, and 100 + 150 leaves room. Timed on that epoch,
    it would pause after epoch 3 (110 + 150 > 255); timed on the later ones (10 s), it
    finishes all 8."""
    from lstpe.training import engine
    from lstpe.training.engine import Paused

    cfg = tiny_train_cfg(tiny_cfg, pes=["learn-0.5"], epochs=8, checkpoint_every=0)
    clock = _Clock()
    monkeypatch.setattr(engine, "time", clock)
    with pytest.raises(Paused, match="paused after epoch 1 of 8"):
        train.train_many([cfg], [tmp_path / "run"], progress=False, splits=small_splits,
                         deadline=200.0, hook=clock)
    clock = _Clock()  # a new process
    monkeypatch.setattr(engine, "time", clock)
    out = train.train_many([cfg], [tmp_path / "run"], progress=False, splits=small_splits,
                           deadline=255.0, hook=clock)[0]
    assert out.manifest["resumed"] and clock.now == 100.0 + 6 * 10.0
