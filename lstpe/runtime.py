"""Where the package runs: the device, the repository root, the results folder and the cache.

The bottom of the package: every other module may import from here, this one from none.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

PAPER_SEEDS: tuple[int, ...] = (
    2235, 6312, 6068, 9742, 8880, 2197, 669, 6256, 3309, 2541, 8643, 7785, 195, 6914, 29,
)
"""The 15 seeds of the paper (the authors' code), for the LST and the brain models alike."""


PRECISION_FLAGS: tuple[str, ...] = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile",
                                    "amx_bf16")
"""CPU flags that say which precisions have native instructions: what manifests, the campaign
and the benchmark report of a machine."""


def cpu_flags(names: tuple[str, ...] | list[str] = PRECISION_FLAGS,
              cpuinfo: str | Path = "/proc/cpuinfo") -> list[str]:
    """Which of ``names`` (default :data:`PRECISION_FLAGS`) the CPU's flags include (the first
    ``flags`` line of ``/proc/cpuinfo``), in the order of ``names``; an empty list where that
    file does not exist (off Linux)."""
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


CLONE_DIRS: tuple[str, ...] = ("/content/lstpe", "~/lstpe")
"""Where a chapter's install cell clones the repository when ``lstpe`` is missing (Colab's
working folder first, then the home folder); :func:`find_results` looks for ``results/``
there."""


def _package_root() -> Path | None:
    """The repository holding the imported ``lstpe`` package (an editable install or a
    clone on ``sys.path``), if any."""
    return repo_root(Path(__file__).resolve().parent)


def find_results(start: Path | None = None) -> tuple[Path, str]:
    """The results folder and how it was found, in this order:

    1. ``$LSTPE_RESULTS`` (``"LSTPE_RESULTS"``), whether or not it exists;
    2. ``<repo>/results`` of the repository above ``start`` (default: the current folder)
       (``"repository"``);
    3. ``<repo>/results`` of the repository the imported ``lstpe`` package lives in (an
       editable install from a clone) when that folder exists (``"package"``);
    4. ``results/`` of the first clone folder of :data:`CLONE_DIRS` that has one
       (``/content/lstpe/results`` on Colab, ``~/lstpe/results``) (``"clone"``);
    5. ``./results`` (``"none"``: no stored runs can be there unless the reader put them).
    """
    env = os.environ.get("LSTPE_RESULTS")
    if env:
        return Path(env), "LSTPE_RESULTS"
    root = repo_root(start)
    if root is not None:
        return root / "results", "repository"
    pkg = _package_root()
    if pkg is not None and (pkg / "results").is_dir():
        return pkg / "results", "package"
    for d in CLONE_DIRS:
        folder = expand_home(d)
        if folder is None:  # no home folder: no clone there
            continue
        res = folder / "results"
        if res.is_dir():
            return res, "clone"
    return Path("results"), "none"


def home() -> Path | None:
    """The home folder, or None where there is none (HOME unset and the uid without a passwd
    entry, as in a container run as an arbitrary uid: ``Path.home()`` then raises)."""
    try:
        return Path.home()
    except (RuntimeError, KeyError, OSError):
        return None


def expand_home(path: str | Path) -> Path | None:
    """``path`` with a leading ``~`` expanded; None if it needs a home folder there is not
    (:func:`home`)."""
    try:
        return Path(path).expanduser()
    except (RuntimeError, KeyError, OSError):
        return None


@lru_cache(maxsize=1)
def _temporary_cache() -> Path:
    """A private temporary cache folder for this process (as matplotlib does without a
    home): made once (mode 0700), removed when the process ends, announced once."""
    where = Path(tempfile.mkdtemp(prefix="lstpe-cache-"))
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    print(f"lstpe: no home folder (HOME unset, no passwd entry for this uid), so no "
          f"~/.cache/lstpe: caching in {where} for this process only; set LSTPE_CACHE to a "
          "folder to keep the cache", file=sys.stderr)
    return where


def cache_dir() -> Path:
    """Where this package keeps what it can compute again: ``$LSTPE_CACHE``, else
    ``~/.cache/lstpe``, else (no home folder: :func:`home`) a private temporary folder for
    this process. Runs trained for a chapter (:mod:`lstpe.experiments.runs`, keyed by
    their config and code) and the attention maps at initialisation recomputed for stored
    fragments (:mod:`lstpe.experiments.init_maps`, keyed by the fragment's artefact file) live
    there; deleting the folder loses nothing but time."""
    env = os.environ.get("LSTPE_CACHE")
    if env:
        return Path(env)
    base = home()
    return base / ".cache" / "lstpe" if base is not None else _temporary_cache()


def default_results_dir() -> Path:
    """The results folder of :func:`find_results`: ``$LSTPE_RESULTS``, else the repository's
    ``results/`` (above the current folder, then the installed package's), else a clone's
    (:data:`CLONE_DIRS`), else ``./results``."""
    return find_results()[0]


def stored_counts(results_dir: Path) -> dict[str, int]:
    """What a results folder holds: ``{"paper": run fragments (folders with a manifest)
    under paper/, "cpu": runs under cpu/}`` (hidden folders such as ``.campaign`` skipped)."""
    out = {}
    for scale in ("paper", "cpu"):
        base = Path(results_dir) / scale
        n = 0
        if base.is_dir():
            for m in base.rglob("manifest.json"):
                rel = m.relative_to(base).parts
                n += not any(part.startswith(".") for part in rel)
        out[scale] = n
    return out


