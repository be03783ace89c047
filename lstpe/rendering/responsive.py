"""Figures that stay readable on a phone: a second rendering laid out for the phone's column.

A book figure is drawn for the laptop's column (:data:`lstpe.rendering.style.COLUMN_PX`, 688
px); on a phone in portrait (a 420-px window) the column is
:data:`lstpe.rendering.phone.PHONE_PX` (388 px) and the page shrinks the PNG to it, so 9-pt
text shows at 5 pt. Shrinking cannot keep text legible: the figure has to be laid out again
for the narrower column: :func:`lstpe.rendering.phone.phone_figure` does that on a copy of
the finished figure, the same for every figure of the book (panels stacked, legends under
them, long text wrapped, crowded ticks thinned, cut markers given room).

:func:`figure_html` puts both renderings in one ``<picture>``: the page shows the phone's below
a :data:`PHONE_MEDIA` window, the laptop's above; Jupyter and Colab render the same HTML. Each
rendering is checked with the house style's checks (:func:`check_figure`: text under 9 pt
where it is shown, overlapping text, legends over text or panels, markers cut by their
axes, a heatmap's cell values wider than their cells) and the result is written into the
``<picture>`` as ``data-lstpe-check``, where a test of the built book reads what every figure
looks like at both widths (``tests/test_book.py``, ``figure_problems``). :func:`install` makes
this the way a notebook shows every matplotlib figure (``lstpe.chapters.notebook.setup`` calls
it).

Lives in :mod:`lstpe.rendering` beside :mod:`lstpe.rendering.style`, which it builds on.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from typing import TYPE_CHECKING, Any

from lstpe.rendering import style
from lstpe.rendering.phone import PHONE_PX, phone_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["CHECK_ATTR", "PHONE_MEDIA", "check_figure", "figure_html", "install", "renderings"]

PHONE_MEDIA = "(max-width: 600px)"
"""The windows that get the phone's rendering: below 600 px the laptop's 688-px figure would
show at 0.8 of its size or less."""

TEXT_ONLY_ENV = "LSTPE_TEXT_ONLY"
"""An environment variable: ``1`` in a run that reads only the pages' text (the
findings-change test executes every results page a second time on fewer units and compares
their words and numbers). There a figure gets no phone rendering, no checks and a blank
image, which saves most of a page's drawing; a book build never sets it."""

CHECK_ATTR = "data-lstpe-check"
"""The ``<picture>`` attribute holding :func:`check_figure`'s result for both renderings (JSON)."""


# --------------------------------------------------------------------------- checking


def check_figure(fig: Figure, column_px: float, paint: bool = False) -> dict[str, list]:
    """The house style's checks of ``fig`` shown in a column ``column_px`` wide: ``small``
    (texts under :data:`~lstpe.rendering.style.MIN_PT` there), ``overlap`` (titles, labels and
    tick labels running into each other or into another panel), ``legend`` (a legend over
    text, a panel or a legend), ``cut`` (markers cut by their axes' edge), ``collapsed`` (the
    layout engine gave up: its panels would have no height or width, so they are drawn
    squeezed where they were), ``dense`` (a heatmap's cell values wider than their cells,
    :func:`~lstpe.rendering.style.crowded_cell_labels`). ``paint``: the one draw the checks
    read paints the canvas too (:func:`_painted_png` then crops its PNG from it)."""
    import warnings

    if not hasattr(fig.canvas, "get_renderer"):  # closed in pyplot: measured on an Agg canvas
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        if paint:
            fig.canvas.draw()
        else:
            style.lay_out(fig)  # once: every check below reads the boxes of this draw
    collapsed = sorted({str(w.message).split(".")[0] for w in caught
                        if "collapsed" in str(w.message)})
    return {"small": [list(t) for t in style.small_text(fig, column_px=column_px, draw=False)],
            "overlap": [list(t) for t in style.overlapping_text(fig, draw=False)],
            "legend": [list(t) for t in style.legend_clashes(fig, draw=False)],
            "cut": [list(t) for t in style.markers_at_edge(fig, draw=False)],
            "collapsed": collapsed,
            "dense": [list(t) for t in style.crowded_cell_labels(fig, draw=False)]}


# --------------------------------------------------------------------------- the phone


def _png(fig: Figure, drawn: bool = False) -> bytes:
    """The PNG the inline backend saves (``bbox_inches="tight"``). ``drawn``: ``fig`` was just
    laid out (:func:`check_figure`): without a layout engine, its tight box is read from that
    draw (the same box) instead of drawing it once more first."""
    import matplotlib as mpl

    bbox: Any = "tight"
    if drawn and fig.get_layout_engine() is None and hasattr(fig.canvas, "get_renderer"):
        pad = mpl.rcParams["savefig.pad_inches"]
        bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(pad)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches=bbox)
    return buf.getvalue()


