"""Chapter 2 (the Latin Square Task): which lines force the probe, and the chapter's figures.

A *line* is a row or a column, written ``("row", k)`` or ``("col", k)``. :func:`probe_values`
lists the probe values that the filled cells of some lines allow on their own (every other cell
blanked), straight from the 576 Latin squares; :func:`forcing` lists the sets of lines that pin
the probe down. They re-derive, slowly and readably, what :func:`lstpe.lst.relational_complexity`
computes with bit masks.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lstpe import lst
from lstpe.rendering import style

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from lstpe.rendering.widgets import WithStatic

Line = tuple[str, int]
LINES: tuple[Line, ...] = tuple([("row", k) for k in range(4)] + [("col", k) for k in range(4)])
"""The 8 lines of the grid."""

SHAPE_COLORS = {1: "#1f77b4", 2: "#d62728", 3: "#2ca02c", 4: "#9467bd"}
"""The colours :func:`lstpe.lst.plot_puzzle` gives shapes 1-4."""

CONDITION_COLORS = {1: "#8ecae6", 2: "#219ebc", 3: "#023047"}


def _figure(*args, **kw) -> tuple[Figure, np.ndarray]:
    import matplotlib.pyplot as plt

    kw.setdefault("layout", "constrained")
    return plt.subplots(*args, squeeze=False, **kw)


# --------------------------------------------------------------------------- lines


def probe_values(p: lst.Puzzle, lines: Sequence[Line]) -> list[int]:
    """Probe values allowed by the filled cells of ``lines`` alone (all other cells blanked)."""
    keep = np.zeros((4, 4), dtype=bool)
    for kind, k in lines:
        if kind not in ("row", "col") or not 0 <= k < 4:
            raise ValueError(f"not a line: {(kind, k)!r}")
        keep[(k, slice(None)) if kind == "row" else (slice(None), k)] = True
    sub = lst.Puzzle(tuple(map(tuple, np.where(keep, p.grid, 0))), p.probe)
    return sorted({int(s[p.probe]) for s in lst.candidates(sub)})


def forcing(p: lst.Puzzle, size: int) -> list[tuple[Line, ...]]:
    """Every set of ``size`` lines whose filled cells force the probe."""
    return [ls for ls in itertools.combinations(LINES, size) if len(probe_values(p, ls)) == 1]


def own_lines(p: lst.Puzzle) -> dict[str, list[Line]]:
    """The probe's row, its column, and both."""
    r, c = p.probe
    return {"row alone": [("row", r)], "column alone": [("col", c)],
            "row + column": [("row", r), ("col", c)]}


def lines_table(examples: Mapping[int, lst.Puzzle]) -> pd.DataFrame:
    """Per puzzle: the probe values its own lines allow, the forcing 3-line sets, its RC."""
    rows = []
    for v, p in examples.items():
        row = {"published": f"{v}-vector"}
        row.update({k: probe_values(p, ls) for k, ls in own_lines(p).items()})
        row["forcing 3-line sets"] = len(forcing(p, 3))
        row["computed RC"] = lst.relational_complexity(p)
        rows.append(row)
    return pd.DataFrame(rows).set_index("published")


def lines_to_show(p: lst.Puzzle) -> tuple[Line, ...]:
    """One set of lines that forces the probe, preferring the probe's own row and column."""
    for ls in own_lines(p).values():
        if len(probe_values(p, ls)) == 1:
            return tuple(ls)
    r, c = p.probe
    for size in (3, 4):
        sets = forcing(p, size)
        if sets:
            return max(sets, key=lambda ls: (("row", r) in ls) + (("col", c) in ls))
    raise ValueError("no set of up to 4 lines forces the probe: not a uniquely solvable puzzle")


def shade(ax: Axes, lines: Sequence[Line], color: str = "#ffd54f") -> None:
    """Shade lines on a board drawn by :func:`lstpe.lst.plot_puzzle`."""
    from matplotlib import patches

    for kind, k in lines:
        xy, w, h = ((0, 3 - k), 4, 1) if kind == "row" else ((k, 0), 1, 4)
        ax.add_patch(patches.Rectangle(xy, w, h, color=color, alpha=0.35, zorder=0))


def _describe(lines: Sequence[Line]) -> str:
    return " + ".join(f"{kind} {k}" for kind, k in lines)


def plot_forcing_lines(examples: Mapping[int, lst.Puzzle]) -> Figure:
    """Each puzzle with one set of lines that forces its probe shaded."""
    fig, axes = _figure(1, len(examples), figsize=(2.6 * len(examples), 2.9))
    for ax, (v, p) in zip(axes[0], examples.items(), strict=True):
        used = lines_to_show(p)
        lst.plot_puzzle(p, ax=ax)
        shade(ax, used)
        ax.set_title(f"{v}-vector: {_describe(used)}", fontsize=9)
    fig.suptitle("Lines whose filled cells force the probe (shaded)")
    return style.readable(fig)


