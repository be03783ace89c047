"""A widget with a static twin: one output that a live kernel shows as the widget and the
rendered book page as a picture of the same content, or as views that play without a kernel.

An ipywidgets widget needs a running kernel: on the rendered (static) book page it has none and
shows nothing. :class:`WithStatic` is one displayed object whose ``_repr_mimebundle_`` holds both
the widget's view (``application/vnd.jupyter.widget-view+json`` with its ``text/plain``) and an
``image/png`` of the same content. Jupyter and Colab render the widget (a widget view outranks an
image there); the book's ``_config.yml`` sets myst-nb's ``nb_mime_priority_overrides`` so that the
html builders rank the widget view after ``image/png``, and the page shows the picture. Used by
chapter 2's puzzle browser (:mod:`lstpe.tutorial.lst_task`) and chapter 6's explorer
(:mod:`lstpe.chapters.explore`).

An explorer can also carry its views pre-rendered (:func:`views_html`): every state of its
controls drawn once, when the notebook runs, as an inline PNG, and a ``text/html`` output that
shows one of them and switches on a select box, slider or checkbox with a few lines of its own
JavaScript (an ``oninput`` handler; no library, no CDN, no kernel). myst-nb ranks ``text/html``
(30) before ``image/png`` (50), so the rendered page plays the views; Jupyter and Colab render
the widget view, which outranks both there.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lstpe.rendering.responsive import figure_html
from lstpe.rendering.style import DPI

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["HTML_MIME", "PNG_MIME", "WIDGET_VIEW_MIME", "Control", "WithStatic", "close_figure",
           "figure_png", "views_html", "with_static"]

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
"""The mime type of an ipywidgets view (rendered only where a kernel holds the widget)."""

PNG_MIME = "image/png"
HTML_MIME = "text/html"

_DPI = DPI


def figure_png(fig: Figure, dpi: int = _DPI) -> bytes:
    """The figure as PNG bytes (``bbox_inches="tight"``); the figure is left open."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def close_figure(fig: Figure) -> None:
    """Close ``fig`` in pyplot, so that the inline backend does not show it a second time."""
    import matplotlib.pyplot as plt

    plt.close(fig)


@dataclass(frozen=True)
class Control:
    """One control of a static explorer.

    Attributes:
        label: shown before it.
        options: ``(value, shown)`` pairs; a view's key holds the value (a string).
        kind: ``select`` (a drop-down), ``range`` (a slider over the options, in order, its
            value shown beside it) or ``checkbox`` (options ``("0", ...), ("1", ...)``).
    """

    label: str
    options: tuple[tuple[str, str], ...]
    kind: str = "select"


_SWITCH = ("const k=[...this.querySelectorAll('[data-ctl]')].map(c=>c.type==='checkbox'?"
           "(c.checked?'1':'0'):c.dataset.values?c.dataset.values.split('|')[c.value]:c.value)"
           ".join('|');let n=0;for(const r of this.querySelectorAll('input[type=range]'))"
           "r.nextElementSibling.textContent=r.dataset.shown.split('|')[r.value];"
           "for(const i of this.querySelectorAll('[data-key]')){i.hidden=i.dataset.key!==k;"
           "n+=!i.hidden}this.querySelector('.lstpe-missing').hidden=n>0;")
"""The explorer's JavaScript (the container's ``oninput``): the key of the controls' values,
then show the view with that key (or the 'no view' note)."""


def _control_html(c: Control) -> str:
    esc = html.escape
    label = f"<label>{esc(c.label)} "
    if c.kind == "select":
        opts = "".join(f'<option value="{esc(v)}">{esc(t)}</option>' for v, t in c.options)
        return f"{label}<select data-ctl>{opts}</select></label>"
    if c.kind == "checkbox":
        return f'<label><input type="checkbox" data-ctl> {esc(c.label)}</label>'
    if c.kind == "range":
        values = "|".join(v for v, _ in c.options)
        shown = "|".join(t for _, t in c.options)
        return (f'{label}<input type="range" min="0" max="{len(c.options) - 1}" value="0" '
                f'step="1" data-ctl data-values="{esc(values)}" data-shown="{esc(shown)}">'
                f"<output>{esc(c.options[0][1])}</output></label>")
    raise ValueError(f"unknown control kind {c.kind!r}")


