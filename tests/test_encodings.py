"""Tests of lstpe.nn.encodings: closed-form properties of every positional encoding, the PE name
parser, and the (non-)equivariance of the PE-free models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lstpe.nn import encodings as enc
from lstpe.nn.architecture import ModelConfig, init_weights
from lstpe.nn.model import LSTTransformer

# --------------------------------------------------------------------------- sinusoids


def test_sinusoid_matches_formula_by_hand():
    d, base = 8, 10000.0
    pe = enc.sinusoid_1d(5, d)
    for k in range(5):
        for i in range(d // 2):
            w = base ** (-2 * i / d)
            assert pe[k, 2 * i].item() == pytest.approx(math.sin(k * w), abs=1e-6)
            assert pe[k, 2 * i + 1].item() == pytest.approx(math.cos(k * w), abs=1e-6)
    assert pe.shape == (5, 8) and pe.dtype == torch.float32
    assert torch.equal(enc.sinusoid_1d(torch.tensor([3, 1]), d), pe[[3, 1]])


def test_sinusoid_dot_products_depend_only_on_offset_and_decay():
    d, n = 160, 64
    p = enc.sinusoid_1d(n, d).double()
    g = p @ p.T
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    # <p_m, p_n> = sum_i cos((m - n) w_i): a function of the offset only (and even in it)
    for m in range(n):
        for k in range(n):
            closed = torch.cos((m - k) * omega).sum()
            assert g[m, k].item() == pytest.approx(closed.item(), abs=1e-4)
    f = torch.stack([g.diagonal(k).mean() for k in range(n)])
    for k in range(n):
        assert torch.allclose(g.diagonal(k), f[k].expand(n - k), atol=1e-4)
    assert torch.allclose(g, g.T)
    # largest at offset 0 (= d/2), and decreasing on average with distance
    assert f[0].item() == pytest.approx(d / 2, abs=1e-4)
    assert (f[1:] < f[0]).all()
    blocks = [f[1:9].mean(), f[9:17].mean(), f[17:33].mean(), f[33:].mean()]
    assert all(a > b for a, b in zip(blocks, blocks[1:], strict=False))
    assert np.corrcoef(np.arange(1, n), f[1:].numpy())[0, 1] < -0.8


def test_2d_fixed_equals_row_column_construction_by_hand():
    d = 32
    h = d // 2
    expected = torch.zeros(16, d)
    for t in range(16):
        r, c = divmod(t, 4)
        for i in range(h // 2):
            w = 10000.0 ** (-2 * i / h)
            expected[t, 2 * i], expected[t, 2 * i + 1] = math.sin(r * w), math.cos(r * w)
            expected[t, h + 2 * i], expected[t, h + 2 * i + 1] = math.sin(c * w), math.cos(c * w)
    torch.testing.assert_close(enc.sinusoid_2d(4, 4, d), expected, atol=1e-6, rtol=0)
    pe = enc.additive_pe(enc.parse_pe("2d-fixed", variant="textbook"), 3, 16, d)
    assert pe.shape == (3, 16, d)
    for layer in range(3):  # the same sinusoid at every block
        torch.testing.assert_close(pe[layer], expected, atol=1e-6, rtol=0)
    # tokens in the same row share the row half exactly
    assert torch.equal(pe[0, 0, :h], pe[0, 3, :h]) and torch.equal(pe[0, 0, h:], pe[0, 4, h:])
    # the authors' PositionalEncoding2D (the paper variant): the column code in dims 0..h-1
    paper = enc.additive_pe("2d-fixed", 1, 16, d)[0]
    torch.testing.assert_close(paper, torch.cat([expected[:, h:], expected[:, :h]], 1))


def test_2d_fixed_dot_products_depend_on_row_and_column_offsets():
    p = enc.sinusoid_2d(4, 4, 32).double()
    g = p @ p.T
    r, c = enc.grid_positions()
    one = enc.sinusoid_1d(4, 16).double()
    g1 = one @ one.T
    for t in range(16):
        for u in range(16):  # <p_t, p_u> = f(row offset) + f(column offset)
            assert g[t, u].item() == pytest.approx((g1[r[t], r[u]] + g1[c[t], c[u]]).item(),
                                                   abs=1e-5)


def test_1d_fixed_is_sinusoid_over_16_positions():
    pe = enc.additive_pe("1d-fixed", 2, 16, 32)
    assert torch.equal(pe[0], enc.sinusoid_1d(16, 32)) and torch.equal(pe[1], pe[0])


def test_sinusoid_shape_errors():
    with pytest.raises(ValueError, match="d=7"):
        enc.sinusoid_1d(4, 7)
    with pytest.raises(ValueError, match="d=30"):
        enc.sinusoid_2d(4, 4, 30)
    with pytest.raises(ValueError, match="got 15"):
        enc.additive_pe("2d-fixed", 1, 15, 32)


# --------------------------------------------------------------------------- rotary


def scores_all_pairs(q: torch.Tensor, k: torch.Tensor, rot) -> torch.Tensor:
    """<R_m q, R_n k> for every pair of positions, the same q and k at every position."""
    return rot(q) @ rot(k).T


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
def test_rope_scores_depend_only_on_offset(pairing):
    g = torch.Generator().manual_seed(0)
    n, d = 12, 16
    q = torch.randn(d, generator=g, dtype=torch.float64)
    k = torch.randn(d, generator=g, dtype=torch.float64)
    ang = enc.rope_angles(n, d).double()
    qr = enc.rotate(q.expand(n, d), ang, pairing)
    kr = enc.rotate(k.expand(n, d), ang, pairing)
    s = qr @ kr.T
    for off in range(-n + 1, n):
        assert torch.allclose(s.diagonal(off), s.diagonal(off)[0].expand_as(s.diagonal(off)),
                              atol=1e-5)
    # closed form: Re sum_k z_q conj(z_k) exp(i (m - n) theta_k) with z = the feature pairs
    if pairing == "interleaved":
        zq, zk = torch.complex(q[0::2], q[1::2]), torch.complex(k[0::2], k[1::2])
    else:
        zq, zk = torch.complex(q[: d // 2], q[d // 2:]), torch.complex(k[: d // 2], k[d // 2:])
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    for m, nn_ in [(0, 0), (5, 2), (2, 9), (11, 0)]:
        closed = (zq * zk.conj() * torch.exp(1j * (m - nn_) * theta)).real.sum()
        assert s[m, nn_].item() == pytest.approx(closed.item(), abs=1e-5)
    # rotations: norms kept, position 0 untouched
    assert torch.allclose(qr.norm(dim=-1), q.norm().expand(n))
    assert torch.allclose(qr[0], q)


@pytest.mark.parametrize("variant, d_rot", [("paper", 16), ("textbook", 32)])
def test_apply_rope_relative_scores(variant, d_rot):
    spec = enc.parse_pe("rope", variant=variant)
    assert enc.rope_dims(spec, 32) == d_rot
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 32, generator=g)
    qr = enc.apply_rope(spec, q.expand(16, 32))
    kr = enc.apply_rope(spec, k.expand(16, 32))
    s = qr @ kr.T
    for off in range(-15, 16):
        dg = s.diagonal(off)
        assert torch.allclose(dg, dg[0].expand_as(dg), atol=1e-4)
    assert torch.equal(qr[:, d_rot:], q[d_rot:].expand(16, 32 - d_rot))  # passthrough dims
    assert not torch.allclose(qr[5, :d_rot], q[:d_rot])
    pairing = "half" if variant == "paper" else "interleaved"
    torch.testing.assert_close(qr[:, :d_rot],
                               enc.rotate(q[:d_rot].expand(16, d_rot),
                                          enc.rope_angles(16, d_rot), pairing))


@pytest.mark.parametrize("variant", ["paper", "textbook"])
def test_rope_2d_depends_only_on_row_and_column_offsets(variant):
    spec = enc.parse_pe("rope-2d", variant=variant)
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 32, generator=g, dtype=torch.float64)
    s = enc.apply_rope(spec, q.expand(16, 32)) @ enc.apply_rope(spec, k.expand(16, 32)).T
    r, c = enc.grid_positions()
    by_offset: dict[tuple[int, int], list[float]] = {}
    for t in range(16):
        for u in range(16):
            key = (int(r[t] - r[u]), int(c[t] - c[u]))
            by_offset.setdefault(key, []).append(s[t, u].item())
    assert len(by_offset) == 49
    for vals in by_offset.values():
        assert max(vals) - min(vals) < 1e-5  # the angles are float32
    # not a function of the flat offset: tokens 1, 0 and tokens 4, 3 are both 1 apart in
    # row-major order, but at (row, col) offsets (0, 1) and (1, -3)
    assert abs(s[1, 0] - s[4, 3]) > 1e-3


def test_rotary_errors():
    with pytest.raises(ValueError, match="'bogus'.*'interleaved', 'half'"):
        enc.rotate(torch.zeros(4, 8), torch.zeros(4, 4), "bogus")
    with pytest.raises(ValueError, match="got 7"):
        enc.rope_angles(4, 7)
    with pytest.raises(ValueError, match="'nope'"):
        enc.apply_rope(enc.parse_pe("nope"), torch.zeros(16, 8))


# --------------------------------------------------------------------------- biases, masks


def test_alibi_relative_index_causal_mask_closed_forms():
    b = enc.alibi_bias(5, slope=0.5)
    for i in range(5):
        for j in range(5):
            assert b[i, j].item() == -0.5 * abs(i - j)
    ri = enc.relative_index(16)
    assert ri.min() == 0 and ri.max() == 30
    for i in range(16):
        for j in range(16):
            assert ri[i, j].item() == j - i + 15
    m = enc.causal_mask(4)
    assert m.tolist() == [[j <= i for j in range(4)] for i in range(4)]


# --------------------------------------------------------------------------- learnable PE


@pytest.mark.parametrize("sigma", [0.02, 0.2, 1.0, 1.7])
def test_learn_init_std_within_5_percent(sigma, tiny_cfg):
    g = torch.Generator().manual_seed(3)
    pe = enc.additive_pe(f"learn-{sigma}", 4, 16, 160, generator=g)
    assert pe.shape == (4, 16, 160)
    assert abs(pe.std().item() - sigma) < 0.05 * sigma
    assert abs(pe.mean().item()) < 0.05 * sigma
    assert not torch.allclose(pe[0], pe[1])  # each block has its own draw
    w = init_weights(f"learn-{sigma}", 7, ModelConfig())
    assert abs(w["pe.learn"].std().item() - sigma) < 0.05 * sigma
    m = LSTTransformer(f"learn-{sigma}", 7, tiny_cfg)  # the model uses exactly that draw
    assert torch.equal(m.pe.data, init_weights(f"learn-{sigma}", 7, tiny_cfg)["pe.learn"])
    assert m.pe.requires_grad


def test_random_pe_std_one_and_frozen(tiny_cfg):
    pe = enc.additive_pe("random", 4, 16, 160, generator=torch.Generator().manual_seed(4))
    assert abs(pe.std().item() - 1.0) < 0.05
    assert not LSTTransformer("random", 0, tiny_cfg).pe.requires_grad
    assert torch.equal(enc.additive_pe("learn-0", 2, 16, 32), torch.zeros(2, 16, 32))
    for name in ("nope", "c-nope", "rope", "relative", "alibi", "rope-2d"):
        assert torch.equal(enc.additive_pe(name, 2, 16, 32), torch.zeros(2, 16, 32))


# --------------------------------------------------------------------------- names


def test_parse_pe_valid_names():
    for name in enc.PE_NAMES:
        spec = enc.parse_pe(name, sigma=0.2 if name == "learn" else None)
        assert spec.name == name
    s = enc.parse_pe("learn-0.25")
    assert (s.name, s.sigma, s.label, s.variant) == ("learn", 0.25, "learn-0.25", "paper")
    assert enc.parse_pe("learn", sigma=0.25) == s
    assert enc.parse_pe(s) is s
    assert enc.parse_pe("learn-0.2", sigma=0.2).sigma == 0.2
    assert set(enc.PAPER_PES) == {"2d-fixed", "1d-fixed", "learn", "random", "relative",
                                  "rope", "nope", "c-nope"}


def test_learn_label_roundtrips_sigma():
    for sigma in [round(0.1 * k, 1) for k in range(1, 21)] + [0.0, 1e-3, 0.05]:
        label = enc.parse_pe("learn", sigma=sigma).label
        assert label == f"learn-{sigma:g}"  # the usual short form: learn-0.2, learn-1, ...
        assert enc.parse_pe(label).sigma == sigma
    odd = enc.parse_pe("learn", sigma=0.123456789)
    assert odd.label == "learn-0.123456789" and enc.parse_pe(odd.label) == odd


def test_pespec_properties():
    p = enc.parse_pe
    assert p("c-nope").causal and p("c-nope").temperature == enc.C_NOPE_TEMPERATURE
    assert p("c-nope", variant="textbook").causal  # causal in both variants
    assert p("c-nope", variant="textbook").temperature == 1.0
    assert p("relative").causal and not p("relative", variant="textbook").causal
    assert not p("nope").causal and p("nope").additive and not p("nope").trainable
    assert p("learn-0.1").trainable and p("relative").trainable and not p("random").trainable
    assert [p(n).attention_kind for n in ("rope", "rope-2d", "relative", "alibi", "2d-fixed")] \
        == ["rope", "rope-2d", "relative", "alibi", "none"]


@pytest.mark.parametrize("args, kwargs, needles", [
    (("bogus",), {}, ["'bogus'", *enc.PE_NAMES]),
    (("Learn-0.2",), {}, ["'Learn-0.2'", *enc.PE_NAMES]),
    (("learn",), {"sigma": -0.1}, ["sigma=-0.1", ">= 0"]),
    (("learn--0.1",), {}, ["sigma=-0.1", ">= 0"]),
    (("learn-inf",), {}, ["sigma=inf"]),
    (("learn",), {"sigma": float("nan")}, ["sigma=nan"]),
    (("learn-abc",), {}, ["'learn-abc'", "learn-0.2"]),
    (("learn",), {}, ["needs a sigma"]),
    (("learn-0.2",), {"sigma": 0.3}, ["'learn-0.2'", "sigma=0.3"]),
    (("2d-fixed",), {"sigma": 0.2}, ["'2d-fixed'", "sigma=0.2"]),
    (("rope",), {"variant": "fancy"}, ["'fancy'", "paper", "textbook"]),
    ((3,), {}, ["3"]),
])
def test_parse_pe_errors_name_value_and_choices(args, kwargs, needles):
    with pytest.raises(ValueError) as e:
        enc.parse_pe(*args, **kwargs)
    for needle in needles:
        assert needle in str(e.value)


# --------------------------------------------------------------------------- equivariance


def hidden_states(model: LSTTransformer, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token hidden states after the last block (B, 16, d) and attention (B, L, 16, 16)."""
    h = model.embed(x)
    maps = []
    for i, blk in enumerate(model.blocks):
        h, a = blk(h + model.pe[i])
        maps.append(a.mean(1))
    return h, torch.stack(maps, 1)


