"""Generating LST puzzles (:func:`generate`, :func:`generate_frame`) and the Jaccard
dissimilarity between puzzles (:func:`jaccard_dissimilarity`, :func:`min_dissimilarity`).

Dissimilarity (:func:`jaccard_dissimilarity`) is the Jaccard distance between the sets of
(cell, value) pairs of the filled cells and the probe (the probe as value 5). Under it every one
of the authors' 9000 training puzzles is > 0.8 from every human puzzle (smallest 0.8125), as the
file names ``*_dist80`` say; the set of filled *positions* is not (some are at distance 0).

The generator draws puzzles with the exact solver of :mod:`lstpe.lst.puzzles` and reproduces the
number of filled cells of the authors' training set (:data:`FILLED_HISTOGRAM`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from lstpe.lst.puzzles import CONDITIONS, Puzzle, _analyse, _as_values, latin_squares

MAX_IDLE_DRAWS = 2_000_000
""":func:`generate` gives up (ValueError) after this many candidates in a row bring no new
puzzle: the request cannot be met (the real rate is never below ~1e-4, see the generator)."""

FILLED_HISTOGRAM: dict[int, dict[int, int]] = {
    1: {3: 12, 4: 105, 5: 234, 6: 476, 7: 363, 8: 307, 9: 441, 10: 688, 11: 374},
    2: {3: 103, 4: 430, 5: 579, 6: 769, 7: 387, 8: 209, 9: 225, 10: 215, 11: 83},
    3: {3: 96, 4: 557, 5: 669, 6: 756, 7: 369, 8: 228, 9: 150, 10: 146, 11: 29},
}
"""Number of filled cells (probe excluded) of the authors' 3000 training puzzles per
complexity; :func:`generate` reproduces these proportions."""


# --------------------------------------------------------------------------- dissimilarity


def _one_hot(puzzles: Sequence[Puzzle] | Sequence[str]) -> np.ndarray:
    """(N, 80) float64: the (cell, value) pairs (values 1-5) of each puzzle."""
    a = _as_values(puzzles)
    return (a[:, :, None] == np.arange(1, 6)).reshape(len(a), 80).astype(np.float64)


def _min_jaccard(x: np.ndarray, ref: np.ndarray, chunk: int = 4096) -> np.ndarray:
    if len(ref) == 0:
        return np.full(len(x), np.inf)
    out = np.empty(len(x))
    nr = ref.sum(1)
    for i in range(0, len(x), chunk):
        xi = x[i:i + chunk]
        inter = xi @ ref.T
        out[i:i + chunk] = (1.0 - inter / (xi.sum(1)[:, None] + nr[None] - inter)).min(1)
    return out


def jaccard_dissimilarity(a: Puzzle, b: Puzzle) -> float:
    """Jaccard distance ``1 - |A & B| / |A | B|`` of the sets of (cell, value) pairs of the
    filled cells and the probe (the probe as value 5; the answer is not part of the set)."""
    x, y = _one_hot([a, b])
    inter = float(x @ y)
    return 1.0 - inter / (x.sum() + y.sum() - inter)


def min_dissimilarity(puzzles: Sequence[Puzzle] | Sequence[str],
                      reference: Sequence[Puzzle] | Sequence[str]) -> np.ndarray:
    """(N,) smallest :func:`jaccard_dissimilarity` of each puzzle to any reference puzzle
    (``inf`` when ``reference`` is empty)."""
    return _min_jaccard(_one_hot(puzzles), _one_hot(reference))


# --------------------------------------------------------------------------- generator


def _allocate(weights: Sequence[float], total: int) -> np.ndarray:
    """Integer counts summing to ``total`` proportional to ``weights`` (largest remainder,
    ties to the earlier entry)."""
    w = np.asarray(weights, dtype=np.float64)
    exact = total * w / w.sum()
    out = np.floor(exact).astype(np.int64)
    rest = np.argsort(-(exact - out), kind="stable")[: total - out.sum()]
    out[rest] += 1
    return out


def generate(n: int, vectors: int, seed: int | Sequence[int],
             exclude: Sequence[Puzzle] | None = None,
             min_dissimilarity: float = 0.8) -> list[Puzzle]:
    """``n`` distinct uniquely solvable puzzles of relational complexity exactly ``vectors``.

    Rejection sampling: for each candidate draw a uniform Latin square of the 576, a uniform
    probe cell and a uniform subset of ``k`` other cells to show; keep it if its complexity is
    ``vectors``, it is new, and its Jaccard dissimilarity to every puzzle of ``exclude`` is
    ``> min_dissimilarity``. The number of filled cells ``k`` (3-11) follows the authors'
    training set (:data:`FILLED_HISTOGRAM`, exact quotas); the list is shuffled at the end.
    Deterministic for a seed (``numpy.random.default_rng(seed)``). Each :class:`Puzzle` has
    ``answer``, ``vectors`` and ``id`` = its index.

    Raises:
        ValueError: ``n < 0``, ``vectors`` not in 1-3, ``min_dissimilarity`` outside [0, 1);
            or a request that cannot be met (:data:`MAX_IDLE_DRAWS` candidates in a row
            without a new puzzle, e.g. a threshold no puzzle passes).
    """
    if isinstance(n, bool) or int(n) != n or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if vectors not in (1, 2, 3):
        raise ValueError(f"vectors must be 1, 2 or 3, got {vectors!r}")
    if not 0.0 <= min_dissimilarity < 1.0:
        raise ValueError(f"min_dissimilarity must be in [0, 1), got {min_dissimilarity!r}")
    rng = np.random.default_rng(seed)
    flat = latin_squares().reshape(576, 16).astype(np.int64)
    ref = _one_hot(list(exclude or []))
    hist = FILLED_HISTOGRAM[vectors]
    seen: set[bytes] = set()
    found: list[tuple[np.ndarray, int]] = []
    for k, quota in zip(hist, _allocate(list(hist.values()), int(n)), strict=True):
        got, rate, idle = 0, 0.05, 0
        while got < quota:
            if idle >= MAX_IDLE_DRAWS:
                raise ValueError(
                    f"cannot generate {int(n)} distinct puzzles of complexity {vectors}: no new "
                    f"one with {k} filled cells in {idle} draws (found {got} of {quota}; "
                    f"min_dissimilarity={min_dissimilarity} to {len(ref)} excluded puzzles)")
            b = int(np.clip((quota - got) / rate * 1.3, 256, 20000))
            sq, probe = rng.integers(576, size=b), rng.integers(16, size=b)
            keys = rng.random((b, 16))
            keys[np.arange(b), probe] = 2.0  # never pick the probe
            show = np.zeros((b, 16), dtype=bool)
            np.put_along_axis(show, np.argsort(keys, axis=1)[:, :k], True, axis=1)
            values = np.where(show, flat[sq], 0)
            _, rc = _analyse(values, probe, triples=vectors == 3)
            ok = np.flatnonzero(rc == vectors)
            strings = values[ok]
            strings[np.arange(len(ok)), probe[ok]] = 5
            if len(ref):
                keep = _min_jaccard((strings[:, :, None] == np.arange(1, 6)).reshape(
                    len(ok), 80).astype(np.float64), ref) > min_dissimilarity
                ok, strings = ok[keep], strings[keep]
            rate = max(len(ok) / b, 1e-4)
            before = got
            for j, s in zip(ok, strings, strict=True):
                key = s.astype(np.int8).tobytes()
                if got < quota and key not in seen:
                    seen.add(key)
                    found.append((s, int(flat[sq[j], probe[j]])))
                    got += 1
            idle = 0 if got > before else idle + b
    order = rng.permutation(len(found))
    out = []
    for i, j in enumerate(order):
        s, ans = found[j]
        g = np.where(s == 5, 0, s).reshape(4, 4)
        p = int(np.flatnonzero(s == 5)[0])
        out.append(Puzzle(tuple(tuple(int(v) for v in r) for r in g), divmod(p, 4), ans,
                          vectors, i))
    return out


def generate_frame(n_per_condition: int, seed: int,
                   exclude: Sequence[Puzzle] | None = None) -> pd.DataFrame:
    """``n_per_condition`` generated puzzles of each complexity 1, 2, 3 (seeds
    ``(seed, vectors)``) in :func:`~lstpe.lst.data.load_training` format, ``id`` 0.. over the
    three."""
    frames = []
    for name, v in CONDITIONS.items():
        ps = generate(n_per_condition, v, seed=(seed, v), exclude=exclude)
        frames.append(pd.DataFrame({"condition": name, "vectors": v,
                                    "puzzle": [p.string for p in ps],
                                    "answer": [p.answer for p in ps]}))
    df = pd.concat(frames, ignore_index=True)
    df.insert(0, "id", np.arange(len(df), dtype=np.int64))
    df.insert(1, "lst_num", pd.array([pd.NA] * len(df), dtype="Int64"))
    df["source"] = "generated"
    df["vectors"] = df["vectors"].astype(np.int64)
    df["answer"] = df["answer"].astype(np.int64)
    return df
