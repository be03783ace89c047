"""Solutions of the exercises of chapters 2-4, as functions the chapters' folded solution cells
call and the tests check.

* chapter 2: :func:`removable_cells` (exercise 1), :func:`consistent_squares` and
  :func:`squares_by_condition` (exercise 2);
* chapter 3: :func:`lst_decay` and :func:`equal_ends_base` (exercise 1),
  :func:`binary_grid_pe` with :func:`lstpe.tutorial.sinusoid.grid_checks` (exercise 2);
* chapter 4: :func:`mean_readout_dependence` (exercise 1), :func:`l2_row_mass`
  (exercise 2).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from lstpe import lst
from lstpe.tutorial.sinusoid import sinusoid_decay

__all__ = ["removable_cells", "consistent_squares", "squares_by_condition", "lst_decay",
           "equal_ends_base", "binary_grid_pe", "mean_readout_dependence", "l2_row_mass"]

# --------------------------------------------------------------------------- chapter 2


def removable_cells(p: lst.Puzzle) -> pd.DataFrame:
    """Blank each filled cell of ``p`` in turn: is the puzzle still uniquely solvable, and what
    is its relational complexity then?

    Returns:
        One row per filled cell: ``row, col, shape, unique`` (one probe value left),
        ``complexity`` (:func:`lstpe.lst.relational_complexity`; 0 where not unique).
    """
    rows = []
    for r in range(4):
        for c in range(4):
            if (r, c) == p.probe or not p.grid[r][c]:
                continue
            grid = [list(row) for row in p.grid]
            grid[r][c] = 0
            q = lst.Puzzle(tuple(map(tuple, grid)), p.probe)
            unique = len({int(s[p.probe]) for s in lst.candidates(q)}) == 1
            rows.append({"row": r, "col": c, "shape": int(p.grid[r][c]), "unique": unique,
                         "complexity": lst.relational_complexity(q) if unique else 0})
    return pd.DataFrame(rows)


def consistent_squares(puzzles: Sequence[lst.Puzzle], acc: pd.DataFrame) -> pd.DataFrame:
    """How many of the 576 Latin squares agree with each puzzle, beside its condition and
    human accuracy (``acc``: ``id, accuracy``, ``id`` = index in ``puzzles``).

    Returns:
        Columns ``id, vectors, squares, accuracy``.
    """
    by_id = acc.set_index("id")["accuracy"]
    return pd.DataFrame([{"id": i, "vectors": p.vectors, "squares": len(lst.candidates(p)),
                          "accuracy": float(by_id[i])} for i, p in enumerate(puzzles)])


def squares_by_condition(frame: pd.DataFrame) -> pd.DataFrame:
    """Per condition: mean consistent squares, mean human accuracy, and the Spearman
    correlation of squares and accuracy within the condition (:func:`consistent_squares`)."""
    def spearman(g: pd.DataFrame) -> float:
        return float(g["squares"].rank().corr(g["accuracy"].rank()))

    g = frame.groupby("vectors")
    out = g[["squares", "accuracy"]].mean().add_prefix("mean ")
    out["spearman(squares, accuracy)"] = g.apply(spearman, include_groups=False)
    return out


# --------------------------------------------------------------------------- chapter 3


def lst_decay(bases: Sequence[float] = (10000, 100), d: int = 160) -> pd.DataFrame:
    """:func:`lstpe.tutorial.sinusoid.sinusoid_decay` over the 16 positions of the LST, one
    column per base (index: the 1-D offset 0-15)."""
    out = pd.DataFrame({f"base {b:g}": sinusoid_decay(15, d, b) for b in bases})
    out.index.name = "offset"
    return out


def equal_ends_base(d: int = 160, bases: Sequence[float] | None = None) -> tuple[float, float]:
    """The base (of a log grid from 1.1 to 10^9 unless given) at which offsets 1 and 15 are
    the most alike: ``(base, |s(1) - s(15)|)`` with ``s`` the normalised inner product."""
    grid = np.geomspace(1.1, 1e9, 300) if bases is None else np.asarray(bases, dtype=float)
    gaps = [abs(float(s[1] - s[15])) for s in (sinusoid_decay(15, d, b) for b in grid)]
    k = int(np.argmin(gaps))
    return float(grid[k]), gaps[k]


def binary_grid_pe(d: int = 160) -> torch.Tensor:
    """A "2-D binary counter" PE of the 4x4 grid, (16, d) float64: the row's 2 bits fill the
    first d/2 dims and the column's 2 bits the last d/2, each bit repeated d/4 times (0/1)."""
    if d % 4:
        raise ValueError(f"d must be a multiple of 4, got {d}")
    k = torch.arange(16)
    bits = [(k // 4 >> 1) & 1, (k // 4) & 1, (k % 4 >> 1) & 1, (k % 4) & 1]
    return torch.stack(bits, 1).double().repeat_interleave(d // 4, dim=1)


# --------------------------------------------------------------------------- chapter 4


def mean_readout_dependence(x: torch.Tensor, seed: int = 0, d_model: int = 32,
                            n_layers: int = 2) -> pd.Series:
    """The authors' misused rope wiring (:class:`lstpe.analysis.rope_misuse.SeqFirstRopeLST`)
    with a read-out that averages all 16 tokens instead of taking token 15: the largest change
    of puzzle 0's logits under each edit of :func:`~lstpe.analysis.rope_misuse.perturbations`."""
    from lstpe.analysis import rope_misuse as rm

    class MeanReadout(rm.SeqFirstRopeLST):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.embed(x)
            for blk in self.blocks:
                h = blk(h)
            return self.head(h.mean(1))

    model = MeanReadout(d_model, n_layers, seed=seed).double()
    return pd.Series(rm.logit_change(model, x.double()), name="mean read-out")


def l2_row_mass(slope_left: float, slope_right: float, n: int = 16) -> np.ndarray:
    r"""Su's probe under l2-normalised attention with identical inputs: the output of position
    ``i`` is :math:`(\sum_j a_{ij})\,v`, so the row masses :math:`\sum_j a_{ij}` are all it can
    tell positions by. ALiBi-style logits :math:`-s_\ell (i - j)` for :math:`j < i` and
    :math:`-s_r (j - i)` for :math:`j > i`; returns the n row masses."""
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    b = np.where(j < i, -slope_left * (i - j), -slope_right * (j - i)).astype(float)
    a = np.exp(b)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    return a.sum(axis=1)
