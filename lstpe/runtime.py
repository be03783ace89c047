"""Where the package runs: the device, the repository root and the results folder.

The bottom of the package: every other module may import from here, this one from none.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

PAPER_SEEDS: tuple[int, ...] = (
    2235, 6312, 6068, 9742, 8880, 2197, 669, 6256, 3309, 2541, 8643, 7785, 195, 6914, 29,
)
"""The 15 seeds of the paper (the authors' code), for the LST and the brain models alike."""


def cpu_flags(names: tuple[str, ...] | list[str],
              cpuinfo: str | Path = "/proc/cpuinfo") -> list[str]:
    """Which of ``names`` the CPU's flags include (the first ``flags`` line of
    ``/proc/cpuinfo``), in the order of ``names``; an empty list where that file does not
    exist (off Linux)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.split(":")[0].strip() == "flags"), "")
    have = set(line.partition(":")[2].split())
    return [f for f in names if f in have]


BF16_FLAGS: tuple[str, ...] = ("avx512_bf16", "amx_bf16")
"""CPU flags of native bf16 arithmetic; without them bf16 matmuls are emulated (measured about
50x slower than fp32 on this project's AVX2 machines)."""


def has_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether this CPU has native bf16 instructions (:data:`BF16_FLAGS`)."""
    return bool(cpu_flags(BF16_FLAGS, cpuinfo))


def pick_device(device: str = "auto") -> torch.device:
    """``"auto"`` picks cuda > mps > cpu; ``cpu``, ``cuda``, ``cuda:N`` and ``mps`` are checked.

    Raises:
        ValueError: an unknown device string, a device type other than cpu / cuda / mps, or a
            device asked for that this machine does not have (naming it).
    """
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"unknown device {device!r}; use 'auto', 'cpu', 'cuda' or 'mps'") from e
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device {device!r} is not supported; use 'auto', 'cpu', 'cuda' or "
                         "'mps'")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} was asked for but CUDA is not available here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r} was asked for but this machine has "
                             f"{torch.cuda.device_count()} CUDA device(s)")
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(f"device {device!r} was asked for but MPS (Apple GPU) is not "
                             "available here")
    return dev


def repo_root(start: Path | None = None) -> Path | None:
    """The repository root (the folder holding ``_config.yml`` and ``lstpe/``), if any."""
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "_config.yml").exists() and (p / "lstpe").is_dir():
            return p
    return None


def default_results_dir() -> Path:
    """``$LSTPE_RESULTS`` if set, else ``<repo>/results``, else ``./results``."""
    env = os.environ.get("LSTPE_RESULTS")
    if env:
        return Path(env)
    root = repo_root()
    return (root / "results") if root else Path("results")
