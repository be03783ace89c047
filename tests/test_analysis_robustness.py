"""Noise robustness on a tiny random-weight batched model (no training)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lstpe.lst import validation_split
from lstpe.nn.architecture import ModelConfig
from lstpe.nn.model import BatchedLSTTransformer
from lstpe.training import noise as rob
from lstpe.training.task import predict, score

CFG = ModelConfig(d_model=32, n_layers=2)
PES = ["2d-fixed", "2d-fixed", "learn-0.2", "learn-0.2"]
SEEDS = [0, 1, 0, 1]


@pytest.fixture(scope="module")
def model() -> BatchedLSTTransformer:
    return BatchedLSTTransformer(PES, SEEDS, CFG).eval()


@pytest.fixture(scope="module")
def val():
    return validation_split()


@pytest.fixture(scope="module")
def table(model, val):
    return rob.noise_robustness(model, val)


def test_table_shape_and_columns(table):
    assert list(table.columns) == ["noise", "model", "pe", "pe_name", "sigma", "seed",
                                   "condition", "accuracy", "repeats"]
    levels = [0.0, *rob.NOISE_LEVELS]
    assert sorted(set(table["noise"])) == levels
    assert set(table["condition"]) == {"all", "1", "2", "3"}
    assert len(table) == len(levels) * len(PES) * 4
    assert not table.duplicated(["noise", "model", "condition"]).any()
    assert table["accuracy"].between(0, 1).all()
    first = table[(table["noise"] == 0.02) & (table["condition"] == "all")]
    assert list(first["pe"]) == PES and list(first["seed"]) == SEEDS
    assert np.isnan(first["sigma"].iloc[0]) and first["sigma"].iloc[2] == pytest.approx(0.2)


def test_plot_noise_curves(table):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lstpe.figures import plots

    ax = plots.plot_noise_curves(table)
    assert len(ax.containers) == 2  # one line per PE
    want = table[(table["condition"] == "all") & (table["pe"] == "2d-fixed")].groupby(
        "noise")["accuracy"].mean()
    np.testing.assert_allclose(np.asarray(ax.containers[0].lines[0].get_ydata(), float),
                               want.to_numpy())
    with pytest.raises(ValueError, match="no rows for condition '4'"):
        plots.plot_noise_curves(table, condition="4")
    plt.close("all")


def test_noise_zero_is_the_noiseless_accuracy(model, val, table):
    acc = score(predict(model, val.x), val.y, val.vectors)
    zero = table[table["noise"] == 0.0]
    for cond, (a, _) in acc.items():
        got = zero[zero["condition"] == cond].sort_values("model")["accuracy"].to_numpy()
        np.testing.assert_array_equal(got, a.astype(np.float64))


def test_noise_changes_predictions_and_is_reproducible(model, val):
    a = rob.noise_robustness(model, val, noise_levels=[50.0], include_zero=False, seed=3)
    b = rob.noise_robustness(model, val, noise_levels=[50.0], include_zero=False, seed=3)
    c = rob.noise_robustness(model, val, noise_levels=[50.0], include_zero=True, seed=3)
    np.testing.assert_array_equal(a["accuracy"], b["accuracy"])
    clean = c[c["noise"] == 0.0]["accuracy"].to_numpy()
    assert not np.array_equal(a["accuracy"].to_numpy(), clean)


def test_repeats_average_the_single_draws(model, val):
    # repeat r of a model of seed s draws from a generator seeded by noise_seed(seed, x, r, s)
    both = rob.noise_robustness(model, val, noise_levels=[0.5], include_zero=False, seed=0,
                                repeats=2)
    acc = []
    for rep in (0, 1):
        g = [torch.Generator().manual_seed(rob.noise_seed(0, 0.5, rep, s)) for s in model.seeds]
        with torch.no_grad():
            logits = model(val.x, embed_noise_std=0.5, generator=g)
        acc.append(np.asarray(score(logits, val.y, val.vectors)["all"][0], dtype=np.float64))
    got = both[both["condition"] == "all"].sort_values("model")["accuracy"].to_numpy()
    np.testing.assert_allclose(got, (acc[0] + acc[1]) / 2, rtol=1e-12)
    assert set(both["repeats"]) == {2}


def test_a_models_noise_does_not_depend_on_its_batch(model, val):
    """Model 3 (learn-0.2, seed 1) alone and inside the 4-model batch: the same weights
    (weights follow the PE and seed) and now the same noise, so the same accuracies."""
    alone = BatchedLSTTransformer(PES[3:], SEEDS[3:], CFG).eval()
    torch.testing.assert_close(alone.pe(), model.pe()[3:])
    kw = dict(noise_levels=[0.3, 1.0], include_zero=False, seed=5)
    a = rob.noise_robustness(alone, val, **kw)
    b = rob.noise_robustness(model, val, **kw)
    b = b[b["model"] == 3].reset_index(drop=True)
    np.testing.assert_array_equal(a["accuracy"].to_numpy(), b["accuracy"].to_numpy())
    # models of one seed see one draw: learn-0.2 and 2d-fixed of seed 0 are paired
    assert rob.noise_seed(5, 0.3, 0, 0) != rob.noise_seed(5, 0.3, 0, 1) != \
        rob.noise_seed(5, 1.0, 0, 1)


def test_model_ids_from_artifacts(model, val):
    arts = {"labels": ["learn-0.2", "learn-0.2", "2d-fixed", "2d-fixed"],
            "seeds": [0, 1, 0, 1]}
    t = rob.noise_robustness(model, val, noise_levels=[], artifacts=arts)
    t = t[t["condition"] == "all"].sort_values("model")
    assert list(t["pe"]) == arts["labels"] and list(t["seed"]) == arts["seeds"]
    with pytest.raises(ValueError, match="not in the artifacts"):
        rob.noise_robustness(model, val, noise_levels=[],
                             artifacts={"labels": ["2d-fixed"], "seeds": [0]})


def test_bad_inputs(model, val):
    with pytest.raises(ValueError, match=">= 0"):
        rob.noise_robustness(model, val, noise_levels=[-0.1])
    with pytest.raises(ValueError, match="repeats"):
        rob.noise_robustness(model, val, repeats=0)
    with pytest.raises(ValueError, match="no models"):
        rob.noise_robustness([], val)
    with pytest.raises(ValueError, match="no noise levels"):
        rob.noise_robustness(model, val, noise_levels=[], include_zero=False)
    with pytest.raises(ValueError, match="BatchedLSTTransformer"):
        rob.noise_robustness([torch.nn.Linear(2, 2)], val)


def test_list_of_models_numbered_in_order(val):
    a = BatchedLSTTransformer(["2d-fixed"], [0], CFG)
    b = BatchedLSTTransformer(["rope"], [0], CFG)
    t = rob.noise_robustness([a, b], val, noise_levels=[0.1])
    t = t[(t["condition"] == "all") & (t["noise"] == 0.1)]
    assert list(t["model"]) == [0, 1] and list(t["pe"]) == ["2d-fixed", "rope"]
    assert a.training and b.training  # train/eval mode restored


def test_end_to_end_on_a_train_result(val):
    """Every analysis runs on real training-run artefacts (1 epoch, tiny model and data)."""
    from lstpe.analysis import attention, humans, procrustes
    from lstpe.stats import seed_stats
    from lstpe.training.config import TrainConfig
    from lstpe.training.train import train

    splits = {"train": val, "test": val, "val": val}
    cfg = TrainConfig(pes=["2d-fixed", "learn-0.2", "rope"], seeds=[0, 1], epochs=1,
                      model=CFG, device="cpu", checkpoint_every=0, eval_epochs=[1])
    res = train(cfg, progress=False, splits=splits)
    arts = res.artifacts
    t = rob.noise_robustness(res.models, val, noise_levels=[], artifacts=arts)
    final = res.final()
    got = t[t["condition"] == "all"].set_index("model")["accuracy"].sort_index()
    np.testing.assert_allclose(got.to_numpy(), final.set_index("model")["accuracy"]
                               .sort_index().to_numpy(), atol=1e-12)
    sim = attention.average_layers(attention.similarity_to_reference(arts))
    assert len(sim) == 6 and sim["cosine"].between(0, 1 + 1e-9).all()
    al = seed_stats.with_accuracy(procrustes.pe_alignment(arts), res.history)
    assert len(al) == 6 * CFG.n_layers and al["accuracy"].notna().all()
    assert len(procrustes.pe_movement(arts)) == 6 * CFG.n_layers
    assert len(humans.human_similarity(arts)) == 3
