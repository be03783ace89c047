"""The claims (:mod:`lstpe.claims`) on synthetic units whose outcome is known by construction,
and on the stored units."""

from __future__ import annotations

import pandas as pd
import pytest

from lstpe import claims as C
from lstpe.claims import optimizers, sigma, table1, verdicts, weight_decay

SEEDS = (1, 2, 3, 4, 5)
FIXED = ("2d-fixed", "relative", "random", "rope", "1d-fixed", "nope", "c-nope")


def _final(acc: dict[str, float], spread: float = 0.004) -> pd.DataFrame:
    """Five seeds per PE at acc +- a small, distinct spread (no ties), epoch 200."""
    rows = []
    for pe, a in acc.items():
        for i, s in enumerate(SEEDS):
            rows.append({"pe": pe, "seed": s, "accuracy": a + spread * (i - 2) / 2,
                         "epoch": 200})
    return pd.DataFrame(rows)


def _x(final: pd.DataFrame, **kw) -> C.Inputs:
    return C.Inputs(final=final, **kw)


@pytest.mark.parametrize("outcomes, verdict", [
    (("supports", "supports"), "shown"), (("supports", "open"), "partly shown"),
    (("supports", "contradicts"), "partly shown"), (("open", "contradicts"), "contradicted"),
    (("open", "open"), "not shown"), ((), "not testable yet")])
def test_decide_weighs_support_against_contradiction(outcomes, verdict):
    tests = [verdicts.Test(str(i), o, "") for i, o in enumerate(outcomes)]
    assert verdicts.weigh(tests)[0] == verdict
    with pytest.raises(ValueError, match="'maybe'"):
        verdicts.Test("a", "maybe", "")


def test_table1_shown_when_learn02_tops_every_common_pe_and_equals_2d_fixed():
    f = _final({"learn-0.2": 0.95, **{p: 0.5 for p in FIXED if p != "2d-fixed"},
                "2d-fixed": 0.951})
    v = table1.judge(_x(f))
    assert v.verdict == "shown" and v.label == "shown at epoch 200"
    # 5+5 seeds, all of one above all of the other: the exact two-sided floor 2/252
    assert "exact p = 0.0079" in v.evidence  # 2/252 and "TOST" in v.evidence


def test_table1_a_difference_from_2d_fixed_beyond_the_margin_contradicts_the_paper():
    f = _final({"learn-0.2": 0.90, **{p: 0.5 for p in FIXED if p != "2d-fixed"},
                "2d-fixed": 0.99})
    v = table1.judge(_x(f))
    assert v.verdict == "partly shown"
    assert v.label == ("partly shown at epoch 200 (above 6 of 6 fixed PEs; contradicted: no "
                       "difference from 2d-fixed)")


def test_table1_reads_single_contrasts_with_holm_and_names_pes_still_rising():
    f = _final({"learn-0.2": 0.95, "relative": 0.95, "random": 0.5, "2d-fixed": 0.95})
    longs = pd.DataFrame([{"pe": "random", "seeds": 2, "epoch": 1000, "val_200": 0.5,
                           "val_last": 0.9, "train_200": 0.9, "train_last": 1.0}])
    v = table1.judge(_x(f, table1_long=longs))
    assert v.verdict == "partly shown" and "above 1 of 2" in v.label
    assert "Holm p = 0.016" in v.evidence  # 2/252 times the two contrasts
    assert "random still training at epoch 200: 0.500 → 0.900 at epoch 1000" in v.evidence


def test_sigma_tests_the_papers_contrasts_and_describes_the_curve():
    sig = {f"learn-{s:g}": a for s, a in ((0.1, .95), (0.2, .951), (0.5, .93), (1, .8),
                                          (1.5, .6), (2, .3))}
    v = sigma.judge(_x(_final(sig)))
    assert v.verdict == "shown"  # 0.2 > 2, 0.2 > 1, accuracy falls over sigma
    assert "learn-0.2 − learn-1 = +0.151" in v.evidence
    s = v.numbers["shape"]
    assert (s["plateau_to"], s["drop_from"], s["drop_to"]) == (0.5, 1.5, 2.0)
    # a low smallest sigma (Table 4's 0.01 under Adam) does not end the plateau before it starts
    low = sigma.shape(_final({"learn-0.01": 0.5, **sig}))
    assert (low["best_sigma"], low["plateau_to"]) == (0.2, 0.5)
    # a sigma with one unit is no point of the curve: its dip neither ends the plateau nor
    # makes the largest fall
    one = pd.concat([_final(sig), _final({"learn-0.3": 0.7}).iloc[:1]])
    assert sigma.shape(one) == s
    flat = {k: 0.9 for k in sig}
    assert sigma.judge(_x(_final(flat, spread=0.02))).verdict == "not shown"


def test_untested_claims_say_so():
    x = _x(_final({"learn-0.2": 0.9}))
    assert optimizers.judge(x).verdict == "not testable yet"
    adam = pd.DataFrame({"pe": ["learn-0.01"] * 3, "seed": [1, 2, 3],
                         "accuracy": [0.4, 0.45, 0.5]})
    v = optimizers.judge(_x(x.final, adam4=adam))
    assert v.verdict == "not testable yet" and "learn-0.01 0.450 (n = 3; paper 0.588)" \
        in v.evidence
    assert weight_decay.judge(x).verdict == "not testable yet"
    card = C.scorecard(_x(x.final, paper_scale=False))
    assert (card["verdict"] == "not testable yet").all() and len(card) == len(C.CLAIMS)
    one = C.judge(C.table1, _x(x.final, paper_scale=False))  # as a page asks on a preview
    assert one.verdict == "not testable yet" and "preview" in one.evidence


