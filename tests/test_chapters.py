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
from lstpe.chapters.notebook import Setup
from lstpe.experiments.registry import REGISTRY
from lstpe.runtime import repo_root
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
    t = ch.chance_test(f).set_index("pe")
    assert t.loc["a", "k"] == 27 + 27 and t.loc["a", "trials"] == 216
    assert bool(t.loc["a", "at_chance"]) and not bool(t.loc["b", "at_chance"])
    assert t.loc["b", "p_above_chance"] < 1e-10
    # 40/108 = 0.37 with one seed is above chance at alpha 0.05; 30/108 is not
    one = ch.chance_test(pd.DataFrame({"pe": ["x", "y"], "accuracy": [40 / 108, 30 / 108]}))
    assert list(one["at_chance"]) == [False, True]


def test_chance_pes_names_the_groups_at_chance_by_the_exact_binomial_tail():
    from math import comb

    def tail(k: int, n: int = 108) -> float:  # P(X >= k), X ~ Binomial(n, 1/4), exactly
        return sum(comb(n, j) * 3 ** (n - j) for j in range(k, n + 1)) / 4 ** n

    first = next(k for k in range(109) if tail(k) < 0.05)  # fewest correct above chance
    f = pd.DataFrame({"pe": pd.Categorical(["lo", "hi"]),
                      "accuracy": [(first - 1) / 108, first / 108]})
    assert ch.chance_pes(f) == {"lo"}
    assert ch.chance_pes(f.rename(columns={"pe": "name"}), by="name") == {"lo"}
    assert ch.chance_pes(None) == set() and ch.chance_pes(f.iloc[:0]) == set()


def test_chance_test_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        ch.chance_test(pd.DataFrame({"pe": [], "accuracy": []}))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ch.chance_test(pd.DataFrame({"pe": ["a"], "accuracy": [1.5]}))
    with pytest.raises(ValueError, match="lacks columns"):
        ch.chance_test(pd.DataFrame({"accuracy": [0.5]}))


# --------------------------------------------------------------------------- caveats


def test_caveats_of_a_preview_run_near_chance():
    exp = experiment(history({"2d-fixed": {"val": 0.24}, "learn-0.2": {"val": 0.26}}))
    cav = ch.caveats(exp, exp.final("val"))
    text = " ".join(cav)
    assert "PREVIEW" in text and "cannot test the paper" in text and "d_model=64" in text
    assert "2 seed(s): no confidence interval" in text
    assert "every PE of table1 is within noise of chance" in text


def test_caveats_name_only_the_pes_at_chance():
    exp = experiment(history({"2d-fixed": {"val": 0.95}, "nope": {"val": 0.26}}),
                     preset="paper", epochs=4000, seeds=range(15))
    cav = ch.caveats(exp, exp.final("val"))
    assert len(cav) == 1 and "1 of 2 (nope)" in cav[0]


def test_caveats_state_the_registry_reason_for_short_runs():
    exp = experiment(history({"learn-0.2": {"val": 0.95}}), name="table2", preset="paper",
                     epochs=200, seeds=range(15))
    (line,) = ch.caveats(exp, exp.final("val"))
    assert "200 epochs, not the paper's 4000" in line and REGISTRY["table2"].why in line
    # Table 1's campaign units stop at 200, not at the registry's 1000: both are said
    units = Run(exp.history, {"config": {**exp.config, "seeds": list(range(15))},
                              "seeds_per_pe": {"learn-0.2": list(range(15))}}, name="table1")
    (line,) = ch.caveats(units, units.final("val"))
    assert "table1 trained 200 epochs" in line and "campaign's units stop at 200" in line
    assert f"the registry's 1000 at paper scale: {REGISTRY['table1'].why}" in line
    fact = [f for f in ch.run_facts([units]) if f.startswith("Shorter")]
    assert fact and "table1 (200 epochs; the campaign's units stop at 200" in fact[0]
    # a whole run of 1000 epochs gets the registry's reason only
    whole = experiment(exp.history, name="table1", preset="paper", epochs=1000,
                       seeds=range(15))
    (line,) = ch.caveats(whole, whole.final("val"))
    assert line.endswith(f"({REGISTRY['table1'].why}).") and "campaign" not in line


