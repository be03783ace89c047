"""A phone's layout of a finished figure (:func:`phone_figure`), for
:mod:`lstpe.rendering.responsive`, which renders and checks both layouts.

1. panels drawn side by side are stacked in reading order (one column; two for eight or more
   panels); a table whose rows are named keeps its layout when it has two columns, a wider one
   is stacked with the row's name on each panel; a shared axis keeps its tick labels on the
   outer panels only; colour bars follow their panels;
2. legends outside their axes (or in a panel of their own) go under them in one column; long
   titles and names are wrapped; the figure is made :data:`PHONE_PX` wide (text keeps its size
   in pt, at least :data:`~lstpe.rendering.style.MIN_PT`) and laid out by matplotlib's
   constrained layout (else tight layout);
3. crowded tick labels are thinned (numbers), turned upright (names on the x axis) or given a
   taller figure (names on the y axis), and markers cut by their axes get room (a heatmap's
   shrink instead);
4. a heatmap's cell values wider than their cells are written with fewer digits (``.27`` for
   ``0.27``, then one decimal), else left out (:func:`_fit_cell_labels`).
"""

from __future__ import annotations

import contextlib
import pickle
from typing import TYPE_CHECKING, Any

from lstpe.rendering import style

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["PHONE_PX", "phone_figure"]

PHONE_PX = 388
"""Width in CSS px of a cell output in the content column at a 420-px window (a phone in
portrait; sphinx-book-theme 1.3, measured in headless Chromium)."""

def _canvas(fig: Figure) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return FigureCanvasAgg(fig)


def _copy(fig: Figure) -> Figure:
    """A copy of ``fig`` on its own Agg canvas (pyplot does not know it)."""
    copy = pickle.loads(pickle.dumps(fig))
    _canvas(copy)
    return copy


def _panels(fig: Figure) -> list[Axes]:
    """The axes of ``fig``'s subplot grids (not colour bars, insets or twins of another
    panel)."""
    out = []
    for ax in fig.axes:
        spec = ax.get_subplotspec()
        if spec is None or not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        if any(o is not ax and o in out and o.get_subplotspec() == spec for o in out):
            continue
        out.append(ax)
    return out


def _rows_of(panels: list[Axes]) -> list[list[Axes]]:
    """The panels grouped into the rows they are drawn in (top to bottom, each left to
    right): a panel joins a row whose vertical extent it shares by more than half."""
    rows: list[list[Axes]] = []
    for p in sorted(panels, key=lambda a: (-a.get_position().y1, a.get_position().x0)):
        b = p.get_position()
        for row in rows:
            r = row[0].get_position()
            if min(b.y1, r.y1) - max(b.y0, r.y0) > 0.5 * min(b.height, r.height):
                row.append(p)
                break
        else:
            rows.append([p])
    return [sorted(row, key=lambda a: a.get_position().x0) for row in rows]


