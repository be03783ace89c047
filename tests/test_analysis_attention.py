"""Attention-map alignment: cosine / JSD against hand-computed cases and scipy."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from scipy.spatial.distance import jensenshannon  # noqa: E402

from lstpe.analysis import attention as att  # noqa: E402
from lstpe.figures import plots  # noqa: E402
from lstpe.nn.architecture import ModelConfig
from lstpe.nn.model import BatchedLSTTransformer  # noqa: E402


def random_maps(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Softmax of random logits along the last axis (rows are distributions)."""
    z = rng.normal(size=shape) * 2
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def make_artifacts(n: int = 6, L: int = 2, tokens: int = 4, seed: int = 0) -> dict:
    """4 models: 2d-fixed seeds 1, 2 and learn-0.2 seeds 1, 2; learn seed 1 copies 2d seed 1."""
    rng = np.random.default_rng(seed)
    final = random_maps(rng, (4, n, L, tokens, tokens))
    final[2] = final[0]
    init = random_maps(rng, (4, n, L, tokens, tokens))
    return {"labels": ["2d-fixed", "2d-fixed", "learn-0.2", "learn-0.2"], "seeds": [1, 2, 1, 2],
            "val_attention": torch.tensor(final), "val_attention_init": torch.tensor(init)}


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sum(a * b) / math.sqrt(np.sum(a * a) * np.sum(b * b)))


# --------------------------------------------------------------------------- primitives


def test_cosine_hand_cases():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert att.cosine_similarity(a, a) == pytest.approx(1.0)
    assert att.cosine_similarity(a, 3 * a) == pytest.approx(1.0)
    assert att.cosine_similarity([1, 0], [0, 1]) == pytest.approx(0.0)
    assert att.cosine_similarity([1, 1], [1, 0]) == pytest.approx(1 / math.sqrt(2))
    with pytest.raises(ValueError, match="shape mismatch"):
        att.cosine_similarity(a, a.ravel())
    with pytest.raises(ValueError, match="all-zero"):
        att.cosine_similarity(a, np.zeros_like(a))


def test_jsd_hand_cases_and_scipy():
    assert att.js_divergence([0.2, 0.8], [0.2, 0.8]) == pytest.approx(0.0, abs=1e-15)
    assert att.js_divergence([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0)
    # p = (1/2, 1/2), q = (1, 0), m = (3/4, 1/4):
    # KL(p||m) = 1/2 log2(2/3) + 1/2 log2(2); KL(q||m) = log2(4/3)
    hand = 0.5 * (0.5 * math.log2(2 / 3) + 0.5 * 1.0) + 0.5 * math.log2(4 / 3)
    assert att.js_divergence([0.5, 0.5], [1.0, 0.0]) == pytest.approx(hand)
    rng = np.random.default_rng(1)
    p, q = random_maps(rng, (5, 7)), random_maps(rng, (5, 7))
    ours = att.js_divergence(p, q)
    ref = [jensenshannon(p[i], q[i], base=2) ** 2 for i in range(5)]
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)
    # symmetric, along another axis
    np.testing.assert_allclose(att.js_divergence(p.T, q.T, axis=0), ours, rtol=1e-12)
    np.testing.assert_allclose(att.js_divergence(q, p), ours, rtol=1e-12)


def test_jsd_bad_inputs():
    with pytest.raises(ValueError, match="shape mismatch"):
        att.js_divergence([0.5, 0.5], [1 / 3] * 3)
    with pytest.raises(ValueError, match="non-negative"):
        att.js_divergence([1.5, -0.5], [0.5, 0.5])
    with pytest.raises(ValueError, match="not a probability distribution"):
        att.js_divergence([0.5, 0.2], [0.5, 0.5])


def test_layer_scores_per_layer_by_hand():
    rng = np.random.default_rng(2)
    a = random_maps(rng, (3, 2, 4, 4))
    b = a.copy()
    b[:, 1] = random_maps(rng, (3, 4, 4))
    s = att.layer_scores(a, b)
    assert s["cosine"][0] == pytest.approx(1.0)
    assert s["jsd"][0] == pytest.approx(0.0, abs=1e-15)
    assert s["cosine"][1] == pytest.approx(cos(a[:, 1], b[:, 1]))
    rows = [jensenshannon(a[i, 1, j], b[i, 1, j], base=2) ** 2
            for i in range(3) for j in range(4)]
    assert s["jsd"][1] == pytest.approx(np.mean(rows))
    with pytest.raises(ValueError, match="shapes differ"):
        att.layer_scores(a, b[:2])
    with pytest.raises(ValueError, match="unknown metrics"):
        att.layer_scores(a, b, metrics=("euclid",))


