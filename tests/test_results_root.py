"""One results-folder resolver (:func:`lstpe.store.results.results_root`): every function
that takes an optional ``results_dir`` means the same folder by it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lstpe.campaign import precision as pr
from lstpe.experiments import long_units as lu
from lstpe.experiments import units as un
from lstpe.store import results as res


@pytest.mark.parametrize("given", [None, ""], ids=["none", "empty"])
def test_an_absent_results_dir_is_the_default_everywhere(given: str | None, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """None and "" both mean the default folder (``$LSTPE_RESULTS`` here) in every module;
    before the resolver, ``""`` meant the current folder in some (``long/``,
    ``precision_pair/``) and the default in others."""
    env = tmp_path / "env"
    monkeypatch.setenv("LSTPE_RESULTS", str(env))
    monkeypatch.chdir(tmp_path)
    assert res.results_source(given) == (env, "LSTPE_RESULTS")
    assert res.results_root(given) == env
    assert lu.long_root(given) == env / "long"
    assert pr.pair_dir(given, tag="cpu-x") == env / "precision_pair" / "cpu-x"
    unit = un.Unit("table2", "learn-0.2", 2235)
    assert unit.path(given) == env / "paper" / "table2" / "learn-0.2" / "2235"


def test_a_given_results_dir_is_used_as_it_is(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LSTPE_RESULTS", str(tmp_path / "env"))
    mine = tmp_path / "mine"
    assert res.results_source(str(mine)) == (mine, "results_dir")
    assert res.results_root(mine) == mine
    assert lu.long_root(str(mine)) == mine / "long"
    assert un.Unit("table1", "2d-fixed", 1).path(mine) == mine / "paper" / "table1/2d-fixed/1"
