"""Sphinx extension of the book: load MathJax on every page, not only on pages with equations.

Sphinx adds MathJax only to pages that contain math, but the navigation sidebar of every page
shows every chapter title, and a title with math (``$\\sigma$``) would show as raw TeX
``\\(\\sigma\\)`` on the pages without equations. The chapter titles write the letter σ
instead (a browser tab cannot render math either); this keeps any future title with math
readable in the sidebar. Listed under
``sphinx.extra_extensions`` in ``_config.yml``; MathJax itself is vendored (``_vendor/mathjax``).
"""

from __future__ import annotations


def setup(app) -> dict:
    app.set_html_assets_policy("always")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
