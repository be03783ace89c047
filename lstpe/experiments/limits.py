"""Values a reader gives ``get_run`` or ``lstpe``, refused before anything trains.

Each check names the value it refuses:

* a time budget that is not a positive, finite number of minutes: ``nan`` never pauses,
  ``-1`` sets a deadline in the past, ``0`` read as no limit (:func:`positive_minutes`, the
  ``argparse`` type of ``--minutes`` and the check of a value given in Python).
"""

from __future__ import annotations

import argparse
import math


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
