"""The brain experiment (lstpe.brain and the modules behind it): data, masks, model, baseline,
batched training through the engine, checkpoints and run folders."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from lstpe import brain
from lstpe.analysis import networks as nw
from lstpe.brain import config as brain_config
from lstpe.brain import task as brain_task
from lstpe.store import results as res
from lstpe.training import engine

# --------------------------------------------------------------------------- vendored data


def test_fc_files_are_correlation_matrices():
    for n in brain.PARCELLATIONS:
        for g in brain.GROUPS:
            fc = brain.load_fc(n, g)
            assert fc.shape == (n, n)
            assert np.allclose(fc, fc.T) and np.allclose(np.diag(fc), 1.0)
            assert np.linalg.eigvalsh(fc)[0] > 0
    assert not np.allclose(brain.load_fc(100, "main"), brain.load_fc(100, "holdout"))


def test_within_network_fc_exceeds_between():
    # Reference README: within-network FC 0.50 vs between 0.29 at 100 parcels.
    fc = brain.load_fc(100, "main")
    net = brain.load_networks(100)["network"].to_numpy()
    same = (net[:, None] == net[None, :]) & ~np.eye(100, dtype=bool)
    diff = net[:, None] != net[None, :]
    assert fc[same].mean() == pytest.approx(0.50, abs=0.01)
    assert fc[diff].mean() == pytest.approx(0.29, abs=0.01)


def test_network_labels():
    df = brain.load_networks(400)
    assert list(df.columns) == ["parcel", "hemisphere", "network"]
    assert set(df["network"]) == set(brain.YEO7) and len(df) == 400
    assert sorted(df["hemisphere"].unique()) == ["LH", "RH"]


def test_bad_parcellation_or_group():
    with pytest.raises(ValueError, match="valid: 100, 400"):
        brain.load_fc(200)
    with pytest.raises(ValueError, match="valid: main, holdout"):
        brain.load_fc(100, "test")


def test_nearest_pd_fixes_and_says_so():
    c = np.array([[1.0, 0.9, -0.9], [0.9, 1.0, 0.9], [-0.9, 0.9, 1.0]])  # not PSD
    assert np.linalg.eigvalsh(c)[0] < 0
    with pytest.warns(UserWarning, match="not positive definite"):
        fixed, changed = brain.nearest_pd(c)
    assert changed
    assert np.linalg.eigvalsh(fixed)[0] > 0
    assert np.allclose(np.diag(fixed), 1.0) and np.allclose(fixed, fixed.T)
    good = brain.load_fc(100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same, changed = brain.nearest_pd(good)
    assert not changed and np.allclose(same, good)


# --------------------------------------------------------------------------- surrogate data


@pytest.fixture(scope="module")
def surrogate():
    return brain.make_surrogate(100, n_train=20_000, n_test=20_000, seed=0)


def test_surrogate_has_the_groups_covariance(surrogate):
    d, o = surrogate, surrogate.order
    main, hold = brain.load_fc(100, "main")[o][:, o], brain.load_fc(100, "holdout")[o][:, o]
    c_train = np.corrcoef(d.train.numpy(), rowvar=False)
    c_test = np.corrcoef(d.test.numpy(), rowvar=False)
    # sampling error of a correlation with n = 20000 is about 0.007
    assert np.abs(c_train - main).max() < 0.05
    assert np.abs(c_test - hold).max() < 0.05
    # the test split is other people: closer to the holdout group's FC than to the main one's
    assert np.linalg.norm(c_test - hold) < np.linalg.norm(c_test - main)
    for x in (d.train, d.test):  # z-scored per region
        assert torch.allclose(x.mean(0), torch.zeros(100), atol=1e-4)
        assert torch.allclose(x.std(0, correction=0), torch.ones(100), atol=1e-4)


def test_token_order_and_labels(surrogate):
    d = surrogate
    assert sorted(d.order.tolist()) == list(range(100))
    assert not np.array_equal(d.order, np.arange(100))
    names = brain.load_networks(100)["network"].to_numpy()
    assert list(d.labels) == list(names[d.order])
    f = brain.make_surrogate(100, 50, 50, order="file")
    assert np.array_equal(f.order, np.arange(100))
    # the file lists parcels network by network: few runs of equal labels along the tokens,
    # many once shuffled
    def runs(codes):
        return int((np.diff(codes) != 0).sum() + 1)
    assert runs(f.networks) <= 2 * len(brain.YEO7)
    assert runs(d.networks) > 50
    with pytest.raises(ValueError, match="valid: shuffled, file"):
        brain.make_surrogate(100, 10, 10, order="random")


# --------------------------------------------------------------------------- real time series


def _blocks(r: int = 12, k: int = 3, rho: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    labels = np.repeat(np.arange(k), r // k)
    cov = np.where(labels[:, None] == labels[None, :], rho, 0.05)
    np.fill_diagonal(cov, 1.0)
    return cov, labels


def _tiny_data(r: int = 12, t: int = 600, seed: int = 0) -> brain.BrainData:
    cov, labels = _blocks(r)
    x = brain.sample_gaussian(cov, 2 * t, seed)
    return brain.load_timeseries(x[:t], [x[t:t + t // 2], x[t + t // 2:]], labels)


def test_load_timeseries_zscores_each_run(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.normal(3.0, 2.0, size=(50, 4))
    b = rng.normal(-1.0, 5.0, size=(30, 4))
    np.save(tmp_path / "b.npy", b)
    d = brain.load_timeseries([a, tmp_path / "b.npy"], a, ["x", "y", "x", "y"])
    assert d.train.shape == (80, 4) and d.test.shape == (50, 4)
    assert torch.allclose(d.train[:50].mean(0), torch.zeros(4), atol=1e-5)
    assert torch.allclose(d.train[50:].std(0, correction=0), torch.ones(4), atol=1e-5)
    assert d.network_names == ("x", "y") and list(d.networks) == [0, 1, 0, 1]


def test_load_timeseries_validation(tmp_path):
    x = np.random.default_rng(0).normal(size=(20, 5))
    part = [0, 0, 1, 1, 1]
    bad = x.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"NaN/inf values \(first at timepoint 3, region 2\)"):
        brain.load_timeseries(bad, x, part)
    with pytest.raises(ValueError, match="has 20 regions .* partition has 5 .*transposed"):
        brain.load_timeseries(x.T, x, part)
    with pytest.raises(ValueError, match="2-D array"):
        brain.load_timeseries(x[:, 0], x, part)
    flat = x.copy()
    flat[:, 4] = 1.0
    with pytest.raises(ValueError, match=r"regions \[4\] have zero variance"):
        brain.load_timeseries(x, flat, part)
    with pytest.raises(ValueError, match="not in network_names"):
        brain.load_timeseries(x, x, part, network_names=[0])
    with pytest.raises(FileNotFoundError, match="no file"):
        brain.load_timeseries(tmp_path / "missing.npy", x, part)
    with pytest.raises(ValueError, match="1-D vector"):
        brain.load_timeseries(x, x, [[0, 1]])


# --------------------------------------------------------------------------- masks


def test_masks_hide_exact_counts_and_nest():
    m = brain.sample_masks(200, 40, 0.9, seed=1)
    assert m.shape == (200, 40) and (m.sum(1) == 36).all()
    assert brain.n_masked(0.15, 400) == 60 and brain.n_masked(0.5, 100) == 50
    with pytest.raises(ValueError, match=r"in \(0, 1\)"):
        brain.n_masked(1.0, 10)
    idx, scores = brain.draw_batch(7, 3, 1000, 8, 40)
    low, high = brain.masks_from_scores(scores, 0.5), brain.masks_from_scores(scores, 0.75)
    assert (low <= high).all()  # the 50% mask of a step lies inside its 75% mask
    idx2, scores2 = brain.draw_batch(7, 3, 1000, 8, 40)
    assert torch.equal(idx, idx2) and torch.equal(scores, scores2)
    assert not torch.equal(scores, brain.draw_batch(7, 4, 1000, 8, 40)[1])
    # masked regions are uniformly spread: every region is hidden about as often
    freq = brain.sample_masks(4000, 10, 0.3, seed=2).float().mean(0)
    assert torch.allclose(freq, torch.full((10,), 0.3), atol=0.03)


# --------------------------------------------------------------------------- model


def _oracle_forward(w: dict, spec, x: torch.Tensor, mask: torch.Tensor, n_layers: int):
    """One model, written out with plain tensor ops (single head)."""
    d = w["embed.w"].shape[1]
    h = x[..., None] * w["embed.w"][0] + w["embed.b"]
    h = torch.where(mask[..., None], w["mask.emb"], h)
    pe = w["pe.fixed"] + w["pe.mask"] * w["pe.learn"]
    n = x.shape[-1]
    for i in range(n_layers):
        p = f"blocks.{i}."
        h = h + pe[i]
        q, k, v = (h @ w[p + "qkv.w"] + w[p + "qkv.b"]).split(d, -1)
        if spec.name == "rope":  # paper variant: first half of the dims, pairs (j, j + d_rot/2)
            d_rot = d // 2
            theta = 10000.0 ** (-torch.arange(0, d_rot, 2, dtype=torch.float64) / d_rot)
            ang = (torch.arange(n, dtype=torch.float64)[:, None] * theta).float()
            c, s = ang.cos(), ang.sin()

            def rot(t, c=c, s=s, d_rot=d_rot):
                a, b, rest = t[..., :d_rot // 2], t[..., d_rot // 2:d_rot], t[..., d_rot:]
                return torch.cat([a * c - b * s, a * s + b * c, rest], -1)

            q, k = rot(q), rot(k)
        scores = q @ k.transpose(-1, -2)
        if spec.name == "relative":  # Shaw keys, bidirectional
            rel = w[p + "rel"]
            j_minus_i = torch.arange(n)[None, :] - torch.arange(n)[:, None] + n - 1
            scores = scores + torch.einsum("bid,ijd->bij", q, rel[j_minus_i])
        a = (scores / math.sqrt(d)).softmax(-1) @ v
        h = F.layer_norm(h + a @ w[p + "out.w"] + w[p + "out.b"], (d,), w[p + "ln1.w"],
                         w[p + "ln1.b"])
        mlp = F.gelu(F.gelu(h @ w[p + "fc1.w"] + w[p + "fc1.b"]) @ w[p + "fc2.w"] + w[p + "fc2.b"])
        h = F.layer_norm(h + mlp, (d,), w[p + "ln2.w"], w[p + "ln2.b"])
    return (h @ w["head.w"] + w["head.b"])[..., 0]


@pytest.mark.parametrize("pes", [["learn-0.2", "1d-fixed", "random"], ["rope"], ["relative"]])
def test_model_matches_plain_formulas(pes):
    cfg = brain.model_config(10, d_model=16, n_layers=2)
    specs = [brain.brain_spec(p) for p in pes]
    model = brain.BatchedBrainTransformer(specs, list(range(len(pes))), cfg)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 10, generator=g)
    mask = brain.sample_masks(5, 10, 0.5, seed=3)
    with torch.no_grad():
        fast = model(x, mask)
        slow, attn = model(x, mask, return_attention=True)
    assert fast.shape == (len(pes), 5, 10) and attn.shape == (len(pes), 5, 2, 10, 10)
    assert torch.allclose(attn.sum(-1), torch.ones(()), atol=1e-5)
    assert torch.allclose(fast, slow, atol=1e-5)  # SDPA path == explicit attention path
    for m, spec in enumerate(specs):
        ref = _oracle_forward(model.single_weights(m), spec, x, mask, 2)
        assert torch.allclose(fast[m], ref, atol=1e-4), spec.label


def test_masked_values_do_not_leak():
    cfg = brain.model_config(8, d_model=16, n_layers=2)
    model = brain.BatchedBrainTransformer(["learn-0.1", "learn-0.1"], [0, 1], cfg)
    x = torch.randn(4, 8)
    mask = brain.sample_masks(4, 8, 0.5, seed=0)
    x2 = torch.where(mask, torch.randn(4, 8) * 100, x)
    with torch.no_grad():
        assert torch.equal(model(x, mask), model(x2, mask))
        assert not torch.equal(model(x, mask), model(x, ~mask))


def test_nope_model_is_permutation_equivariant():
    cfg = brain.model_config(9, d_model=16, n_layers=2)
    model = brain.BatchedBrainTransformer(["nope"], [0], cfg)
    x, mask = torch.randn(3, 9), brain.sample_masks(3, 9, 0.5, seed=0)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(model(x, mask)[:, :, perm], model(x[:, perm], mask[:, perm]),
                              atol=1e-5)


def test_specs_and_initial_pe():
    assert not brain.brain_spec("relative").causal
    assert brain.brain_spec("relative", relative_causal=True).causal
    with pytest.raises(ValueError, match="causal"):
        brain.brain_spec("c-nope")
    cfg = brain.model_config(10, d_model=16, n_layers=2)
    model = brain.BatchedBrainTransformer(["learn-0.1", "learn-0.2"], [5, 5], cfg)
    # common random numbers: same seed -> same draw, scaled by sigma
    assert torch.allclose(model.pe()[1], 2 * model.pe()[0])
    assert torch.equal(brain.initial_pe("learn-0.2", 5, cfg), model.pe()[1].detach())
    with pytest.raises(ValueError, match="n_inputs=1"):
        brain.BatchedBrainTransformer(["nope"], [0], brain.ModelConfig(n_tokens=10))


# --------------------------------------------------------------------------- linear baseline


def test_linear_baseline_closed_form():
    rho = 0.8
    cov = np.array([[1.0, rho], [rho, 1.0]])
    x = torch.from_numpy(brain.sample_gaussian(cov, 20_000, seed=0))
    mask = torch.zeros(20_000, 2, dtype=torch.bool)
    mask[:10_000, 0] = True
    mask[10_000:, 1] = True
    # conditional variance of one coordinate given the other: 1 - rho^2
    assert brain.linear_baseline_mse(cov, x, mask) == pytest.approx(1 - rho**2, rel=0.05)
    assert brain.linear_baseline_mse(np.eye(2), x, mask) == pytest.approx(1.0, rel=0.05)
    with pytest.raises(ValueError, match="same number"):
        brain.linear_baseline_mse(cov, x[:2], torch.tensor([[True, False], [True, True]]))


# --------------------------------------------------------------------------- training


def _cfg(**kw) -> brain.BrainConfig:
    base = dict(pes=["learn-0.1", "random", "rope"], seeds=[1, 2], train_masks=[0.5], steps=4,
                batch_size=8, lr=1e-3, n_eval=16, eval_every=2, d_model=16, n_layers=2,
                checkpoint_every=0, device="cpu")
    base.update(kw)
    return brain.BrainConfig(**base)


@pytest.fixture(scope="module")
def tiny():
    return _tiny_data()


def test_training_history_and_saved_run(tiny, tmp_path):
    cfg = _cfg(train_masks=[0.5, 0.9])
    r = brain.train_brain(cfg, run_dir=tmp_path / "run", data=tiny, progress=False)
    h = r.history
    assert list(h.columns) == brain.BRAIN_HISTORY_COLUMNS
    assert len(cfg.models) == 12 and sorted(h["model"].unique()) == list(range(12))
    assert sorted(h["step"].unique()) == [0, 2, 4]
    got = set(zip(h["split"], h["mask_ratio"], strict=True))
    assert got == {("train", 0.5), ("train", 0.9), ("test", 0.9)}
    assert (h["mse"] > 0).all() and h["mse"].notna().all()
    m5 = h[h["model"] == 5].iloc[0]
    spec, tm, seed = cfg.models[5]
    assert (m5["pe"], m5["train_mask"], m5["seed"]) == (spec.label, tm, seed)
    assert (spec.label, tm, seed) == ("random", 0.5, 2)
    assert r.artifacts["pe_final"].shape == (12, 2, 12, 16)
    run = res.load(tmp_path / "run")  # artifacts too, with torch's weights_only loader
    pd.testing.assert_frame_equal(run.history, h, check_dtype=False)
    assert list(np.asarray(run.artifacts["networks"])) == list(np.asarray(tiny.networks))
    assert run.artifacts["linear_baseline"] == r.artifacts["linear_baseline"]
    assert run.manifest["kind"] == "brain-train" and run.manifest["data_source"] == "timeseries"
    s = brain.mse_summary(h, train_mask=0.5)
    assert list(s["test_mean"]) == sorted(s["test_mean"], reverse=True)
    shown = brain.mse_table(s)  # 2 seeds: mean ± SD of the seeds' final test MSEs
    rope = brain.final_mse(h, "test", train_mask=0.5).query("pe == 'rope'")["mse"]
    assert list(shown.index) == list(s["pe"]) and (shown["n"] == 2).all()
    assert shown.loc["rope", "test MSE"] == f"{rope.mean():.4f} ± {rope.std():.4f}"
    one = brain.mse_table(brain.mse_summary(h[h["seed"] == 2], train_mask=0.5))
    assert (one["n"] == 1).all() and not one["train MSE"].str.contains("±|nan").any()
    nt = brain.network_table(r.artifacts, stages=("init", "final"))
    assert nt.loc[nt["pe"] == "rope", "modularity"].isna().all()
    assert nt.loc[nt["pe"] != "rope", ["modularity", "clustering"]].notna().all().all()


def test_batched_training_equals_one_by_one(tiny):
    cfg = _cfg(pes=["learn-0.1", "random", "1d-fixed"], steps=3, eval_every=3)
    r = brain.train_brain(cfg, data=tiny, progress=False)
    for i, (spec, _, seed) in enumerate(cfg.models):
        one = brain.train_brain(_cfg(pes=[spec.label], seeds=[seed], steps=3, eval_every=3),
                                data=tiny, progress=False)
        assert torch.allclose(one.artifacts["pe_final"][0], r.artifacts["pe_final"][i],
                              atol=1e-5)
        a = one.history["mse"].to_numpy()
        b = r.history[r.history["model"] == i]["mse"].to_numpy()
        assert np.allclose(a, b, atol=1e-5)
    # the learnable PE moved, the fixed ones did not
    assert not torch.allclose(r.artifacts["pe_final"][0], brain.initial_pe("learn-0.1", 1,
                                                                           r.models[0].cfg))
    assert torch.equal(r.artifacts["pe_final"][2], brain.initial_pe("random", 1, r.models[0].cfg))


def test_resume_after_interruption_gives_the_same_run(tiny, tmp_path, monkeypatch):
    cfg = _cfg(pes=["learn-0.2", "rope"], seeds=[3], steps=6, eval_every=3, checkpoint_every=2)
    full = brain.train_brain(cfg, run_dir=tmp_path / "a", data=tiny, progress=False)
    assert not full.manifest["resumed"]
    real, calls = brain_task.masked_mse, {"n": 0}

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == 4:  # step 4: after the checkpoint of round 1 (steps 1-3)
            raise RuntimeError("interrupted")
        return real(*a, **k)

    monkeypatch.setattr(brain_task, "masked_mse", flaky)  # the loss of every training step
    with pytest.raises(RuntimeError, match="interrupted"):
        brain.train_brain(cfg, run_dir=tmp_path / "b", data=tiny, progress=False)
    assert (tmp_path / "b" / "checkpoints" / "chunk0.pt").exists()
    assert not (tmp_path / "b" / "manifest.json").exists()
    assert not (tmp_path / "b" / res.LOCK_NAME).exists()  # the lock went with the process
    monkeypatch.setattr(brain_task, "masked_mse", real)
    # the checkpoints are refused to another configuration and to other data
    with pytest.raises(res.ConfigMismatchError, match="different configuration"):
        brain.train_brain(_cfg(pes=["learn-0.2", "rope"], seeds=[3], steps=6, eval_every=3,
                               checkpoint_every=2, lr=2e-3),
                          run_dir=tmp_path / "b", data=tiny, progress=False)
    with pytest.raises(ValueError, match="different configuration"):
        brain.train_brain(cfg, run_dir=tmp_path / "b", data=_tiny_data(seed=1), progress=False)
    again = brain.train_brain(cfg, run_dir=tmp_path / "b", data=tiny, progress=False)
    pd.testing.assert_frame_equal(again.history, full.history)
    assert torch.equal(again.artifacts["pe_final"], full.artifacts["pe_final"])
    assert again.manifest["resumed"] and len(again.manifest["segments"]) == 2
    assert again.manifest["segments"][0]["git_commit"] == res.git_commit()  # who paused it
    # a finished run is not trained again
    with pytest.raises(res.RunDirError, match="already holds this finished run"):
        brain.train_brain(cfg, run_dir=tmp_path / "b", data=tiny, progress=False)


def test_run_folder_of_another_run_is_refused(tiny, tmp_path):
    brain.train_brain(_cfg(pes=["rope"], seeds=[1], steps=2), run_dir=tmp_path / "r",
                      data=tiny, progress=False)
    with pytest.raises(res.ConfigMismatchError, match="steps"):
        brain.train_brain(_cfg(pes=["rope"], seeds=[1], steps=3), run_dir=tmp_path / "r",
                          data=tiny, progress=False)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(res.RunDirError, match="holds no run"):
        brain.train_brain(_cfg(pes=["rope"], seeds=[1], steps=2), run_dir=tmp_path / "other",
                          data=tiny, progress=False)


def test_rounds_of_steps():
    assert brain_config.n_rounds(7, 3) == 3 and brain_config.n_rounds(6, 3) == 2
    assert [list(brain_task.round_steps(r, 7, 3)) for r in range(4)] == [
        [], [1, 2, 3], [4, 5, 6], [7]]
    assert [brain_task.last_step(r, 7, 3) for r in range(4)] == [0, 3, 6, 7]
    cfg = _cfg(steps=7, eval_every=3)
    assert cfg.schedule() == [brain_task.last_step(r, 7, 3) for r in range(4)]


@pytest.mark.parametrize(("every", "saved"), [(2, [1, 2, 3]), (6, [2, 3]), (100, [3])])
def test_checkpoint_every_counts_whole_rounds(tiny, tmp_path, monkeypatch, every, saved):
    # checkpoint_every steps -> every max(1, checkpoint_every // eval_every) rounds, and the last
    got = []
    real = res.save_torch

    def spy(obj, path, tmp_dir=None):
        if isinstance(obj, dict) and "epoch" in obj:
            got.append(obj["epoch"])
        return real(obj, path, tmp_dir)

    monkeypatch.setattr(res, "save_torch", spy)
    brain.train_brain(_cfg(pes=["rope"], seeds=[1], steps=7, eval_every=3,
                           checkpoint_every=every), run_dir=tmp_path / "r", data=tiny,
                      progress=False)
    assert got == saved


def test_brain_and_lst_runs_go_through_the_engine(tiny, small_splits, tiny_cfg, monkeypatch):
    from lstpe.training import config, train
    from lstpe.training import task as lst_task

    real, seen = engine.run_chunk, []

    def spy(task, opt, opts, init_state):
        seen.append((task, opts))
        return real(task, opt, opts, init_state)

    monkeypatch.setattr(engine, "run_chunk", spy)
    monkeypatch.setattr(train, "run_chunk", spy)  # train.py binds the name at import
    cfg = _cfg(steps=7, eval_every=3, max_models=4)
    r = brain.train_brain(cfg, data=tiny, progress=False)
    assert [type(t) for t, _ in seen] == [brain_task.BrainTask] * 2  # 6 models in chunks of 4
    assert [t.ids for t, _ in seen] == [[0, 1, 2, 3], [4, 5]]
    opts = seen[0][1]
    assert (opts.epochs, opts.schedule, opts.mode) == (3, {1, 2, 3}, "eager")
    assert sorted(r.history["step"].unique()) == [0, 3, 6, 7]
    seen.clear()
    lst_cfg = config.TrainConfig(pes=["learn-0.5"], seeds=[3], epochs=1, batch_size=16,
                                model=tiny_cfg, device="cpu", checkpoint_every=0,
                                save_attention=False, noise_levels=[])
    train.train(lst_cfg, progress=False, splits=small_splits)
    assert [type(t) for t, _ in seen] == [lst_task.LSTTask]


def test_amp_trains_in_bf16_on_the_cpu(tiny, monkeypatch):
    # amp on the CPU is bf16 only where the CPU has bf16 instructions (lstpe.runtime.choose_amp)
    monkeypatch.setattr("lstpe.runtime.has_bf16", lambda *a: True)
    fp32 = brain.train_brain(_cfg(pes=["rope"], seeds=[1], steps=2), data=tiny, progress=False)
    bf16 = brain.train_brain(_cfg(pes=["rope"], seeds=[1], steps=2, amp=True), data=tiny,
                             progress=False)
    a, b = fp32.history["mse"].to_numpy(), bf16.history["mse"].to_numpy()
    assert np.isfinite(b).all() and not np.array_equal(a, b)  # autocast was on
    assert np.allclose(a, b, rtol=0.05)
    assert (fp32.manifest["precision"], bf16.manifest["precision"]) == ("fp32", "bf16")
    monkeypatch.setattr("lstpe.runtime.has_bf16", lambda *a: False)  # emulated bf16: not used
    off = brain.train_brain(_cfg(pes=["rope"], seeds=[1], steps=2, amp=True), data=tiny,
                            progress=False)
    assert np.array_equal(a, off.history["mse"].to_numpy()) and \
        off.manifest["precision"] == "fp32"


def test_config_validation():
    with pytest.raises(ValueError, match="unknown positional encoding"):
        _cfg(pes=["learn-0.1", "sinusoid"])
    with pytest.raises(ValueError, match="duplicate"):
        _cfg(seeds=[1, 1])
    with pytest.raises(ValueError, match=r"in \(0, 1\)"):
        _cfg(train_masks=[1.0])
    with pytest.raises(ValueError, match="valid presets: preview, cpu, paper"):
        brain.brain_preset("huge")
    p = brain.brain_preset("paper")
    assert p.n_parcels == 400 and p.steps == 50_000 and p.d_model == 64 and p.n_layers == 4
    assert p.train_masks == list(brain.PAPER_MASKS) and len(p.seeds) == 15
    assert [m[0].label for m in p.models[::60]] == list(brain.BRAIN_PES)
    assert brain.brain_preset("preview", steps=7).steps == 7


def test_network_table_reports_undefined_measures():
    cfg = brain.model_config(14, d_model=16, n_layers=2)
    labels = ["1d-fixed", "learn-0.1", "rope"]
    arts = {"labels": labels, "seeds": [0, 0, 0], "train_masks": [0.5] * 3,
            "pe_final": torch.stack([brain.initial_pe(p, 0, cfg) for p in labels]),
            "networks": np.repeat([0, 1], 7), "network_names": ["a", "b"],
            "model_config": cfg.to_dict()}
    # default: plain distances between the tokens' PEs, defined for 1d-fixed
    t = brain.network_table(arts, stages=("init", "final")).set_index(["pe", "stage"])
    assert t.loc[("1d-fixed", "final"), ["modularity", "clustering"]].notna().all()
    assert t.loc[("1d-fixed", "final"), "note"] == ""
    assert "no per-region" in t.loc[("rope", "init"), "note"]
    learn = t.loc["learn-0.1"]
    assert learn["modularity"].notna().all()
    assert learn.loc["init", "modularity"] == pytest.approx(learn.loc["final", "modularity"])
    w = nw.pe_similarity(arts["pe_final"][0])
    assert t.loc[("1d-fixed", "final"), "modularity"] == pytest.approx(
        nw.modularity(w, np.repeat(["a", "b"], 7)))
    # per-pair Procrustes (an option): every 1d-fixed token is at distance 0 from every other
    pair = brain.network_table(arts, align="pair").set_index("pe")
    assert pair.loc["1d-fixed", ["modularity", "clustering"]].isna().all()
    assert "equidistant (align='pair')" in pair.loc["1d-fixed", "note"]
    assert np.isfinite(pair.loc["learn-0.1", "modularity"])
    with pytest.raises(ValueError, match="valid: 'final', 'init'"):
        brain.network_table(arts, stages=("end",))


def test_plot_pe_similarities_draws_1d_fixed_by_default():
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    cfg = brain.model_config(14, d_model=16, n_layers=2)
    labels = ["1d-fixed", "learn-0.1"]
    arts = {"labels": labels, "pe_final": torch.stack([brain.initial_pe(p, 0, cfg)
                                                       for p in labels]),
            "networks": np.repeat([0, 1], 7), "network_names": ["a", "b"]}
    fig = brain.plot_pe_similarities(arts, [0, 1])
    assert len(fig.axes[0].images) == 1 and not fig.axes[0].texts  # a matrix, not a note
    fig = brain.plot_pe_similarities(arts, [0, 1], align="pair")
    assert not fig.axes[0].images and "align='pair'" in fig.axes[0].texts[0].get_text()
    assert len(fig.axes[1].images) == 1  # learn-0.1 under per-pair alignment: defined
    plt.close("all")


def test_plot_mse_bars_draws_train_and_test_per_pe():
    import matplotlib

    matplotlib.use("Agg")
    summ = pd.DataFrame({"pe": ["relative", "learn-0.1"], "train_mean": [0.8, 0.5],
                         "train_std": [0.1, np.nan], "test_mean": [0.9, 0.6],
                         "test_std": [0.05, 0.02]})
    ax = brain.plot_mse_bars(summ, baseline=0.4)
    assert len(ax.patches) == 4  # two bars per PE
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    assert heights == [0.5, 0.6, 0.8, 0.9]
    assert ax.get_ylim()[0] == pytest.approx(0.9 * 0.4)  # the baseline is the lowest value
    assert [t.get_text() for t in ax.get_xticklabels()] == ["relative", "learn-0.1"]


def test_plot_network_measures_uses_final_init_and_null():
    import matplotlib

    matplotlib.use("Agg")
    rows = []
    for stage, base in (("init", 0.0), ("final", 0.3)):
        for pe, bump in (("learn-0.1", 0.2), ("random", 0.0)):
            for seed in (1, 2):
                rows.append({"stage": stage, "pe": pe, "seed": seed,
                             "modularity": base + bump + 0.01 * seed,
                             "clustering": base + bump, "modularity_null_mean": 0.05,
                             "clustering_null_mean": 0.02})
    fig = brain.plot_network_measures(pd.DataFrame(rows), ["random", "learn-0.1"])
    ax = fig.axes[0]
    final = ax.containers[0].lines[0].get_ydata()  # errorbar means, in the given order
    np.testing.assert_allclose(np.asarray(final, dtype=float), [0.315, 0.515])


def test_network_measures_go_in_sigma_order_with_readable_text():
    """Whatever order the chapter passes (its MSE ranking), the modularity plot reads the fixed
    PEs first, then sigma upwards; no text under 9 pt on the page."""
    import matplotlib

    matplotlib.use("Agg")
    from lstpe.rendering import style

    pes = ["learn-1", "random", "learn-0.1", "learn-0.2"]
    rows = [{"stage": st, "pe": pe, "seed": 1, "modularity": 0.1 * i, "clustering": 0.1,
             "modularity_null_mean": 0.0, "clustering_null_mean": 0.0}
            for st in ("init", "final") for i, pe in enumerate(pes)]
    fig = brain.plot_network_measures(pd.DataFrame(rows), pes)
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == ["random", "learn-0.1", "learn-0.2", "learn-1"]
    final = np.asarray(fig.axes[0].containers[0].lines[0].get_ydata(), dtype=float)
    np.testing.assert_allclose(final, [0.1, 0.2, 0.3, 0.0])  # each PE's own value
    assert style.small_text(fig) == []


def test_token_order_strip_has_a_colour_legend():
    """Every network present in the strip is named in a legend, in its strip colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lstpe.rendering import style

    names = ["Vis", "SomMot", "DorsAttn", "Limbic"]
    file_codes = np.repeat([0, 1, 3], 4)
    fc = np.eye(12)
    fig = brain.plot_token_order(fc, file_codes, file_codes[::-1], names)
    leg = fig.axes[-1].get_legend() or next(a.get_legend() for a in fig.axes if a.get_legend())
    assert [t.get_text() for t in leg.get_texts()] == ["Vis", "SomMot", "Limbic"]
    cmap = plt.get_cmap("tab10")
    colours = [tuple(h.get_facecolor()) for h in leg.legend_handles]
    assert colours == [tuple(cmap(c / 9)) for c in (0, 1, 3)]
    assert style.small_text(fig) == []
    # on the real 100-region FC, as chapter 10 draws it: no panel covers another's ticks
    fc, nets = brain.load_fc(100, "main"), brain.load_networks(100)
    codes = np.array([brain.YEO7.index(v) for v in nets["network"]])
    fig = brain.plot_token_order(fc, codes, codes[::-1], brain.YEO7)
    assert style.overlapping_text(fig) == []