def _stack(fig: Figure, panels: list[Axes], width_in: float) -> None:
    """Put panels drawn side by side into one column (two where there are eight or more,
    or rows of four or more plots that are not images), in reading order, each about as
    tall as it was; a shared axis keeps its tick labels on the outer panels of the new grid
    only. A grid whose rows are named (a different y label on each row's first panel, none
    on the others) is a table: two columns keep their layout; a wider one is stacked with
    its row's name on every panel (:func:`_name_panels`)."""
    from matplotlib.gridspec import GridSpec

    rows = _rows_of(panels)
    widest = max(len(r) for r in rows)
    named = [r[0].get_ylabel() for r in rows]
    inner = [p.get_ylabel() for r in rows for p in r[1:] if p.yaxis.label.get_visible()]
    table = (len(rows) > 1 and all(named) and len(set(named)) == len(rows) and not any(inner))
    if widest < 2 or (table and widest < 3):
        return  # one column already, or a table that fits: keep it
    if table:
        _name_panels(rows)
    order = [p for row in rows for p in row]
    ncol = 2 if len(order) >= 8 or (widest >= 4 and not any(p.images for p in order)) else 1
    nrow = -(-len(order) // ncol)
    style.lay_out(fig)
    tall = sum(max(p.get_position().height for p in row) for row in rows)
    per_row = fig.get_size_inches()[1] * tall / len(rows)
    if any(p.images for p in order):  # an image keeps its shape: as tall as it is wide
        per_row = max(per_row, 0.7 * width_in / ncol + 0.6)
    new = GridSpec(nrow, ncol, figure=fig)
    for i, p in enumerate(order):
        twins = [a for a in fig.axes if a is not p and a.get_subplotspec() is not None
                 and a.get_subplotspec() == p.get_subplotspec()]
        for a in [p, *twins]:
            a.set_subplotspec(new[i // ncol, i % ncol])
        last = i + ncol >= len(order)
        shared_x = len(p.get_shared_x_axes().get_siblings(p)) > 1
        shared_y = len(p.get_shared_y_axes().get_siblings(p)) > 1
        p.tick_params(labelbottom=last or not shared_x, labelleft=i % ncol == 0 or not shared_y)
        p.xaxis.label.set_visible(last or not shared_x)
        p.yaxis.label.set_visible(i % ncol == 0 or not shared_y)
        if shared_y and i % ncol == 0 and not p.get_ylabel():  # a new outer panel: its label
            names = [a.get_ylabel() for a in p.get_shared_y_axes().get_siblings(p)]
            p.set_ylabel(next((n for n in names if n), ""))
        if shared_x and last and not p.get_xlabel():
            names = [a.get_xlabel() for a in p.get_shared_x_axes().get_siblings(p)]
            p.set_xlabel(next((n for n in names if n), ""))
    fig.set_size_inches(width_in, per_row * nrow * (0.85 if ncol == 2 else 1.0) + 1.0)


def _name_panels(rows: list[list[Axes]]) -> None:
    """A table's rows, about to be stacked: each panel's title starts with its row's name
    (the first panel's y label, less its last line when it has several: that line names
    the axis, and stays as every panel's y label)."""
    for row in rows:
        lines = row[0].get_ylabel().split("\n")
        name, axis = (", ".join(lines[:-1]), lines[-1]) if len(lines) > 1 else (lines[0], "")
        for p in row:
            p.set_title(f"{name}\n{p.get_title()}" if p.get_title() else name,
                        fontsize=p.title.get_fontsize())
            p.set_ylabel(axis)
            p.yaxis.label.set_visible(True)


def _take_colorbars(fig: Figure) -> list[tuple[Any, Axes, str, str, list[float] | None]]:
    """Remove the colour bars of ``fig``'s panels; return ``(mappable, its axes, label,
    orientation, ticks or None)`` of each, to draw again beside the panel once it has moved
    (a bar placed by hand stays where it was when its panel moves)."""
    from matplotlib.ticker import FixedLocator

    out = []
    for cax in [a for a in fig.axes if a.get_label() == "<colorbar>"]:
        cb = getattr(cax, "_colorbar", None)
        ax = getattr(getattr(cb, "mappable", None), "axes", None)
        if cb is None or ax is None or ax.get_subplotspec() is None:
            continue
        axis = cax.yaxis if cb.orientation == "vertical" else cax.xaxis
        fixed = isinstance(axis.get_major_locator(), FixedLocator)  # ticks set by the plot
        out.append((cb.mappable, ax, axis.get_label().get_text(), cb.orientation,
                    list(cb.get_ticks()) if fixed else None))
        cb.remove()
    return out


def _put_colorbars(fig: Figure, bars: list) -> None:
    """Draw the taken colour bars again beside their panels, with their labels and ticks;
    constrained layout places them (:func:`_lay_out` keeps it)."""
    if not bars:
        return
    fig.set_layout_engine("constrained")
    for mappable, ax, label, orientation, ticks in bars:
        cb = fig.colorbar(mappable, ax=ax, label=label, orientation=orientation,
                          fraction=0.046)
        if ticks is not None:
            cb.set_ticks(ticks)


def _take_legends(fig: Figure) -> list[tuple[Any, list, list, str | None]]:
    """Remove the legends that lie outside their axes and the figure's own legends; return
    ``(axes or None, handles, labels, title)`` of each, to place again."""
    style.lay_out(fig)
    r = fig.canvas.get_renderer()
    out = []
    for ax in list(fig.axes):
        leg = ax.get_legend()
        if leg is None:
            continue
        if _legend_panel(ax):  # a panel drawn only to hold a legend: the figure's legend
            out.append((None, *_legend_parts(leg)))
            ax.remove()
            continue
        box, frame = leg.get_window_extent(r), ax.bbox
        if (box.x0 >= frame.x0 - 1 and box.x1 <= frame.x1 + 1
                and box.y0 >= frame.y0 - 1 and box.y1 <= frame.y1 + 1):
            continue
        out.append((ax, *_legend_parts(leg)))
        leg.remove()
    for leg in list(fig.legends):
        out.append((None, *_legend_parts(leg)))
        leg.remove()
    return out


def _legend_panel(ax: Axes) -> bool:
    """Whether ``ax`` is a panel with its axis off and nothing drawn but a legend."""
    return (not ax.axison and ax.get_legend() is not None
            and not (ax.lines or ax.collections or ax.patches or ax.images or ax.texts))


def _legend_parts(leg: Any) -> tuple[list, list, str | None]:
    title = leg.get_title().get_text() or None
    return list(leg.legend_handles), [t.get_text() for t in leg.texts], title


def _put_legends(fig: Figure, taken: list, panels: list[Axes]) -> None:
    """Place the taken legends again in one column: an axes' legend under it, the figure's
    under the figure (constrained layout makes room) or else under its last panel."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    constrained = isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)
    for ax, handles, labels, title in taken:
        if ax is None and constrained:  # under one panel of a grid it would squeeze them all
            leg = fig.legend(handles, labels, loc="outside lower center", ncols=1, title=title,
                             fontsize=9, frameon=False)
        else:
            under = ax if ax is not None else (panels[-1] if panels else fig.axes[-1])
            leg = style.legend_below(under, handles=handles, labels=labels, ncols=1,
                                     title=title)
        style.lay_out(fig)  # the one-column legend was beside the panels: the figure grows
        w, h = fig.get_size_inches()  # by its height, so the panels keep theirs
        fig.set_size_inches(w, h + leg.get_window_extent().height / fig.dpi)


def _thin_ticks(fig: Figure) -> None:
    """Where tick labels of an axis run into each other: numbers get fewer ticks, names on
    the x axis are turned upright, names on the y axis get a taller figure."""
    from matplotlib.ticker import FixedLocator, MaxNLocator

    style.lay_out(fig)
    r = fig.canvas.get_renderer()
    changed = False
    for ax in fig.axes:
        for axis, nbins in ((ax.xaxis, 4), (ax.yaxis, 6)):
            labels = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
            boxes = [t.get_window_extent(r) for t in labels]
            hit = any(style._overlap(a, b, 1.0) for a, b in zip(boxes, boxes[1:], strict=False))
            if not hit:
                continue
            changed = True
            numbers = all(_is_number(t.get_text()) for t in labels)
            if not isinstance(axis.get_major_locator(), FixedLocator):
                axis.set_major_locator(MaxNLocator(nbins=nbins))
            elif numbers:
                axis.set_major_locator(FixedLocator(axis.get_ticklocs()[::2]))
            elif axis is ax.xaxis:
                ax.tick_params(axis="x", labelrotation=90)
            else:  # names on a y axis stay (dropping one would lose it): a taller figure
                grow = max(max(b.height for b in boxes) + 3.0, 1.0) / max(
                    min(abs(a.y0 - b.y0) for a, b in zip(boxes, boxes[1:], strict=False)), 1.0)
                w, h = fig.get_size_inches()
                fig.set_size_inches(w, h * min(grow, 3.0))
    engine = fig.get_layout_engine()
    if changed and engine is not None:  # room for turned labels (constrained: at each draw)
        engine.execute(fig)


def phone_figure(fig: Figure, width_px: float = PHONE_PX) -> Figure:
    """A copy of ``fig`` laid out for a column ``width_px`` wide (module docstring); ``fig``
    is left as it is. Raises what pickling raises for a figure that cannot be copied."""
    ph = _copy(fig)
    ph.set_dpi(style.DPI)
    width_in = width_px / style.DPI
    taken = _take_legends(ph)
    panels = _panels(ph)
    if len(panels) > 1:
        bars = _take_colorbars(ph)
        _stack(ph, panels, width_in)
        _put_colorbars(ph, bars)
    w, h = ph.get_size_inches()
    column = len(panels) > 1 and all(len(r) == 1 for r in _rows_of(panels))
    if w > width_in:  # not stacked: one panel, or a table of them, shrinks with its width;
        # a column of panels keeps its height (labels under each take the same room)
        scale = 1.0 if column else 0.85 if len(panels) <= 1 else width_in / w
        ph.set_size_inches(width_in, max(h * scale, 2.4))
    for t in style._texts(ph):
        if t.get_fontsize() < style.MIN_PT:
            t.set_fontsize(style.MIN_PT)
    _narrow_legends(ph, width_px)
    _lay_out(ph)
    _wrap_long_text(ph)
    _put_legends(ph, taken, _panels(ph))
    _thin_ticks(ph)
    for _ in range(2):  # a narrower figure can cut a marker; wider limits can widen it
        _fit_width(ph, width_px)
        _uncut(ph)
    _fit_width(ph, width_px)
    _fit_cell_labels(ph)
    return ph


def _short_number(text: str, digits: int) -> str:
    """``text``, a number, with ``digits`` decimals and no leading zero (``.27``, ``-.3``);
    a value that rounds to a whole number keeps no decimals (``1``). Not a number: as it is."""
    try:
        v = float(text.replace("\u2212", "-"))
    except ValueError:
        return text
    s = f"{v:.{digits}f}"
    if float(s) == round(v):
        return f"{round(v):d}"
    return s.replace("0.", ".", 1) if s.lstrip("-").startswith("0.") else s


def _fit_cell_labels(fig: Figure, gap_px: float = 2.0) -> None:
    """A heatmap whose cell values are wider than its cells (at the phone's width they run
    into each other): write them all with fewer digits, two decimals without the leading
    zero, then one; where even that does not fit, leave them out (the colour bar still reads
    each cell)."""
    style.lay_out(fig)
    r = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels, cell = style.cell_labels(ax)
        if not labels:
            continue
        original = [t.get_text() for t in labels]
        for digits in (None, 2, 1):
            if digits is not None:
                for t, text in zip(labels, original, strict=True):
                    t.set_text(_short_number(text, digits))
            if max(t.get_window_extent(r).width for t in labels) <= cell - gap_px:
                break
        else:
            for t in labels:
                t.set_visible(False)


def _is_number(text: str) -> bool:
    try:
        float(text.replace("\u2212", "-"))
    except ValueError:
        return False
    return True


def _wrap_long_text(fig: Figure) -> None:
    """Titles wider than their axes (the figure's title: than the figure) and y labels taller
    than their axes are broken into lines (mathtext is left alone)."""
    import textwrap

    style.lay_out(fig)
    r = fig.canvas.get_renderer()

    def wrap(t: Any, room: float, vertical: bool = False) -> None:
        text = t.get_text()
        if not text or "$" in text:
            return
        box = t.get_window_extent(r)
        size = box.height if vertical else box.width
        longest = max(text.split("\n"), key=len)
        if size > room and len(longest) > 8:
            n = max(int(len(longest) * room / size * 0.95), 8)
            t.set_text("\n".join(textwrap.fill(line, n, break_long_words=False)
                                  for line in text.split("\n")))

    if fig._suptitle is not None:
        wrap(fig._suptitle, fig.bbox.width - 8)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label):
            wrap(t, max(ax.bbox.width, 60))
        wrap(ax.yaxis.label, max(ax.bbox.height, 120), vertical=True)
        _wrap_tick_names(ax, 0.4 * fig.bbox.width, r)


def _wrap_tick_names(ax: Axes, room: float, r: Any) -> None:
    """y tick labels that are names wider than ``room`` px are broken into lines."""
    import textwrap

    labels = [t for t in ax.get_yticklabels() if t.get_visible() and t.get_text()]
    if not labels or "$" in "".join(t.get_text() for t in labels):
        return
    widest = max(t.get_window_extent(r).width for t in labels)
    longest = max(len(t.get_text()) for t in labels)
    if widest <= room or longest < 12:
        return
    n = max(int(longest * room / widest), 10)
    ax.set_yticks(ax.get_yticks(), [textwrap.fill(t.get_text(), n, break_long_words=False)
                                    for t in ax.get_yticklabels()])


def _uncut(fig: Figure, margin_px: float = 3.0) -> None:
    """Widen an axes' limits (linear scales) where a marker would be cut by its edge; on a
    heatmap, shrink the marker instead."""
    import numpy as np

    style.lay_out(fig)
    for ax in fig.axes:
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        pts = []
        for line in ax.get_lines():
            if style._has_marker(line):
                xy = np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2)
                xy = xy[np.isfinite(xy).all(axis=1)]
                if len(xy):
                    r = line.get_markersize() * fig.dpi / 72 / 2 + margin_px
                    pts.append((ax.transData.transform(xy), r))
        if not pts:
            continue
        box = ax.bbox
        if ax.images:  # a heatmap keeps its cells: its markers shrink to clear the edge
            for line in ax.get_lines():
                if not style._has_marker(line):
                    continue
                xy = np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2)
                px = ax.transData.transform(xy[np.isfinite(xy).all(axis=1)])
                if not len(px):
                    continue
                room = min((px[:, 0] - box.x0).min(), (box.x1 - px[:, 0]).min(),
                           (px[:, 1] - box.y0).min(), (box.y1 - px[:, 1]).min()) - margin_px
                size = 2 * room * 72 / fig.dpi
                if 0 < size < line.get_markersize():
                    line.set_markersize(size)
            continue
        for k, (scale, lims, setter, lo_edge, hi_edge) in enumerate((
                (ax.get_xscale(), ax.get_xlim(), ax.set_xlim, box.x0, box.x1),
                (ax.get_yscale(), ax.get_ylim(), ax.set_ylim, box.y0, box.y1))):
            if scale != "linear" or lims[0] > lims[1]:
                continue
            need_lo = max((r - (p[:, k].min() - lo_edge) for p, r in pts), default=0.0)
            need_hi = max((r - (hi_edge - p[:, k].max()) for p, r in pts), default=0.0)
            if need_lo <= 0 and need_hi <= 0:
                continue
            per_px = (lims[1] - lims[0]) / max(hi_edge - lo_edge, 1.0)
            setter(lims[0] - max(need_lo, 0.0) * per_px, lims[1] + max(need_hi, 0.0) * per_px)


def _narrow_legends(fig: Figure, width_px: float) -> None:
    """A legend of several columns that is wider than ``width_px`` gets one column."""
    style.lay_out(fig)
    r = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    for leg in legends:  # drawn again whole (re-initialising its box in place left it placed
        # far below its axes, and constrained layout then collapsed them)
        if leg._ncols > 1 and leg.get_window_extent(r).width > width_px - 8:
            handles, labels, title = _legend_parts(leg)
            ax = leg.axes
            size = leg.texts[0].get_fontsize() if leg.texts else style.MIN_PT
            leg.remove()
            ax.legend(handles, labels, loc=leg._loc, bbox_to_anchor=leg._bbox_to_anchor,
                      ncols=1, fontsize=size, title=title, frameon=leg.get_frame_on())


def _lay_out(fig: Figure) -> None:
    """Constrained layout where the figure takes it, else tight layout, else as it was (a
    grid with zero-height rows or colour bars placed by hand)."""
    import warnings

    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    if not isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine | None):
        return  # constrained or tight: it lays the new size out at the next draw
    for engine in ("constrained", "tight"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                fig.set_layout_engine(engine)
                style.lay_out(fig)
            return
        except (RuntimeError, ValueError, ZeroDivisionError, UserWarning):
            with contextlib.suppress(RuntimeError):  # never keep an engine that failed
                fig.set_layout_engine("none")
    try:  # a placeholder engine (tight_layout called once) refuses a new one: lay out once
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig.tight_layout()
    except (RuntimeError, ValueError, ZeroDivisionError, UserWarning):
        pass


def _fit_width(fig: Figure, width_px: float) -> None:
    """Text reaching past the figure's edge widens the saved PNG: narrow the figure until
    the PNG fits ``width_px`` (its text keeps its size)."""
    for _ in range(6):
        px = style._png_width_px(fig)  # drawn, tight box plus savefig's padding
        if px <= width_px - 1:
            return
        w, h = fig.get_size_inches()
        fig.set_size_inches(w * (width_px - 2) / px, h)


# --------------------------------------------------------------------------- showing
