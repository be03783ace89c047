"""Su's position probe (lstpe.analysis.probe): exact failure of relative-only softmax attention
on identical inputs, and success of absolute PE, l2-normalised attention and a marker token."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lstpe.analysis import probe as P

CFG = P.ProbeConfig(n=8, steps=300)
SEEDS = (0, 1)
FAILING = ("rope", "alibi", "relative", "c-nope", "nope")
WORKING = ("absolute", "rope+l2", "rope+cls")


@pytest.fixture(scope="module")
def trained() -> dict[tuple[str, int], P.ProbeModel]:
    torch.set_num_threads(1)
    return {(v, s): P.train_probe(v, s, CFG)[0]
            for v in ("rope", "alibi", "alibi+l2", *WORKING) for s in SEEDS}


def test_floor_is_std_of_positions():
    for n in (2, 8, 16):
        assert P.constant_floor(n) == pytest.approx(np.arange(1, n + 1).std())
    assert P.constant_floor(16) == pytest.approx(math.sqrt(255 / 12))


@pytest.mark.parametrize("variant", FAILING)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_relative_only_identical_at_init(variant, seed):
    m = P.ProbeModel(variant, CFG, seed)
    assert P.output_spread(m) < 1e-10
    # ... and it is not because the PE does nothing: the attention rows differ by position
    if variant != "nope":
        _, w = m()
        assert (w[:, 0] - w[:, 3]).abs().max() > 1e-3


@pytest.mark.parametrize("variant", ["rope", "alibi", "relative"])
def test_relative_only_identical_for_arbitrary_weights(variant):
    """The argument holds for any weights, not just the init: scale every parameter up."""
    m = P.ProbeModel(variant, CFG, seed=5)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    assert P.output_spread(m) < 1e-9
    np.testing.assert_allclose(P.attention_mass(m), 1.0, atol=1e-12)


def test_absolute_differs_at_init():
    assert P.output_spread(P.ProbeModel("absolute", CFG, 0)) > 1e-3


@pytest.mark.parametrize("variant", ["rope", "alibi"])
def test_relative_only_after_training_sits_on_floor(trained, variant):
    for s in SEEDS:
        m = trained[(variant, s)]
        y = P.probe_predict(m)
        assert y.max() - y.min() < 1e-9
        rmse = float(np.sqrt(np.mean((y - np.arange(1, CFG.n + 1)) ** 2)))
        assert rmse >= P.constant_floor(CFG.n) - 1e-9
        # the optimiser found the best constant, the mean position (n+1)/2
        assert y.mean() == pytest.approx((CFG.n + 1) / 2, abs=0.05)


@pytest.mark.parametrize("variant", WORKING)
def test_absolute_and_fixes_learn_positions(trained, variant):
    for s in SEEDS:
        y = P.probe_predict(trained[(variant, s)])
        target = np.arange(1, CFG.n + 1)
        assert np.sqrt(np.mean((y - target) ** 2)) < 0.25
        np.testing.assert_array_equal(np.round(y), target)


def test_alibi_l2_is_mirror_symmetric(trained):
    """ALiBi's bias -m|i-j| is symmetric: under l2 the positions i and n+1-i stay identical."""
    for s in SEEDS:
        m = trained[("alibi+l2", s)]
        y = P.probe_predict(m)
        np.testing.assert_allclose(y, y[::-1], atol=1e-9)
        assert y.max() - y.min() > 1e-6  # not constant: only the mirror pairs coincide
        mass = P.attention_mass(m)
        np.testing.assert_allclose(mass, mass[:, ::-1], atol=1e-12)


def test_l2_mass_closed_form_causal():
    """Causal mask, identical keys: a row of i equal weights has l1/l2 = i / sqrt(i) = sqrt(i)."""
    m = P.ProbeModel("c-nope+l2", CFG, seed=3)
    np.testing.assert_allclose(P.attention_mass(m),
                               np.sqrt(np.arange(1, CFG.n + 1))[None].repeat(CFG.n_heads, 0),
                               rtol=1e-12)


def test_cls_mass_and_prediction_rows():
    m = P.ProbeModel("rope+cls", CFG, seed=0)
    y, w = m()
    assert y.shape == (CFG.n,)
    assert w.shape == (CFG.n_heads, CFG.n + 1, CFG.n + 1)
    np.testing.assert_allclose(w.sum(-1).detach().numpy(), 1.0, atol=1e-12)


def test_exact_failure_labels():
    assert all(P.exact_failure(v) for v in ("rope", "alibi", "relative", "c-nope", "nope",
                                            "nope+cls", "nope+l2", "alibi+l2"))
    assert not any(P.exact_failure(v) for v in ("absolute", "rope+l2", "rope+cls",
                                                "alibi+cls", "c-nope+cls", "c-nope+l2"))


def test_run_probe_table_and_summary():
    cfg = P.ProbeConfig(n=4, steps=5)
    df = P.run_probe(("rope", "absolute"), seeds=(0, 1), cfg=cfg)
    assert list(df.columns[:6]) == ["variant", "seed", "position", "target", "prediction",
                                    "error"]
    assert len(df) == 2 * 2 * 4
    np.testing.assert_allclose(df["error"], df["prediction"] - df["target"])
    s = P.summarize_probe(df)
    assert list(s["variant"]) == ["rope", "absolute"]
    rope = s.iloc[0]
    assert rope["rmse_mean"] >= rope["floor"] - 1e-9 and rope["spread_max"] < 1e-9
    assert rope["floor"] == pytest.approx(P.constant_floor(4))
    assert rope["exact_failure"] and not s.iloc[1]["exact_failure"]


@pytest.mark.parametrize("bad", ["sinusoid", "rope+foo", "rope+l2+cls", "", 3])
def test_bad_variant(bad):
    with pytest.raises(ValueError, match="valid"):
        P.ProbeModel(bad, CFG)


def test_bad_config():
    with pytest.raises(ValueError, match="n_heads"):
        P.ProbeConfig(d_model=12, n_heads=4)
    with pytest.raises(ValueError, match="n must be >= 2"):
        P.ProbeConfig(n=1)