def test_caveats_count_seeds_per_pe_of_a_campaign_run():
    exp = experiment(history({"learn-0.2": {"val": 0.95}, "learn-2": {"val": 0.9}}),
                     name="table2", preset="paper", epochs=200, seeds=[1, 2, 3])
    same = Run(exp.history, {"config": exp.config,
                             "seeds_per_pe": {"learn-0.2": [1, 2, 3], "learn-2": [1, 2, 3]}},
               name="table2")
    assert "table2 has 3 seed(s) per PE: no confidence interval" in ch.caveats(same)[0]
    mixed = Run(exp.history, {"config": exp.config,
                              "seeds_per_pe": {"learn-0.2": [1, 2, 3], "learn-2": [1]}},
                name="table2")
    assert "table2 has 1 seed(s) for some PEs" in ch.caveats(mixed)[0]


def test_source_note_of_campaign_units_says_what_their_seed_counts_allow():
    exp = experiment(history({"learn-0.2": {"val": 0.95}}), name="table2", preset="paper",
                     epochs=200, seeds=[1, 2, 3])

    def note(per_pe: dict) -> str:
        return ch.source_note(Run(exp.history, {"config": exp.config, "seeds_per_pe": per_pe},
                                  name="table2"))

    three = note({"learn-0.2": [1, 2, 3], "learn-2": [1, 2, 3]})
    assert "3 seed(s) per PE so far" in three and "with fewer than 5 seeds it cannot" in three
    five = note({"learn-0.2": [1, 2, 3, 4, 5], "learn-2": [1, 2, 3, 4, 5]})
    assert "5 seed(s) per PE" in five and "cannot" not in five
    assert "With 5 or more seeds per PE it gives each PE a mean with an interval" in five
    mixed = note({"learn-0.2": [1, 2, 3, 4, 5], "learn-2": [1, 2, 3, 4]})
    assert "4-5 seed(s) per PE" in mixed
    assert "the others place a few models each, with no interval" in mixed


def test_no_caveat_for_a_full_run_above_chance(capsys):
    exp = experiment(history({"learn-0.2": {"val": 0.95}}), preset="paper", epochs=4000,
                     seeds=range(15))
    assert ch.caveats(exp, exp.final("val")) == []
    ch.warn(exp, exp.final("val"))
    assert capsys.readouterr().out == ""
    ch.warn(experiment(history({"learn-0.2": {"val": 0.95}})))
    assert capsys.readouterr().out.startswith("WARNING: table1 is a PREVIEW")  # wrapped


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
    few = experiment(history({"learn-0.2": {"val": 0.6}}))
    t2 = ch.compact(ch.compare_splits(few, 1, splits=("val",)), names={"val": "eval"})
    assert list(t2.columns) == ["n", "ours (eval)", "paper", "diff", "verdict"]  # no CI: none
    assert t2.loc["learn-0.2", "verdict"] == "no test (n<5)"
    assert t2.loc["learn-0.2", "diff"] == "-0.356"  # 0.6 - 0.956
    # 0.3 of 108 puzzles from one seed (32 right) is within noise of 0.25: not compared
    low = experiment(history({"learn-0.2": {"val": 0.3}}))
    t3 = ch.compact(ch.compare_splits(low, 1, splits=("val",)))
    assert (t3.loc["learn-0.2", "diff"], t3.loc["learn-0.2", "verdict"]) == ("-", "at chance")


# --------------------------------------------------------------------------- complexity


def test_complexity_table_and_sentence():
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
    s = ch.complexity_sentence(t)
    assert "People: 0.97 -> 0.87 -> 0.66" in s
    assert "falls from 1 to 2 to 3 vectors for 1 of 2 models above chance (learn-0.2)" in s
    assert "not for rope" in s
    assert "1 model(s) (nope) are within noise of chance" in s


# --------------------------------------------------------------------------- PE kernels


def test_pe_kernel_is_the_cosine_of_rows():
    pe = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0], [0.0, 0.0]])
    k = ch.pe_kernel(pe)
    assert k[0, 0] == pytest.approx(1) and k[0, 1] == 0
    assert k[0, 2] == pytest.approx(1 / math.sqrt(2))
    assert (k[3] == 0).all()
    with pytest.raises(ValueError, match="positions, dims"):
        ch.pe_kernel(np.zeros(4))


