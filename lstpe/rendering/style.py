"""The book's one figure style: figures as wide as the page's content column, text >= 9 pt there.

A figure on the rendered book page is a PNG saved at the figure's dpi (the inline backend uses
``fig.dpi``); the page draws it at its pixel size, shrunk to the content column when it is wider.
So a figure :data:`WIDTH` inches wide at :data:`DPI` = 96 (one CSS inch) fills the column of the
Jupyter Book theme at a 1280 px window exactly, and a font of ``s`` pt shows at ``s`` CSS pt. A
wider figure is shrunk and its text with it: :func:`displayed_pt` says by how much, and
:func:`readable` fits a figure to the column and lifts what would show under :data:`MIN_PT`.

* :data:`RC`, :func:`apply`: the rcParams (chapters call :func:`apply` through
  ``lstpe.chapters.notebook.setup``);
* :func:`figsize`: a width as a fraction of the column, and a height;
* :func:`readable`: fit a finished figure to the column, text at least :data:`MIN_PT`;
* :func:`small_text`: the texts of a figure that would show under :data:`MIN_PT` (for tests);
  :func:`overlapping_text`: texts that run into each other; :func:`legend_clashes`: legends
  over texts or other panels; :func:`markers_at_edge`: markers cut by their axes' edge;
  :func:`crowded_cell_labels`: a heatmap's cell values wider than their cells;
* :func:`legend_below`: a legend under an axes and its tick labels;
  :func:`swarm_offsets`: sideways offsets that keep markers at one x from hiding each other.

Lives in :mod:`lstpe.rendering`, a floor under every module that draws figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Text

__all__ = ["COLUMN_PX", "DPI", "MIN_PT", "RC", "WIDTH", "apply", "cell_labels",
           "crowded_cell_labels", "displayed_pt", "figsize", "legend_below", "legend_clashes",
           "markers_at_edge", "overlapping_text", "readable", "small_text", "swarm_offsets"]

COLUMN_PX = 688
"""Width in CSS px of a cell output in the book's content column (sphinx-book-theme 1.3,
measured in headless Chromium: ``div.cell_output`` at a 1280 px window, sidebar shown)."""

DPI = 96
"""Figure dpi: one figure inch is one CSS inch (96 px) on the page."""

WIDTH = COLUMN_PX / DPI
"""A full-column figure's width in inches (about 7.2)."""

MIN_PT = 9.0
"""The smallest text a figure may show, in pt at its displayed size."""

RC: dict[str, Any] = {
    "figure.figsize": (WIDTH, 3.6),
    "figure.dpi": DPI,
    "savefig.dpi": "figure",
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9.5,
    "figure.titlesize": 11,
    "legend.loc": "best",
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "image.cmap": "viridis",
}
"""The rcParams of the book's figures."""


def apply() -> None:
    """Set :data:`RC` in matplotlib's rcParams (figures made afterwards use them)."""
    import matplotlib as mpl

    mpl.rcParams.update(RC)


def figsize(frac: float = 1.0, height: float = 3.6) -> tuple[float, float]:
    """``(width, height)`` in inches: ``frac`` of the column's width, ``height`` inches tall."""
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    return (WIDTH * frac, height)


def lay_out(fig: Figure) -> None:
    """Draw ``fig`` for its layout only: the layout engine places the axes and every text is
    measured, as at a real draw, but no pixel is painted (``RendererBase._draw_disabled``, what
    ``Figure.draw_without_rendering`` uses). Every measurement of this module and of
    :mod:`lstpe.rendering.phone` reads the drawn boxes only, so they need no pixels; a figure
    without an Agg canvas is drawn as ``canvas.draw()`` draws it."""
    canvas = fig.canvas
    if not hasattr(canvas, "get_renderer"):
        canvas.draw()
        return
    renderer = canvas.get_renderer()
    with renderer._draw_disabled():
        fig.draw(renderer)


