"""The project's own words on a reader page (issue 65, item 5).

A reader page (the intro and chapters 2-10) speaks the reader's words: the campaign's
machinery ("unit", "item 4", "campaign", "lease", "chunk", "segment", ...) appears only where
the page defines it at its first use.

**The definition rule** (one, explicit): a term's *first* occurrence on a page counts as
defined when it is followed directly (after an optional plural "s", a closing quote or ``*``,
and spaces) by an opening parenthesis that glosses it, e.g. "a unit (one trained model: one
PE, one seed)". Every later occurrence is then fine. A first occurrence without that
parenthesis is a problem, and so is the term on a page that never defines it.

Math and ordinary uses of "unit" are exempt by :data:`UNIT_EXEMPT`: "unit" directly followed by
one of those words ("unit vector", "unit-norm", ...), or "in units of", is not the project's noun.
A library's method called on a value (``qkv(h).chunk(3, dim=-1)``, torch's) is not either.

A term is found inside a code name too (``campaign_status``, ``fragment_match``,
``plot_witness``: an underscore or a dot separates words), since the scanned text holds the code
a reader sees (issue 77): the inputs of visible code cells, never those of folded or removed
ones (:class:`ArticleText`). A code name never counts as glossed: the gloss is a space and
then the parenthesis, and ``weight_decay_witness(wit)`` is a call.
"""
from __future__ import annotations

import html.parser
import re

_B, _E = r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"
"""A word's edges: a letter or digit may not touch it, an underscore may (``fragment_match``)."""


def _term(pattern: str) -> re.Pattern:
    return re.compile(_B + pattern + _E, re.I)


TERMS: dict[str, re.Pattern] = {
    "unit": _term(r"units?"),
    "item N": _term(r"items? \d+"),
    "campaign": _term(r"campaigns?"),
    "lease": _term(r"leas(?:e|es|ed|ing)"),
    "lent": _term(r"lent"),
    "borrowed machine": _term(r"borrowed (?:GPUs?|CPUs?|machines?)"),
    "chunk": _term(r"chunks?"),
    "segment": _term(r"segments?"),
    "fragment": _term(r"fragments?"),
    "machine-hours": _term(r"machine[- ]hours?"),
    "witness": _term(r"witness(?:es)?"),
}
"""The internal terms, each with the pattern that finds it (case-insensitive; inside code names
too, see the module docstring)."""

UNIT_EXEMPT = re.compile(
    r"[\s-]*(?:vectors?|circles?|norms?|normed|length|variance|spheres?|balls?|intervals?|"
    r"squares?|matri(?:x|ces)|diagonal|determinant|steps?|magnitude|modulus|complex|"
    r"roots?|disc|disk)\b", re.I)
"""What may follow "unit(s)" for it to be math ("unit vector", "unit-norm"); "in units of" is
a measure too."""

DEFINED = re.compile(r"s?[*\"'”’]*\s+\(")
"""The gloss right after a term's first occurrence: ``term (plain words)``, the parenthesis
after a space (so that a call, ``plot_witness(wit)``, is no gloss)."""


def _is_method_call(text: str, start: int, end: int) -> bool:
    """``.chunk(``: a term called as a method of a value (torch's ``Tensor.chunk``)."""
    return text[start - 1:start] == "." and text[end:end + 1] == "("


def _is_math_unit(text: str, start: int, end: int) -> bool:
    measure = text[max(0, start - 3):start].lower() == "in " and text[end:end + 3] == " of"
    return measure or bool(UNIT_EXEMPT.match(text, end))


def reader_word_problems(page_text: str, page: str) -> list[str]:
    """The internal terms ``page_text`` uses without defining them at their first use.

    Args:
        page_text: the reader-facing text of one page (Markdown, printed outputs and the
            code of visible cells: :func:`article_text`).
        page: the page's name, used in each message.

    Returns:
        One line per term whose first occurrence (math uses of "unit" skipped) is not followed
        by a parenthesised gloss; each names the page, the term and the words around it, and
        says what to do. Empty when the page is clean.
    """
    problems = []
    for term, pattern in TERMS.items():
        for m in pattern.finditer(page_text):
            if term == "unit" and _is_math_unit(page_text, m.start(), m.end()):
                continue
            if _is_method_call(page_text, m.start(), m.end()):
                continue
            if not DEFINED.match(page_text, m.end()):
                around = " ".join(page_text[max(0, m.start() - 50):m.end() + 50].split())
                problems.append(
                    f"{page}: {term!r} first used without a definition: ...{around}... "
                    f"(say it in the reader's words, or gloss it at its first use: "
                    f"'{m.group(0)} (plain words)')")
            break  # only the first (non-math) occurrence decides
    return problems


class SkipStack:
    """The element an HTML parser is skipping, as ``(tag, depth)`` pairs: a start tag of the
    skipped element's kind nests one deeper, its end tag climbs back out; a new element is
    skipped only outside one (shared by the book test's parsers)."""

    def __init__(self) -> None:
        self._stack: list[tuple[str, int]] = []

    def start(self, tag: str, skip: bool) -> None:
        if self._stack and tag == self._stack[-1][0]:
            self._stack[-1] = (tag, self._stack[-1][1] + 1)
        elif skip:
            self._stack.append((tag, 1))

    def end(self, tag: str) -> None:
        if self._stack and tag == self._stack[-1][0]:
            depth = self._stack[-1][1] - 1
            if depth:
                self._stack[-1] = (tag, depth)
            else:
                self._stack.pop()

    def __bool__(self) -> bool:
        return bool(self._stack)


class ArticleText(html.parser.HTMLParser):
    """The reader-facing text of a built page, with code cells hidden the way the book hides
    them: its article body (``<article>``; not the navigation, the page's table of contents
    or the links to the next page) without scripts, styles or the header links, and without
    the code inputs of folded cells (``div.cell`` tagged ``tag_hide-input`` or
    ``tag_hide-cell``: "Show code cell source"); removed cells are not on the page at all.
    Markdown, the code of visible cells and cell outputs (folded ones too) are kept."""

    SKIP_TAGS = {"script", "style", "head"}
    FOLDED = {"tag_hide-input", "tag_hide-cell"}

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._in_article = 0
        self._skip = SkipStack()
        self._cells: list[tuple[bool, int]] = []  # (folded, div depth) of the open cells
        self._divs = 0

    def _folded_input(self, tag: str, cls: list[str]) -> bool:
        if tag != "div":
            return False
        self._divs += 1
        if "cell" in cls:
            self._cells.append((bool(self.FOLDED & set(cls)), self._divs))
        return "cell_input" in cls and bool(self._cells) and self._cells[-1][0]

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "article":
            self._in_article += 1
        folded = self._folded_input(tag, cls)
        self._skip.start(tag, tag in self.SKIP_TAGS or folded or "headerlink" in cls)
        if tag in ("p", "div", "li", "br", "tr", "h1", "h2", "h3", "h4", "pre"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        self._skip.end(tag)
        if tag == "div":
            if self._cells and self._cells[-1][1] == self._divs:
                self._cells.pop()
            self._divs -= 1
        if tag == "article":
            self._in_article -= 1

    def handle_data(self, data: str) -> None:
        if self._in_article and not self._skip:
            self.parts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def article_text(page_html: str) -> str:
    """The reader-facing text of one built page (see :class:`ArticleText`)."""
    p = ArticleText()
    p.feed(page_html)
    return p.text
