"""The chapter helpers (:mod:`lstpe.chapters`): caveats, like-for-like tables, wording."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from lstpe import chapters as ch
from lstpe import lst
from lstpe.analysis import kernels
from lstpe.chapters.notebook import Setup
from lstpe.experiments.registry import REGISTRY
from lstpe.runtime import repo_root
from lstpe.stats import chance
from lstpe.store.results import Run


def history(acc: dict[str, dict[str, float]], seeds=(1, 2), epochs=(0, 8),
            cond: dict[str, dict[str, float]] | None = None, jitter: float = 0.0
            ) -> pd.DataFrame:
    """A tidy history: ``acc[pe][split]`` is every seed's final accuracy (``jitter`` * k added
    to seed k); at earlier epochs accuracy is 0.25. ``cond[pe]`` gives per-condition
    accuracies of the ``val`` and ``val_dropout`` splits."""
    rows, model = [], 0
    for pe, splits in acc.items():
        name = pe.split("-")[0] if pe.startswith("learn") else pe
        sigma = float(pe.split("-")[1]) if pe.startswith("learn") else math.nan
        for k, seed in enumerate(seeds):
            for e in epochs:
                last = e == epochs[-1]
                for split, a in splits.items():
                    conds = {"all": a}
                    if split in ("val", "val_dropout") and cond and pe in cond:
                        conds.update(cond[pe])
                    for c, v in conds.items():
                        rows.append({"model": model, "pe": pe, "pe_name": name, "sigma": sigma,
                                     "seed": seed, "optimizer": "adam", "epoch": e,
                                     "split": split, "condition": c,
                                     "accuracy": (v + jitter * k) if last else 0.25,
                                     "loss": 1.0, "diverged": False})
            model += 1
    return pd.DataFrame(rows)


def experiment(hist: pd.DataFrame, name: str = "table1", preset: str = "preview",
               epochs: int = 8, seeds=(1, 2), d_model: int = 64) -> Run:
    cfg = {"preset": preset, "epochs": epochs, "seeds": list(seeds), "n_train": 1000,
           "model": {"d_model": d_model, "n_layers": 2}}
    return Run(hist, {"config": cfg}, name=name)


# --------------------------------------------------------------------------- chance


def test_chance_test_pools_seeds_and_flags_guessing():
    f = pd.DataFrame({"pe": ["a", "a", "b", "b"], "accuracy": [27 / 108, 0.25, 0.9, 0.95]})
    t = chance.chance_test(f).set_index("pe")
    assert t.loc["a", "k"] == 27 + 27 and t.loc["a", "trials"] == 216
    assert bool(t.loc["a", "at_chance"]) and not bool(t.loc["b", "at_chance"])
    assert t.loc["b", "p_above_chance"] < 1e-10
    # 40/108 = 0.37 with one seed is above chance at alpha 0.05; 30/108 is not
    one = chance.chance_test(pd.DataFrame({"pe": ["x", "y"], "accuracy": [40 / 108, 30 / 108]}))
    assert list(one["at_chance"]) == [False, True]


def test_chance_pes_names_the_groups_at_chance_by_the_exact_binomial_tail():
    from math import comb

    def tail(k: int, n: int = 108) -> float:  # P(X >= k), X ~ Binomial(n, 1/4), exactly
        return sum(comb(n, j) * 3 ** (n - j) for j in range(k, n + 1)) / 4 ** n

    first = next(k for k in range(109) if tail(k) < 0.05)  # fewest correct above chance
    f = pd.DataFrame({"pe": pd.Categorical(["lo", "hi"]),
                      "accuracy": [(first - 1) / 108, first / 108]})
    assert chance.chance_pes(f) == {"lo"}
    assert chance.chance_pes(f.rename(columns={"pe": "name"}), by="name") == {"lo"}
    assert chance.chance_pes(None) == set() and chance.chance_pes(f.iloc[:0]) == set()


def test_chance_test_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        chance.chance_test(pd.DataFrame({"pe": [], "accuracy": []}))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        chance.chance_test(pd.DataFrame({"pe": ["a"], "accuracy": [1.5]}))
    with pytest.raises(ValueError, match="lacks columns"):
        chance.chance_test(pd.DataFrame({"accuracy": [0.5]}))


# --------------------------------------------------------------------------- caveats


# --------------------------------------------------------------------------- paper tables


@pytest.fixture
def five_seed_run():
    acc = {"2d-fixed": {"val": 0.97, "val_dropout": 0.90, "train_running": 0.99,
                        "train": 1.0},
           "learn-0.2": {"val": 0.95, "val_dropout": 0.95, "train_running": 1.0,
                         "train": 1.0}}
    return experiment(history(acc, seeds=range(5), jitter=0.002), preset="paper",
                      epochs=1000, seeds=range(5))


def test_compare_splits_uses_the_first_split_for_the_verdict(five_seed_run):
    cmp = ch.compare_splits(five_seed_run, 1)
    row = cmp.set_index("pe").loc["2d-fixed"]
    assert row["split"] == "val_dropout"
    assert row["mean"] == pytest.approx(0.904)  # 0.90 + 0.002 * mean(0..4)
    assert row["mean_val"] == pytest.approx(0.974)
    assert row["paper_mean"] == pytest.approx(0.977)
    assert row["diff"] == pytest.approx(0.904 - 0.977)
    tr = ch.compare_splits(five_seed_run, 1, splits=("train_running", "train"),
                           metric="train_acc").set_index("pe")
    assert tr.loc["2d-fixed", "mean"] == pytest.approx(0.994)
    assert tr.loc["2d-fixed", "mean_train"] == pytest.approx(1.004)
    assert tr.loc["2d-fixed", "paper_mean"] == 1.0


def test_compare_splits_filters_a_pe_family(five_seed_run):
    cmp = ch.compare_splits(five_seed_run, 2, pe_name="learn", splits=("val",))
    assert list(cmp["pe"]) == ["learn-0.2"]
    assert not [c for c in cmp.columns if c.startswith("mean_")]


def test_compact_formats_a_narrow_table(five_seed_run):
    t = ch.compact(ch.compare_splits(five_seed_run, 1))
    assert list(t.columns) == ["n", "ours (dropout on)", "ours (eval mode)",
                               "95% CI", "paper", "diff", "verdict"]
    assert t.loc["2d-fixed", "ours (dropout on)"] == "0.904 ± 0.003"
    assert t.loc["2d-fixed", "ours (eval mode)"] == "0.974"
    assert t.loc["2d-fixed", "paper"] == "0.977 ± 0.073"
    assert t.loc["2d-fixed", "diff"] == "-0.073"
    assert t.loc["2d-fixed", "95% CI"].startswith("[0.90")
    one = experiment(history({"learn-0.2": {"val": 0.6}}, seeds=(1,)), seeds=(1,))
    t2 = ch.compact(ch.compare_splits(one, 1, splits=("val",)), names={"val": "eval"})
    assert list(t2.columns) == ["n", "ours (eval)", "paper", "diff", "verdict"]  # no CI: none
    assert t2.loc["learn-0.2", "verdict"] == "n=1"
    assert t2.loc["learn-0.2", "diff"] == "-0.356"  # 0.6 - 0.956
    # 0.3 of 108 puzzles from one seed (32 right) is within noise of 0.25: not compared
    low = experiment(history({"learn-0.2": {"val": 0.3}}))
    t3 = ch.compact(ch.compare_splits(low, 1, splits=("val",)))
    assert (t3.loc["learn-0.2", "diff"], t3.loc["learn-0.2", "verdict"]) == ("-", "at chance")


# --------------------------------------------------------------------------- complexity


# --------------------------------------------------------------------------- PE kernels


def test_pe_kernel_is_the_cosine_of_rows():
    pe = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0], [0.0, 0.0]])
    k = kernels.pe_kernel(pe)
    assert k[0, 0] == pytest.approx(1) and k[0, 1] == 0
    assert k[0, 2] == pytest.approx(1 / math.sqrt(2))
    assert (k[3] == 0).all()
    with pytest.raises(ValueError, match="positions, dims"):
        kernels.pe_kernel(np.zeros(4))


def test_pe_kernels_pick_one_seed_and_block():
    pe = torch.randn(4, 2, 16, 8)
    arts = {"labels": ["a", "b", "a", "b"], "seeds": [1, 1, 2, 2], "pe_final": pe,
            "pe_init": pe * 0 + 1}
    ks = kernels.pe_kernels(arts, seed=2, block=1)
    assert list(ks) == ["a", "b"]
    np.testing.assert_allclose(ks["b"], kernels.pe_kernel(pe[3, 1].numpy()), rtol=1e-6)
    assert list(kernels.pe_kernels(arts, pes=["b"])) == ["b"]
    np.testing.assert_allclose(kernels.pe_kernels(arts, stage="init")["a"], np.ones((16, 16)))
    with pytest.raises(ValueError, match="seed 3"):
        kernels.pe_kernels(arts, seed=3)
    with pytest.raises(ValueError, match="no model"):
        kernels.pe_kernels(arts, pes=["c"])


# --------------------------------------------------------------------------- report


def report_rows() -> pd.DataFrame:
    base = {"table": "1", "setting": "adam", "n": 15, "sd": 0.01, "paper_sd": 0.05,
            "verdict": "differs", "run": "table1"}
    rows = [
        {"pe": "rope", "metric": "val_acc", "mean": 0.95, "paper_mean": 0.805},
        {"pe": "2d-fixed", "metric": "val_acc", "mean": 0.90, "paper_mean": 0.977},
        {"pe": "learn-0.2", "metric": "val_acc", "mean": 0.957, "paper_mean": 0.956},
        {"pe": "learn-0.2", "metric": "train_acc", "mean": 0.98, "paper_mean": 1.0},
        {"pe": "relative", "metric": "val_acc", "mean": 0.80, "paper_mean": 0.92},
    ]
    return pd.DataFrame([{**base, **r} for r in rows])


def test_describe_setup_shows_no_absolute_path():
    S = Setup("preview", torch.device("cpu"), repo_root() / "results")
    line = ch.describe_setup(S)
    assert "stored runs from: results" in line and str(repo_root()) not in line
    other = ch.describe_setup(Setup("paper", torch.device("cpu"), Path("/somewhere/else")))
    assert "/somewhere" not in other and "custom folder" in other


@pytest.fixture
def report_runs():
    acc1 = {"2d-fixed": {"val": 0.97, "val_dropout": 0.90, "train_running": 0.99, "train": 1.0},
            "learn-0.2": {"val": 0.955, "val_dropout": 0.955, "train_running": 1.0,
                          "train": 1.0},
            "rope": {"val": 0.99, "val_dropout": 0.99, "train_running": 1.0, "train": 1.0}}
    acc2 = {p: {"val": v, "val_dropout": v, "train_running": 1.0, "train": 1.0}
            for p, v in [("2d-fixed", 0.93), ("learn-0.1", 0.925), ("learn-0.2", 0.956)]}
    kw = dict(preset="paper", seeds=range(5))
    return {"table1": experiment(history(acc1, seeds=range(5), jitter=0.001), "table1",
                                 epochs=1000, **kw),
            "table2": experiment(history(acc2, seeds=range(5), jitter=0.001), "table2",
                                 epochs=200, **kw)}


def test_describe_setup_outside_a_repository(monkeypatch):
    monkeypatch.setattr("lstpe.runtime.repo_root", lambda start=None: None)
    line = ch.describe_setup(Setup("preview", torch.device("cpu"), Path("results")))
    assert line.endswith("stored runs from: results")
    line = ch.describe_setup(Setup("preview", torch.device("cpu"), Path("/x/results")))
    assert "custom folder" in line and "/x" not in line


def test_say_wraps_long_lines(capsys):
    ch.say("word " * 40 + "\nsecond", width=30, prefix="WARNING: ")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("WARNING: word") and all(len(line) <= 30 for line in out)
    assert out[1].startswith("  word") and out[-1] == "WARNING: second"


# --------------------------------------------------------------------------- every paper cell


def _paper_cell_count() -> int:
    """Cells of the vendored paper tables, counted from the CSVs themselves: one per non-empty
    accuracy of ``paper_tables.csv`` and one per row of the Table 3 file."""
    data = Path(ch.__file__).parents[1] / "data"
    t = pd.read_csv(data / "paper_tables.csv")
    return int(t["val_acc"].notna().sum() + t["train_acc"].notna().sum()
               + len(pd.read_csv(data / "attention_similarity_table3.csv")))


@pytest.fixture
def cell_runs(report_runs):
    """``report_runs`` (5 seeds, above chance) plus Table 4 SGD from 1 seed and Tables 5-6
    from 5 seeds at chance."""
    sgd = {"learn-0.1": {"val": 0.9, "train_running": 1.0, "train": 1.0}}
    at_chance = {p: {"val": 0.25, "val_dropout": 0.25, "train_running": 0.9, "train": 0.9}
                 for p in ("learn-0.1", "2d-fixed")}
    return {**report_runs,
            "table4/sgd": experiment(history(sgd, seeds=[1]), "table4/sgd", preset="paper",
                                     epochs=1000, seeds=[1]),
            "tables56": experiment(history(at_chance, seeds=range(5)), "tables56",
                                   preset="paper", epochs=1000, seeds=range(5))}


# --------------------------------------------------------------------------- facts said once


def test_show_runs_says_each_fact_once(capsys):
    chance = {"learn-0.2": {"val": 0.25}, "2d-fixed": {"val": 0.25}}
    a = experiment(history(chance), "table4/sgd")
    b = experiment(history(chance), "tables56")
    c = experiment(history({"learn-0.2": {"val": 0.95}}, seeds=[1]), "table2", preset="paper",
                   epochs=200, seeds=[1])
    lines = ch.run_facts([a, b, c])
    assert len([x for x in lines if x.startswith("[")]) == 3  # one describe line per run
    facts = lines[3:]
    assert facts == [
        "Preview scale (the paper: d_model=160, 4 blocks, 4000 epochs): table4/sgd, tables56 "
        "(d_model=64, 2 blocks, 1000 training puzzles, 8 epochs).",
        facts[1]]
    assert facts[1] == ("Shorter than the paper's 4000 epochs: table2 (200 epochs; "
                        f"{REGISTRY['table2'].why}).")
    ch.show_runs(a, b, c)
    out = capsys.readouterr().out
    assert "WARNING" not in out and out.count("Preview scale") == 1
    brain = Run(pd.DataFrame(), {"config": {"preset": "preview", "steps": 10}}, name="brain")
    assert ch.run_facts([brain]) == [brain.describe()]  # no epochs: no LST facts


def _curves(slopes: dict[str, tuple[float, float]], seeds=(1, 2, 3), last: int = 200,
            grid: Sequence[int] | None = None) -> pd.DataFrame:
    """A val_dropout history: accuracy = a + b * epoch per PE, evaluated at ``grid`` (default:
    the engine's schedule, every epoch up to 50 and every 10th after) up to ``last``."""
    grid = list(grid) if grid is not None else [*range(51), *range(60, 10_000, 10)]
    return pd.DataFrame([
        {"model": i * 10 + k, "pe": pe, "pe_name": pe, "sigma": math.nan, "seed": s,
         "epoch": e, "split": "val_dropout", "condition": "all",
         "accuracy": a + b * e, "loss": 1.0, "diverged": False}
        for i, (pe, (a, b)) in enumerate(slopes.items()) for k, s in enumerate(seeds)
        for e in grid if e <= last])


def test_late_gain_is_the_slope_times_the_window():
    """On a straight line a + b e, the mean over epochs 151-200 minus the mean over 101-150 is
    exactly 50 b whatever the evaluation schedule (every epoch to 50, then every 10th: the
    epochs are interpolated, not the evaluations averaged); a flat curve gains 0; each PE's
    windows end at its own last epoch."""
    from lstpe.analysis.curves import late_gain

    g = late_gain(_curves({"up": (0.3, 0.002), "flat": (0.9, 0.0)}))
    assert g.loc["up", "gain"] == pytest.approx(0.1) and g.loc["flat", "gain"] == pytest.approx(0)
    assert g.loc["up", "final"] == pytest.approx(0.7) and list(g.index) == ["up", "flat"]
    assert (g["from_epoch"] == 151).all() and (g["to_epoch"] == 200).all() and (g["n"] == 3).all()
    # 100-epoch windows reach into the dense early evaluations: still exactly 100 b
    assert late_gain(_curves({"up": (0.3, 0.002)}), window=100).loc["up", "gain"] == (
        pytest.approx(0.2))
    short = _curves({"short": (0.3, 0.001)}, last=120).assign(model=lambda t: t.model + 5)
    both = pd.concat([_curves({"long": (0.3, 0.002)}), short])
    g2 = late_gain(both)
    assert g2.loc["short", "to_epoch"] == 120 and g2.loc["short", "gain"] == pytest.approx(0.05)
    assert g2.loc["short", "final"] == pytest.approx(0.42)
    with pytest.raises(ValueError, match=r"too short .* a \(epochs 0-60\)"):
        late_gain(_curves({"a": (0.3, 0.002)}, last=60))


def test_complexity_table():
    cond = {"learn-0.2": {"1": 0.99, "2": 0.95, "3": 0.80},
            "rope": {"1": 0.80, "2": 0.90, "3": 0.70},
            "nope": {"1": 0.20, "2": 0.30, "3": 0.25}}
    acc = {"learn-0.2": {"val": 0.91}, "rope": {"val": 0.8}, "nope": {"val": 0.25}}
    exp = experiment(history(acc, cond=cond))
    t = ch.complexity_table(exp)
    assert list(t.index) == ["learn-0.2", "rope", "nope", "people"]
    assert list(t.columns) == ["1", "2", "3", "falls", "at_chance"]
    assert t.loc["learn-0.2", "falls"] and not t.loc["rope", "falls"]
    assert t.loc["nope", "at_chance"] and not t.loc["rope", "at_chance"]
    people = lst.human_accuracy().groupby("vectors")["accuracy"].mean()
    assert t.loc["people", "3"] == pytest.approx(people[3]) and t.loc["people", "falls"]


def test_human_table():
    sim = pd.DataFrame({"pe": ["a", "b", "c"], "model_accuracy": [0.9, 0.5, 0.25],
                        "cosine": [0.99, 0.9, 0.98], "spearman": [0.4, 0.1, math.nan],
                        "spearman_p": [0.001, 0.3, math.nan], "composite": [0.695, 0.5, math.nan]})
    t = ch.human_table(sim)
    assert list(t.index) == ["a", "b", "c"]
    assert list(t.columns) == ["accuracy", "cosine", "Spearman ρ", "p (ρ)", "composite"]
    by_sigma = ch.human_table(sim.assign(sigma=[2.0, 0.1, 0.5]), by="sigma")
    assert list(by_sigma.index) == [0.1, 0.5, 2.0]  # a sweep in order of sigma, not of score
    assert list(by_sigma["composite"].fillna(-1)) == [0.5, -1, 0.695]


def test_init_vs_final_never_shows_minus_zero():
    init = pd.DataFrame({"model": [0, 1], "sigma": [0.5, 0.5], "d": [1.0, 2.0]})
    final = init.assign(d=[1.0 - 4e-5, 2.0 - 2e-5])  # a change that rounds to -0.000
    t = ch.init_vs_final(init, final, "d")
    change = t[("d", "change")].iloc[0]
    assert change == 0 and math.copysign(1, change) == 1 and t[("n", "")].iloc[0] == 2
    assert "-0.0" not in t.to_string()


def test_describe_page_names_the_stored_units_and_no_scale():
    """Issue 51: a page that shows stored units of the authors' recipe says how many, of which
    recipe, epochs and seeds, and names no scale or device; a page that trained says what and
    at which scale."""
    import pandas as pd

    from lstpe.store.results import Run

    S = Setup("preview", torch.device("cpu"), repo_root() / "results")
    merged = Run(pd.DataFrame(), {"kind": "campaign-merge", "config": {"preset": "paper",
                 "epochs": 200}, "fragments": ["a", "b", "c"],
                 "seeds_per_pe": {"2d-fixed": [1, 2], "learn-0.2": [1]}}, name="table1",
                 source="stored")
    line = ch.describe_page(S, [merged])
    assert "`table1`: 3 models of the authors' recipe (2 PEs, 1-2 seeds each, 200 epochs, fp32)" \
        in line
    assert "Nothing was trained here." in line and "scale" not in line and "preview" not in line
    live = Run(pd.DataFrame(), {"config": {"preset": "preview", "epochs": 8, "seeds": [0]}},
               name="brain", source="live")
    line = ch.describe_page(S, [merged, live])
    assert "Trained here at the `preview` scale (not the authors' recipe) on cpu: `brain` " \
           "(8 epochs, 1 seed, trained now)." in line
    alone = ch.describe_page(S, [live])
    assert alone.startswith("No stored run of this page was found in `results/`")
    assert str(repo_root()) not in line


def test_setup_refuses_a_results_dir_that_names_nothing(tmp_path):
    """Issue 50, item 8: a results_dir that does not exist or is a file is an error naming it
    (it used to warn and train the chapter); an existing empty folder is fine."""
    from lstpe.chapters import notebook as nb

    with pytest.raises(FileNotFoundError, match="no-such-folder"):
        nb.setup("preview", "cpu", str(tmp_path / "no-such-folder"), verbose=False)
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(NotADirectoryError, match="a-file"):
        nb.setup("preview", "cpu", str(tmp_path / "a-file"), verbose=False)
    (tmp_path / "empty").mkdir()
    assert nb.setup("preview", "cpu", str(tmp_path / "empty"), verbose=False).results_dir \
        == tmp_path / "empty"


def test_batch_resolves_a_relative_results_dir_where_it_runs(tmp_path, monkeypatch):
    """Issue 50, item 8: lstpe batch runs a notebook in its own folder (book/), so a relative
    results_dir is made absolute against the folder lstpe batch runs in, and one that names
    nothing is refused before anything is written."""
    from lstpe.chapters import batch

    nb_path = Path(__file__).resolve().parents[1] / "book" / "05_training.ipynb"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "res").mkdir()
    assert batch._results_dir("res") == {"results_dir": str(tmp_path / "res")}
    assert batch._results_dir(None) == {}
    with pytest.raises(ValueError, match="'typo' does not exist"):
        batch.run_batch(nb_path, {"seeds": [[2235]]}, {"results_dir": "typo"}, tmp_path / "o")
    assert not (tmp_path / "o").exists()