def _png_width_px(fig: Figure, draw: bool = True) -> float:
    """Width in px of the PNG the inline backend saves (``bbox_inches="tight"``, which pads
    the tight box by ``savefig.pad_inches`` on each side), measured on the drawn figure
    (``draw=False``: it was just drawn)."""
    import matplotlib as mpl

    canvas = fig.canvas
    if not hasattr(canvas, "get_renderer"):  # a figure closed in pyplot: give it an Agg canvas
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(fig)
    if draw:
        lay_out(canvas.figure)  # a layout engine places the axes when the figure is drawn
    pad = 2 * mpl.rcParams["savefig.pad_inches"] * fig.dpi
    return fig.get_tightbbox(canvas.get_renderer()).width * fig.dpi + pad


def displayed_pt(fig: Figure, size_pt: float, column_px: float = COLUMN_PX) -> float:
    """What a ``size_pt`` font of ``fig`` measures on the page, in CSS pt: the PNG holds it at
    ``size_pt * dpi / 72`` px and the page shrinks a PNG wider than ``column_px`` to fit."""
    scale = min(1.0, column_px / _png_width_px(fig))
    return size_pt * fig.dpi / DPI * scale


def _texts(fig: Figure) -> list[Text]:
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def small_text(fig: Figure, min_pt: float = MIN_PT, column_px: float = COLUMN_PX,
               draw: bool = True) -> list[tuple[str, float]]:
    """``(text, displayed pt)`` of every visible text of ``fig`` that shows under ``min_pt``
    on the page (:func:`displayed_pt`); ``draw=False``: the figure was just drawn."""
    out = []
    scale = min(1.0, column_px / _png_width_px(fig, draw)) * fig.dpi / DPI  # one layout for all
    for t in _texts(fig):
        pt = t.get_fontsize() * scale
        if pt < min_pt - 1e-6:
            out.append((t.get_text(), round(pt, 2)))
    return out


def _frame_texts(ax: Axes) -> list[Text]:
    """The titles, axis labels and drawn tick labels (inside the view) of ``ax``: the texts
    around its frame."""
    own = [ax.title, ax._left_title, ax._right_title]
    for axis in (ax.xaxis, ax.yaxis) if ax.axison else ():
        own.append(axis.label)
        lo, hi = sorted(axis.get_view_interval())
        own += [lab for tick in axis.get_major_ticks()
                if lo - 1e-9 <= tick.get_loc() <= hi + 1e-9
                for lab in (tick.label1, tick.label2)]
    return [t for t in own if t.get_visible() and t.get_text().strip()]


