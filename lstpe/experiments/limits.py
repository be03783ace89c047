"""Values a reader gives ``get_run`` or ``lstpe``, refused before anything trains.

Each check names the value it refuses:

* a learnable PE's sigma whose float32 initialisation would overflow: the finite check of
  :func:`lstpe.nn.encodings.parse_pe` lets ``sigma=1e39`` through, and ``N(0, 1e39)`` in
  float32 is ``inf`` (:func:`check_sigmas`, :data:`INIT_SIGMA_MAX`);
* a time budget that is not a positive, finite number of minutes: ``nan`` never pauses,
  ``-1`` sets a deadline in the past, ``0`` read as no limit (:func:`positive_minutes`, the
  ``argparse`` type of ``--minutes`` and the check of a value given in Python).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable

import torch

from lstpe.nn.encodings import parse_pe

INIT_SIGMA_MAX: float = math.sqrt(float(torch.finfo(torch.float32).max)) / 10
"""The largest learnable-PE sigma accepted (about 1.8e18): a float32 draw of 10 standard
deviations and its square are finite (the layer norm and the attention scores square the
PE). The paper's sigmas go to 2.0; any above this is an overflow, not an experiment."""


def check_sigmas(sigmas: Iterable[float] | None = None, pes: Iterable[str] | None = None
                 ) -> None:
    """Refuse a sigma (given, or in a ``learn-<sigma>`` PE name) above :data:`INIT_SIGMA_MAX`.

    Raises:
        ValueError: naming the sigma (and the PE it came from).
    """
    named = [(float(s), "") for s in sigmas or []]
    for pe in pes or []:
        spec = parse_pe(pe)
        if spec.name == "learn" and spec.sigma is not None:
            named.append((spec.sigma, f" (PE {pe!r})"))
    for value, where in named:
        if not value <= INIT_SIGMA_MAX:  # nan and inf too
            raise ValueError(f"a learnable PE's sigma must be at most {INIT_SIGMA_MAX:.3g} (above "
                             "it a float32 draw of N(0, sigma^2), or its square, overflows), "
                             f"got sigma={value!r}{where}")


class MinutesError(argparse.ArgumentTypeError, ValueError):
    """A time budget that is not a positive, finite number of minutes: ``argparse`` shows its
    message under the option's name, and ``lstpe``'s main function as an error (exit 2)."""


def positive_minutes(value: str | float) -> float:
    """A time budget in minutes (the ``argparse`` type of ``--minutes``, and the check of a
    value given in Python): a positive, finite number.

    Raises:
        MinutesError: naming ``--minutes`` and the value.
    """
    try:
        minutes = float(value)
    except (TypeError, ValueError):
        minutes = math.nan
    if not math.isfinite(minutes) or minutes <= 0:
        raise MinutesError(f"a time budget (--minutes) must be a positive, finite number of "
                           f"minutes, got {value!r}")
    return minutes
