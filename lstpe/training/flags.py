"""The command-line flags of a training run, declared once.

``lstpe train`` / ``lstpe sweep`` (:mod:`lstpe.cli`) and ``lstpe reproduce run|plan``
(:mod:`lstpe.experiments.reproduce`) add the flags they share from :data:`TRAINING_FLAGS`.
Each sets a :class:`~lstpe.training.config.TrainConfig` field (``--d-model`` and
``--n-layers`` its model's), and the config checks the value: no entry point validates a
value itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

__all__ = ["TRAINING_FLAGS", "add_training_flags"]

TRAINING_FLAGS: dict[str, dict[str, Any]] = {
    "seeds": {"type": int, "nargs": "+", "help": "model seeds (default: the preset's or run's)"},
    "epochs": {"type": int, "help": "epochs (default: the preset's or run's)"},
    "n-train": {"type": int, "help": "stratified subset of the training puzzles"},
    "d-model": {"type": int, "help": "model width (default: the preset's)"},
    "n-layers": {"type": int, "help": "number of blocks (default: the preset's)"},
    "device": {"help": "auto (cuda > mps > cpu), cpu, cuda, ..."},
    "amp": {"action": "store_true",
            "help": "mixed precision where the device has it (bf16 on CUDA >= 8.0 and on CPUs "
                    "with bf16 instructions, fp16 with loss scaling on older GPUs, else fp32)"},
    "max-models": {"type": int, "help": "at most this many models per chunk (memory)"},
    "checkpoint-every": {"type": int, "help": "epochs between checkpoints (0 = none)"},
    "no-progress": {"action": "store_true", "help": "no progress bars"},
}
"""``--<name>``: its ``argparse`` keywords."""


def add_training_flags(parser: argparse.ArgumentParser,
                       names: Sequence[str] = tuple(TRAINING_FLAGS)) -> None:
    """Add ``--<name>`` for each of ``names`` (default: all of :data:`TRAINING_FLAGS`).

    Raises:
        KeyError: a name that is not a training flag.
    """
    for name in names:
        parser.add_argument(f"--{name}", **TRAINING_FLAGS[name])