def views_html(views: Mapping[tuple[str, ...], bytes | str | Figure | tuple[Figure, Figure]],
               controls: Sequence[Control],
               alt: str = "explorer view") -> str:
    """The pre-rendered views of an explorer as one HTML block that switches between them.

    Args:
        views: a PNG (or SVG), a figure, or a ``<picture>`` of
            :func:`lstpe.rendering.responsive.figure_html`, per state, keyed by the controls'
            values in order
            (a control with no option of that value makes the view unreachable); a figure
            becomes a ``<picture>`` with its phone rendering and checks
            (:func:`lstpe.rendering.responsive.figure_html`), a pair of figures (laptop,
            phone) one with that phone rendering.
        controls: the controls, in the order of the keys.
        alt: the images' alt text (the key is appended).
    Returns:
        HTML: the controls, every view as an ``<img data-key>`` or ``<picture data-key>``
        (all but the first state's hidden) and a note for a state with no view; its
        ``oninput`` switches views.
    Raises:
        ValueError: a key with the wrong number of values, or no views.
    """
    if not views:
        raise ValueError("no views")
    first = "|".join(c.options[0][0] if c.kind != "checkbox" else "0" for c in controls)
    imgs = []
    for key, png in views.items():
        if len(key) != len(controls):
            raise ValueError(f"key {key!r} does not have one value per control")
        k = "|".join(key)
        hidden = "" if k == first else " hidden"
        label = f"{alt}: {k}"
        if isinstance(png, str):  # a <picture> already drawn (figure_html, its alt given)
            imgs.append(png.replace("<picture ", f'<picture data-key="{html.escape(k)}"{hidden} ',
                                    1))
            continue
        if not isinstance(png, bytes):  # a figure (or laptop and phone figures): a <picture>
            fig, phone = png if isinstance(png, tuple) else (png, None)
            imgs.append(figure_html(fig, alt=label, phone=phone).replace(
                "<picture ", f'<picture data-key="{html.escape(k)}"{hidden} ', 1))
            continue
        b64 = base64.b64encode(png).decode("ascii")
        mime = PNG_MIME if png[:4] == b"\x89PNG" else "image/svg+xml"
        imgs.append(f'<img data-key="{html.escape(k)}" alt="{html.escape(alt)}: '
                    f'{html.escape(k)}" src="data:{mime};base64,{b64}"{hidden}>')
    missing = " hidden" if first in {"|".join(k) for k in views} else ""
    ctl = "".join(_control_html(c) for c in controls)
    return (f'<div class="lstpe-views" oninput="{html.escape(_SWITCH)}">'
            f'<div class="lstpe-controls">{ctl}</div>{"".join(imgs)}'
            f'<p class="lstpe-missing"{missing}>no stored view for this choice</p>'
            "</div>")


class WithStatic:
    """A widget and a static PNG of the same content, displayed as one output.

    Attributes:
        widget: the ipywidgets widget (Jupyter, Colab: the live view).
        figure: the static figure (closed in pyplot; its axes stay readable).
        png: ``figure`` as PNG bytes (the book page's view).
        text: the ``text/plain`` of the bundle (terminals, nbconvert to text).
        live: the object behind the widget (its callbacks and state), if any.
        html: the pre-rendered views that play on the page (:func:`views_html`), if any.
        picture: without views, ``figure`` as the page shows it
            (:func:`lstpe.rendering.responsive.figure_html`: a phone's rendering beside it).
    """

    def __init__(self, widget: Any, figure: Figure, text: str | None = None,
                 dpi: int = _DPI, live: Any = None, html: str | None = None,
                 png: bytes | None = None) -> None:
        self.widget, self.live, self.html = widget, live, html
        self.figure = figure
        self.png = figure_png(figure, dpi) if png is None else png
        self.picture = None if html else figure_html(figure)
        close_figure(figure)
        self.text = text or f"{type(widget).__name__} widget (needs a live kernel)"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None,
                          **kwargs: Any) -> dict[str, Any]:
        """The widget's view bundle plus ``image/png`` (base64, as notebooks store it),
        :attr:`text` as ``text/plain`` and :attr:`html` as ``text/html`` when there are views.
        IPython applies ``include`` / ``exclude`` itself."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = self.text
        bundle[PNG_MIME] = base64.b64encode(self.png).decode("ascii")
        bundle[HTML_MIME] = self.html or self.picture
        return bundle

    def __repr__(self) -> str:
        return self.text


def with_static(widget: Any, figure: Figure, text: str | None = None,
                live: Any = None, html: str | None = None, png: bytes | None = None
                ) -> WithStatic:
    """``widget`` for a live kernel, ``figure`` (then closed) for the static book page
    (:class:`WithStatic`; ``live``: the object behind the widget, kept as ``.live``; ``html``:
    pre-rendered views, :func:`views_html`, which the page plays instead of the figure;
    ``png``: the figure's :func:`figure_png`, if already drawn)."""
    return WithStatic(widget, figure, text, live=live, html=html, png=png)