def test_pe_kernels_pick_one_seed_and_block():
    pe = torch.randn(4, 2, 16, 8)
    arts = {"labels": ["a", "b", "a", "b"], "seeds": [1, 1, 2, 2], "pe_final": pe,
            "pe_init": pe * 0 + 1}
    ks = ch.pe_kernels(arts, seed=2, block=1)
    assert list(ks) == ["a", "b"]
    np.testing.assert_allclose(ks["b"], ch.pe_kernel(pe[3, 1].numpy()), rtol=1e-6)
    assert list(ch.pe_kernels(arts, pes=["b"])) == ["b"]
    np.testing.assert_allclose(ch.pe_kernels(arts, stage="init")["a"], np.ones((16, 16)))
    with pytest.raises(ValueError, match="seed 3"):
        ch.pe_kernels(arts, seed=3)
    with pytest.raises(ValueError, match="no model"):
        ch.pe_kernels(arts, pes=["c"])


# --------------------------------------------------------------------------- report


def report_rows() -> pd.DataFrame:
    base = {"table": "1", "setting": "adam", "n": 15, "sd": 0.01, "paper_sd": 0.05,
            "verdict": "different", "run": "table1"}
    rows = [
        {"pe": "rope", "metric": "val_acc", "mean": 0.95, "paper_mean": 0.805},
        {"pe": "2d-fixed", "metric": "val_acc", "mean": 0.90, "paper_mean": 0.977},
        {"pe": "learn-0.2", "metric": "val_acc", "mean": 0.957, "paper_mean": 0.956},
        {"pe": "learn-0.2", "metric": "train_acc", "mean": 0.98, "paper_mean": 1.0},
        {"pe": "relative", "metric": "val_acc", "mean": 0.80, "paper_mean": 0.92},
    ]
    return pd.DataFrame([{**base, **r} for r in rows])


def test_outside_paper_interval():
    r = report_rows()
    out = ch.outside_paper_interval(r)
    # paper SD 0.05, 15 seeds: half-width 2.145 * 0.05 / sqrt(15) = 0.0277
    assert list(out) == [True, True, False, False, True]
    # an SD of 0.000 is rounded: +-0.0005 is inside
    z = r.assign(paper_sd=0.0, paper_mean=1.0, mean=[0.9996, 0.999, 1.0, 1.0004, 0.99])
    assert list(ch.outside_paper_interval(z)) == [False, True, False, False, True]
    r.loc[0, "verdict"] = "too few seeds (n<5)"
    assert ch.outside_paper_interval(r)[0] is None


def test_explain_rows_gives_the_evidence():
    r = report_rows()
    paper = {"table1": experiment(pd.DataFrame(), preset="paper", epochs=1000,
                                  seeds=range(15))}
    why = ch.explain_rows(r, paper)
    assert "deviation 6" in why[0]
    assert "deviations 2-3" in why[1] and "0.938 at 200" in why[1]
    assert why[2] == ""
    assert why[3] == ""  # 0.98 vs 1.0 +- 0.013: inside
    assert "1000 epochs, not 4000" in why[4]
    preview = {"table1": experiment(pd.DataFrame())}
    assert set(ch.explain_rows(r, preview)) == {"preview-scale run: cannot test the paper"}
    full = {"table1": experiment(pd.DataFrame(), preset="paper", epochs=4000, seeds=range(15))}
    assert ch.explain_rows(r, full)[4].startswith("none known")


def test_run_summary(five_seed_run):
    cmp = ch.compare_splits(five_seed_run, 1)
    s = ch.run_summary(cmp, five_seed_run, five_seed_run.final("val"), with_caveats=True)
    assert s.startswith("This run (table1): validation accuracy 0.904-0.954 across 2 rows")
    assert "Verdicts:" in s and "Caveats: table1 trained 1000 epochs" in s
    # a page says its caveats once (admonition, show_runs): the takeaway leaves them out
    short = ch.run_summary(cmp, five_seed_run, five_seed_run.final("val"))
    assert "Caveats" not in short and short == s[:s.index(" Caveats: ")]
    few = experiment(history({"learn-0.2": {"val": 0.9}, "2d-fixed": {"val": 0.95},
                              "relative": {"val": 0.8}}))
    cmp_few = ch.compare_splits(few, 1, splits=("val",))
    text = ch.run_summary(cmp_few, few, few.final("val"))
    assert "Spearman" not in text and "fewer than 5 seeds" in text  # no statistic from 1 seed
    assert "fewer than 5 seeds per row" in text
    mixed = ch.run_summary(cmp_few.assign(n=[5, 5, 4]), few, few.final("val"))
    assert "Spearman" not in mixed and "1 of the 3 rows has fewer than 5 seeds" in mixed


