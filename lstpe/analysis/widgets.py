"""A widget with a static twin: one output that a live kernel shows as the widget and the
rendered book page as a picture of the same content.

An ipywidgets widget needs a running kernel: on the rendered (static) book page it has none and
shows nothing. :class:`WithStatic` is one displayed object whose ``_repr_mimebundle_`` holds both
the widget's view (``application/vnd.jupyter.widget-view+json`` with its ``text/plain``) and an
``image/png`` of the same content. Jupyter and Colab render the widget (a widget view outranks an
image there); the book's ``_config.yml`` sets myst-nb's ``nb_mime_priority_overrides`` so that the
html builders rank the widget view after ``image/png``, and the page shows the picture. Used by
chapter 2's puzzle browser (:mod:`lstpe.tutorial.lst_task`) and chapter 6's explorer
(:mod:`lstpe.chapters.explore`).
"""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PNG_MIME", "WIDGET_VIEW_MIME", "WithStatic", "close_figure", "figure_png",
           "with_static"]

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
"""The mime type of an ipywidgets view (rendered only where a kernel holds the widget)."""

PNG_MIME = "image/png"

_DPI = 100


def figure_png(fig: Figure, dpi: int = _DPI) -> bytes:
    """The figure as PNG bytes (``bbox_inches="tight"``); the figure is left open."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def close_figure(fig: Figure) -> None:
    """Close ``fig`` in pyplot, so that the inline backend does not show it a second time."""
    import matplotlib.pyplot as plt

    plt.close(fig)


class WithStatic:
    """A widget and a static PNG of the same content, displayed as one output.

    Attributes:
        widget: the ipywidgets widget (Jupyter, Colab: the live view).
        figure: the static figure (closed in pyplot; its axes stay readable).
        png: ``figure`` as PNG bytes (the book page's view).
        text: the ``text/plain`` of the bundle (terminals, nbconvert to text).
        live: the object behind the widget (its callbacks and state), if any.
    """

    def __init__(self, widget: Any, figure: Figure, text: str | None = None,
                 dpi: int = _DPI, live: Any = None) -> None:
        self.widget, self.live = widget, live
        self.figure = figure
        self.png = figure_png(figure, dpi)
        close_figure(figure)
        self.text = text or f"{type(widget).__name__} widget (needs a live kernel)"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None,
                          **kwargs: Any) -> dict[str, Any]:
        """The widget's view bundle plus ``image/png`` (base64, as notebooks store it) and
        :attr:`text` as ``text/plain``. IPython applies ``include`` / ``exclude`` itself."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = self.text
        bundle[PNG_MIME] = base64.b64encode(self.png).decode("ascii")
        return bundle

    def __repr__(self) -> str:
        return self.text


def with_static(widget: Any, figure: Figure, text: str | None = None,
                live: Any = None) -> WithStatic:
    """``widget`` for a live kernel, ``figure`` (then closed) for the static book page
    (:class:`WithStatic`; ``live``: the object behind the widget, kept as ``.live``)."""
    return WithStatic(widget, figure, text, live=live)
