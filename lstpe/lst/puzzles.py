"""LST puzzles: the :class:`Puzzle` type, parsing and validation, an exact solver,
relational complexity and drawing a puzzle (:func:`render_text`, :func:`plot_puzzle`).

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

This is the bottom of the LST modules: :mod:`lstpe.lst.generator` (generator, dissimilarity)
and :mod:`lstpe.lst.data` (vendored data, tensors, splits) build on it, and :mod:`lstpe.lst`
re-exports all of them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes

CONDITIONS: dict[str, int] = {"Binary": 1, "Ternary": 2, "Quaternary": 3}
"""Published condition name -> relational complexity ("number of vectors")."""

SHAPES: dict[int, str] = {1: "circle", 2: "triangle", 3: "square", 4: "cross"}
"""How digits 1-4 are drawn (an arbitrary but fixed choice)."""

_SYMBOLS = {0: "·", 1: "●", 2: "▲", 3: "■", 4: "✚", 5: "?"}
_TRIPLES = np.array(list(itertools.combinations(range(8), 3)))  # (56, 3) line indices


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
    frame of :func:`~lstpe.lst.data.load_human` / :func:`~lstpe.lst.data.load_training` format."""
    comp = relational_complexities(list(df["puzzle"]))
    tab = pd.crosstab(pd.Series(df["vectors"].to_numpy(), name="published"),
                      pd.Series(comp, name="computed"))
    cols = sorted(set(tab.columns) | {1, 2, 3})
    return tab.reindex(columns=cols, fill_value=0)


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
