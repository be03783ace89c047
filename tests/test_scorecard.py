"""The claims scorecard (:mod:`lstpe.analysis.scorecard`) on synthetic units whose outcome is
known by construction, and on the stored units."""

from __future__ import annotations

import pandas as pd
import pytest

from lstpe.analysis import scorecard as sc

SEEDS = (1, 2, 3, 4, 5)
FIXED = ("2d-fixed", "relative", "random", "rope", "1d-fixed", "nope", "c-nope")


def _final(acc: dict[str, float], spread: float = 0.004) -> pd.DataFrame:
    """Five seeds per PE at acc +- a small, distinct spread (no ties)."""
    rows = []
    for pe, a in acc.items():
        for i, s in enumerate(SEEDS):
            rows.append({"pe": pe, "seed": s, "accuracy": a + spread * (i - 2) / 2})
    return pd.DataFrame(rows)


def test_fixed_shown_when_learn02_tops_every_common_pe():
    f = _final({"learn-0.2": 0.95, **{p: 0.5 for p in FIXED if p != "2d-fixed"},
                "2d-fixed": 0.99})
    row = sc.score_fixed(f)
    assert row["verdict"] == "shown"
    assert "higher than 6 of 6" in row["evidence"]
    # 5+5 seeds, all of one above all of the other: the exact two-sided floor 2/252
    assert f"exact p <= {2 / 252:.3f}" in row["evidence"]


def test_fixed_partly_shown_when_one_pe_ties():
    f = _final({"learn-0.2": 0.95, "relative": 0.95, "random": 0.5, "2d-fixed": 0.99})
    row = sc.score_fixed(f)
    assert row["verdict"] == "partly shown" and "not shown against relative" in row["evidence"]


def test_sigma_shown_partly_and_not():
    sig = {f"learn-{s:g}": a for s, a in ((0.1, .95), (0.2, .95), (0.5, .9), (1, .8),
                                          (1.5, .6), (2, .4))}
    assert sc.score_sigma(_final(sig))["verdict"] == "shown"
    flat = {k: 0.9 for k in sig}
    assert sc.score_sigma(_final(flat, spread=0.02))["verdict"] == "not shown"


def _structure(p_dpe: float, p_final: float) -> pd.DataFrame:
    rows = [{"block": 0, "sigma": s, "seed": k, "epoch": 200, "score_dpe": 0.4,
             "p_dpe": p_dpe, "score_final": 0.1, "p_final": p_final, "init_share": 0.95}
            for s in (0.1, 0.2, 1.0) for k in SEEDS]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("p_dpe, p_final, verdict", [(0.001, 0.001, "shown"),
                                                     (0.001, 0.5, "partly shown"),
                                                     (0.5, 0.5, "not shown")])
def test_mechanism_reads_the_learned_part_and_the_final_pe(p_dpe, p_final, verdict):
    row = sc.score_mechanism(_structure(p_dpe, p_final), long_epoch=400)
    assert row["verdict"] == verdict
    assert "long units at epoch 400 of 4000" in row["evidence"]


def test_untested_claims_say_so():
    assert sc.score_optimizers({"table4/sgd": 0})["verdict"] == "not testable yet"
    # Adam's side of Table 4 alone tests no contrast of the claim: counted, not scored
    adam = sc.score_optimizers({"table4/adam": 3, "table4/sgd": 0, "tables56": 0})
    assert adam["verdict"] == "not testable yet" and "Adam side: 3 units" in adam["evidence"]
    assert sc.score_optimizers({"table4/adam": 3, "table4/sgd": 2})["verdict"] == "not shown"
    assert sc.score_brain(0)["verdict"] == "not testable yet"
    sim = pd.DataFrame({"pe": ["learn-0.2", "learn-1"], "spearman": [0.5, 0.2],
                        "spearman_p": [0.001, 0.04]})
    assert sc.score_humans(sim)["verdict"] == "shown"
    sim.loc[1, "spearman"] = 0.6
    assert sc.score_humans(sim)["verdict"] == "partly shown"


def test_scorecard_on_the_stored_units():
    """learn-0.2 against learn-2 is a difference any test finds at the stored n; the humans
    row compares learn-0.2 with every stored PE of Tables 1 and 2, each counted once."""
    from lstpe.chapters import claims
    from lstpe.experiments.runs import get_run

    runs = {n: get_run(n, "paper", require_stored=True) for n in ("table1", "table2")}
    cl = claims.claims_card(runs)
    card = cl.card
    assert len(card) == len(sc.CLAIM_LINES)
    assert card.loc[1, "verdict"] == "shown"
    assert sum(sc.verdict_counts(card).values()) == len(card)
    pes = set(runs["table1"].final("val")["pe"]) | set(runs["table2"].final("val")["pe"])
    assert sorted(cl.similarity["pe"]) == sorted(pes)  # both tables, no PE twice
    top = cl.similarity.loc[cl.similarity["spearman"].idxmax()]
    assert f"highest: {top['pe']} {top['spearman']:.2f}" in card.loc[4, "evidence"]
    md = claims.claims_markdown(card).splitlines()
    assert len(md) == 2 + len(card) and md[1] == "| --- | --- | --- | --- |"
    assert all(ln.endswith(f"({w}) |") for ln, w in zip(md[2:], card["where"], strict=True))
    assert cl.long["hours_left"].notna().all()  # priced at the units' rate before a segment


def test_report_figures_draw_every_stored_seed_readably():
    import matplotlib

    matplotlib.use("Agg")
    from lstpe.analysis import authors_logs, paper_compare, report_plots, style
    from lstpe.experiments import campaign_status as cs
    from lstpe.experiments import long_units as lu
    from lstpe.experiments.runs import get_run

    style.apply()
    final = get_run("table2", "paper", require_stored=True).final("val_dropout")
    paper = paper_compare.load_paper_tables().query("table == '2' and metric == 'val_acc'")
    fig = report_plots.plot_sigma_sweep(final, authors_logs.authors_at(200), paper)
    seeds = next(ln for ln in fig.axes[0].lines if ln.get_label().endswith("each seed"))
    assert len(seeds.get_xdata()) == final["pe"].str.startswith("learn-").sum()
    assert style.small_text(fig) == []
    table = cs.status(verify=False)
    fig = report_plots.plot_progress(cs.progress(table), lu.long_status())
    bars = [t.get_text() for t in fig.axes[0].texts]
    assert len(bars) == sum(k.isdigit() for k in cs.progress(table).index) + len(lu.LONG_PLAN)
    assert style.small_text(fig) == []