def pair_forced(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """How many three-vector puzzles some pair of lines forces (a "hidden single")."""
    rows = []
    for name, frame in frames.items():
        quat = lst.puzzles_from_frame(frame[frame["vectors"] == 3])
        rows.append({"puzzles": name, "three-vector": len(quat),
                     "forced by a pair of lines": sum(bool(forcing(p, 2)) for p in quat)})
    return pd.DataFrame(rows).set_index("puzzles")


def hidden_single(frame: pd.DataFrame) -> lst.Puzzle:
    """The first three-vector puzzle of ``frame`` that a pair of lines forces (a "hidden
    single"); ValueError when there is none."""
    quat = lst.puzzles_from_frame(frame[frame["vectors"] == 3])
    p = next((q for q in quat if forcing(q, 2)), None)
    if p is None:
        raise ValueError("no three-vector puzzle of this frame is forced by two lines")
    return p


def plot_hidden_single(frame: pd.DataFrame) -> Figure:
    """The first three-vector puzzle of ``frame`` that a pair of lines forces, pair shaded."""
    p = hidden_single(frame)
    pair = forcing(p, 2)[0]
    fig, axes = _figure(figsize=(3.0, 3.1))
    lst.plot_puzzle(p, ax=axes[0, 0], show_answer=True)
    shade(axes[0, 0], pair)
    axes[0, 0].set_title(f"a 'hidden single': forced by {_describe(pair)}", fontsize=9)
    return style.readable(fig)


# --------------------------------------------------------------------------- puzzles and squares


def plot_examples(examples: Mapping[int, lst.Puzzle]) -> Figure:
    """Each puzzle (top) and its solution (bottom)."""
    fig, axes = _figure(2, len(examples), figsize=(2.5 * len(examples), 5.2))
    for j, (v, p) in enumerate(examples.items()):
        lst.plot_puzzle(p, ax=axes[0, j]).set_title(f"{v}-vector puzzle")
        lst.plot_puzzle(p, ax=axes[1, j], show_answer=True).set_title(
            f"solution: {lst.SHAPES[p.answer]}")
    fig.suptitle("One puzzle per condition (top) and the shape that solves it (bottom)")
    return style.readable(fig)


def token_table(p: lst.Puzzle) -> pd.DataFrame:
    """The one-hot tensor of ``p`` (:func:`lstpe.lst.encode`) as a table, one row per token."""
    x = lst.encode([p])[0].int().numpy()
    return pd.DataFrame(x, columns=["circle", "triangle", "square", "cross", "probe"],
                        index=pd.Index([f"r{i // 4} c{i % 4}" for i in range(16)], name="token"))


def solver_table(examples: Mapping[int, lst.Puzzle]) -> pd.DataFrame:
    """Per puzzle: filled cells, Latin squares consistent with them, probe values they leave."""
    rows = []
    for v, p in examples.items():
        cand = lst.candidates(p)
        rows.append({"puzzle": f"{v}-vector", "filled cells": int((np.array(p.grid) > 0).sum()),
                     "consistent squares": len(cand),
                     "probe values left": sorted({int(s[p.probe]) for s in cand}),
                     "solve()": lst.solve(p), "published answer": p.answer})
    return pd.DataFrame(rows).set_index("puzzle")


def square_checks(sq: np.ndarray) -> pd.Series:
    """The enumeration of Latin squares checked against the classical count L4 = 4! 3! R4."""
    natural = np.arange(1, 5)
    reduced = int(((sq[:, 0] == natural).all(1) & (sq[:, :, 0] == natural).all(1)).sum())
    latin = all(len(set(s[r])) == 4 and len(set(s[:, r])) == 4 for s in sq for r in range(4))
    return pd.Series({"squares": len(sq), "all rows and columns permutations": latin,
                      "reduced squares R4": reduced, "4! * 3! * R4": 24 * 6 * reduced})


def plot_square_gallery(sq: np.ndarray, n: int = 16) -> Figure:
    """``n`` evenly spaced squares of the enumeration, coloured by shape, with a shape legend."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    cmap = ListedColormap([SHAPE_COLORS[v] for v in (1, 2, 3, 4)])
    cols = 8
    fig, axes = _figure(int(np.ceil(n / cols)), cols, figsize=(9, 1.25 * np.ceil(n / cols) + 0.9))
    for ax, k in zip(axes.flat, np.linspace(0, len(sq) - 1, n).astype(int), strict=True):
        ax.imshow(sq[k], cmap=cmap, vmin=1, vmax=4)
        ax.set_title(f"#{k}", fontsize=8)
        ax.axis("off")
    fig.legend([Patch(color=SHAPE_COLORS[v]) for v in (1, 2, 3, 4)], list(lst.SHAPES.values()),
               loc="outside lower center", ncols=4, title="colour = shape")
    fig.suptitle(f"{n} of the {len(sq)} Latin squares of order 4")
    return style.readable(fig)


# --------------------------------------------------------------------------- humans


def condition_summary(acc: pd.DataFrame) -> pd.DataFrame:
    """Per condition: mean, SD, min, max of per-puzzle accuracy and the number of puzzles."""
    out = acc.groupby("vectors")["accuracy"].agg(["mean", "std", "min", "max", "count"])
    out.index = [f"{v}-vector" for v in out.index]
    return out.rename(columns={"count": "puzzles"})


def plot_human_accuracy(acc: pd.DataFrame, seed: int = 0) -> Figure:
    """Left: mean accuracy per condition (bar, SE) over the puzzles (dots). Right: histograms."""
    fig, axes = _figure(1, 2, figsize=(9.5, 3.8))
    ax, hist = axes[0]
    grouped = acc.groupby("vectors")["accuracy"]
    mean, se = grouped.mean(), grouped.std() / np.sqrt(grouped.count())
    ax.bar(mean.index, mean.values, yerr=se.values, capsize=4,
           color=[CONDITION_COLORS[v] for v in mean.index], label="mean ± SE over puzzles")
    jitter = np.random.default_rng(seed).uniform(-0.25, 0.25, len(acc))
    ax.scatter(acc["vectors"] + jitter, acc["accuracy"], s=8, color="0.3", alpha=0.6, zorder=3,
               label="one puzzle")
    ax.set_xticks([1, 2, 3], [f"{v}-vector" for v in (1, 2, 3)])
    ax.set_xlabel("condition (relational complexity)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.05)
    ax.set_title("Human accuracy by condition")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2)
    bins = np.linspace(0.4, 1.0, 13)
    for v in (1, 2, 3):
        hist.hist(acc.loc[acc["vectors"] == v, "accuracy"], bins=bins, histtype="step",
                  linewidth=2, color=CONDITION_COLORS[v], label=f"{v}-vector")
    hist.set_xlabel("per-puzzle accuracy")
    hist.set_ylabel("number of puzzles")
    hist.set_title(f"Distribution over the {len(acc)} puzzles")
    hist.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=3)
    return style.readable(fig)


def plot_easiest_hardest(acc: pd.DataFrame, puzzles: Sequence[lst.Puzzle]) -> Figure:
    """The two easiest and two hardest puzzles for people in each condition, answers shown."""
    by_id = acc.set_index("id")["accuracy"]
    fig, axes = _figure(3, 4, figsize=(8, 6.8))
    tags = ["easiest", "2nd easiest", "2nd hardest", "hardest"]
    for row, v in zip(axes, (1, 2, 3), strict=True):
        ranked = acc[acc["vectors"] == v].sort_values("accuracy", kind="stable")["id"]
        chosen = list(ranked.iloc[-2:][::-1]) + list(ranked.iloc[:2][::-1])
        for ax, i, tag in zip(row, chosen, tags, strict=True):
            lst.plot_puzzle(puzzles[i], ax=ax, show_answer=True)
            ax.set_title(f"{v}-vec {tag}: {by_id[i]:.2f}", fontsize=8)
    fig.suptitle("Easiest and hardest puzzles for people, per condition (faint shape = answer)")
    return style.readable(fig)


def plot_puzzle_gallery(puzzles: Sequence[lst.Puzzle], acc: pd.DataFrame, show: int = 12,
                        ncols: int = 6) -> Figure:
    """The first ``show`` puzzles as :func:`puzzle_browser` shows them with the answer revealed:
    number, condition and human accuracy above each board (a readable static subset; the
    browser holds them all).

    Args:
        puzzles: the puzzles, in the browser's order (N of them).
        acc: per-puzzle human accuracy (``id``, ``accuracy``; ``id`` = index in ``puzzles``).
        show: how many (the first ones), at most N.
    Returns:
        The Figure, one panel per puzzle shown first in ``fig.axes`` (unused panels hidden).
    """
    by_id = acc.set_index("id")["accuracy"]
    chosen = list(puzzles)[:max(1, show)]
    ncols = max(1, min(ncols, len(chosen)))
    nrows = -(-len(chosen) // ncols)
    width = style.WIDTH * min(1.0, ncols / 6)
    fig, axes = _figure(nrows, ncols, figsize=(width, (width / ncols + 0.3) * nrows + 0.4))
    for ax in axes.flat[len(chosen):]:
        ax.set_visible(False)
    for i, (ax, p) in enumerate(zip(axes.flat, chosen, strict=False)):
        lst.plot_puzzle(p, ax=ax, show_answer=True)
        for t in ax.texts:  # the probe's "?" at the board's scale
            t.set_fontsize(12)
        ax.set_title(f"#{i} {p.vectors}v {by_id[i]:.2f}", fontsize=9, pad=2)
    fig.suptitle(f"Puzzles #0-{len(chosen) - 1} of {len(puzzles)}, answers revealed (faint): "
                 "number, vectors (v), human accuracy", fontsize=10)
    return style.readable(fig)


def _puzzle_view(p: lst.Puzzle, i: int, accuracy: float, reveal: bool,
                 close: bool = True) -> Figure:
    """One puzzle as the browser shows it (closed in pyplot with ``close``)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.3, 3.5), dpi=style.DPI)
    lst.plot_puzzle(p, ax=ax, show_answer=reveal)
    ax.set_title(f"#{i}: {p.vectors}-vector, human accuracy {accuracy:.2f}", fontsize=10)
    if close:
        plt.close(fig)
    return style.readable(fig)