def test_describe_setup_shows_no_absolute_path():
    S = Setup("preview", torch.device("cpu"), repo_root() / "results")
    line = ch.describe_setup(S)
    assert "stored runs from: results" in line and str(repo_root()) not in line
    other = ch.describe_setup(Setup("paper", torch.device("cpu"), Path("/somewhere/else")))
    assert "/somewhere" not in other and "custom folder" in other


def test_summary_hides_intervals_from_few_seeds():
    t = pd.DataFrame({"pe": ["a", "a", "b", "b", "b", "b", "b"],
                      "accuracy": [0.2, 0.3, 0.5, 0.5, 0.6, 0.6, 0.55]})
    s = ch.summary(t)
    assert s.loc["a", "mean ± SD"] == "0.250 ± 0.071" and s.loc["a", "95% CI"] == "-"
    assert s.loc["b", "n"] == 5 and s.loc["b", "95% CI"].startswith("[0.4")


def test_run_summary_reports_no_correlation_at_chance():
    acc = {p: {"val": 0.25} for p in ("2d-fixed", "learn-0.2", "relative")}
    exp = experiment(history(acc))
    cmp = ch.compare_splits(exp, 1, splits=("val",))
    s = ch.run_summary(cmp, exp, exp.final("val"))
    assert s == ("This run (table1): every model is within noise of chance (validation "
                 "accuracy 0.250-0.250), so none of it is compared with the paper.")
    # one PE above chance: only its row is set beside the paper; the others are named
    acc["learn-0.2"] = {"val": 0.95}
    exp = experiment(history(acc))
    s = ch.run_summary(ch.compare_splits(exp, 1, splits=("val",)), exp, exp.final("val"))
    assert s.startswith("This run (table1): validation accuracy 0.950-0.950 across 1 rows "
                        "above chance (paper, same rows: 0.956-0.956).")
    assert "Within noise of chance, not compared: 2d-fixed, relative." in s
    assert s.endswith("Verdicts: no test (n<5) 1.") and "Spearman" not in s


def test_noise_loss():
    rows = [{"noise": x, "pe": pe, "condition": c, "seed": k, "accuracy": a - x + 0.01 * k}
            for pe, a in [("b", 0.5), ("a", 0.9)] for k in (0, 2) for x in (0.0, 0.05, 0.1)
            for c in ("all", "1")]
    t = ch.noise_loss(pd.DataFrame(rows), pes=["a", "b"])
    assert list(t.index) == ["a", "b"] and list(t.columns) == ["noise 0", "noise 0.1", "loss"]
    assert t.loc["a", "noise 0"] == pytest.approx(0.91)
    assert t.loc["b", "loss"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="condition"):
        ch.noise_loss(pd.DataFrame(rows), condition="3")


def test_noise_sentence_ranks_in_the_papers_measure():
    """Mean accuracy over the noisy levels: learn-0.2 loses 0.5 per unit of noise, learn-2
    loses 2 (from a higher start), 2d-fixed nothing; nope guesses and is not ranked."""
    start = {"2d-fixed": 0.99, "learn-0.2": 0.95, "learn-2": 0.97, "nope": 0.25}
    slope = {"2d-fixed": 0.0, "learn-0.2": 0.5, "learn-2": 2.0, "nope": 0.0}
    xs = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1)
    rows = [{"noise": x, "pe": pe, "condition": "all", "seed": k,
             "accuracy": start[pe] - slope[pe] * x} for pe in start for k in (1, 2) for x in xs]
    final = pd.DataFrame({"pe": list(start), "accuracy": list(start.values())})
    text = ch.noise_sentence(pd.DataFrame(rows), final)
    # learn-0.2: 0.95 - 0.5 * 0.06 = 0.920; learn-2: 0.97 - 2 * 0.06 = 0.850
    assert "(the paper's Fig. A9D measure; 2 seed(s) per PE), highest first: 2d-fixed 0.990, " \
           "learn-0.2 0.920, learn-2 0.850." in text
    assert "most robust learnable PE here is learn-0.2, inside the paper's most robust range" \
           in text
    assert "Largest drop from no noise to 0.1: learn-2 (0.200)." in text
    assert "not ranked: nope." in text and text.endswith("it tests nothing.")
    assert "by the drop alone" not in text  # learn-0.2 is also the one that drops least
    with pytest.raises(ValueError, match="no noisy rows"):
        ch.noise_sentence(pd.DataFrame(rows).query("noise == 0"))
    # learn-0.5 starts lower (0.90, mean 0.900 < 0.920) but loses nothing: the mean ranks
    # learn-0.2 first, the drop learn-0.5
    flat = [{"noise": x, "pe": "learn-0.5", "condition": "all", "seed": k, "accuracy": 0.90}
            for k in (1, 2) for x in xs]
    text = ch.noise_sentence(pd.DataFrame(rows + flat), final)
    assert "most robust learnable PE here is learn-0.2" in text
    assert ("by the drop alone the most robust learnable PE is learn-0.5 (0.000), and learn-0.2 "
            "drops 0.050.") in text
    # a tie on the drop (learn-0.5 loses as much as learn-0.2, from lower): no such clause
    same = [{**r, "accuracy": 0.90 - 0.5 * r["noise"]} for r in flat]
    assert "by the drop alone" not in ch.noise_sentence(pd.DataFrame(rows + same), final)
    # 5 seeds of some PEs, 2 of others: only those below 5 are named; all at 5: no caveat
    more = [{**r, "seed": k} for r in rows if r["pe"] != "learn-2" for k in (3, 4, 5)
            if r["seed"] == 1]
    text = ch.noise_sentence(pd.DataFrame(rows + more), final)
    assert text.endswith("Below 5 seeds (learn-2) a PE's value describes its few models; "
                         "nothing here is a test.")
    five = pd.DataFrame(rows + more).query("pe != 'learn-2'")
    assert "seeds (" not in ch.noise_sentence(five, final) and \
        "tests nothing" not in ch.noise_sentence(five, final)