def test_scorecard_on_the_stored_units():
    """learn-0.2 against learn-2 is a difference any test finds at the stored n; the humans
    row compares learn-0.2 with every stored PE of Tables 1 and 2, each counted once."""
    from lstpe.chapters import claims
    from lstpe.experiments.runs import get_run

    runs = {n: get_run(n, "paper", require_stored=True) for n in ("table1", "table2")}
    cl = claims.claims_card(runs)
    card = cl.card
    assert len(card) == len(C.CLAIMS)
    by = card.set_index("id")
    # learn-0.2 - learn-2 is found at any stored n
    assert "learn-0.2 − learn-2 = +0.5" in by.loc["sigma", "evidence"]
    noise = cl.inputs.noise  # left out of the noise tests: exactly the models near chance
    near = noise.loc[noise["clean"] <= 0.25 + C.noise.ABOVE_CHANCE, "pe"]
    assert next(v for v in cl.verdicts if v.claim == "noise").numbers["left_out"] \
        == sorted(set(near))
    assert sum(C.verdict_counts(card).values()) == len(card)
    pes = set(runs["table1"].final("val")["pe"]) | set(runs["table2"].final("val")["pe"])
    assert sorted(cl.similarity["pe"]) == sorted(pes)  # both tables, no PE twice
    top = cl.similarity.dropna(subset=["spearman"])
    top = top.loc[top["spearman"].idxmax()]
    assert f"highest {top['pe']} ρ = {top['spearman']:.2f}" in by.loc["humans", "evidence"]
    # the humans claim tests chapter 9's measure: the same cells as chapter 9's table
    from lstpe.evidence import claim_tables as ct
    cells, _ = ct.human_evidence(cl.inputs.agreement)
    got = next(v for v in cl.verdicts if v.claim == "humans").numbers["cells"]
    pd.testing.assert_frame_equal(got, cells)
    md = claims.claims_markdown(card).splitlines()
    assert len(md) == 2 + len(card) and md[1] == "| --- | --- | --- | --- |"
    assert all(ln.endswith(f"({w}) |") for ln, w in zip(md[2:], card["where"], strict=True))
    short = claims.claims_markdown(card, evidence=False).splitlines()  # chapter 11 folds it
    assert short[1] == "| --- | --- | --- |" and len(short) == len(md)
    assert all(r.evidence not in ln for ln, r in zip(short[2:], card.itertuples(), strict=True))
    from lstpe.campaign import status as cs  # the campaign's table, not the page's
    assert cs.long_table()["hours_left"].notna().all()  # priced at the units' rate before a segment
    # the numbers chapter 11 and the intro glue in, read off the same verdicts
    rf, cf = claims.report_facts(cl), claims.counts_facts(card)
    rows = next(v for v in cl.verdicts if v.claim == "table1").numbers["rows"].set_index("b")
    assert rf["gt_side"] == ("below" if rows.loc["2d-fixed", "diff"] < 0 else "above")
    assert int(rf["n_common"]) == len(rows) - 1 and int(rf["n_above"]) <= int(rf["n_common"])
    sf = claims.stored_sigmas(runs["table2"])
    assert sf["n_sigmas"] == str(len(sf["sigmas"].split(", ")))
    assert sf["holder"] == "the campaign stores"
    per = runs["table2"].final("val_dropout").query("pe_name == 'learn'").groupby("sigma").size()
    assert sf["seeds"].startswith(f"{per.min()} ") and (sf["rest"] == "") == (len(per) >= 20)
    from lstpe.references.authors_logs import authors_range_check  # every unit, checked once
    checked = authors_range_check(runs["table2"].final("val_dropout"))
    assert f"the {len(checked)} models" in claims.rank_facts(runs["table2"])["range"]
    counts = C.verdict_counts(card)
    assert cf["parts"] == str(len(card)) and cf["contradicted"] == str(counts["contradicted"])
    assert cf["is_are"] == ("is" if counts["shown"] == 1 else "are")


def test_report_figures_draw_every_stored_seed_readably():
    import matplotlib

    matplotlib.use("Agg")
    from lstpe.campaign import long_progress as lp
    from lstpe.campaign import status as cs
    from lstpe.experiments import long_units as lu
    from lstpe.experiments.runs import get_run
    from lstpe.figures import report_plots
    from lstpe.references import authors_logs, paper_tables
    from lstpe.rendering import style

    style.apply()
    final = get_run("table2", "paper", require_stored=True).final("val_dropout")
    paper = paper_tables.load_paper_tables().query("table == '2' and metric == 'val_acc'")
    fig = report_plots.plot_sigma_sweep(final, authors_logs.authors_at(200), paper)
    seeds = next(ln for ln in fig.axes[0].lines if ln.get_label().endswith("each seed"))
    assert len(seeds.get_xdata()) == final["pe"].str.startswith("learn-").sum()
    assert style.small_text(fig) == [] and style.markers_at_edge(fig) == []
    table = cs.status(verify=False)
    fig = report_plots.plot_progress(cs.progress(table), lp.long_status())
    bars = [t.get_text() for t in fig.axes[0].texts]
    assert len(bars) == sum(k.isdigit() for k in cs.progress(table).index) + \
        len({c.item for c in lu.LONG_PLAN})
    assert not any("item" in t.get_text() for t in fig.axes[0].get_yticklabels())
    assert style.small_text(fig) == []