def puzzle_svg(p: lst.Puzzle, title: str, reveal: bool = False, cell: int = 56) -> bytes:
    """``p`` drawn as :func:`lstpe.lst.plot_puzzle` draws it (same shapes and colours), as a
    small SVG under ``title``: the browser's view on the static page."""
    from html import escape

    def shape(v: int, x: float, y: float, alpha: float = 1.0) -> str:
        a, c, r = f' fill-opacity="{alpha}"', SHAPE_COLORS[v], cell
        if v == 1:
            return f'<circle cx="{x}" cy="{y}" r="{0.3 * r}" fill="{c}"{a}/>'
        if v == 2:
            ts = (0, 2 * np.pi / 3, 4 * np.pi / 3)
            pts = " ".join(f"{x + 0.36 * r * np.sin(t):.1f},"
                           f"{y - 0.05 * r - 0.36 * r * np.cos(t):.1f}" for t in ts)
            return f'<polygon points="{pts}" fill="{c}"{a}/>'
        if v == 3:
            return (f'<rect x="{x - 0.28 * r}" y="{y - 0.28 * r}" width="{0.56 * r}" '
                    f'height="{0.56 * r}" fill="{c}"{a}/>')
        w, h = 0.2 * r, 0.64 * r
        return (f'<rect x="{x - w / 2}" y="{y - h / 2}" width="{w}" height="{h}" fill="{c}"{a}/>'
                f'<rect x="{x - h / 2}" y="{y - w / 2}" width="{h}" height="{w}" fill="{c}"{a}/>')

    top, n = 30, 4 * cell
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{n + 4}" height="{n + top + 2}" '
           f'font-family="sans-serif"><text x="{(n + 4) / 2}" y="18" font-size="14" '
           f'text-anchor="middle">{escape(title)}</text><g transform="translate(2,{top})">']
    for k in range(5):
        out.append(f'<path d="M0,{k * cell}H{n}M{k * cell},0V{n}" stroke="#4d4d4d"/>')
    for r in range(4):
        for c in range(4):
            x, y = (c + 0.5) * cell, (r + 0.5) * cell
            if (r, c) == p.probe:
                if reveal and p.answer is not None:
                    out.append(shape(p.answer, x, y, 0.3))
                out.append(f'<text x="{x}" y="{y + 0.17 * cell}" font-size="{0.5 * cell:.0f}" '
                           'font-weight="bold" fill="#e6b800" text-anchor="middle">?</text>')
            elif p.grid[r][c]:
                out.append(shape(p.grid[r][c], x, y))
    out.append("</g></svg>")
    return "".join(out).encode()