def test_human_helpers():
    sim = pd.DataFrame({"pe": ["a", "b", "c"], "model_accuracy": [0.9, 0.5, 0.25],
                        "cosine": [0.99, 0.9, 0.98], "spearman": [0.4, 0.1, math.nan],
                        "spearman_p": [0.001, 0.3, math.nan], "composite": [0.695, 0.5, math.nan]})
    t = ch.human_table(sim)
    assert list(t.index) == ["a", "b", "c"]
    assert list(t.columns) == ["accuracy", "cosine", "Spearman ρ", "p (ρ)", "composite"]
    h = lst.human_accuracy()["accuracy"]
    floor = ch.constant_cosine(h)
    assert floor == pytest.approx(0.9847, abs=1e-4)
    # any constant vector: the same cosine as computed directly
    const = np.full(len(h), 0.3)
    assert floor == pytest.approx(const @ h / (np.linalg.norm(const) * np.linalg.norm(h)))
    with pytest.raises(ValueError):
        ch.constant_cosine([0.0, 0.0])
    s = ch.human_summary(sim.assign(pe=["learn-1", "learn-0.2", "nope"]),
                         experiment(pd.DataFrame()), human=h, with_caveats=True)
    assert s.startswith("Highest composite on this run: learn-1 (0.695")
    assert "learn-0.2 ranks 2 of 2." in s and "1 of 3 cosines exceed 0.985" in s
    assert "Caveats: table1 is a PREVIEW" in s
    assert "No rank correlation, hence no composite: nope (the same accuracy" in s
    one = ch.human_summary(sim.assign(pe=["learn-0.2", "2d-fixed", "nope"]).iloc[[0, 2]],
                           experiment(pd.DataFrame()))
    assert one.startswith("Only learn-0.2 has a composite score (0.695")
    assert "ranks" not in one and "Highest" not in one


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


