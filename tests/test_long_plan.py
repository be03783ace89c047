"""The long plan (issue 67): its order, reasons and costs, the CPU's order, the resume budget."""

from __future__ import annotations

import subprocess
import time

import pandas as pd
import torch

from lstpe.campaign import long_plan as lp
from lstpe.campaign import resume as rs
from lstpe.campaign import scheduler as cr
from lstpe.campaign import status as cs
from lstpe.experiments import long_units as lu
from lstpe.experiments.registry import REGISTRY
from lstpe.references.paper_tables import load_paper_tables
from lstpe.store import model as mf
from lstpe.store import results as res

SEEDS = (2235, 6312, 6068, 9742, 8880)


def legs(item: int) -> list[lu.LongChunk]:
    return [c for c in lu.LONG_PLAN if c.item == item]


def test_the_long_plan_runs_in_the_issues_order_with_its_costs():
    order = list(dict.fromkeys(c.item for c in lu.LONG_PLAN))
    assert order == [4, 5, 6, 10, 13, 14, 15, 16, 17]
    items = [c.item for c in lu.LONG_PLAN]
    assert items == sorted(items, key=order.index)  # each item's legs together
    # the legs begun before this plan keep their names, units and targets
    mech = ["table2/learn-0.1/2235", "table2/learn-0.2/2235", "table2/learn-2/2235"]
    assert [(c.name, c.target, [u.key for u in c.units]) for c in lu.LONG_PLAN[:3]] == [
        ("mechanism", 1000, mech), ("weight-decay", 1000,
                                    ["tables56/learn-0.2/2235", "tables56/learn-2/2235"]),
        ("mechanism", 4000, mech)]
    six = ["1d-fixed", "random", "relative", "rope", "nope", "c-nope"]
    for seed in (2235, 6312):
        assert [u.key for u in lu.find_chunk(f"table1-{seed}").units] == \
            [f"table1/{p}/{seed}" for p in six]
    # Table 1 at 1000 holds all 8 PEs at seeds 1-3 (learn-0.2 at seed 1: the mechanism's)
    t1 = {(u.pe, u.seed) for c in legs(10) for u in c.units}
    assert t1 == {(p, s) for p in [*six, "2d-fixed", "learn-0.2"] for s in SEEDS[:3]} - \
        {("learn-0.2", 2235)}
    # new model-epochs: Table 1 11,000 (as the issue counts), Table 4 20,000 (its 22,000 less
    # Adam at 0.2 for seeds 2-3, which Table 1 trains), Table 6 23,000, Table 5 14,000
    new = {i: sum(lp.leg_cost(c) for c in legs(i) if c.name not in
                  ("table1-2235", "table1-6312")) for i in (6, 10, 13, 14, 15, 16, 17)}
    assert new == {6: 9000, 10: 11000, 13: 20000, 14: 23000, 15: 14000, 16: 16000,
                   17: 17 * 3000}
    for i in (10, 13, 14, 15):  # seeds are the outer loop: seed 1 of every cell first
        seeds = [SEEDS.index(c.units[0].seed) for c in legs(i)]
        assert seeds == sorted(seeds) and set(seeds) == {0, 1, 2}
    assert {s for c in legs(16) for u in c.units for s in [u.seed]} == {9742, 8880}
    # the 4000-epoch legs continue the seed-1 legs of Tables 4-6 under the same names
    assert [c.name for c in legs(17)] == [c.name for i in (13, 14, 15) for c in legs(i)
                                          if c.units[0].seed == 2235]
    assert all(lp.start_epoch(c) == 1000 and lu.extended(lu.find_chunk(c.name, 1000))
               for c in legs(17))
    assert not lu.extended(lu.find_chunk("weight-decay")) and \
        lu.extended(lu.find_chunk("mechanism"))


