"""PE alignment (orthogonal Procrustes) and the lazy-vs-rich movement diagnostic."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group

from lstpe.analysis import procrustes as pr
from lstpe.nn import encodings as enc

D = 16


def rotation(d: int, seed: int) -> np.ndarray:
    return ortho_group.rvs(d, random_state=seed)


def target() -> np.ndarray:
    return enc.sinusoid_2d(4, 4, D).double().numpy()


def test_rotated_copy_has_distance_zero():
    t = target()
    Q = rotation(D, 0)
    pe = t @ Q
    R, dist = pr.procrustes_align(pe, t)
    assert dist == pytest.approx(0.0, abs=1e-10)
    np.testing.assert_allclose(R @ R.T, np.eye(D), atol=1e-10)
    np.testing.assert_allclose(pe @ R, t, atol=1e-10)
    assert pr.procrustes_distance(pe, t, normalize=True) == pytest.approx(0.0, abs=1e-10)
    # the unrotated copy is far from the target
    assert np.linalg.norm(pe - t) > 1.0


def test_full_rank_rotation_is_recovered():
    """With a full-rank PE the optimal rotation is unique: exactly the inverse rotation."""
    a = np.random.default_rng(4).normal(size=(24, D))
    Q = rotation(D, 5)
    R, dist = pr.procrustes_align(a @ Q, a)
    assert dist == pytest.approx(0.0, abs=1e-10)
    np.testing.assert_allclose(R, Q.T, atol=1e-10)


def test_scaled_rotated_copy_raw_vs_normalized():
    t = target()
    pe = 2.0 * t @ rotation(D, 1)
    # min_R ||2 T Q R - T|| = ||T|| (R = Q^T), and scale-free distance 0
    assert pr.procrustes_distance(pe, t) == pytest.approx(np.linalg.norm(t), rel=1e-10)
    assert pr.procrustes_distance(pe, t, normalize=True) == pytest.approx(0.0, abs=1e-10)


def test_distance_closed_form():
    """min over orthogonal R of ||A R - B||^2 = ||A||^2 + ||B||^2 - 2 ||A^T B||_* (nuclear)."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(16, D)), rng.normal(size=(16, D))
    nuc = np.linalg.svd(a.T @ b, compute_uv=False).sum()
    want = math.sqrt(np.sum(a**2) + np.sum(b**2) - 2 * nuc)
    assert pr.procrustes_distance(a, b) == pytest.approx(want, rel=1e-10)
    assert pr.procrustes_distance(a, b) <= np.linalg.norm(a - b)


def test_bad_inputs():
    t = target()
    with pytest.raises(ValueError, match="shapes differ"):
        pr.procrustes_distance(t[:8], t)
    with pytest.raises(ValueError, match="2 dimensions"):
        pr.procrustes_distance(t[None], t[None])
    with pytest.raises(ValueError, match="unknown positional encoding"):
        pr.target_pe("3d-fixed", 16, D)
    with pytest.raises(ValueError, match="fixed sinusoid"):
        pr.target_pe("learn-0.2", 16, D)
    with pytest.raises(ValueError, match="square number"):
        pr.target_pe("2d-fixed", 15, D)
    assert math.isnan(pr.procrustes_distance(np.zeros_like(t), t, normalize=True))


def test_target_pe_is_the_2d_sinusoid():
    np.testing.assert_allclose(pr.target_pe("2d-fixed", 16, 32),
                               enc.sinusoid_2d(4, 4, 32).numpy(), rtol=1e-7)
    np.testing.assert_allclose(pr.target_pe("1d-fixed", 16, 32),
                               enc.sinusoid_1d(16, 32).numpy(), rtol=1e-7)


def make_artifacts() -> dict:
    """4 models, L=2: 2d-fixed, a rotated 2d sinusoid, nope (zeros), 1d-fixed."""
    t = torch.from_numpy(target()).float()
    rot = torch.from_numpy(target() @ rotation(D, 2)).float()
    one = enc.sinusoid_1d(16, D)
    final = torch.stack([t.expand(2, 16, D), rot.expand(2, 16, D), torch.zeros(2, 16, D),
                         one.expand(2, 16, D)])
    g = torch.Generator().manual_seed(0)
    init = final.clone()
    init[1] = 0.2 * torch.randn(2, 16, D, generator=g)
    return {"labels": ["2d-fixed", "learn-0.2", "nope", "1d-fixed"], "seeds": [5, 5, 5, 5],
            "pe_init": init, "pe_final": final}