@pytest.fixture(scope="module")
def puzzles() -> torch.Tensor:
    from lstpe import lst

    return lst.encode(list(lst.load_human()["puzzle"][:8]))


@torch.no_grad()
def test_nope_is_permutation_equivariant(puzzles, tiny_cfg):
    model = LSTTransformer("nope", 5, tiny_cfg)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(0))
    h, a = hidden_states(model, puzzles)
    hp, ap = hidden_states(model, puzzles[:, perm])
    torch.testing.assert_close(hp, h[:, perm], atol=1e-5, rtol=0)
    torch.testing.assert_close(ap, a[:, :, perm][:, :, :, perm], atol=1e-5, rtol=0)
    # the readout token 15 kept in place: the logits do not change at all
    fix = torch.cat([torch.randperm(15, generator=torch.Generator().manual_seed(1)),
                     torch.tensor([15])])
    torch.testing.assert_close(model(puzzles[:, fix]), model(puzzles), atol=1e-5, rtol=0)


@torch.no_grad()
@pytest.mark.parametrize("name", ["c-nope", "2d-fixed", "rope", "relative"])
def test_positional_models_are_not_equivariant(puzzles, name, tiny_cfg):
    model = LSTTransformer(name, 5, tiny_cfg)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(0))
    h, a = hidden_states(model, puzzles)
    hp, ap = hidden_states(model, puzzles[:, perm])
    assert (hp - h[:, perm]).abs().max() > 1e-2
    assert (ap - a[:, :, perm][:, :, :, perm]).abs().max() > 1e-2
