"""Network measures of PEs (lstpe.analysis.networks): plain and per-pair Procrustes distances,
A.3 measures, null."""

from __future__ import annotations

import inspect

import networkx as nx
import numpy as np
import pytest
import torch
from networkx.algorithms.community import modularity as nx_modularity
from scipy.linalg import orthogonal_procrustes
from scipy.stats import ortho_group

from lstpe import brain
from lstpe.analysis import networks as nw


def _nx_q(w: np.ndarray, part) -> float:
    g = nx.from_numpy_array(w)
    labels = np.asarray(part)
    comms = [set(np.flatnonzero(labels == k).tolist()) for k in dict.fromkeys(labels.tolist())]
    return nx_modularity(g, comms, weight="weight")


# --------------------------------------------------------------------------- distances


def test_procrustes_distance_matches_scipy():
    rng = np.random.default_rng(0)
    for shape in [(4, 16), (3, 5), (6, 4)]:
        a, b = rng.normal(size=shape), rng.normal(size=shape)
        r, _ = orthogonal_procrustes(a, b)
        want = np.linalg.norm(a @ r - b)
        assert nw.token_procrustes_distance(a, b) == pytest.approx(want, abs=1e-9)


def test_distance_matrix_entries_are_pairwise_procrustes():
    rng = np.random.default_rng(1)
    pe = rng.normal(size=(3, 9, 8))  # (L, n, d)
    d = nw.pe_distance_matrix(pe, "pair", chunk=4)
    for i in range(9):
        for j in range(9):
            r, _ = orthogonal_procrustes(pe[:, i], pe[:, j])
            assert d[i, j] == pytest.approx(np.linalg.norm(pe[:, i] @ r - pe[:, j]), abs=1e-8)
    assert np.allclose(d, d.T) and np.all(np.diag(d) == 0)


def test_per_pair_alignment_ignores_per_token_rotations():
    # Rotating each token's PE by its own orthogonal matrix changes nothing after alignment,
    # but does change the unaligned distances.
    rng = np.random.default_rng(2)
    pe = rng.normal(size=(2, 6, 5))
    rot = pe.copy()
    for i in range(6):
        rot[:, i] = pe[:, i] @ ortho_group.rvs(5, random_state=i)
    assert np.allclose(nw.pe_distance_matrix(pe, "pair"), nw.pe_distance_matrix(rot, "pair"),
                       atol=1e-9)
    assert not np.allclose(nw.pe_distance_matrix(pe), nw.pe_distance_matrix(rot))


def test_single_block_distance_is_norm_difference():
    pe = np.array([[3.0, 4.0], [0.0, 1.0], [0.0, 0.0]])  # (n, d): norms 5, 1, 0
    d = nw.pe_distance_matrix(pe, "pair")
    assert d == pytest.approx(np.array([[0, 4, 5], [4, 0, 1], [5, 1, 0]]), abs=1e-9)


def test_unaligned_distance_is_euclidean():
    pe = np.array([[[0.0, 0.0], [3.0, 4.0]], [[1.0, 0.0], [1.0, 0.0]]])  # (L=2, n=2, d=2)
    # flattened token PEs: (0,0,1,0) and (3,4,1,0) -> distance 5
    assert nw.pe_distance_matrix(pe, "none")[0, 1] == pytest.approx(5.0)
    assert nw.pe_distance_matrix(pe)[0, 1] == pytest.approx(5.0)  # the default


def test_default_is_plain_distance_everywhere():
    # Distances between the tokens of one model need no alignment: every entry point defaults
    # to align="none".
    funcs = [nw.pe_distance_matrix, nw.pe_similarity, nw.network_measures,
             brain.network_table, brain.plot_pe_similarities]
    for f in funcs:
        assert inspect.signature(f).parameters["align"].default == "none", f.__name__
    assert nw.DEFAULT_ALIGN == "none" and set(nw.ALIGNMENTS) == {"none", "pair"}


def test_random_pe_plain_distances_match_cdist_and_ignore_a_global_rotation():
    rng = np.random.default_rng(7)
    pe = rng.normal(size=(3, 11, 6))  # (L, n, d)
    flat = torch.from_numpy(pe).permute(1, 0, 2).reshape(11, -1)  # token i -> (L*d,)
    ref = torch.cdist(flat, flat).numpy()
    np.testing.assert_allclose(nw.pe_distance_matrix(pe), ref, atol=1e-10)
    # one rotation of the embedding space for every token changes no distance
    q = ortho_group.rvs(6, random_state=0)
    np.testing.assert_allclose(nw.pe_distance_matrix(pe @ q), ref, atol=1e-10)