def _painted_png(fig: Figure) -> bytes:
    """The PNG of a figure without a layout engine that :func:`check_figure` just painted,
    cropped from its canvas to the tight box (``bbox_inches="tight"``'s, widened to whole
    pixels) instead of drawn again; where a text or a marker lies outside the canvas, or
    the figure is saved another colour than it is drawn, :func:`_png` draws it again."""
    import matplotlib as mpl
    import numpy as np
    from PIL import Image

    r = fig.canvas.get_renderer()
    dpi, (W, H) = fig.dpi, (int(r.width), int(r.height))
    tight = fig.get_tightbbox(r)
    box = tight.padded(mpl.rcParams["savefig.pad_inches"])
    x0, y0 = (int(np.floor(v * dpi)) for v in (box.x0, box.y0))
    x1, y1 = (int(np.ceil(v * dpi)) for v in (box.x1, box.y1))
    inside = tight.x0 * dpi >= 0 and tight.y0 * dpi >= 0 and tight.x1 * dpi <= W \
        and tight.y1 * dpi <= H
    if fig.get_layout_engine() is not None or not inside or mpl.rcParams["savefig.transparent"] \
            or mpl.rcParams["savefig.facecolor"] != "auto":
        return _png(fig, drawn=True)
    out = np.empty((y1 - y0, x1 - x0, 4), np.uint8)
    out[:] = np.round(np.array(mpl.colors.to_rgba(fig.get_facecolor())) * 255)
    sx0, sy0, sx1, sy1 = max(x0, 0), max(y0, 0), min(x1, W), min(y1, H)
    out[y1 - sy1:y1 - sy0, sx0 - x0:sx1 - x0] = np.asarray(r.buffer_rgba())[H - sy1:H - sy0,
                                                                            sx0:sx1]
    buf = io.BytesIO()
    Image.fromarray(out, "RGBA").save(buf, format="png", dpi=(dpi, dpi))
    return buf.getvalue()


def renderings(fig: Figure, phone: Figure | None = None, fitted: bool = False
               ) -> tuple[bytes, bytes | None, dict[str, Any]]:
    """The laptop's PNG (``fig`` fitted to the column first: :func:`style.readable`, unless
    ``fitted``: drawn into a frame already fitted, which the checks still measure), the
    phone's PNG (None where the figure cannot be copied) and the checks of each
    (``{"laptop": ..., "phone": ...}``; the phone's is ``{"error": [why]}`` when there is no
    phone rendering). ``phone``: the phone's figure drawn for its column by the caller
    (e.g. an explorer's many views of one layout), used instead of laying out a copy of
    ``fig`` again (:func:`lstpe.rendering.phone.phone_figure`); it is checked the same way."""
    import warnings

    import matplotlib.pyplot as plt

    if os.environ.get(TEXT_ONLY_ENV) == "1":  # the page's text is read, not its figures
        return BLANK_PNG, None, {"phone": {"error": [f"{TEXT_ONLY_ENV}=1: not drawn"]}}
    with warnings.catch_warnings():  # layout engines warn while they try: the checks judge
        warnings.simplefilter("ignore", UserWarning)
        if not fitted:
            style.readable(fig)
        paint = fitted and fig.get_layout_engine() is None  # drawn into a frame: paint once
        result: dict[str, Any] = {"laptop": check_figure(fig, style.COLUMN_PX, paint)}
        laptop = _painted_png(fig) if paint else _png(fig, drawn=True)
        try:
            ph = phone if phone is not None else phone_figure(fig)
        except Exception as err:  # noqa: BLE001 - any failure is reported, the figure shows
            result["phone"] = {"error": [f"{type(err).__name__}: {err}"]}
            return laptop, None, result
        paint = fitted and ph.get_layout_engine() is None
        result["phone"] = check_figure(ph, PHONE_PX, paint)
        phone = _painted_png(ph) if paint else _png(ph, drawn=True)
    plt.close(ph)
    return laptop, phone, result


BLANK_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")
"""A 1 x 1 PNG: a figure's image in a :data:`TEXT_ONLY_ENV` run."""


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def figure_html(fig: Figure, alt: str | None = None, phone: Figure | None = None,
                fitted: bool = False) -> str:
    """``fig`` as a ``<picture>``: the phone's rendering below :data:`PHONE_MEDIA`, the
    laptop's otherwise, both checked (:data:`CHECK_ATTR`); ``phone``, ``fitted``: as in
    :func:`renderings`."""
    laptop, phone, result = renderings(fig, phone, fitted)
    alt = alt or _alt(fig)
    source = (f'<source media="{PHONE_MEDIA}" srcset="{_data_uri(phone)}">' if phone else "")
    return (f'<picture class="lstpe-figure" {CHECK_ATTR}="{html.escape(json.dumps(result))}">'
            f'{source}<img src="{_data_uri(laptop)}" alt="{html.escape(alt)}"></picture>')


def _alt(fig: Figure) -> str:
    """A figure's alt text: its title, else its panels' titles."""
    sup = fig._suptitle.get_text() if fig._suptitle is not None else ""
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    return sup or "; ".join(titles[:3]) or "figure"


def install() -> None:
    """Show every matplotlib figure of this IPython kernel as :func:`figure_html` (its
    ``text/html``; the inline backend's ``image/png`` stays in the output beside it). The inline
    backend drops other formatters of figures when it starts (at pyplot's first figure), so
    this starts it, then registers, and registers again before every cell. A no-op outside
    IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None:
        return
    import matplotlib.pyplot as plt

    plt.close(plt.figure())  # pyplot picks its backend at the first figure: start it first

    def register(*_: Any, **__: Any) -> None:
        from matplotlib.figure import Figure

        ip.display_formatter.formatters["text/html"].for_type(Figure, figure_html)

    register()
    if register.__qualname__ not in {getattr(f, "__qualname__", "")
                                     for f in ip.events.callbacks["pre_run_cell"]}:
        ip.events.register("pre_run_cell", register)