def _overlap(a: Any, b: Any, slack_px: float) -> bool:
    """Whether boxes ``a`` and ``b`` overlap by more than ``slack_px`` each way."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > slack_px
            and min(a.y1, b.y1) - max(a.y0, b.y0) > slack_px)


def overlapping_text(fig: Figure, slack_px: float = 1.0, draw: bool = True
                     ) -> list[tuple[str, str]]:
    """Pairs ``(text, what)`` of titles, axis labels and tick labels of ``fig`` whose drawn box
    overlaps another such text or another axes' plotting area by more than ``slack_px`` pixels
    each way (``what``: the other text, or ``axes <its title>``): titles run together, ticks
    collide, a panel covers its neighbour's ticks. Texts drawn inside an axes (annotations,
    cell values) are not compared. ``draw=False``: the figure was just drawn."""
    if draw:
        lay_out(fig)
    r = fig.canvas.get_renderer()
    items: list[tuple[Text, Any]] = [(t, None) for t in [fig._suptitle]
                                     if t is not None and t.get_text()]
    axes = [ax for ax in fig.axes if ax.get_visible()]
    items += [(t, ax) for ax in axes for t in _frame_texts(ax)]
    boxes = [t.get_window_extent(r) for t, _ in items]

    def hit(a: Any, b: Any) -> bool:
        return _overlap(a, b, slack_px)

    out = []
    for i, (ti, ai) in enumerate(items):
        out += [(ti.get_text(), tj.get_text()) for j, (tj, _) in enumerate(items)
                if j > i and hit(boxes[i], boxes[j])]
        out += [(ti.get_text(), f"axes {ax.get_title() or ax.get_label()}") for ax in axes
                if ax is not ai and hit(boxes[i], ax.get_window_extent(r))]
    return out


def readable(fig: Figure, min_pt: float = MIN_PT) -> Figure:
    """Fit ``fig`` to the page: at :data:`DPI`, no wider than :data:`WIDTH` (height scaled
    with it), every visible text at least ``min_pt``, and its saved PNG (tight box) no wider
    than :data:`COLUMN_PX`. Returns ``fig``."""
    w, h = fig.get_size_inches()
    fig.set_dpi(DPI)
    if w > WIDTH:
        fig.set_size_inches(WIDTH, h * WIDTH / w)
    for t in _texts(fig):
        if t.get_fontsize() < min_pt:
            t.set_fontsize(min_pt)
    for i in range(6):  # text over the figure's edge widens the saved PNG: shrink to fit
        px = _png_width_px(fig)
        if px <= COLUMN_PX:
            break
        w, h = fig.get_size_inches()  # a legend or label in points does not shrink with the
        # figure: after the first proportional step, shrink by more than the excess
        new_w = (w * (COLUMN_PX - 2) / px if i == 0
                 else w - 1.5 * (px - COLUMN_PX + 2) / fig.dpi)
        fig.set_size_inches(new_w, h * new_w / w)
    return fig


def _has_marker(line: Any) -> bool:
    return line.get_visible() and line.get_marker() not in (None, "None", "none", "", " ")


def markers_at_edge(fig: Figure, margin_px: float = 2.0, draw: bool = True
                    ) -> list[tuple[str, float, float]]:
    """``(label, x, y)`` (data coordinates) of every marker of ``fig``'s axes whose centre lies
    less than its half size plus ``margin_px`` inside its axes' box: a point drawn on the
    frame, cut by it, or out of view (error-bar caps included; colour bars skipped).
    ``draw=False``: the figure was just drawn."""
    import numpy as np

    if draw:
        lay_out(fig)
    out = []
    for ax in fig.axes:
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        box = ax.bbox
        for line in ax.get_lines():
            if not _has_marker(line):
                continue
            r = line.get_markersize() * fig.dpi / 72 / 2 + margin_px
            xy = np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2)
            xy = xy[np.isfinite(xy).all(axis=1)]
            if not len(xy):
                continue
            px = line.get_transform().transform(xy)
            bad = ((px[:, 0] < box.x0 + r) | (px[:, 0] > box.x1 - r)
                   | (px[:, 1] < box.y0 + r) | (px[:, 1] > box.y1 - r))
            out += [(line.get_label(), float(x), float(y)) for x, y in xy[bad]]
    return out


def legend_below(ax: Axes, gap_pt: float = 4.0, **kw: Any) -> Any:
    """The Axes' legend centred under it, below its x tick labels and axis label (measured on
    the drawn axes, so a label at the right edge or a colour bar cannot overprint it), at a
    fixed distance in points from the axes' bottom (it stays clear when the figure is
    re-drawn at another size); keyword arguments go to ``ax.legend`` (default: 2 columns,
    9 pt)."""
    import matplotlib.transforms as mtransforms

    fig = ax.figure
    r = fig.canvas.get_renderer()
    below_in = (ax.bbox.y0 - ax.get_tightbbox(r).y0) / fig.dpi + gap_pt / 72
    shift = mtransforms.ScaledTranslation(0, -below_in, fig.dpi_scale_trans)
    opts = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0),
            "bbox_transform": ax.transAxes + shift, "ncols": 2, "fontsize": 9,
            "borderaxespad": 0.0, **kw}
    return ax.legend(**opts)


def swarm_offsets(y_px: Sequence[float], size_px: float, side: str = "both") -> np.ndarray:
    """Sideways offsets (px) for markers of diameter ``size_px`` drawn at one x and heights
    ``y_px``, so that no two centres come closer than ``size_px`` (a beeswarm: each marker,
    in the given order, takes the smallest offset that clears those placed before it).

    Args:
        side: ``both`` (either way), ``left`` or ``right`` (a marker at the axes' right or
            left end moves inwards only).
    Returns:
        One offset per marker, 0 where nothing is in the way.
    """
    import numpy as np

    if side not in ("both", "left", "right"):
        raise ValueError(f"side must be 'both', 'left' or 'right', got {side!r}")
    ys = np.asarray(y_px, dtype=float)
    dx = np.zeros(len(ys))
    for i, y in enumerate(ys):
        near = [(dx[j], (size_px ** 2 - (ys[j] - y) ** 2) ** 0.5) for j in range(i)
                if abs(ys[j] - y) < size_px]
        cands = [0.0] + [c + s * w for c, w in near for s in (-1, 1)]
        cands = [c for c in cands if side == "both" or (c <= 0 if side == "left" else c >= 0)]
        for c in sorted(cands, key=abs):
            if all(abs(c - x) >= w - 1e-9 for x, w in near):
                dx[i] = c
                break
    return dx


def legend_clashes(fig: Figure, slack_px: float = 1.0, draw: bool = True
                   ) -> list[tuple[str, str]]:
    """Pairs ``(legend, what)``: a legend of ``fig`` (of an axes or of the figure) whose box
    overlaps a title, axis label or tick label (``what``: its text), another axes' plotting
    area (``axes <title>``) or another legend, by more than ``slack_px`` each way; a legend
    inside its own axes is not a clash. ``draw=False``: the figure was just drawn."""
    if draw:
        lay_out(fig)
    r = fig.canvas.get_renderer()
    legs = [(ax.get_legend(), ax) for ax in fig.axes if ax.get_legend() is not None]
    legs += [(leg, None) for leg in fig.legends]
    texts = [t for ax in fig.axes if ax.get_visible() for t in _frame_texts(ax)]

    def hit(a: Any, b: Any) -> bool:
        return _overlap(a, b, slack_px)

    out = []
    for i, (leg, own) in enumerate(legs):
        box = leg.get_window_extent(r)
        name = f"legend {i}"
        out += [(name, t.get_text()) for t in texts if hit(box, t.get_window_extent(r))]
        out += [(name, f"axes {ax.get_title() or ax.get_label()}") for ax in fig.axes
                if ax is not own and ax.get_visible() and hit(box, ax.get_window_extent(r))]
        out += [(name, f"legend {j}") for j, (other, _) in enumerate(legs)
                if j > i and hit(box, other.get_window_extent(r))]
    return out


def cell_labels(ax: Axes) -> tuple[list[Text], float]:
    """The cell values written on a heatmap ``ax`` (its visible texts placed in data
    coordinates inside its first image) and the width in px of one of its cells as drawn
    (the image's width over its columns); ``([], inf)`` for an axes without an image."""
    if not ax.images:
        return [], float("inf")
    im = ax.images[0]
    left, right, bottom, top = im.get_extent()
    lo, hi = sorted((left, right))
    ylo, yhi = sorted((bottom, top))
    cols = im.get_array().shape[1]
    x0, x1 = (ax.transData.transform((x, ylo))[0] for x in (left, right))
    labels = [t for t in ax.texts if t.get_visible() and t.get_text().strip()
              and t.get_transform() == ax.transData
              and lo <= t.get_position()[0] <= hi and ylo <= t.get_position()[1] <= yhi]
    return labels, abs(x1 - x0) / max(cols, 1)


def crowded_cell_labels(fig: Figure, gap_px: float = 2.0, draw: bool = True
                        ) -> list[tuple[str, float, float]]:
    """``(label, its width px, the cell's width px)`` of every cell value written on a
    heatmap of ``fig`` that is wider than its cell less ``gap_px`` (:func:`cell_labels`):
    its neighbours' values run into it ("1.000.270.40"). ``draw=False``: the figure was
    just drawn."""
    if draw:
        lay_out(fig)
    r = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        labels, cell = cell_labels(ax)
        for t in labels:
            w = t.get_window_extent(r).width
            if w > cell - gap_px:
                out.append((t.get_text(), round(w, 1), round(cell, 1)))
    return out
