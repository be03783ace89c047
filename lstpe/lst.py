"""The Latin Square Task (LST): puzzles, an exact solver, relational complexity, a generator,
the vendored data of Ito et al. and the tensors the transformers are trained on.

A puzzle is a 4x4 grid holding shapes 1-4 (circle, triangle, square, cross), blanks (0) and one
probe "?" whose shape must be inferred so that no shape repeats in a row or a column. As a
string it is 16 digits, row-major, with ``0`` blank, ``1``-``4`` shapes and ``5`` the probe.

Everything is exact: the 576 Latin squares of order 4 are enumerated once
(:func:`latin_squares`) and a puzzle is solved by filtering them (:func:`candidates`,
:func:`solve`). Sets of squares are also kept as 576-bit masks (9 ``uint64`` words), which makes
the relational complexity of thousands of puzzles a few vectorised AND operations.

Relational complexity (:func:`relational_complexity`) -- a *line* is one row or one column of
the grid, "the filled cells of a set of lines" means the filled cells lying on those lines with
every other cell treated as blank, and a set of cells *forces* the probe when all Latin squares
agreeing with them give the probe one and the same value. For a uniquely solvable puzzle::

    1  the filled cells of the probe's row alone, or of its column alone, force the probe;
    2  otherwise, the filled cells of the probe's row and column together force it;
    3  otherwise, the filled cells of some 3 lines (any of the 8) force it;
    4  otherwise (4 lines always suffice: the 4 rows are the whole grid).

That is the fewest lines that force the probe, with one restriction: the only two-line set that
counts as "2 vectors" is the probe's own row + column. This reproduces the published condition
of all 108 human puzzles and of all 9000 training puzzles (Binary = 1, Ternary = 2, Quaternary
= 3; see :func:`complexity_confusion`). Without the restriction (plain fewest lines), 612 of the
3000 Quaternary training puzzles would count as 2: they can be solved from the probe's line plus
one other line through a "hidden single" (the other line rules the shape out of the remaining
blanks of the probe's line), which the authors' labelling counts as a three-vector problem.

Dissimilarity (:func:`jaccard_dissimilarity`) is the Jaccard distance between the sets of
(cell, value) pairs of the filled cells and the probe (the probe as value 5). Under it every one
of the authors' 9000 training puzzles is > 0.8 from every human puzzle (smallest 0.8125), as the
file names ``*_dist80`` say; the set of filled *positions* is not (some are at distance 0).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

if TYPE_CHECKING:
    from matplotlib.axes import Axes

CONDITIONS: dict[str, int] = {"Binary": 1, "Ternary": 2, "Quaternary": 3}
"""Published condition name -> relational complexity ("number of vectors")."""

SHAPES: dict[int, str] = {1: "circle", 2: "triangle", 3: "square", 4: "cross"}
"""How digits 1-4 are drawn (an arbitrary but fixed choice)."""

_SYMBOLS = {0: "·", 1: "●", 2: "▲", 3: "■", 4: "✚", 5: "?"}
_FILES = {1: "binary", 2: "ternary", 3: "quaternary"}
_TRIPLES = np.array(list(itertools.combinations(range(8), 3)))  # (56, 3) line indices
SPLIT_KINDS: tuple[str, ...] = ("paper", "generated")
SPLIT_RULES: tuple[str, ...] = ("code", "text")
"""How the 9000 training puzzles are split: ``code`` = the authors' code (8100 / 900), ``text``
= the paper's text (8000 per epoch, 1000 held out)."""
TEST_SIZE = 1000
"""Size of the stratified test split carved out of the 9000 training puzzles."""

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


class UnsolvablePuzzleError(ValueError):
    """No Latin square agrees with the filled cells."""