def test_scale_complement_hand_case():
    d = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])
    w = nw.scale_complement(d)
    assert w == pytest.approx(np.array([[0, 1, 0], [1, 0, 0.5], [0, 0.5, 0]]))


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="all off-diagonal distances are equal"):
        nw.scale_complement(np.ones((3, 3)) - np.eye(3))
    with pytest.raises(ValueError, match="valid: none, pair"):
        nw.pe_distance_matrix(np.ones((2, 3)), align="global")
    with pytest.raises(ValueError, match="shape"):
        nw.pe_distance_matrix(np.ones(4))
    with pytest.raises(ValueError, match="NaN"):
        nw.pe_distance_matrix(np.array([[np.nan, 1.0], [0.0, 1.0]]))


# --------------------------------------------------------------------------- modularity


def test_modularity_two_disjoint_cliques_is_one_half():
    # Two disconnected, equal communities: Q = 1 - 2 * (1/2)^2 = 0.5 (hand computed).
    w = np.zeros((4, 4))
    w[0, 1] = w[1, 0] = w[2, 3] = w[3, 2] = 1.0
    assert nw.modularity(w, [0, 0, 1, 1]) == pytest.approx(0.5)
    assert nw.modularity(w, [0, 1, 0, 1]) == pytest.approx(-0.5)  # every edge across: -sum a^2


def test_modularity_perfect_block_matrix_matches_networkx():
    sizes = [5, 3, 7]
    labels = np.repeat(["a", "b", "c"], sizes)
    w = (labels[:, None] == labels[None, :]).astype(float)
    np.fill_diagonal(w, 0.0)
    q = nw.modularity(w, labels)
    assert q == pytest.approx(_nx_q(w, labels))
    # closed form for disjoint cliques: sum_m [e_m/E - (e_m/E)^2], e_m = n_m(n_m-1)
    e = np.array([s * (s - 1) for s in sizes], float)
    assert q == pytest.approx(np.sum(e / e.sum() - (e / e.sum()) ** 2))


def test_modularity_random_weights_matches_networkx():
    rng = np.random.default_rng(3)
    for n, k in [(10, 2), (25, 4), (40, 7)]:
        a = rng.random((n, n))
        w = (a + a.T) / 2
        np.fill_diagonal(w, 0.0)
        part = rng.integers(0, k, n)
        assert nw.modularity(w, part) == pytest.approx(_nx_q(w, part), abs=1e-12)