def test_no_model_is_trained_twice_and_a_shared_model_is_the_same_recipe():
    seen: dict[tuple, str] = {}
    for c in lu.LONG_PLAN:
        for u in c.units:
            key = (REGISTRY[u.run].optimizer, u.pe, u.seed)
            assert seen.setdefault(key, c.name) == c.name, (key, c.name)
    # what the plan leaves out as the same model is the same configuration
    for a, b in [(("table4/adam", "learn-0.2", 6312), ("table1", "learn-0.2", 6312)),
                 (("table4/adam", "learn-0.1", 2235), ("table2", "learn-0.1", 2235)),
                 (("table1", "learn-0.2", 2235), ("table2", "learn-0.2", 2235)),
                 (("tables56", "learn-2", 2235), ("tables56", "learn-2", 2235))]:
        assert not res.config_diff(lu.LongUnit(*a).config().to_dict(),
                                   lu.LongUnit(*b).config().to_dict(), res.EXECUTION_KEYS)
    assert res.config_diff(lu.LongUnit("table4/sgd", "learn-0.1", 2235).config().to_dict(),
                           lu.LongUnit("table2", "learn-0.1", 2235).config().to_dict(),
                           res.EXECUTION_KEYS)


def test_table5s_claim_deciding_sigmas_are_where_the_papers_accuracy_falls():
    t = load_paper_tables()
    t5 = t[(t["table"] == "5") & (t["metric"] == "val_acc")].sort_values("sigma")
    high = t5.loc[t5["mean"] >= 0.98, "sigma"]
    assert high.max() == 1.6 and list(high) == sorted(high)  # 0.98 or more up to 1.6 only
    assert tuple(t5.loc[t5["sigma"] >= high.max(), "sigma"]) == lu.TABLE5_SIGMAS
    assert {u.pe for c in legs(15) for u in c.units} == \
        {f"learn-{s:g}" for s in lu.TABLE5_SIGMAS}


def test_campaign_plan_prints_the_long_plan_in_order_with_reasons_and_costs(tmp_path):
    text = cs.plan_text(tmp_path)
    at = [text.index(f"\nitem {i}: ") for i in (4, 5, 6, 10, 13, 14, 15, 16, 17)]
    assert at == sorted(at)
    assert "cost 20,000 model-epochs, 20,000 left" in text  # Table 4, nothing stored
    assert "cost 9,000 model-epochs, 9,000 left" in text  # the mechanism, from 1000
    assert "the only optimizer claim no unit speaks to" in text
    assert "a CPU (campaign run): table4-sgd-learn-0.01-2235" in text


# --------------------------------------------------------------------------- the CPU's order


def checkpoint(results, name: str, epoch: int, size: int = 0):
    path = rs.resume_dir(name, results) / "chunk0.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"epoch": epoch, "pad": torch.zeros(size // 4, dtype=torch.float32)}, path)
    return path