def test_paper_report_lines_up_every_table(report_runs):
    att = pd.DataFrame({"pe": ["learn-0.1"] * 5, "pe_name": "learn", "cosine": 0.836})
    rep = ch.paper_report(report_runs, attention=att)
    keys = list(dict.fromkeys(zip(rep["table"], rep["metric"], strict=True)))
    assert keys == [("1", "val_acc"), ("1", "train_acc"), ("2", "val_acc"),
                    ("2", "train_acc"), ("3", "attention_cosine")]
    t1 = rep[(rep["table"] == "1") & (rep["metric"] == "val_acc")].set_index("pe")
    assert t1.loc["2d-fixed", "split"] == "val_dropout"
    assert t1.loc["2d-fixed", "mean"] == pytest.approx(0.902)
    assert t1.loc["2d-fixed", "mean_val"] == pytest.approx(0.972)
    assert t1.loc["rope", "outside"] and "deviation 6" in t1.loc["rope", "why"]
    assert "deviations 2-3" in t1.loc["2d-fixed", "why"]
    assert not t1.loc["learn-0.2", "outside"] and t1.loc["learn-0.2", "why"] == ""
    t2 = rep[(rep["table"] == "2") & (rep["metric"] == "val_acc")]
    assert set(t2["pe"]) == {"learn-0.1", "learn-0.2"}  # the 2d-fixed reference is not in Table 2
    tr = rep[(rep["table"] == "1") & (rep["metric"] == "train_acc")].set_index("pe")
    assert tr.loc["2d-fixed", "split"] == "train_running"
    assert tr.loc["2d-fixed", "mean"] == pytest.approx(0.992)

    both = ch.both_evaluations(rep)
    assert both.loc[("1", "2d-fixed"), "eval - dropout"] == pytest.approx(0.07)
    assert both.loc[("1", "2d-fixed"), "paper"] == 0.977

    out = ch.outside_rows(rep).set_index("why")
    rope = [w for w in out.index if "deviation 6" in w][0]
    assert out.loc[rope, "which"].startswith("T1 val_acc: rope")

    s = ch.report_summary(rep, report_runs)
    assert "table1: paper, 5 seeds, 1000 epochs" in s and "PREVIEW" not in s
    camp = {"table1": Run(report_runs["table1"].history, {
        "config": report_runs["table1"].config,
        "seeds_per_pe": {"2d-fixed": [0, 1, 2], "learn-0.2": [0, 1], "rope": [0, 1]}},
        name="table1")}
    assert "table1: paper, 2-3 seeds per PE, 1000 epochs" in ch.report_summary(rep, camp)
    assert "Outside the paper's 95% interval:" in s


def test_report_summary_says_preview_cannot_test(five_seed_run):
    runs = {"table1": experiment(five_seed_run.history, "table1", seeds=range(5))}
    rep = ch.paper_report(runs)
    s = ch.report_summary(rep, runs)
    assert "PREVIEW scale" in s and "cannot test the paper" in s
    assert set(rep["why"]) == {"preview-scale run: cannot test the paper"}
    # a compact table of one group drops the other group's all-NaN columns
    t = ch.compact(rep[rep["metric"] == "train_acc"])
    assert "ours (eval mode)" in t.columns and "ours (dropout on)" not in t.columns


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


def test_verdict_table(report_runs):
    rep = ch.paper_report(report_runs)
    v = ch.verdict_table(rep)
    assert list(v.index) == ["T1 val", "T1 train", "T2 val", "T2 train"]
    assert list(v.columns) == ["rows", "mean |diff|", "equivalent", "different",
                               "inconclusive", "no test (n<5)", "at chance"]
    assert v.loc["T1 val", "rows"] == 3
    assert v.loc["T1 val"].iloc[2:].sum() == 3  # every row has one verdict
    t1 = rep[(rep["table"] == "1") & (rep["metric"] == "val_acc")]
    assert v.loc["T1 val", "mean |diff|"] == f"{t1['diff'].abs().mean():.3f}"


def test_rows_at_chance_are_not_compared_with_the_paper(cell_runs):
    """Tables 5-6 of ``cell_runs`` are 5 seeds at chance (0.25): no verdict, no difference,
    no outside-the-interval call, no mean |diff|, no row among both evaluations."""
    rep = ch.paper_report(cell_runs)
    low = rep[rep["run"] == "tables56"]
    assert len(low) and low["at_chance"].all() and (low["verdict"] == ch.AT_CHANCE).all()
    assert low["outside"].isna().all() and low["p_equiv"].isna().all()
    assert set(low["why"]) == {"validation accuracy at chance: not compared with the paper"}
    above = rep[rep["run"] == "table1"]
    assert not above["at_chance"].any() and (above["verdict"] != ch.AT_CHANCE).all()
    v = ch.verdict_table(rep)
    assert v.loc["T6 val", "mean |diff|"] == "-" and v.loc["T6 val", "at chance"] == 1
    assert v.loc["T6 val", "no test (n<5)"] + v.loc["T6 val", "equivalent"] == 0
    t6 = ch.compact(low[(low["table"] == "6") & (low["metric"] == "val_acc")])
    assert set(t6["diff"]) == {"-"} and set(t6["verdict"]) == {"at chance"}
    assert list(ch.both_evaluations(rep).index) == [("1", "2d-fixed")]
    s = ch.report_summary(rep, cell_runs)  # verdicts named as the tables name them
    n_chance = int((rep["verdict"] == ch.AT_CHANCE).sum())
    assert f"at chance {n_chance}" in s and "no test (n<5) 1" in s and "too few" not in s
    # compare_splits marks the PE from its own validation accuracy
    cmp = ch.compare_splits(cell_runs["tables56"], 6)
    assert cmp["at_chance"].all()
    assert not ch.compare_splits(cell_runs["table1"], 1)["at_chance"].any()


