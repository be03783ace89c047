"""Model vs human per-puzzle accuracy on the 108 validation puzzles."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from scipy import stats  # noqa: E402

from lstpe import lst  # noqa: E402
from lstpe.analysis import humans as hu  # noqa: E402
from lstpe.figures import plots  # noqa: E402
from lstpe.lst import validation_split  # noqa: E402


@pytest.fixture(scope="module")
def val():
    return validation_split()


def logits_for(pred: torch.Tensor) -> torch.Tensor:
    """(N,) predicted classes -> (N, 4) logits whose argmax is ``pred``."""
    return torch.nn.functional.one_hot(pred, 4).float() * 5.0


@pytest.fixture(scope="module")
def arts(val):
    """learn-0.2: seed 1 always right, seed 2 always class 0; 2d-fixed: both seeds right."""
    y = val.y
    logits = torch.stack([logits_for(y), logits_for(torch.zeros_like(y)), logits_for(y),
                          logits_for(y)])
    return {"labels": ["learn-0.2", "learn-0.2", "2d-fixed", "2d-fixed"],
            "seeds": [1, 2, 1, 2], "val_logits": logits}


def test_validation_split_matches_load_split_order(val):
    h = lst.load_human()
    assert len(val) == 108
    np.testing.assert_array_equal(val.ids.numpy(), h["id"].to_numpy())
    np.testing.assert_array_equal(val.y.numpy() + 1, h["answer"].to_numpy())


def test_model_correct(arts, val):
    c = hu.model_correct(arts)
    assert list(c.columns) == ["model", "pe", "pe_name", "sigma", "seed", "id", "vectors",
                               "correct"]
    assert len(c) == 4 * 108
    m1 = c[c["model"] == 1]
    np.testing.assert_array_equal(m1["correct"], (val.y.numpy() == 0).astype(float))
    assert c[c["model"] == 0]["correct"].eq(1).all()


def test_puzzle_accuracy_averages_seeds(arts, val):
    pa = hu.puzzle_accuracy(arts)
    assert len(pa) == 2 * 108 and set(pa["n_seeds"]) == {2}
    learn = pa[pa["pe"] == "learn-0.2"].sort_values("id")
    np.testing.assert_allclose(learn["accuracy"], np.where(val.y.numpy() == 0, 1.0, 0.5))


def test_human_similarity_hand_cases(arts, val):
    # humans identical to learn-0.2's per-puzzle accuracy -> cosine 1, Spearman 1, composite 1
    model_acc = np.where(val.y.numpy() == 0, 1.0, 0.5)
    same = pd.DataFrame({"id": val.ids.numpy(), "accuracy": model_acc})
    s = hu.human_similarity(arts, humans=same).set_index("pe")
    assert s.loc["learn-0.2", "cosine"] == pytest.approx(1.0)
    assert s.loc["learn-0.2", "spearman"] == pytest.approx(1.0)
    assert s.loc["learn-0.2", "composite"] == pytest.approx(1.0)
    # 2d-fixed solves everything: constant vector -> rank correlation undefined (ceiling)
    assert math.isnan(s.loc["2d-fixed", "spearman"]) and math.isnan(s.loc["2d-fixed",
                                                                          "composite"])
    assert s.loc["2d-fixed", "cosine"] == pytest.approx(
        model_acc.sum() / (math.sqrt(108) * np.linalg.norm(model_acc)))


def test_human_similarity_real_humans(arts, val):
    h = lst.human_accuracy()
    s = hu.human_similarity(arts).set_index("pe")
    hv = h.sort_values("id")["accuracy"].to_numpy()
    m = np.where(val.y.numpy() == 0, 1.0, 0.5)
    assert s.loc["learn-0.2", "cosine"] == pytest.approx(m @ hv / np.linalg.norm(m)
                                                         / np.linalg.norm(hv))
    r = stats.spearmanr(m, hv)
    assert s.loc["learn-0.2", "spearman"] == pytest.approx(r.statistic)
    assert s.loc["learn-0.2", "spearman_p"] == pytest.approx(r.pvalue)
    assert s.loc["learn-0.2", "composite"] == pytest.approx(
        (s.loc["learn-0.2", "cosine"] + r.statistic) / 2)
    assert s.loc["learn-0.2", "human_accuracy"] == pytest.approx(hv.mean())
    assert s.loc["2d-fixed", "model_accuracy"] == 1.0


def test_condition_accuracy(arts, val):
    t = hu.condition_accuracy(arts)
    assert set(t["source"]) == {"model", "human"}
    hum = t[t["source"] == "human"].set_index("vectors")["accuracy"]
    want = lst.human_accuracy_by_condition()
    np.testing.assert_allclose(hum.sort_index().to_numpy(), want.sort_index().to_numpy())
    learn = t[t["pe"] == "learn-0.2"].set_index("vectors")
    y, v = val.y.numpy(), val.vectors.numpy()
    for k in (1, 2, 3):
        seed2 = float(np.mean(y[v == k] == 0))
        assert learn.loc[k, "accuracy"] == pytest.approx((1.0 + seed2) / 2)
        assert learn.loc[k, "sd"] == pytest.approx(np.std([1.0, seed2], ddof=1))
        assert learn.loc[k, "n"] == 2
    ax = plots.plot_condition_curves(t)
    assert len(ax.containers) == 3  # learn-0.2, 2d-fixed, human
    ax = plots.plot_human_scatter(hu.puzzle_accuracy(arts), lst.human_accuracy(), "learn-0.2")
    assert sum(len(c.get_offsets()) for c in ax.collections) == 108
    plt.close("all")


def test_bad_inputs(arts, val):
    short = dict(arts, val_logits=arts["val_logits"][:, :50])
    with pytest.raises(ValueError, match="hold 50 puzzles but the split has 108"):
        hu.model_correct(short)
    with pytest.raises(ValueError, match="no 'val_logits'"):
        hu.model_correct({"labels": ["nope"], "seeds": [0]})
    with pytest.raises(ValueError, match="lacks columns"):
        hu.human_similarity(arts, humans=pd.DataFrame({"id": [0]}))
    with pytest.raises(ValueError, match="ids differ"):
        hu.human_similarity(arts, humans=pd.DataFrame({"id": [0, 1], "accuracy": [1.0, 0.5]}))
    with pytest.raises(ValueError, match="empty"):
        hu.human_similarity(arts, humans=pd.DataFrame({"id": [], "accuracy": []}))
    with pytest.raises(ValueError, match="unknown positional encoding"):
        hu.model_correct(dict(arts, labels=["bogus"] * 4))