# --------------------------------------------------------------------------- precision


def autocast_supported(device: torch.device | str) -> bool:
    """Whether ``torch.autocast`` accepts this device type in the installed torch (torch 2.3
    rejects ``"mps"`` even with ``enabled=False``); a device without it trains in fp32."""
    dtype = torch.device(device).type
    check = getattr(torch.amp, "is_autocast_available", None)
    if check is not None:
        try:
            return bool(check(dtype))
        except (RuntimeError, ValueError):
            return False
    try:
        torch.autocast(dtype, enabled=False)
    except (RuntimeError, ValueError, AssertionError):
        return False
    return True


def choose_amp(device: torch.device | str, capability: tuple[int, int] | None = None,
               asked: bool = True) -> tuple[torch.dtype | None, str]:
    """The autocast dtype of a run on ``device`` (None = fp32) and why, in one line.

    * not ``asked``: fp32;
    * CUDA, compute capability >= 8.0 (A100, H100, RTX 30xx+): bf16 (tensor cores, no loss
      scaling);
    * older CUDA (V100 7.0, T4 7.5): fp16 with per-model dynamic loss scaling
      (:class:`lstpe.training.engine.LossScaler`): these GPUs have fp16 tensor cores only;
    * CPU: bf16 if it has bf16 instructions (:func:`has_bf16`), else fp32 (bf16 would be
      emulated, about 50x slower);
    * MPS and anything else: fp32.

    Args:
        capability: the CUDA compute capability (default: the device's own).
    """
    dev = torch.device(device)
    if not asked:
        return None, "fp32 (amp not asked)"
    if dev.type == "cuda":
        cap = tuple(capability) if capability is not None else \
            torch.cuda.get_device_capability(dev)
        if cap >= (8, 0):
            return torch.bfloat16, f"bf16 autocast (CUDA capability {cap[0]}.{cap[1]} >= 8.0)"
        return torch.float16, (f"fp16 autocast with per-model loss scaling (CUDA capability "
                               f"{cap[0]}.{cap[1]} has no bf16 tensor cores)")
    if dev.type == "cpu":
        if has_bf16():
            return torch.bfloat16, "bf16 autocast (the CPU has bf16 instructions)"
        return None, "fp32 (the CPU has no bf16 instructions: bf16 would be emulated)"
    return None, f"fp32 (no mixed precision on {dev.type})"


def precision_name(dtype: torch.dtype | None) -> str:
    """``"bf16"``, ``"fp16"`` or ``"fp32"`` (None)."""
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "fp32")  # type: ignore


@contextlib.contextmanager
def tf32_mode(device: torch.device | str, enabled: bool = False) -> Iterator[None]:
    """Within the block, TF32 matmuls and convolutions are ``enabled`` on a CUDA device
    (off by default: the authors' V100 had no TF32); the global flags are restored after it,
    whatever they were. A no-op on other devices."""
    if torch.device(device).type != "cuda":
        yield
        return
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    precision = torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = bool(enabled)
    torch.backends.cudnn.allow_tf32 = bool(enabled)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul
        torch.backends.cudnn.allow_tf32 = cudnn
        torch.set_float32_matmul_precision(precision)


# --------------------------------------------------------------------------- CPUs


FORK_TIMEOUT_S = 600.0
"""How long :func:`fork_map` waits for its processes before it draws the items itself."""

_FORKED: tuple[Callable[[Any, Any], Any], Any] | None = None


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _forked(item: Any) -> Any:
    fn, state = _FORKED  # type: ignore[misc]  # set before the fork
    return fn(state, item)


class Forked:
    """``[fn(state, item) for item in items]`` started in up to ``workers`` forked processes
    (default :func:`usable_cpus`), while this process goes on; :meth:`get` returns the results
    in order. ``state`` reaches the processes by the fork, not pickled; ``fn`` must be a
    module-level function and its results picklable. The items are drawn here, by
    :meth:`get`, on a single CPU, outside Linux (no safe fork), inside a daemon process
    (which may not have children), or if the processes have not answered within
    :data:`FORK_TIMEOUT_S` (a fork of a process with threads can hang)."""

    def __init__(self, fn: Callable[[Any, Any], Any], state: Any, items: Sequence[Any],
                 workers: int | None = None) -> None:
        global _FORKED
        import multiprocessing as mp

        self.fn, self.state, self.items = fn, state, list(items)
        self._pool, self._job = None, None
        n = min(usable_cpus() if workers is None else int(workers), len(self.items))
        if n < 2 or sys.platform != "linux" or mp.current_process().daemon:
            return
        _FORKED = (fn, state)
        try:
            self._pool = mp.get_context("fork").Pool(n)
            self._job = self._pool.map_async(_forked, self.items,
                                             chunksize=max(1, len(self.items) // (4 * n)))
        finally:
            _FORKED = None

    def get(self) -> list[Any]:
        """The results, in the items' order."""
        import multiprocessing as mp

        if self._job is not None:
            try:
                return self._job.get(timeout=FORK_TIMEOUT_S)
            except mp.TimeoutError:
                pass
            finally:
                self._pool.terminate()
                self._pool.join()
                self._pool, self._job = None, None
        return [self.fn(self.state, it) for it in self.items]


def fork_map(fn: Callable[[Any, Any], Any], state: Any, items: Sequence[Any],
             workers: int | None = None) -> list[Any]:
    """``[fn(state, item) for item in items]`` in forked processes (:class:`Forked`)."""
    return Forked(fn, state, items, workers).get()
