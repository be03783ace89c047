"""lstpe.analysis.learned_part: the learned part of the PE summarised per sigma."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lstpe.analysis import learned_part as lp
from lstpe.analysis.pe_structure import pe_structure, permutation_null
from lstpe.nn.encodings import sinusoid_2d


def _table() -> pd.DataFrame:
    rows = []
    for sigma, scores, ps in ((0.1, [0.4, 0.5, 0.3], [1e-4, 2e-3, 0.01]),
                              (2.0, [0.0, -0.1], [0.5, 0.9])):
        for block in (0, 1):
            for i, (s, p) in enumerate(zip(scores, ps, strict=True)):
                rows.append({"pe": f"learn-{sigma:g}", "sigma": sigma, "seed": i,
                             "block": block, "score_dpe": s + block, "p_dpe": p,
                             "init_share": 0.9 + 0.01 * i})
    rows.append({"pe": "2d-fixed", "sigma": np.nan, "seed": 0, "block": 0,
                 "score_dpe": np.nan, "p_dpe": np.nan, "init_share": 1.0})
    return pd.DataFrame(rows)


def test_by_sigma_counts_means_and_fisher_by_hand() -> None:
    out = lp.by_sigma(_table())
    assert list(out.columns) == list(lp.BY_SIGMA_COLUMNS)
    assert out["sigma"].tolist() == [0.1, 2.0]          # the fixed PE is left out
    small, big = out.iloc[0], out.iloc[1]
    assert (small["n"], small["n_below"], big["n_below"]) == (3, 3, 0)
    assert small["score_mean"] == pytest.approx(0.4)  # block 0, not block 1's +1
    half = stats.t.ppf(0.975, 2) * np.std([0.4, 0.5, 0.3], ddof=1) / np.sqrt(3)
    assert small["score_high"] - small["score_mean"] == pytest.approx(half)
    assert small["p_max"] == pytest.approx(0.01)
    chi2 = -2 * np.log([1e-4, 2e-3, 0.01]).sum()
    assert small["p_fisher"] == pytest.approx(stats.chi2.sf(chi2, 6))
    assert (small["init_share_min"], small["init_share_max"]) == pytest.approx((0.9, 0.92))
    assert lp.by_sigma(_table(), block=1)["score_mean"].iloc[0] == pytest.approx(1.4)


def test_by_sigma_rejects_unknown_parts_and_missing_columns() -> None:
    with pytest.raises(ValueError, match="part"):
        lp.by_sigma(_table(), part="kernel")
    with pytest.raises(ValueError, match="init_share"):
        lp.by_sigma(_table().drop(columns="init_share"))


def test_a_learned_sinusoid_is_found_and_a_gaussian_update_is_not() -> None:
    """End to end on pe_structure: an update that is the 2-D sinusoid scores p <= 1e-3 in
    every unit; a Gaussian update does not reach the same at every unit."""
    rng = np.random.default_rng(0)
    grid = sinusoid_2d(4, 4, 32).numpy()[None]                  # (1, 16, 32)
    p0 = 0.2 * rng.standard_normal((4, 1, 16, 32))
    p1 = p0 + np.concatenate([np.repeat(grid[None], 2, 0),
                              rng.standard_normal((2, 1, 16, 32))])
    art = {"labels": ["learn-0.1"] * 2 + ["learn-2"] * 2, "seeds": [1, 2, 1, 2],
           "pe_init": p0, "pe_final": p1}
    out = lp.by_sigma(pe_structure(art, null=permutation_null(16, draws=999)))
    assert out.set_index("sigma").loc[0.1, "p_max"] <= 2e-3
    assert out.set_index("sigma").loc[0.1, "n_below"] == 2
    assert out.set_index("sigma").loc[2.0, "score_mean"] < 0.5


def test_learned_kernels_are_the_kernels_of_the_final_pe_and_of_the_update():
    """learned_kernels: per PE, the cosine kernel of P_final and of P_final - P_init of the
    asked block and seed (checked against the cosine written out by hand)."""
    import torch

    from lstpe.analysis.kernels import learned_kernels

    g = torch.Generator().manual_seed(0)
    init = torch.randn(4, 2, 16, 8, generator=g)  # (M, L, n, d)
    update = torch.randn(4, 2, 16, 8, generator=g)
    arts = {"labels": ["learn-0.2", "learn-2", "learn-0.2", "learn-2"],
            "seeds": [1, 1, 2, 2], "pe_init": init, "pe_final": init + update}

    def cos(p):
        p = p.double().numpy()
        p = p / np.linalg.norm(p, axis=1, keepdims=True)
        return p @ p.T

    k = learned_kernels(arts, ["learn-2", "learn-0.2"], seed=2, block=1)
    assert list(k) == ["learn-2: after training", "learn-2: learned part",
                       "learn-0.2: after training", "learn-0.2: learned part"]
    np.testing.assert_allclose(k["learn-2: learned part"], cos(update[3, 1]), atol=1e-6)
    np.testing.assert_allclose(k["learn-0.2: after training"], cos(init[2, 1] + update[2, 1]),
                               atol=1e-6)