def test_modularity_input_checks():
    w = np.array([[0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="symmetric"):
        nw.modularity(np.array([[0.0, 1.0], [0.0, 0.0]]), [0, 1])
    with pytest.raises(ValueError, match=">= 0"):
        nw.modularity(-w, [0, 1])
    with pytest.raises(ValueError, match="3 labels but the matrix has 2"):
        nw.modularity(w, [0, 1, 1])
    with pytest.raises(ValueError, match="sums to 0"):
        nw.modularity(np.zeros((2, 2)), [0, 1])


# --------------------------------------------------------------------------- clustering


def test_clustering_two_level_block_matrix():
    # within-module weight a, between-module weight b: every module gives (a - b) / a.
    labels = np.repeat([0, 1, 2], [4, 2, 3])
    a, b = 0.8, 0.2
    w = np.where(labels[:, None] == labels[None, :], a, b)
    np.fill_diagonal(w, 1.0)  # the diagonal is ignored
    assert nw.network_clustering(w, labels) == pytest.approx((a - b) / a)


def test_clustering_hand_computed_unequal_modules():
    # nodes 0,1,2 in module x, nodes 3,4 in module y
    w = np.array([
        [0.0, 1.0, 0.5, 0.2, 0.0],
        [1.0, 0.0, 0.3, 0.0, 0.4],
        [0.5, 0.3, 0.0, 0.1, 0.1],
        [0.2, 0.0, 0.1, 0.0, 0.6],
        [0.0, 0.4, 0.1, 0.6, 0.0],
    ])
    part = ["x", "x", "x", "y", "y"]
    in_x, out_x = (1.0 + 0.5 + 0.3) / 3, (0.2 + 0.0 + 0.0 + 0.4 + 0.1 + 0.1) / 6
    in_y, out_y = 0.6, out_x  # the same 6 cross pairs
    c, per = nw.network_clustering(w, part, per_module=True)
    assert per["x"] == pytest.approx((in_x - out_x) / in_x)
    assert per["y"] == pytest.approx((in_y - out_y) / in_y)
    assert c == pytest.approx(((in_x - out_x) / in_x + (in_y - out_y) / in_y) / 2)


def test_clustering_singletons_and_errors():
    labels = np.array([0, 0, 0, 1, 1, 2])
    rng = np.random.default_rng(4)
    a = rng.random((6, 6))
    w = (a + a.T) / 2
    c, per = nw.network_clustering(w, labels, per_module=True)
    assert np.isnan(per[2]) and c == pytest.approx((per[0] + per[1]) / 2)
    with pytest.raises(ValueError, match="at least two modules"):
        nw.network_clustering(w, np.zeros(6))
    with pytest.raises(ValueError, match="no module has two"):
        nw.network_clustering(w, np.arange(6))
    z = w.copy()
    z[:3, :3] = 0.0
    with pytest.raises(ValueError, match="within-module weight is 0"):
        nw.network_clustering(z, labels)


# --------------------------------------------------------------------------- null and pipeline


def test_null_of_perfect_blocks_puts_observed_above_all_shuffles():
    labels = np.repeat(np.arange(4), 6)
    w = (labels[:, None] == labels[None, :]).astype(float) * 0.9 + 0.05
    np.fill_diagonal(w, 0.0)
    for measure in nw.MEASURES:
        t = nw.shuffled_null(w, labels, measure, n_perm=200, seed=0)
        assert t.null.shape == (200,)
        assert t.observed > t.null.max()
        assert t.p_value == pytest.approx(1 / 201)
        assert t.z > 3


def test_null_is_exact_for_structureless_weights():
    # constant off-diagonal weights: every partition with the same module sizes has the same Q
    labels = np.repeat([0, 1, 2], [3, 4, 5])
    w = np.ones((12, 12)) - np.eye(12)
    t = nw.shuffled_null(w, labels, "modularity", n_perm=50)
    assert np.allclose(t.null, t.observed)
    assert t.p_value == 1.0
    with pytest.raises(ValueError, match="valid: modularity, clustering"):
        nw.shuffled_null(w, labels, "segregation")


def test_planted_modules_in_pe_are_recovered():
    rng = np.random.default_rng(5)
    labels = np.repeat(np.arange(4), 8)
    centres = rng.normal(size=(4, 3, 16)) * 2.0  # per module, per block
    pe = centres[labels].transpose(1, 0, 2) + 0.1 * rng.normal(size=(3, 32, 16))
    out = nw.network_measures(pe, labels, n_perm=200)
    assert out["modularity"] > out["modularity_null_mean"]
    assert out["modularity_z"] > 3 and out["clustering_z"] > 3
    assert out["clustering"] > 0
    # a random PE shows no structure on average
    rnd = nw.network_measures(rng.normal(size=(3, 32, 16)), labels, n_perm=200)
    assert abs(rnd["modularity_z"]) < 4


def test_network_order_groups_modules():
    labels = ["b", "a", "b", "c", "a"]
    order = nw.network_order(labels, names=["a", "b", "c"])
    assert [labels[i] for i in order] == ["a", "a", "b", "b", "c"]
    assert list(order) == [1, 4, 0, 2, 3]
    with pytest.raises(ValueError, match="not in names"):
        nw.network_order(labels, names=["a", "b"])


def _one_d_fixed(n: int = 20, d: int = 16, blocks: int = 3) -> torch.Tensor:
    """A 1d-fixed PE as the brain model adds it: the same sinusoid at every block, (L, n, d)."""
    from lstpe.nn.encodings import sinusoid_1d

    return sinusoid_1d(n, d).expand(blocks, n, d).float()


def test_one_d_fixed_plain_distances_are_nonzero_and_depend_on_offset():
    pe = _one_d_fixed()
    d = nw.pe_distance_matrix(pe)  # default: no alignment
    flat = pe.double().permute(1, 0, 2).reshape(20, -1)  # token i -> its (L*d,) PE
    np.testing.assert_allclose(d, torch.cdist(flat, flat).numpy(), atol=1e-9)
    off = ~np.eye(20, dtype=bool)
    assert d[off].min() > 0.1 and d[off].max() > d[off].min() + 0.1  # non-zero, non-constant
    # every block adds the same vector: D_ij = sqrt(L) * |s_i - s_j|, a function of |i - j|
    s = pe[0].double()
    np.testing.assert_allclose(d, np.sqrt(3) * torch.cdist(s, s).numpy(), atol=1e-9)
    for k in range(1, 5):
        np.testing.assert_allclose(np.diag(d, k), np.diag(d, k)[0], atol=1e-9)
    w = nw.pe_similarity(pe)  # defined, unlike under per-pair alignment
    assert w[off].min() == pytest.approx(0.0) and w[off].max() == pytest.approx(1.0)
    out = nw.network_measures(pe, np.repeat([0, 1], 10))
    assert np.isfinite(out["modularity"]) and np.isfinite(out["clustering"])


def test_identical_gram_matrices_give_zero_aligned_distances():
    # A 1d-fixed-like PE: every token has the same norm and the same vector at every block, so
    # any token's PE can be rotated onto any other's: all aligned distances are 0 (not noise).
    pe = _one_d_fixed()
    d = nw.pe_distance_matrix(pe, "pair")
    assert np.all(d == 0.0)
    with pytest.raises(ValueError, match="distances are equal"):
        nw.scale_complement(d)
    with pytest.raises(ValueError, match="distances are equal"):
        nw.pe_similarity(pe, "pair")
    assert nw.pe_distance_matrix(pe)[0, 1] > 0.1