def puzzle_views(puzzles: Sequence[lst.Puzzle], acc: pd.DataFrame) -> str:
    """The browser for the static page: every puzzle, answer hidden and revealed, as an SVG
    (:func:`puzzle_svg`) behind a slider and a checkbox
    (:func:`lstpe.rendering.widgets.views_html`)."""
    from lstpe.rendering.widgets import Control, views_html

    by_id = acc.set_index("id")["accuracy"]
    views = {(str(i), str(int(r))): puzzle_svg(
                p, f"#{i}: {p.vectors}-vector, human accuracy {by_id[i]:.2f}", r)
             for i, p in enumerate(puzzles) for r in (False, True)}
    controls = [Control("puzzle", tuple((str(i), f"#{i}") for i in range(len(puzzles))),
                        "range"),
                Control("reveal answer", (("0", "no"), ("1", "yes")), "checkbox")]
    return views_html(views, controls, alt="LST puzzle")


def puzzle_browser(puzzles: Sequence[lst.Puzzle], acc: pd.DataFrame) -> WithStatic:
    """An ipywidgets slider over the puzzles with a checkbox that reveals the answer (Jupyter,
    Colab); on the rendered page the same browser pre-rendered (:func:`puzzle_views`), and
    :func:`plot_puzzle_gallery` as its PNG (:func:`lstpe.rendering.widgets.with_static`; the
    widget is ``.widget``)."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    from lstpe.rendering.widgets import with_static

    by_id = acc.set_index("id")["accuracy"]

    def show(i: int = 0, reveal: bool = False) -> None:
        fig = _puzzle_view(puzzles[i], i, by_id[i], reveal, close=False)
        plt.show()
        plt.close(fig)  # shown (inline backend) or not showable (Agg): never again

    live = widgets.interactive(
        show, i=widgets.IntSlider(0, 0, len(puzzles) - 1, description="puzzle"),
        reveal=widgets.Checkbox(False, description="reveal answer"))
    return with_static(live, plot_puzzle_gallery(puzzles, acc),
                       text="puzzle browser (ipywidgets; needs a live kernel)",
                       html=puzzle_views(puzzles, acc))


# --------------------------------------------------------------------------- generator, splits


def filled_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """Share of puzzles per number of shown cells (probe excluded): generated vs the authors'."""
    k = frame["puzzle"].map(lambda s: sum(ch not in "05" for ch in s))
    rows = []
    for v in (1, 2, 3):
        ref = pd.Series(lst.FILLED_HISTOGRAM[v], dtype=float)
        ours = k[frame["vectors"] == v].value_counts().reindex(ref.index, fill_value=0)
        rows += [{"vectors": v, "filled": int(f), "authors' training set": ref[f] / ref.sum(),
                  "generated": ours[f] / max(ours.sum(), 1), "n generated": int(ours.sum())}
                 for f in ref.index]
    return pd.DataFrame(rows)