# --------------------------------------------------------------------------- tables


def test_similarity_to_reference_seed_pairing():
    arts = make_artifacts()
    maps = arts["val_attention"].numpy()
    t = att.similarity_to_reference(arts)
    assert list(t.columns) == ["model", "pe", "pe_name", "sigma", "seed", "stage", "reference",
                               "pairing", "layer", "cosine", "jsd"]
    assert len(t) == 4 * 2
    # learn-0.2 seed 1 is an exact copy of 2d-fixed seed 1
    r = t[(t["model"] == 2)]
    np.testing.assert_allclose(r["cosine"], 1.0)
    np.testing.assert_allclose(r["jsd"], 0.0, atol=1e-12)
    # learn-0.2 seed 2 is compared with 2d-fixed seed 2 (model 1), not seed 1
    r = t[(t["model"] == 3) & (t["layer"] == 1)].iloc[0]
    assert r["cosine"] == pytest.approx(cos(maps[3][:, 1], maps[1][:, 1]))
    assert r["sigma"] == pytest.approx(0.2)
    assert math.isnan(t[t["model"] == 0]["sigma"].iloc[0])
    per_model = att.average_layers(t)
    assert len(per_model) == 4
    want = np.mean([cos(maps[3][:, k], maps[1][:, k]) for k in range(2)])
    assert per_model.set_index("model").loc[3, "cosine"] == pytest.approx(want)


def test_similarity_to_reference_mean_pairing_and_init():
    arts = make_artifacts()
    maps = arts["val_attention"].numpy()
    ref = maps[[0, 1]].mean(0)
    t = att.similarity_to_reference(arts, pairing="mean", pes=["learn-0.2"])
    assert set(t["pe"]) == {"learn-0.2"}
    r = t[(t["model"] == 2) & (t["layer"] == 0)].iloc[0]
    assert r["cosine"] == pytest.approx(cos(maps[2][:, 0], ref[:, 0]))
    init = arts["val_attention_init"].numpy()
    t0 = att.similarity_to_reference(arts, stage="init")
    r = t0[(t0["model"] == 3) & (t0["layer"] == 0)].iloc[0]
    assert r["stage"] == "init"
    assert r["cosine"] == pytest.approx(cos(init[3][:, 0], init[1][:, 0]))


def test_other_seed_pairing_meets_the_reference_of_the_next_seed():
    """Models 0, 1: 2d-fixed seeds 1, 2; models 2, 3: learn-0.2 seeds 1, 2. With
    ``other-seed`` seed 1 meets 2d-fixed seed 2 and seed 2 wraps round to seed 1."""
    arts = make_artifacts()
    maps = arts["val_attention"].numpy()
    t = att.similarity_to_reference(arts, pairing="other-seed", pes=["learn-0.2"])
    r = t[t["layer"] == 0].set_index("model")
    assert r.loc[2, "cosine"] == pytest.approx(cos(maps[2][:, 0], maps[1][:, 0]))
    assert r.loc[3, "cosine"] == pytest.approx(cos(maps[3][:, 0], maps[0][:, 0]))
    assert r.loc[2, "cosine"] < 1.0  # not the exact copy the seed pairing meets
    one = {"labels": ["2d-fixed", "learn-0.2"], "seeds": [1, 1],
           **{k: arts[k][[0, 2]] for k in ("val_attention", "val_attention_init")}}
    with pytest.raises(ValueError, match="two seeds or more"):
        att.similarity_to_reference(one, pairing="other-seed")
    # the baseline a page draws from it: a run of one seed (a reader's live run) has none
    assert att.other_seed_baseline(one) is None
    base = att.other_seed_baseline(arts, pes=["learn-0.2"]).set_index("model")
    init = arts["val_attention_init"].numpy()
    assert set(base.index) == {2, 3} and (base["stage"] == "init").all()
    assert base.loc[2, "cosine_paper"] == pytest.approx(
        cos(init[2].mean(axis=1), init[1].mean(axis=1)), rel=1e-5)