def test_pe_alignment_table():
    arts = make_artifacts()
    tab = pr.pe_alignment(arts)
    assert list(tab.columns) == ["model", "pe", "pe_name", "sigma", "seed", "stage", "layer",
                                 "norm", "distance", "distance_normalized", "cosine"]
    assert len(tab) == 4 * 2
    by = tab.groupby("model")
    np.testing.assert_allclose(by.get_group(0)["distance"], 0.0, atol=1e-5)
    np.testing.assert_allclose(by.get_group(0)["cosine"], 1.0, rtol=1e-6)
    np.testing.assert_allclose(by.get_group(1)["distance"], 0.0, atol=1e-4)  # rotated copy
    assert (by.get_group(1)["cosine"] < 0.99).all()
    nope = by.get_group(2)
    np.testing.assert_allclose(nope["distance"], np.linalg.norm(target()), rtol=1e-6)
    assert nope["distance_normalized"].isna().all() and nope["cosine"].isna().all()
    # the paper's "baseline similarity" of 1d-fixed to 2d-fixed (0.72 there, 0.71 here)
    init = pr.pe_alignment(arts, stage="init")
    c1d = init[init["pe"] == "1d-fixed"]["cosine"].iloc[0]
    assert c1d == pytest.approx(
        float(np.vdot(enc.sinusoid_1d(16, D).double().numpy(), target())
              / (np.linalg.norm(target()) * np.linalg.norm(enc.sinusoid_1d(16, D).numpy()))),
        rel=1e-5)
    assert abs(init[init["model"] == 1]["cosine"]).max() < 0.3  # random init: ~ 0
    with pytest.raises(ValueError, match="unknown stage"):
        pr.pe_alignment(arts, stage="best")
    with pytest.raises(ValueError, match="target must be"):
        pr.pe_alignment(arts, target=np.zeros((16, D + 1)))
    with pytest.raises(ValueError, match="no 'pe_final'"):
        pr.pe_alignment({k: v for k, v in arts.items() if k != "pe_final"})


def test_pe_movement_hand_cases():
    g = torch.Generator().manual_seed(1)
    p0 = torch.randn(3, 2, 16, D, generator=g)
    p0[2] = 0
    p1 = p0.clone()
    p1[1] = 2 * p0[1]
    arts = {"labels": ["learn-0.1", "learn-0.5", "nope"], "seeds": [0, 0, 0],
            "pe_init": p0, "pe_final": p1}
    t = pr.pe_movement(arts).set_index(["model", "layer"])
    np.testing.assert_allclose(t.loc[0, "relative_change"], 0.0)
    np.testing.assert_allclose(t.loc[0, "kernel_alignment"], 1.0, rtol=1e-6)
    # P_T = 2 P_0: relative change 1; K_T = 4 K_0: kernel change 3, alignment 1
    np.testing.assert_allclose(t.loc[1, "relative_change"], 1.0, rtol=1e-6)
    np.testing.assert_allclose(t.loc[1, "kernel_change"], 3.0, rtol=1e-6)
    np.testing.assert_allclose(t.loc[1, "kernel_alignment"], 1.0, rtol=1e-6)
    np.testing.assert_allclose(t.loc[1, "norm_final"], 2 * t.loc[1, "norm_init"], rtol=1e-6)
    assert t.loc[2, "relative_change"].isna().all()
    with pytest.raises(ValueError, match="shapes differ"):
        pr.pe_movement(dict(arts, pe_final=p1[:, :1]))


def authors_positional_encoding_2d(d_model: int, height: int = 4, width: int = 4) -> np.ndarray:
    """The authors' ``PositionalEncoding2D`` buffer (``lstnn/transformer_main.py:59-76`` of
    ljhearne/LSTNN_public), retyped in numpy: (16, d_model), column code in the first half of
    the dimensions, row code in the second."""
    pe = np.zeros((d_model, height, width))
    half = d_model // 2
    div = np.exp(np.arange(0.0, half, 2) * -(math.log(10000.0) / half))
    w, h = np.arange(width)[:, None] * div, np.arange(height)[:, None] * div  # (4, half/2)
    pe[0:half:2] = np.sin(w).T[:, None, :]
    pe[1:half:2] = np.cos(w).T[:, None, :]
    pe[half::2] = np.sin(h).T[:, :, None]
    pe[half + 1::2] = np.cos(h).T[:, :, None]
    return pe.reshape(d_model, -1).T