def test_verdict_table_leaves_previews_out_of_the_mean_difference(five_seed_run):
    runs = {"table1": experiment(five_seed_run.history, "table1", seeds=range(5))}
    v = ch.verdict_table(ch.paper_report(runs))
    assert v.loc["T1 val", "mean |diff|"] == "-" and v.loc["T1 val", "rows"] == 2


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


def test_paper_cells_has_one_row_per_paper_cell(cell_runs):
    rep = ch.paper_report(cell_runs)
    cells = ch.paper_cells(rep, cell_runs)
    assert len(cells) == _paper_cell_count() == 140
    assert not cells.index.duplicated().any()
    assert list(cells.columns) == ["n", "ours", "authors @200", "paper", "verdict"]
    empty = ch.paper_cells(None)  # no run at all: every cell still listed, table by table
    assert len(empty) == 140 and set(empty["verdict"]) == {"no run yet"}
    assert list(dict.fromkeys(empty.index.get_level_values("table"))) == [
        "T1 val", "T1 train", "T2 val", "T2 train", "T3 attn", "T4 adam val", "T4 sgd val",
        "T5 val", "T5 train", "T6 val", "T6 train"]
    row = cells.loc[("T1 val", "2d-fixed")]
    assert row["n"] == 5 and row["ours"] == "0.902" and row["paper"] == "0.977 ± 0.073"
    none = cells.loc[("T1 val", "relative")]
    assert (none["n"], none["ours"], none["verdict"]) == (0, "-", "no run yet")


def test_paper_cells_gives_no_verdict_under_5_seeds_or_at_chance(cell_runs):
    rep = ch.paper_report(cell_runs)
    cells = ch.paper_cells(rep, cell_runs)
    verdicts = {"equivalent", "different", "inconclusive"}
    judged = cells[cells["verdict"].isin(verdicts)]
    assert len(judged) and (judged["n"] >= 5).all()
    assert cells.loc[("T4 sgd val", "learn-0.1"), "verdict"] == "1 seed: no test"
    for t in ("T5 val", "T5 train"):  # 5 seeds, but their validation accuracy is chance
        assert cells.loc[(t, "learn-0.1"), "verdict"] == "at chance"
    assert cells.loc[("T6 val", "2d-fixed"), "verdict"] == "at chance"
    assert cells.loc[("T1 val", "learn-0.2"), "verdict"] in verdicts
    few = cells[(cells["n"] > 0) & (cells["n"] < 5)]
    assert len(few) and not few["verdict"].isin(verdicts).any()
    preview = {"table1": experiment(cell_runs["table1"].history, "table1", seeds=range(5))}
    pv = ch.paper_cells(ch.paper_report(preview), preview)
    assert set(pv.loc[pv["n"] > 0, "verdict"]) == {"preview: no test"}
    # a preview whose models guess (Table 5's validation accuracy above) says so too
    preview = {"tables56": experiment(cell_runs["tables56"].history, "tables56")}
    pv = ch.paper_cells(ch.paper_report(preview), preview)
    assert pv.loc[("T5 val", "learn-0.1"), "verdict"] == "preview at chance: no test"
    # a paper-scale model that guesses is "at chance" with one seed too, as in its run's table
    one = {"table4/sgd": experiment(history({"learn-0.1": {"val": 0.25, "train_running": 0.9,
                                                           "train": 0.9}}, seeds=[1]),
                                    "table4/sgd", preset="paper", epochs=1000, seeds=[1])}
    rep1 = ch.paper_report(one)
    assert rep1.set_index("pe").loc["learn-0.1", "verdict"] == "at chance"
    assert ch.paper_cells(rep1, one).loc[("T4 sgd val", "learn-0.1"), "verdict"] == "at chance"


def test_paper_cells_show_the_authors_at_epoch_200(cell_runs):
    from lstpe.analysis.authors_logs import authors_at

    cells = ch.paper_cells(ch.paper_report(cell_runs), cell_runs)
    logs = {"val": authors_at(200, "validation"), "train": authors_at(200, "train")}
    shown = 0
    for (table, pe), row in cells.iterrows():
        metric = table.split()[-1]
        logged = (table.startswith(("T1 ", "T2 ", "T4 adam")) and metric in logs
                  and pe in logs[metric].index)
        if not logged:
            assert row["authors @200"] == "-", (table, pe)
            continue
        a = logs[metric].loc[pe]
        assert row["authors @200"] == (f"{a['acc_mean']:.3f} ± {a['acc_sd']:.3f} "
                                       f"({int(a['n_seeds'])})"), (table, pe)
        shown += 1
    assert shown == 2 * (2 + 20) + 2  # T1 and T2, val and train; T4 Adam sigma 0.1, 0.2
    assert cells.loc[("T2 val", "learn-0.1"), "authors @200"].endswith("(14)")


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


