"""Values refused before anything trains, each named (issue 80, cases 20 and 23): a time
budget that is not a positive, finite number of minutes, and a learnable PE's sigma whose
float32 initialisation overflows. Through ``lstpe``'s main function and ``get_run``.
"""

from __future__ import annotations

import pytest
import torch

from lstpe import cli
from lstpe.experiments import limits, runs


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


@pytest.mark.parametrize("asked", [{"sigmas": [1e39]}, {"sigmas": [0.2, float("inf")]},
                                   {"pes": ["2d-fixed", "learn-1e39"]}])
def test_a_sigma_whose_float32_init_overflows_is_refused(asked, tmp_path, monkeypatch):
    """Issue 80, case 20: 1e39 passed the finite check; N(0, 1e39) in float32 is inf."""
    monkeypatch.setattr(runs, "_train", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(ValueError, match=r"sigma=(1e\+39|inf)"):
        runs.get_run("table2", "preview", results_dir=tmp_path, **asked)
    assert not torch.isfinite(torch.tensor([3.0], dtype=torch.float32) * 1e39).all()


def test_sigmas_up_to_the_bound_are_kept_and_the_cli_refuses_above(tmp_path, capsys):
    limits.check_sigmas([0.01, 2.0, limits.INIT_SIGMA_MAX], ["learn-0.2", "2d-fixed", "rope"])
    code, err = _main(["sweep", "--sigmas", "0.2", "1e39", "--out", str(tmp_path / "sweep")],
                      capsys)
    assert code == 2 and "sigma=1e+39" in err and "learn-1e+39" in err
    code, err = _main(["train", "--pe", "learn-1e30", "--out", str(tmp_path / "train")], capsys)
    assert code == 2 and "sigma=1e+30" in err
    assert not (tmp_path / "sweep").exists() and not (tmp_path / "train").exists()