def test_similarity_to_reference_float16_identical_is_exact():
    arts = make_artifacts()
    arts["val_attention"] = arts["val_attention"].to(torch.float16)
    t = att.similarity_to_reference(arts)
    r = t[t["model"] == 2]
    np.testing.assert_allclose(r["cosine"], 1.0, rtol=1e-12)
    np.testing.assert_allclose(r["jsd"], 0.0, atol=1e-12)


def test_similarity_bad_inputs():
    arts = make_artifacts()
    with pytest.raises(ValueError, match="no models with PE 'rope'"):
        att.similarity_to_reference(arts, reference="rope")
    with pytest.raises(ValueError, match="unknown positional encoding"):
        att.similarity_to_reference(arts, reference="bogus")
    with pytest.raises(ValueError, match="unknown pairing"):
        att.similarity_to_reference(arts, pairing="nearest")
    with pytest.raises(ValueError, match="unknown stage"):
        att.similarity_to_reference(arts, stage="middle")
    bad = dict(arts, seeds=[1, 2, 1, 3])
    with pytest.raises(ValueError, match=r"missing seeds \[3\]"):
        att.similarity_to_reference(bad)
    with pytest.raises(ValueError, match="4 models but there are 3 labels"):
        att.similarity_to_reference(dict(arts, labels=arts["labels"][:3], seeds=[1, 2, 1]))
    no_maps = {k: v for k, v in arts.items() if k != "val_attention"}
    with pytest.raises(ValueError, match="no 'val_attention'"):
        att.similarity_to_reference(no_maps)
    with pytest.raises(ValueError, match="empty"):
        att.average_layers(att.similarity_to_reference(arts).iloc[:0])


def test_pairwise_matrix():
    arts = make_artifacts()
    maps = arts["val_attention"].numpy()
    pw = att.pairwise_similarity(arts)
    assert len(pw) == 4 and set(pw["n_seeds"]) == {2}
    m = att.similarity_matrix(pw)
    assert list(m.index) == list(m.columns) == ["2d-fixed", "learn-0.2"]
    np.testing.assert_allclose(np.diag(m.to_numpy()), 1.0)
    np.testing.assert_allclose(m.to_numpy(), m.to_numpy().T)
    seed2 = np.mean([cos(maps[3][:, k], maps[1][:, k]) for k in range(2)])
    assert m.loc["2d-fixed", "learn-0.2"] == pytest.approx((1.0 + seed2) / 2)
    j = att.similarity_matrix(pw, "jsd")
    np.testing.assert_allclose(np.diag(j.to_numpy()), 0.0, atol=1e-12)
    with pytest.raises(ValueError, match="no 'euclid' column"):
        att.similarity_matrix(pw, "euclid")
    ax = plots.plot_similarity_matrix(m)
    np.testing.assert_allclose(ax.images[0].get_array(), m.to_numpy())
    plt.close("all")


def test_with_real_model_attention():
    """Maps from a tiny batched model: identical models give cosine 1; different PEs less."""
    cfg = ModelConfig(d_model=32, n_layers=2)
    model = BatchedLSTTransformer(["2d-fixed", "2d-fixed", "learn-0.2"], [0, 0, 0], cfg)
    x = torch.nn.functional.one_hot(torch.randint(0, 5, (5, 16)), 5).float()
    with torch.no_grad():
        _, maps = model(x, return_attention=True)  # (M, B, L, 16, 16)
    arts = {"labels": ["2d-fixed", "2d-fixed", "learn-0.2"], "seeds": [0, 1, 0],
            "val_attention": maps.to(torch.float16)}
    t = att.average_layers(att.similarity_to_reference(arts, pairing="mean"))
    c = t.set_index("model")["cosine"]
    assert c[0] == pytest.approx(1.0, abs=1e-6) and c[1] == pytest.approx(1.0, abs=1e-6)
    assert 0 < c[2] < 1
    fig = plots.plot_attention_grid(maps[:, :, :].float().mean(1).numpy(),
                                    titles=["a", "b", "c"])
    assert len(fig.axes) == 3 * 2 + 3  # a colour bar per model row
    plt.close("all")