def plot_filled_cells(frame: pd.DataFrame) -> Figure:
    """Bars of :func:`filled_cells`, one panel per condition, legend below the panels."""
    table = filled_cells(frame)
    fig, axes = _figure(1, 3, figsize=(10, 3.3), sharey=True)
    for ax, (v, t) in zip(axes[0], table.groupby("vectors"), strict=True):
        ax.bar(t["filled"] - 0.2, t["authors' training set"], width=0.4,
               label="authors' training set")
        ax.bar(t["filled"] + 0.2, t["generated"], width=0.4, label="generated")
        ax.set_title(f"{v}-vector (n generated = {t['n generated'].iloc[0]})", fontsize=9)
        ax.set_xlabel("filled cells (probe excluded)")
    axes[0, 0].set_ylabel("share of puzzles")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    fig.suptitle("Number of shown cells: generator vs the authors' puzzles")
    return style.readable(fig)


def plot_generated(frame: pd.DataFrame, per_condition: int = 2) -> Figure:
    """The first ``per_condition`` generated puzzles of each condition, answers shown."""
    puzzles = lst.puzzles_from_frame(frame)
    picks = [puzzles[i] for v in (1, 2, 3)
             for i in np.flatnonzero(frame["vectors"].to_numpy() == v)[:per_condition]]
    fig, axes = _figure(1, len(picks), figsize=(1.7 * len(picks), 2.1))
    for ax, p in zip(axes[0], picks, strict=True):
        lst.plot_puzzle(p, ax=ax, show_answer=True).set_title(f"{p.vectors}-vector")
    fig.suptitle("Generated puzzles, answers shown")
    return style.readable(fig)


def split_table(splits: Mapping[str, lst.Split]) -> pd.DataFrame:
    """Puzzles per condition in each split, with totals."""
    table = pd.DataFrame({name: pd.Series(sp.vectors.numpy()).value_counts().sort_index()
                          for name, sp in splits.items()}).fillna(0).astype(int)
    table.index = [f"{v}-vector" for v in table.index]
    table.loc["total"] = table.sum()
    return table


def shared_ids(splits: Mapping[str, lst.Split]) -> int:
    """Puzzles that appear in both the train and the test split (0 for a proper split)."""
    return len(np.intersect1d(splits["train"].ids, splits["test"].ids))