def test_takeaways_leave_the_caveats_to_the_page(five_seed_run):
    exp = experiment(five_seed_run.history, "table1", seeds=range(5))
    s = ch.run_summary(ch.compare_splits(exp, 1), exp, exp.final("val"), with_caveats=True)
    assert "Caveats: table1 is a PREVIEW" in s
    short = ch.run_summary(ch.compare_splits(exp, 1), exp, exp.final("val"))
    assert short.startswith("This run (table1)") and "Caveats" not in short
    assert short == s[:s.index(" Caveats: ")]


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


def test_rising_sentence_names_rising_level_falling_and_chance_pes():
    text = ch.rising_sentence(_curves({"1d-fixed": (0.3, 0.002), "2d-fixed": (0.99, 0.0),
                                       "rope": (0.9, -0.001), "nope": (0.25, 0.0001)}))
    assert text.startswith("Seed means of validation accuracy as the authors evaluated it "
                           "(dropout on), epochs 151-200 against 101-150: ")
    assert ("still rising: 1d-fixed (+0.100, 0.700 at 200) (a longer run could move it); "
            "level within 0.02: 2d-fixed (0.990); falling: rope (-0.050, 0.700 at 200); "
            "at chance: nope.") in text
    two = ch.rising_sentence(_curves({"a": (0.3, 0.002), "b": (0.4, 0.002)}))
    assert "could move them" in two and "level" not in two
    mixed = pd.concat([_curves({"a": (0.3, 0.002)}),
                       _curves({"b": (0.9, 0.0)}, last=120).assign(model=lambda t: t.model + 5)])
    assert "each PE's last 50 epochs against the 50 before" in ch.rising_sentence(mixed)
    assert ch.rising_sentence(_curves({"a": (0.25, 0.0)})).endswith(": at chance: a.")
    assert "No late-gain reading: too short" in ch.rising_sentence(_curves({"a": (0.3, 0.01)},
                                                                           last=40))
    val = _curves({"a": (0.3, 0.002)}).assign(split="val")  # a history without val_dropout
    assert ch.rising_sentence(val).startswith("Seed means of validation accuracy (eval mode)")


def test_paper_gap_sentence_leaves_out_rows_at_chance():
    cmp = pd.DataFrame({"pe": ["learn-0.1", "learn-1", "learn-2"], "n": [3, 3, 3],
                        "mean": [0.70, 0.60, 0.30], "paper_mean": [0.836, 0.685, 0.577]})
    final = pd.DataFrame({"pe": ["learn-0.1", "learn-1", "learn-2", "nope"] * 3,
                          "accuracy": [0.95, 0.9, 0.25, 0.25] * 3})
    text = ch.paper_gap_sentence(cmp, final, "cosine")
    # learn-2 guesses (0.25 on 3 x 108 puzzles): out; -0.136 and -0.085 remain. nope guesses
    # too but has no row here: not named
    assert ("over the 2 rows above chance: -0.136 to -0.085 (mean -0.111), below the paper in "
            "every row.") in text
    assert "3 seed(s) per row" in text and text.endswith("At chance, not compared: learn-2.")
    mixed = ch.paper_gap_sentence(cmp.assign(mean=[0.9, 0.685, 0.3]), final, "cosine")
    assert "+0.000 to +0.064 (mean +0.032), above in 1; equal in 1." in mixed
    up = ch.paper_gap_sentence(cmp.assign(mean=0.9, n=5), final, "cosine")
    assert "above the paper in every row." in up and "seed(s)" not in up
    assert "With 4-5 seed(s) per row this describes" in ch.paper_gap_sentence(
        cmp.assign(n=[5, 4, 5]), final, "cosine")
    one = ch.paper_gap_sentence(cmp.iloc[:1], final, "cosine")
    assert "over the 1 row above chance: -0.136, below the paper." in one
    assert ch.paper_gap_sentence(cmp, final.assign(accuracy=0.25), "cosine").startswith(
        "No row above chance")
    assert "over the 3 rows" in ch.paper_gap_sentence(cmp, final.iloc[:0], "cosine")
