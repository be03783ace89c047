"""Sphinx extension of the book: label the References page by author and year.

The chapters cite author-year (``bibtex_reference_style: author_year`` in ``_config.yml``:
"Ito et al., 2024b"), but sphinxcontrib-bibtex labels the list on the References page with
pybtex's ``alpha`` style, which keeps the last two characters of the year ("ICK+4b" for the
paper's two 2024 versions, whose years are written 2024a and 2024b so that they read apart)
and mangles names with TeX accents ("RDeletangG+23"). This extension registers a formatting
style, :data:`STYLE`, whose labels are the in-text citation itself: the first author's last
name, "and" the second or "et al.", and the year as written, TeX accents decoded. Listed under
``sphinx.extra_extensions`` and chosen by ``bibtex_default_style`` in ``_config.yml``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.alpha import Style as AlphaStyle
from pybtex.style.labels import BaseLabelStyle

STYLE = "lstpe-author-year"
"""The name of the formatting style (and of its label style) this extension registers."""


def _plain(latex: str) -> str:
    """TeX to plain text: ``Del{\\'e}tang`` -> ``Delétang``."""
    return Text.from_latex(latex).render_as("text")


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels like the chapters' citations: ``Ito et al., 2024b``, ``Su, 2021``."""

    def format_labels(self, sorted_entries: Iterable[Any]) -> Iterator[str]:
        for entry in sorted_entries:
            yield self.format_label(entry)

    def format_label(self, entry: Any) -> str:
        persons = entry.persons.get("author") or entry.persons.get("editor") or []
        last = [_plain(" ".join(p.prelast_names + p.last_names)) for p in persons]
        if not last:
            who = _plain(entry.fields.get("title", entry.key))
        elif len(last) == 1:
            who = last[0]
        elif len(last) == 2:
            who = f"{last[0]} and {last[1]}"
        else:
            who = f"{last[0]} et al."
        year = entry.fields.get("year", "")
        return f"{who}, {year}" if year else who


class AuthorYearStyle(AlphaStyle):
    """pybtex's ``alpha`` formatting with :class:`AuthorYearLabelStyle` labels."""

    default_label_style = STYLE


def setup(app: Any) -> dict:
    register_plugin("pybtex.style.labels", STYLE, AuthorYearLabelStyle, force=True)
    register_plugin("pybtex.style.formatting", STYLE, AuthorYearStyle, force=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
