"""The paper's own words and numbers, once: :class:`Quote` (a sentence a claim tests) and
:data:`NUMBERING` (which figure or table of each version of the paper holds a result).

The paper has two versions: ``v1``, *The Importance of Positional Encoding Initialization in
Transformers for Relational Reasoning* (the workshop version, arXiv HTML), and ``v2``,
*Learning positional encodings in transformers depends on initialization* (the later one this
book reproduces). Their numbers differ (v1's Fig. 5 is v2's Fig. A9; v1's Tables 2-6 are v2's
appendix Tables A2-A6). The book's rule, stated in the intro: tables keep the first version's
numbers (1-6), figures the later version's unless a label says "of the first version"; every
label comes from :data:`NUMBERING` (:func:`label`), which the intro shows as a table
(:func:`numbering_markdown`), and a quote names its own version and place.

A quote is verbatim: every piece of its ``text`` between the ellipses `` … `` occurs, in
order, in the version it names (whitespace aside). The ellipsis drops what the plain text of
that version cannot quote readably (v1's arXiv text repeats each formula three times:
``σ=0.2𝜎0.2\\sigma=0.2italic_σ = 0.2``) or what the claim does not test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Quote", "Numbering", "NUMBERING", "VERSIONS", "ELLIPSIS", "label", "pieces",
           "numbering_markdown"]

VERSIONS: dict[str, str] = {
    "v1": "The Importance of Positional Encoding Initialization in Transformers for "
          "Relational Reasoning",
    "v2": "Learning positional encodings in transformers depends on initialization"}
"""The two versions of the paper, by the id a :class:`Quote` names."""

ELLIPSIS = " … "
"""What separates the verbatim pieces of a quote."""


@dataclass(frozen=True)
class Quote:
    """A sentence of the paper, verbatim (module docstring): ``text``, ``version`` (``v1`` or
    ``v2``, :data:`VERSIONS`) and ``where`` (section, figure or table in that version)."""

    text: str
    version: str
    where: str

    def __post_init__(self) -> None:
        if self.version not in VERSIONS:
            raise ValueError(f"quote {self.text[:40]!r}: version {self.version!r} is not one of "
                             f"{', '.join(VERSIONS)}")

    def cite(self) -> str:
        """The quote as a page prints it: ``"text" (v2, §3.1)``."""
        return f"“{self.text}” ({self.version}, {self.where})"


def pieces(text: str) -> list[str]:
    """The verbatim pieces of a quote's ``text`` (split at :data:`ELLIPSIS`), each with its
    whitespace collapsed."""
    return [re.sub(r"\s+", " ", p).strip() for p in text.split(ELLIPSIS.strip()) if p.strip()]


@dataclass(frozen=True)
class Numbering:
    """Where one result is in each version: ``v2`` and ``v1`` (empty: that version does not
    have it) and ``what`` it shows. ``book`` is the label the book prints."""

    book: str
    v2: str
    v1: str
    what: str


NUMBERING: dict[str, Numbering] = {
    "table1": Numbering("Table 1", "Table 1", "Table 1, Fig. 3A", "every PE's accuracy"),
    "sigma": Numbering("Table 2", "Table A2, Fig. 1F", "Table 2, Fig. 2C",
                       "the σ sweep of the learnable PE"),
    "attention": Numbering("Table 3, Fig. 2A-C", "Table A3, Fig. 2A-C", "Table 3, Fig. 4",
                           "attention similarity to 2d-fixed, over σ"),
    "procrustes": Numbering("Fig. 2D-F", "Fig. 2D-F", "Fig. 10",
                            "Procrustes distance of the learned PE to 2d-fixed"),
    "structure": Numbering("Fig. 2D-F", "Fig. 2D-F; abstract", "Fig. 10; §4.3",
                           "the learned PE mirrors the 2-D positions (our grid score)"),
    "sgd": Numbering("Table 4", "Table A4, Fig. A5", "Table 4, Fig. 7", "Adam against SGD"),
    "weight_decay": Numbering("Tables 5-6", "Tables A5-A6, Fig. A6", "Tables 5-6, Fig. 8",
                              "weight decay (AdamW 0.1)"),
    "jsd": Numbering("Fig. A7", "Fig. A7", "Fig. 9",
                     "Jensen-Shannon divergence of attention"),
    "every_pe": Numbering("Fig. A8B", "Fig. A8B-D", "Fig. 3B-D",
                          "attention of every PE against every other"),
    "noise": Numbering("Fig. A9", "Fig. A9; §3.2", "Fig. 5; §3.5", "embedding noise"),
    "humans": Numbering("Fig. 6 of the first version", "", "Fig. 6; §3.6",
                        "models against people per puzzle"),
    "brain": Numbering("Figs. 3-4", "Figs. 3-4", "", "the brain experiment"),
    "brain_masking": Numbering("Figs. A10-A12", "Figs. A10-A12", "",
                               "the brain experiment at 15, 75 and 90% masking"),
}
"""Every result the book labels, by key: its label in the book and its place in each
version. The one source of figure and table numbers (claims' lines, the intro's table)."""


def label(key: str) -> str:
    """The book's label of result ``key`` (:data:`NUMBERING`), e.g. ``Fig. A9``."""
    if key not in NUMBERING:
        raise ValueError(f"no figure or table numbered {key!r}; known: {', '.join(NUMBERING)}")
    return NUMBERING[key].book


def numbering_markdown() -> str:
    """:data:`NUMBERING` as the intro's Markdown table: the book's label, v2's and v1's."""
    rows = [f"| {n.book} | {n.v2 or 'not in this version'} | {n.v1 or 'not in this version'} "
            f"| {n.what} |" for n in NUMBERING.values()]
    return ("| The book says | Later version (v2) | First version (v1) | What |\n"
            "| --- | --- | --- | --- |\n" + "\n".join(rows))