def test_the_cpu_resumes_the_paused_pair_then_sgd_one_at_a_time_when_it_fits(tmp_path):
    log: list[str] = []
    checkpoint(tmp_path, "weight-decay", 810)
    cpu = lp.cpu_first(tmp_path)
    assert [c.name for c in cpu] == ["weight-decay", *lp.CPU_FIRST]
    # issue 79's order, one model per leg: SGD at 0.01, then 0.1 (its Adam twin at seed 1, the
    # mechanism's, is past 1000); Table 1's 2d-fixed at seeds 1-2 and learn-0.2 at seed 2;
    # SGD's other sigmas; Adam at 0.01 and 0.05
    assert [(u.run, u.pe, u.seed) for n in lp.CPU_FIRST for u in lu.find_chunk(n).units] == [
        ("table4/sgd", "learn-0.01", 2235), ("table4/sgd", "learn-0.1", 2235),
        ("table1", "2d-fixed", 2235), ("table1", "2d-fixed", 6312),
        ("table1", "learn-0.2", 6312),
        ("table4/sgd", "learn-0.05", 2235), ("table4/sgd", "learn-0.2", 2235),
        ("table4/adam", "learn-0.01", 2235), ("table4/adam", "learn-0.05", 2235)]
    assert all(lu.find_chunk(n).target == 1000 for n in lp.CPU_FIRST)

    def predict(c, left):  # 1 s per model-epoch, as campaign_run.estimate_s prices it
        return cr.estimate_s(len(c.units), 1.0, lp.epochs_left(c, tmp_path))

    def pick(seconds, skip=None, units_left=True):
        return lp.next_leg(tmp_path, False, time.monotonic() + seconds,
                           set() if skip is None else skip, units_left, predict, log.append)

    # 190 epochs x 2 models x 1 s + 120 s margin = 500 s
    assert pick(600).name == "weight-decay"
    skip: set[str] = set()
    assert pick(450, skip) is None  # neither it (500 s) nor an SGD leg (1120 s) finishes
    assert skip == {"weight-decay", *lp.CPU_FIRST[:2]}  # the others wait for the units
    assert "weight-decay to 1000 needs about 8 min" in log[0]
    assert pick(1200, {"weight-decay"}).name == lp.CPU_FIRST[0]
    # a unit with segments and no checkpoint (as a past lease left one) is passed over
    unit = lu.find_chunk(lp.CPU_FIRST[0]).units[0]
    stage = tmp_path / "stage"
    res.save_run(stage, pd.DataFrame({"epoch": [0, 200]}),
                 {"config": {}, "long": {"unit": unit.key, "from_epoch": 0, "to_epoch": 200,
                                         "previous": None}},
                 {"pe_epochs": [200], "pe": torch.zeros(1, 1, 16, 4)})
    mf.append_segment(unit.path(tmp_path), stage, unit.key)
    assert pick(1200, {"weight-decay"}).name == lp.CPU_FIRST[1]
    # a new leg whose state would take the tree past 100 MB waits
    checkpoint(tmp_path, "mechanism", 2817, size=95_000_000)
    log.clear()
    assert pick(1200, {"weight-decay", "mechanism"}) is None
    assert "waits: its state (6 MB) would take results/long/_resume past 100 MB" in log[0]


def test_table1_and_sgds_other_sigmas_wait_until_no_200_epoch_unit_is_left(tmp_path):
    """With SGD at 0.01 and 0.1 standing at 1000, a CPU trains the 200-epoch units left before
    Table 1's 2d-fixed and learn-0.2, SGD at 0.05 and 0.2 and Adam at 0.01 and 0.05, and takes
    those, in that order, once none is left."""
    for n in lp.CPU_FIRST[:2]:  # SGD at 0.01 and 0.1 reached 1000 (their final state kept)
        checkpoint(tmp_path, n, 1000)
    def at_1000(units_left=False):  # (their legs to 4000 resume, and come first)
        return [c.units[0].pe for c in lp.cpu_first(tmp_path, units_left) if c.target == 1000]

    assert at_1000(units_left=True) == []
    assert at_1000() == ["2d-fixed", "2d-fixed", "learn-0.2", "learn-0.05", "learn-0.2",
                         "learn-0.01", "learn-0.05"]

    def pick(units_left):  # (the legs to 4000, 3000 epochs, do not finish in the run)
        return lp.next_leg(tmp_path, False, time.monotonic() + 10_000, set(), units_left,
                           lambda c, left: cr.estimate_s(1, 5.0, lp.epochs_left(c, tmp_path)),
                           lambda _: None)

    assert pick(True) is None  # the next 200-epoch unit
    assert pick(False).name == "table1-2d-fixed-2235"
    text = lp.long_plan_text(tmp_path)
    assert "then the 200-epoch units; then table1-2d-fixed-2235, table1-2d-fixed-6312, " \
           "table1-learn-0.2-6312, table4-sgd-learn-0.05-2235, table4-sgd-learn-0.2-2235, " \
           "table4-adam-learn-0.01-2235, table4-adam-learn-0.05-2235, and the legs" in text