# --------------------------------------------------------------------------- Table 3 variants


def test_layer_mean_scores_hand_computed():
    """N=1 puzzle, L=2 blocks, 2 tokens. a's blocks are the identity and the swap, so their mean
    is uniform; b attends to key 0 in both blocks. Paper variant (blocks averaged first): cosine
    of [.5 .5 .5 .5] and [1 0 1 0] = 1/sqrt(2); JSD of [.5 .5] and [1 0] per row =
    H(.75, .25) - (1 + 0) / 2. Ours (per block, then the mean): 0.5 in each block."""
    a = np.array([[[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]]])  # (1, 2, 2, 2)
    b = np.array([[[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]]])
    s = att.layer_mean_scores(a, b)
    assert s["cosine"] == pytest.approx(1 / math.sqrt(2))
    h = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    assert s["jsd"] == pytest.approx(h - 0.5)
    assert s["jsd"] == pytest.approx(jensenshannon([0.5, 0.5], [1.0, 0.0], base=2) ** 2)
    ours = att.layer_scores(a, b)
    np.testing.assert_allclose(ours["cosine"], [0.5, 0.5])
    assert att.layer_mean_scores(a, a)["cosine"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="shapes differ"):
        att.layer_mean_scores(a, b[:, :1])
    with pytest.raises(ValueError, match="unknown metrics"):
        att.layer_mean_scores(a, b, metrics=("dot",))


def test_layer_mean_scores_keeps_puzzles_apart():
    """Two puzzles with swapped maps: the same puzzle-averaged map (cosine 1 if puzzles were
    averaged), but the paper variant flattens the puzzles, so it stays at the hand value."""
    p, q = np.array([[0.9, 0.1], [0.5, 0.5]]), np.array([[0.2, 0.8], [0.5, 0.5]])
    a = np.stack([p, q])[:, None]  # (N=2, L=1, 2, 2)
    b = np.stack([q, p])[:, None]
    want = 2 * np.sum(p * q) / (np.sum(p * p) + np.sum(q * q))
    assert att.layer_mean_scores(a, b)["cosine"] == pytest.approx(want)
    assert want < 0.8
    assert cos(a.mean(0), b.mean(0)) == pytest.approx(1.0)


def test_table3_both_variants_by_hand():
    arts = make_artifacts()
    maps, init = arts["val_attention"].numpy(), arts["val_attention_init"].numpy()
    t = att.table3(arts)
    assert list(t.columns) == ["model", "pe", "pe_name", "sigma", "seed", "stage", "reference",
                               "pairing", "cosine_paper", "jsd_paper", "cosine_ours", "jsd_ours"]
    r = t.set_index("model")
    np.testing.assert_allclose(r.loc[2, ["cosine_paper", "cosine_ours"]], 1.0)  # a copy
    assert r.loc[3, "cosine_paper"] == pytest.approx(cos(maps[3].mean(1), maps[1].mean(1)))
    assert r.loc[3, "cosine_ours"] == pytest.approx(
        np.mean([cos(maps[3][:, k], maps[1][:, k]) for k in range(2)]))
    old = att.average_layers(att.similarity_to_reference(arts)).set_index("model")
    np.testing.assert_allclose(r["cosine_ours"], old["cosine"])
    np.testing.assert_allclose(r["jsd_ours"], old["jsd"])
    assert r.loc[3, "cosine_paper"] != pytest.approx(r.loc[3, "cosine_ours"])
    t0 = att.table3(arts, stage="init", pairing="mean", pes=["learn-0.2"]).set_index("model")
    assert list(t0.index) == [2, 3] and set(t0["stage"]) == {"init"}
    ref = init[[0, 1]].mean(0)
    assert t0.loc[3, "cosine_paper"] == pytest.approx(cos(init[3].mean(1), ref.mean(1)))
    with pytest.raises(ValueError, match="unknown pairing"):
        att.table3(arts, pairing="nearest")


