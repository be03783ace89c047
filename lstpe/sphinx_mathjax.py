"""Sphinx extension of the book: load MathJax on every page, not only on pages with equations.

Sphinx adds MathJax only to pages that contain math, but the navigation sidebar of every page
shows every chapter title, and a title such as "The $\\sigma$ sweep" is math. Without MathJax
such a page would show the raw TeX ``\\(\\sigma\\)`` in its sidebar. Listed under
``sphinx.extra_extensions`` in ``_config.yml``; MathJax itself is vendored (``_vendor/mathjax``).
"""

from __future__ import annotations


def setup(app) -> dict:
    app.set_html_assets_policy("always")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