def test_a_fresh_sgd_leg_longer_than_a_run_trains_in_two_runs_and_pauses_once(tmp_path):
    """A 1000-epoch SGD model (1120 s here) starts when at least half of it fits, pausing once
    at the deadline; a leg that resumes from its checkpoint must finish where it resumes."""
    log: list[str] = []
    first = lu.find_chunk(lp.CPU_FIRST[0])

    def predict(c, left):  # 1 s per model-epoch, as campaign_run.estimate_s prices it
        return cr.estimate_s(len(c.units), 1.0, lp.epochs_left(c, tmp_path))

    def pick(seconds):
        return lp.next_leg(tmp_path, False, time.monotonic() + seconds, set(), True, predict,
                           log.append)

    assert predict(first, 0) == 1120
    assert pick(500) is None  # less than half fits: no leg, the 200-epoch units go on
    assert "not started" in log[0]
    log.clear()
    assert pick(600).name == first.name  # more than half: it starts, and says it pauses once
    assert "trains in two" in log[0] and "resumes it first" in log[0]
    checkpoint(tmp_path, first.name, 540)  # the pause: it resumes first, and must finish
    assert [c.name for c in lp.cpu_first(tmp_path)][0] == first.name
    log.clear()
    assert pick(700).name == first.name  # 460 epochs + 120 s = 580 s: it fits
    log.clear()
    assert pick(500) is None  # it does not: no second split (nor half of the next SGD leg)
    assert f"{first.name} to 1000 needs about 10 min" in log[0] and "not started" in log[0]


def test_a_leg_priced_at_the_bound_is_logged_as_a_lower_bound_not_an_estimate(tmp_path):
    """An SGD leg not probed (half the fastest rate already outruns the time left) is "at
    least" its bound; its real run took about four times that on a CPU (135 min, not 52)."""
    first = lu.find_chunk(lp.CPU_FIRST[0])
    rates = {("adam", 1): 2.0}  # s per model-epoch already probed for another leg
    need = cr.leg_seconds(first, torch.device("cpu"), {}, rates, 60.0, tmp_path)
    assert isinstance(need, lp.AtLeast) and need == 0.5 * 2.0 * 1000
    assert rates == {("adam", 1): 2.0}  # nothing probed
    log: list[str] = []
    assert lp.next_leg(tmp_path, False, time.monotonic() + 60, {"weight-decay"}, True,
                       lambda c, left: need, log.append) is None
    assert f"{first.name} to 1000 needs at least 17 min, 1 min left: not started" in log[0]
    assert "about" not in log[0]


def test_a_finished_leg_keeps_its_state_only_when_the_plan_extends_it(tmp_path):
    log: list[str] = []
    wd = lu.find_chunk("weight-decay")
    checkpoint(tmp_path, "weight-decay", 1000)
    sgd = lu.find_chunk(lp.CPU_FIRST[0], 1000)
    checkpoint(tmp_path, sgd.name, 1000)
    assert not lp.retire(sgd, tmp_path, log.append)
    assert rs.resume_checkpoint(sgd, tmp_path).exists() and "stays" in log[-1]
    assert "weight-decay finished its last planned leg" in lp.budget_text(tmp_path)
    assert lp.retire(wd, tmp_path, log.append)
    assert not rs.resume_dir(wd, tmp_path).exists()
    assert "leaves the tree" in log[-1] and "weight-decay" in log[-1]
    assert "final state at 1000, kept for its leg to 4000" in lp.budget_text(tmp_path)
    assert lp.resume_problems(tmp_path) == []


def test_status_names_resume_state_past_its_budget(tmp_path):
    checkpoint(tmp_path, "mechanism", 2817, size=101_000_000)
    problems = lp.resume_problems(tmp_path)
    assert len(problems) == 1 and "more than the 100 MB budget" in problems[0]
    assert "101.0 MB of the 100 MB budget" in lp.budget_text(tmp_path)


def git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_at_most_one_checkpoint_per_1000_epochs_of_a_chunk_is_committed(tmp_path):
    results = tmp_path / "results"
    path = checkpoint(results, "mechanism", 2817)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    assert lp.resume_problems(results) == []  # the committed one
    checkpoint(results, "mechanism", 2950)  # the same span as 2817: not committed again
    (problem,) = lp.resume_problems(results)
    assert "moved from epoch 2817 (committed) to 2950" in problem and str(path) in problem
    checkpoint(results, "mechanism", 3005)  # the next span: one more may be committed
    assert lp.resume_problems(results) == []