@pytest.mark.parametrize("d", [16, 160])
def test_target_is_the_authors_2d_pe_up_to_a_permutation(d):
    """Our target swaps the authors' two halves (rows first): a permutation of dimensions, which
    the Procrustes rotation absorbs (distance 0), while the unrotated matrices differ."""
    a, t = authors_positional_encoding_2d(d), pr.target_pe("2d-fixed", 16, d)
    np.testing.assert_allclose(t, np.concatenate([a[:, d // 2:], a[:, :d // 2]], axis=1),
                               atol=1e-6)
    assert np.abs(a - t).max() > 0.5
    assert pr.procrustes_distance(a, t) == pytest.approx(0.0, abs=1e-5)


def test_init_vs_final_procrustes_columns():
    """Per sigma: the distance at init, after training, and the change per model. A PE that did
    not move has change 0; one trained onto a rotated target has distance 0 after training and
    change = minus its initial distance."""
    from lstpe import chapters as ch
    from lstpe.analysis.attention import average_layers

    t = target()
    g = torch.Generator().manual_seed(3)
    init = torch.randn(2, 2, 16, D, generator=g, dtype=torch.float64)
    init[1] *= 2.0
    final = init.clone()
    final[1] = torch.from_numpy(t @ rotation(D, 4)).expand(2, 16, D)
    arts = {"labels": ["learn-0.5", "learn-1"], "seeds": [0, 0], "pe_init": init,
            "pe_final": final}
    a0, a1 = (average_layers(pr.pe_alignment(arts, stage=s)) for s in ("init", "final"))
    tab = ch.init_vs_final(a0, a1, ["distance", "distance_normalized"], digits=9)
    d0 = [np.mean([pr.procrustes_distance(init[m, k].numpy(), t) for k in range(2)])
          for m in range(2)]
    np.testing.assert_allclose(tab[("distance", "at init")], d0, rtol=1e-8)
    np.testing.assert_allclose(tab.loc[0.5, ("distance", "change")], 0.0, atol=1e-9)
    assert tab.loc[1.0, ("distance", "trained")] == pytest.approx(0.0, abs=1e-6)
    assert tab.loc[1.0, ("distance", "change")] == pytest.approx(-d0[1], rel=1e-6)
    assert tab.loc[1.0, ("distance_normalized", "trained")] == pytest.approx(0.0, abs=1e-6)
    # the raw distance grows with the init norm alone: sigma 1 (2x the PE) starts further away
    assert d0[1] > d0[0]


@pytest.mark.parametrize("shape", [(16, 160), (16, 32), (5, 7)])
@pytest.mark.parametrize("scale", [0.01, 0.2, 2.0])
def test_row_space_distance_equals_scipys_procrustes(shape, scale):
    """procrustes_distance (fewer tokens than dimensions: solved in the PE's row space) gives
    the minimum SciPy's orthogonal_procrustes finds from the full d x d SVD, raw and
    normalised, for random PEs of several scales against the 2-D PE or a random target."""
    from scipy.linalg import orthogonal_procrustes

    rng = np.random.default_rng(7)
    n, d = shape
    for target in (rng.normal(size=shape), pr.target_pe("2d-fixed", n, d) if d % 4 == 0
                   else rng.normal(size=shape)):
        a = scale * rng.normal(size=shape)
        r, _ = orthogonal_procrustes(a, target)
        assert pr.procrustes_distance(a, target) == pytest.approx(
            np.linalg.norm(a @ r - target), rel=1e-10, abs=1e-12)
        an, tn = a / np.linalg.norm(a), target / np.linalg.norm(target)
        rn, _ = orthogonal_procrustes(an, tn)
        assert pr.procrustes_distance(a, target, normalize=True) == pytest.approx(
            np.linalg.norm(an @ rn - tn), rel=1e-10, abs=1e-12)
