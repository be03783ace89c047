"""lstpe.chapters.findings.names / having: a table's cells of one verdict, listed in a sentence."""

from __future__ import annotations

import pandas as pd

from lstpe.chapters import findings as fd


def test_names_reads_as_a_list_and_never_leaves_a_hole() -> None:
    assert fd.names([]) == "none"
    assert fd.names([], empty="no PE") == "no PE"
    assert fd.names(["nope"]) == "`nope`"
    assert fd.names(["a", "b"]) == "`a` and `b`"
    assert fd.names(["a", "b", "c"]) == "`a`, `b` and `c`"
    assert fd.names([0.1, 0.2], code=False) == "0.1 and 0.2"


def test_having_keeps_the_table_order() -> None:
    t = pd.DataFrame({"a": ["x"] * 3, "b": ["r", "s", "t"],
                      "verdict": ["higher", "no difference shown", "higher"]})
    assert fd.having(t, "higher", "b") == ["r", "t"]
    assert fd.having(t, "lower", "b") == []