def test_accuracy_correlations_sets_the_trained_measure_beside_its_initial_value():
    """Accuracy falls with sigma (0.95 ... 0.6). Measure ``m`` after training follows accuracy
    exactly (rho +1, exact p 2/5! over 5 sigmas); at initialisation it was reversed (-1)."""
    from lstpe import chapters as ch

    sig = [0.1, 0.2, 0.5, 1.0, 2.0]
    acc = [0.95, 0.9, 0.8, 0.7, 0.6]
    hist = pd.DataFrame({"model": range(5), "pe": [f"learn-{s:g}" for s in sig],
                         "pe_name": "learn", "sigma": sig, "seed": 1, "optimizer": "adam",
                         "epoch": 200, "split": "val", "condition": "all", "accuracy": acc,
                         "loss": 1.0})
    trained = pd.DataFrame({"model": range(5), "sigma": sig, "m": acc})
    init = trained.assign(m=[0.1, 0.2, 0.3, 0.4, 0.5])
    t = ch.accuracy_correlations([("m", trained, init, "m")], hist)
    assert list(t.columns) == ["rho", "pvalue", "n", "rho at init."]
    row = t.loc["m"]
    assert row["rho"] == pytest.approx(1.0) and row["rho at init."] == pytest.approx(-1.0)
    assert row["n"] == 5
    assert row["pvalue"] == pytest.approx(2 / 120)
    # a measure constant as shown (3 decimals) has no correlation, not one of float noise
    noise = init.assign(m=1.127 + 1e-6 * np.arange(5))
    t = ch.accuracy_correlations([("m", trained, noise, "m")], hist)
    assert np.isnan(t.loc["m", "rho at init."]) and t.loc["m", "rho"] == pytest.approx(1.0)


def test_init_vs_final_table3_columns():
    """Init and trained columns of Table 3 side by side: the change is trained - init per model,
    the paper's column is its Table 3 (0.838 at sigma 0.2, 0.836 at 0.1)."""
    from lstpe import chapters as ch

    rng = np.random.default_rng(5)
    n, L = 3, 2
    ref = random_maps(rng, (n, L, 4, 4))
    final = np.stack([ref, ref, random_maps(rng, (n, L, 4, 4)), ref])
    init = np.stack([ref, random_maps(rng, (n, L, 4, 4)), ref, ref])
    arts = {"labels": ["2d-fixed", "learn-0.1", "learn-0.2", "learn-0.2"], "seeds": [1, 1, 1, 1],
            "val_attention": torch.tensor(final), "val_attention_init": torch.tensor(init)}
    pes = ["learn-0.1", "learn-0.2"]
    t0, t1 = (att.table3(arts, stage=s, pes=pes) for s in ("init", "final"))
    tab = ch.init_vs_final(t0, t1, ["cosine_paper", "cosine_ours"], paper=3, digits=6)
    assert list(tab.columns) == [("n", ""), ("cosine_paper", "at init"),
                                 ("cosine_paper", "trained"), ("cosine_paper", "change"),
                                 ("cosine_ours", "at init"), ("cosine_ours", "trained"),
                                 ("cosine_ours", "change"), ("paper", "@4000 ep.")]
    assert list(tab.index) == [0.1, 0.2] and list(tab[("n", "")]) == [1, 2]
    c01 = cos(init[1].mean(1), ref.mean(1))
    assert tab.loc[0.1, ("cosine_paper", "at init")] == pytest.approx(c01, abs=1e-6)
    assert tab.loc[0.1, ("cosine_paper", "trained")] == pytest.approx(1.0)
    assert tab.loc[0.1, ("cosine_paper", "change")] == pytest.approx(1 - c01, abs=1e-6)
    c02 = cos(final[2].mean(1), ref.mean(1))
    assert tab.loc[0.2, ("cosine_paper", "at init")] == pytest.approx(1.0)
    assert tab.loc[0.2, ("cosine_paper", "trained")] == pytest.approx((c02 + 1) / 2, abs=1e-6)
    assert tab.loc[0.2, ("cosine_paper", "change")] == pytest.approx((c02 - 1) / 2, abs=1e-6)
    assert list(tab[("paper", "@4000 ep.")]) == [0.836, 0.838]
    with pytest.raises(ValueError, match="same models"):
        ch.init_vs_final(t0.iloc[:1], t1, "cosine_paper")
    with pytest.raises(ValueError, match="lacks columns"):
        ch.init_vs_final(t0, t1, "cosine")