class AmbiguousPuzzleError(ValueError):
    """More than one probe value is consistent with the filled cells."""

    def __init__(self, message: str, values: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.values = values


# --------------------------------------------------------------------------- puzzles


@dataclass(frozen=True)
class Puzzle:
    """One LST puzzle.

    Attributes:
        grid: 4x4 tuple of ints, 0 blank, 1-4 shapes; the probe cell is stored as 0.
        probe: (row, col) of the probe, 0-based.
        answer: the probe's shape 1-4, if known.
        vectors: relational complexity label 1-3 (4 = beyond Quaternary), if known.
        id: an identifier (row of the source table), if any.
    """

    grid: tuple[tuple[int, ...], ...]
    probe: tuple[int, int]
    answer: int | None = None
    vectors: int | None = None
    id: int | None = None

    def __post_init__(self) -> None:
        g = self.grid
        if len(g) != 4 or any(len(r) != 4 for r in g):
            raise ValueError(f"grid must be 4x4, got {g!r}")
        if any(not 0 <= v <= 4 for r in g for v in r):
            raise ValueError(f"grid values must be 0-4, got {g!r}")
        r, c = self.probe
        if not (0 <= r < 4 and 0 <= c < 4):
            raise ValueError(f"probe {self.probe!r} is outside the 4x4 grid")
        if g[r][c] != 0:
            raise ValueError(f"the probe cell {self.probe} must be stored as 0, got {g[r][c]}")

    @property
    def array(self) -> np.ndarray:
        """(4, 4) int array, 0 blank, 1-4 shapes, 5 the probe."""
        a = np.array(self.grid, dtype=np.int64)
        a[self.probe] = 5
        return a

    @property
    def string(self) -> str:
        """The 16-digit row-major string with 5 at the probe."""
        return "".join(str(v) for v in self.array.ravel())

    def __str__(self) -> str:
        return render_text(self)


def _is_int_in(v: Any, lo: int, hi: int) -> bool:
    """True if ``v`` is an integral number (not a bool, str or NaN) in ``lo..hi``."""
    if isinstance(v, (bool, str, bytes)):
        return False
    try:
        return int(v) == v and lo <= v <= hi
    except (TypeError, ValueError, OverflowError):
        return False


def parse(
    s: str, answer: int | None = None, vectors: int | None = None, id: int | None = None
) -> Puzzle:
    """Parse a 16-digit puzzle string (row-major; 0 blank, 1-4 shapes, 5 the probe).

    Raises:
        ValueError: naming the bad value, if the string is not 16 characters, holds a character
            outside 0-5, has not exactly one probe, repeats a shape in a row or column; if
            ``answer`` is not 1-4, already appears in the probe's row/column, or is not the
            unique solution; if ``vectors`` is not 1-4. (Without ``answer`` an ambiguous or
            unsolvable grid is accepted; :func:`solve` then raises.)
    """
    if not isinstance(s, str):
        raise ValueError(f"puzzle must be a 16-character string, got {type(s).__name__} {s!r} "
                         "(read CSV puzzle columns with dtype=str to keep leading zeros)")
    if len(s) != 16:
        raise ValueError(f"puzzle string must have 16 characters, got {len(s)}: {s!r}")
    for i, ch in enumerate(s):
        if ch not in "012345":
            raise ValueError(f"invalid character {ch!r} at position {i} of {s!r} "
                             "(allowed: 0-5)")
    n_probe = s.count("5")
    if n_probe != 1:
        raise ValueError(f"puzzle must contain exactly one probe '5', found {n_probe} in {s!r}")
    a = np.array([int(ch) for ch in s]).reshape(4, 4)
    pr, pc = divmod(s.index("5"), 4)
    a[pr, pc] = 0
    for axis, name in ((0, "row"), (1, "column")):
        for k in range(4):
            line = a[k] if axis == 0 else a[:, k]
            vals, counts = np.unique(line[line > 0], return_counts=True)
            if (counts > 1).any():
                raise ValueError(f"shape {int(vals[counts > 1][0])} repeated in {name} {k} "
                                 f"of {s!r} (breaks the Latin rule)")
    if vectors is not None and not _is_int_in(vectors, 1, 4):
        raise ValueError(f"vectors must be an integer 1-4, got {vectors!r}")
    p = Puzzle(tuple(tuple(int(v) for v in row) for row in a), (pr, pc), None,
               None if vectors is None else int(vectors), None if id is None else int(id))
    if answer is None:
        return p
    if not _is_int_in(answer, 1, 4):
        raise ValueError(f"answer must be an integer 1-4, got {answer!r}")
    answer = int(answer)
    if answer in a[pr]:
        raise ValueError(f"answer {answer} already appears in the probe's row {pr} of {s!r}")
    if answer in a[:, pc]:
        raise ValueError(f"answer {answer} already appears in the probe's column {pc} of {s!r}")
    try:
        sol = solve(p)
    except ValueError as e:
        raise ValueError(f"answer {answer} is not the unique solution of {s!r}: {e}") from e
    if sol != answer:
        raise ValueError(f"answer {answer} contradicts {s!r}: the unique solution is {sol}")
    return Puzzle(p.grid, p.probe, answer, p.vectors, p.id)


# --------------------------------------------------------------------------- exact solver


@lru_cache(maxsize=1)
def latin_squares() -> np.ndarray:
    """All Latin squares of order 4 by exhaustive enumeration: (576, 4, 4) int8, values 1-4.

    Row by row over the 24 permutations, keeping those that clash with no earlier row in any
    column; lexicographic order. Cached; the array is read-only.
    """
    perms = [np.array(p, dtype=np.int8) for p in itertools.permutations(range(1, 5))]
    out: list[list[np.ndarray]] = []

    def extend(rows: list[np.ndarray]) -> None:
        if len(rows) == 4:
            out.append(rows)
            return
        for p in perms:
            if all((p != r).all() for r in rows):
                extend(rows + [p])

    extend([])
    sq = np.array(out, dtype=np.int8)
    sq.flags.writeable = False
    return sq


@lru_cache(maxsize=1)
def _bits() -> np.ndarray:
    """(16, 5, 9) uint64: for each cell and value 0-4, the 576-bit mask of the squares holding
    that value there (value 0, a blank, allows every square)."""
    flat = latin_squares().reshape(576, 16)
    b = np.zeros((16, 5, 576), dtype=bool)
    b[:, 0] = True
    for v in range(1, 5):
        b[:, v] = flat.T == v
    out = np.packbits(b, axis=-1, bitorder="little").view(np.uint64)
    out.flags.writeable = False
    return out


def candidates(p: Puzzle) -> np.ndarray:
    """(K, 4, 4) Latin squares agreeing with every filled cell of ``p`` (the probe is blank)."""
    sq = latin_squares()
    g = np.array(p.grid).ravel()
    filled = g > 0
    ok = (sq.reshape(576, 16)[:, filled] == g[filled]).all(axis=1)
    return sq[ok]


def solve(p: Puzzle) -> int:
    """The probe value shared by all :func:`candidates` (1-4).

    Raises:
        UnsolvablePuzzleError: no Latin square agrees with the filled cells.
        AmbiguousPuzzleError: several probe values are possible (named in the message).
    """
    vals = np.unique(candidates(p)[:, p.probe[0], p.probe[1]])
    if len(vals) == 0:
        raise UnsolvablePuzzleError(f"no Latin square agrees with the filled cells of "
                                    f"{p.string!r} (contradictory puzzle)")
    if len(vals) > 1:
        v = tuple(int(x) for x in vals)
        raise AmbiguousPuzzleError(f"the probe of {p.string!r} is ambiguous: it could be any "
                                   f"of {list(v)}", v)
    return int(vals[0])


def _n_values(m: np.ndarray, pv: np.ndarray) -> np.ndarray:
    """Number of distinct probe values among the squares of masks ``m`` (N, K, 9), given the
    per-value probe masks ``pv`` (N, 4, 9): (N, K) int."""
    return sum(((m & pv[:, None, v]) != 0).any(-1).astype(np.int64) for v in range(4))


def _analyse(values: np.ndarray, probe: np.ndarray, triples: bool = True
             ) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised solver and relational complexity.

    Args:
        values: (N, 16) ints 0-4, the probe cell 0. probe: (N,) flat probe index 0-15.
        triples: evaluate 3-line sets (else complexity 3 and 4 both read 4).
    Returns:
        n_sol (N,): number of possible probe values (0 contradictory, 1 unique, >1 ambiguous);
        rc (N,): relational complexity 1-4 where ``n_sol == 1``, else 0.
    """
    t = _bits()
    n = len(values)
    ar = np.arange(n)
    g = t[np.arange(16), values].reshape(n, 4, 4, 9)
    rows = np.bitwise_and.reduce(g, axis=2)
    lines = np.concatenate([rows, np.bitwise_and.reduce(g, axis=1)], axis=1)  # (N, 8, 9)
    pv = t[probe, 1:]  # (N, 4, 9)
    n_sol = _n_values(np.bitwise_and.reduce(rows, axis=1)[:, None], pv)[:, 0]
    own = np.stack([lines[ar, probe // 4], lines[ar, 4 + probe % 4]], axis=1)
    one = (_n_values(own, pv) == 1).any(axis=1)
    two = _n_values((own[:, 0] & own[:, 1])[:, None], pv)[:, 0] == 1
    rc = np.where(n_sol != 1, 0, np.where(one, 1, np.where(two, 2, 4)))
    idx = np.flatnonzero(rc == 4)
    if triples and len(idx):
        trip = np.bitwise_and.reduce(lines[idx][:, _TRIPLES], axis=2)  # (n, 56, 9)
        rc[idx[(_n_values(trip, pv[idx]) == 1).any(axis=1)]] = 3
    return n_sol, rc


def _as_values(puzzles: Sequence[Puzzle] | Sequence[str]) -> np.ndarray:
    """(N, 16) int64 with 5 at the probe; strings are validated with :func:`parse`."""
    if len(puzzles) == 0:
        return np.zeros((0, 16), dtype=np.int64)
    return np.stack([(parse(p) if isinstance(p, str) else p).array.ravel() for p in puzzles])


def relational_complexities(puzzles: Sequence[Puzzle] | Sequence[str]) -> np.ndarray:
    """(N,) int relational complexity (1-4, see the module docstring) of many puzzles at once.

    Raises:
        ValueError: naming the first puzzle that is not uniquely solvable.
    """
    a = _as_values(puzzles)
    probe = (a == 5).argmax(axis=1)
    n_sol, rc = _analyse(np.where(a == 5, 0, a), probe)
    bad = np.flatnonzero(n_sol != 1)
    if len(bad):
        i = int(bad[0])
        raise ValueError(f"puzzle {i} ({''.join(map(str, a[i]))}) is not uniquely solvable "
                         f"({int(n_sol[i])} possible probe values)")
    return rc


def relational_complexity(p: Puzzle) -> int:
    """Relational complexity 1-4 of a uniquely solvable puzzle, exact over the 576 squares.

    1: the probe's row alone or its column alone forces the probe; 2: otherwise its row and
    column together do; 3: otherwise some 3 of the 8 lines (rows/columns, their filled cells
    only) do; 4: otherwise. Equals the published label of all 108 + 9000 vendored puzzles.

    Raises:
        UnsolvablePuzzleError, AmbiguousPuzzleError: as :func:`solve`.
    """
    solve(p)
    return int(relational_complexities([p])[0])


def complexity_confusion(df: pd.DataFrame) -> pd.DataFrame:
    """Published label (rows, column ``vectors``) x computed complexity (columns) counts for a
    frame of :func:`load_human` / :func:`load_training` format."""
    comp = relational_complexities(list(df["puzzle"]))
    tab = pd.crosstab(pd.Series(df["vectors"].to_numpy(), name="published"),
                      pd.Series(comp, name="computed"))
    cols = sorted(set(tab.columns) | {1, 2, 3})
    return tab.reindex(columns=cols, fill_value=0)


# --------------------------------------------------------------------------- vendored data


def _read_csv(name: str, **kw: Any) -> pd.DataFrame:
    with resources.files("lstpe").joinpath("data", "lst", name).open("r") as f:
        return pd.read_csv(f, **kw)


def _tidy(raw: pd.DataFrame, source: str, ids: np.ndarray) -> pd.DataFrame:
    df = pd.DataFrame({
        "id": ids.astype(np.int64),
        "lst_num": pd.to_numeric(raw["LST_num"]).astype("Int64"),
        "condition": raw["condition"].to_numpy(),
        "vectors": raw["condition"].map(CONDITIONS).to_numpy().astype(np.int64),
        "puzzle": raw["puzzles"].to_numpy(),
        "answer": raw["solutions"].astype(np.int64).to_numpy(),
        "source": source,
    })
    for r in df.itertuples():  # validate every puzzle and its stored answer
        parse(r.puzzle, r.answer, r.vectors, r.id)
    return df


@lru_cache(maxsize=1)
def _human() -> pd.DataFrame:
    raw = _read_csv("puzzle_data_original.csv", dtype=str)
    return _tidy(raw, "human", raw["ID"].astype(int).to_numpy())


@lru_cache(maxsize=1)
def _training() -> pd.DataFrame:
    raw = pd.concat([_read_csv(f"generated_puzzle_data_{f}_dist80.csv", dtype=str)
                     for f in _FILES.values()], ignore_index=True)
    return _tidy(raw, "training", np.arange(len(raw)))


def load_human() -> pd.DataFrame:
    """The 108 puzzles shown to humans (the paper's validation set).

    Columns: ``id`` (the file's ``ID``, 0-107), ``lst_num`` (Int64), ``condition``, ``vectors``
    (1-3), ``puzzle`` (16-char str), ``answer`` (1-4), ``source`` ("human").
    """
    return _human().copy()


def load_training() -> pd.DataFrame:
    """The authors' 9000 training puzzles (3000 Binary, Ternary, Quaternary in that order);
    same columns as :func:`load_human`, ``id`` = row 0-8999, ``lst_num`` all missing."""
    return _training().copy()


def puzzles_from_frame(df: pd.DataFrame) -> list[Puzzle]:
    """One validated :class:`Puzzle` per row (columns ``puzzle``, ``answer``, ``vectors``,
    ``id``; the last three optional)."""
    def col(name: str) -> list:
        return list(df[name]) if name in df else [None] * len(df)

    return [parse(s, None if pd.isna(a) else int(a), None if pd.isna(v) else int(v),
                  None if pd.isna(i) else int(i))
            for s, a, v, i in zip(df["puzzle"], col("answer"), col("vectors"), col("id"),
                                  strict=True)]


def human_accuracy() -> pd.DataFrame:
    """Per-puzzle human accuracy from the trial-level file (40 participants x 108 puzzles).

    ``Null`` trials are dropped; ``LST_id - 1`` is the puzzle ``id``. Missing responses
    (``motor_key == 999``, 156 puzzle trials) are already coded ``accuracy = 0`` in the file and
    are kept as incorrect; ``accuracy`` has no NaN, but any would also count as incorrect.

    Returns:
        Columns ``id`` (0-107), ``vectors``, ``accuracy`` (mean over trials), ``n_trials``.
    """
    t = _read_csv("human_behaviour.csv")
    t = t[t["trial_type"] != "Null"].assign(id=lambda d: d["LST_id"] - 1)
    acc = (t.assign(correct=t["accuracy"].fillna(0.0)).groupby("id")
           .agg(accuracy=("correct", "mean"), n_trials=("correct", "size"),
                trial_type=("trial_type", "first")).reset_index())
    out = load_human()[["id", "vectors", "condition"]].merge(acc, on="id", how="left")
    if (out["condition"] != out["trial_type"]).any():
        raise ValueError("trial_type of the behaviour file disagrees with the puzzle condition")
    return out[["id", "vectors", "accuracy", "n_trials"]]


def human_accuracy_by_condition() -> pd.Series:
    """Mean human accuracy per relational complexity (index ``vectors`` 1-3)."""
    return human_accuracy().groupby("vectors")["accuracy"].mean()


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
    ``(seed, vectors)``) in :func:`load_training` format, ``id`` 0.. over the three."""
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


# --------------------------------------------------------------------------- tensors


def encode(puzzles: Sequence[Puzzle] | Sequence[str]) -> torch.Tensor:
    """(N, 16, 5) float32 one-hot: digit k in 1-5 -> channel k-1 (the probe is channel 4),
    a blank is all zeros (as in the paper). Token order is row-major."""
    a = torch.from_numpy(_as_values(puzzles))
    return (a[:, :, None] == torch.arange(1, 6)).to(torch.float32)


def labels(puzzles: Sequence[Puzzle] | Sequence[str]) -> torch.Tensor:
    """(N,) int64 class ``answer - 1`` (solved when the answer is not stored)."""
    ps = [parse(p) if isinstance(p, str) else p for p in puzzles]
    return torch.tensor([(p.answer if p.answer is not None else solve(p)) - 1 for p in ps],
                        dtype=torch.long)


@dataclass
class Split:
    """A data split as tensors.

    Attributes:
        x: (N, 16, 5) float32 one-hot puzzles (:func:`encode`). y: (N,) int64 answer - 1.
        vectors: (N,) int64 complexity 1-3. ids: (N,) int64 ``id`` of the source frame.
        name: "train", "test" or "val".
    """

    x: torch.Tensor
    y: torch.Tensor
    vectors: torch.Tensor
    ids: torch.Tensor
    name: str

    def __len__(self) -> int:
        return int(self.x.shape[0])


def _split(df: pd.DataFrame, name: str) -> Split:
    # torch.tensor copies: the frame's arrays may be read-only views (pandas copy-on-write)
    return Split(encode(list(df["puzzle"])), torch.tensor(df["answer"].to_numpy() - 1),
                 torch.tensor(df["vectors"].to_numpy()), torch.tensor(df["id"].to_numpy()),
                 name)


def validation_split() -> Split:
    """The paper's validation split: the 108 human puzzles as tensors, ordered by ``id``."""
    return _split(load_human(), "val")


def stratified_sample(strata: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted positions of a stratified random sample of size ``n`` (proportional quotas)."""
    levels, counts = np.unique(strata, return_counts=True)
    pick = [rng.permutation(np.flatnonzero(strata == lv))[:q]
            for lv, q in zip(levels, _allocate(counts, n), strict=True)]
    return np.sort(np.concatenate(pick))


@lru_cache(maxsize=4)
def _generated_training(seed: int) -> pd.DataFrame:
    return generate_frame(3000, seed, exclude=puzzles_from_frame(load_human()))


def authors_test_rows() -> np.ndarray:
    """The 900 rows (of :func:`load_training`) that the authors' code held out as test set.

    Their code split the 9000 puzzles with scikit-learn's ``train_test_split(range(9000),
    condition, stratify=condition, test_size=0.1, random_state=42)`` (``get_curriculum("All")``
    in ``lstnn/curricula.py`` of their repository, at commit eef1642; the file was removed from
    the public tree later), 300 per condition, the three files concatenated binary, ternary,
    quaternary. The rows are vendored in ``data/lst/authors_test_split.csv`` (computed once with
    scikit-learn 1.9.1, see PROVENANCE.md), so no scikit-learn is needed here.
    """
    rows = _read_csv("authors_test_split.csv")["row"].to_numpy(np.int64)
    if len(rows) != 900 or len(np.unique(rows)) != 900:
        raise ValueError("data/lst/authors_test_split.csv is damaged: expected 900 distinct rows")
    return rows


def load_split(kind: str = "paper", seed: int = 0, n_train: int | None = None,
               rule: str = "code") -> dict[str, Split]:
    """Train / test / val splits as tensors.

    ``paper``: the authors' 9000 training puzzles, split by ``rule``: ``code`` (default) =
    the authors' code, 8100 train / 900 test (:func:`authors_test_rows`, fixed, ``seed``
    unused for the split); ``text`` = the paper's text, 8000 / 1000 stratified by complexity
    (334/333/333 test puzzles), drawn with ``numpy.random.default_rng(seed)``.
    ``generated``: 3 x 3000 puzzles of :func:`generate_frame` (``seed``, excluding puzzles
    within Jaccard 0.8 of the human ones), split 8000 / 1000 (``rule`` must be ``text``).
    ``val`` is always the 108 human puzzles. ``n_train`` keeps a stratified random subset of
    the train split (preview runs). Splits are ordered by ``id``.
    """
    if kind not in SPLIT_KINDS:
        raise ValueError(f"unknown split kind {kind!r}; valid kinds: {', '.join(SPLIT_KINDS)}")
    if rule not in SPLIT_RULES:
        raise ValueError(f"unknown split rule {rule!r}; valid rules: {', '.join(SPLIT_RULES)}")
    if kind == "generated" and rule == "code":
        rule = "text"  # the code's split exists only for the authors' puzzles
    pool = load_training() if kind == "paper" else _generated_training(seed).copy()
    rng = np.random.default_rng(seed)
    strata = pool["vectors"].to_numpy()
    test = authors_test_rows() if rule == "code" else stratified_sample(strata, TEST_SIZE, rng)
    train = np.setdiff1d(np.arange(len(pool)), test)
    if n_train is not None:
        if isinstance(n_train, bool) or int(n_train) != n_train or not 1 <= n_train <= len(train):
            raise ValueError(f"n_train must be an integer in 1..{len(train)}, got {n_train!r}")
        train = train[stratified_sample(strata[train], int(n_train), rng)]
    test = np.sort(test)
    return {"train": _split(pool.iloc[train], "train"), "test": _split(pool.iloc[test], "test"),
            "val": validation_split()}


# --------------------------------------------------------------------------- display


def render_text(p: Puzzle, show_answer: bool = False) -> str:
    """The grid as 4 lines of symbols: ● ▲ ■ ✚ for shapes 1-4, · blank, ? the probe
    (its answer's symbol in brackets when ``show_answer``)."""
    a = p.array
    cells = [[_SYMBOLS[int(v)] for v in row] for row in a]
    if show_answer and p.answer is not None:
        cells[p.probe[0]][p.probe[1]] = f"[{_SYMBOLS[p.answer]}]"
    return "\n".join(" ".join(f"{c:^3}" for c in row).rstrip() for row in cells)


def plot_puzzle(p: Puzzle, ax: Axes | None = None, show_answer: bool = False) -> Axes:
    """Draw ``p`` on a 4x4 board: circle, triangle, square, cross for 1-4, a yellow ? at the
    probe (over a faint copy of the answer's shape when ``show_answer``). Returns the Axes."""
    import matplotlib.pyplot as plt
    from matplotlib import patches

    if ax is None:
        _, ax = plt.subplots(figsize=(2.4, 2.4))
    colors = {1: "#1f77b4", 2: "#d62728", 3: "#2ca02c", 4: "#9467bd"}

    def shape(v: int, x: float, y: float, alpha: float = 1.0) -> None:
        kw = {"color": colors[v], "alpha": alpha}
        if v == 1:
            ax.add_patch(patches.Circle((x, y), 0.3, **kw))
        elif v == 2:
            ax.add_patch(patches.RegularPolygon((x, y + 0.05), 3, radius=0.36, **kw))
        elif v == 3:
            ax.add_patch(patches.Rectangle((x - 0.28, y - 0.28), 0.56, 0.56, **kw))
        else:
            w, h = 0.2, 0.64
            ax.add_patch(patches.Rectangle((x - w / 2, y - h / 2), w, h, **kw))
            ax.add_patch(patches.Rectangle((x - h / 2, y - w / 2), h, w, **kw))

    for i in range(5):
        ax.plot([0, 4], [i, i], color="0.3", lw=1)
        ax.plot([i, i], [0, 4], color="0.3", lw=1)
    for r in range(4):
        for c in range(4):
            x, y = c + 0.5, 3.5 - r  # row 0 at the top
            if (r, c) == p.probe:
                if show_answer and p.answer is not None:
                    shape(p.answer, x, y, alpha=0.3)
                ax.text(x, y, "?", ha="center", va="center", fontsize=20, fontweight="bold",
                        color="#e6b800")
            elif p.grid[r][c]:
                shape(p.grid[r][c], x, y)
    ax.set_xlim(-0.05, 4.05)
    ax.set_ylim(-0.05, 4.05)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax
