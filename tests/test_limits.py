"""Values refused before anything trains, each named (issue 80, case 23): a time budget that
is not a positive, finite number of minutes. Through ``lstpe``'s main function.
"""

from __future__ import annotations

import pytest

from lstpe import cli
from lstpe.experiments import limits


def _main(argv, capsys) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "-1", "0", "inf", "-inf", "soon"])
def test_a_time_budget_that_is_not_a_positive_number_is_refused(value, tmp_path, monkeypatch,
                                                                capsys):
    monkeypatch.setenv("LSTPE_RESULTS", str(tmp_path / "results"))
    code, err = _main(["reproduce", "run", "--parts", "table2", f"--minutes={value}"], capsys)
    assert code == 2 and "--minutes" in err and repr(value) in err
    with pytest.raises(ValueError, match=r"--minutes\) must be a positive, finite number"):
        limits.positive_minutes(float(value) if value != "soon" else value)
    assert not (tmp_path / "results").exists()


def test_a_time_budget_that_is_a_positive_number_is_kept():
    assert limits.positive_minutes("9") == 9.0 and limits.positive_minutes(0.5) == 0.5
    assert limits.positive_minutes(1e-3) == 1e-3
