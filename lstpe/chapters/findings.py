"""How a results page shows its finding and its evidence: numbers formatted, never sentences.

A chapter's "What the stored units show" paragraph is written by hand in the notebook, as an
f-string whose numbers come from the analysis layer; :func:`md` displays it as Markdown (in the
book, Jupyter and Colab alike). :func:`evidence_view` and :func:`contrast_view` put an evidence
table of :mod:`lstpe.evidence.tables` in the few columns a page shows; :func:`ci` and
:func:`pval` format one number the way the tables do, so the paragraph and the table agree;
:func:`names`, :func:`having` and :func:`grouped` list a table's cells by verdict in the
paragraph, and :func:`reference` names the reference a row was tested against;
:func:`tests_line` and :func:`shape_line` put a claim's verdict (:mod:`lstpe.claims`) in the
phrases a paragraph quotes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from lstpe.stats.seed_stats import p_text as pval  # the one p format (pages, verdicts)


def md(text: str) -> object:
    """``text`` (Markdown, e.g. a hand-written f-string) as a displayable object."""
    from IPython.display import Markdown

    return Markdown(text)


def md_facts(template: str, facts: Mapping[str, Any] | None, otherwise: str = "") -> object:
    """A hand-written paragraph whose numbers are stored yet: ``template`` (Markdown with
    ``{key}`` fields, :meth:`str.format_map`) filled from ``facts``; ``otherwise`` (a sentence
    saying what is missing) when ``facts`` is None, as :mod:`lstpe.chapters.facts` returns
    before the first unit is stored."""
    return md(otherwise if facts is None else template.format_map(facts))


def num(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals; an en dash for a missing value."""
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def ci(mean: float, low: float, high: float, digits: int = 3) -> str:
    """``0.963 [0.955, 0.971]``: a value and its interval, as the tables show it."""
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (low, high)):
        return num(mean, digits)
    return f"{num(mean, digits)} [{num(low, digits)}, {num(high, digits)}]"


def _signed(x: float, digits: int) -> str:
    """``+0.563``: a signed value (``+0.000`` for one that rounds to zero, never ``-0.000``;
    ``±∞``; an en dash for a missing one)."""
    if x is None or x != x:
        return "–"
    if math.isinf(x):
        return "+∞" if x > 0 else "−∞"
    return f"{0.0 if round(x, digits) == 0 else x:+.{digits}f}"


def signed_interval(low: float, high: float, digits: int = 3) -> str:
    """``[+0.363, +0.762]``; an en dash when either bound is missing."""
    if not (low == low and high == high):
        return "–"
    return f"[{_signed(low, digits)}, {_signed(high, digits)}]"


def span_text(lo: str, hi: str) -> str:
    """``"12%"`` where two formatted ends read alike, else ``"12% to 30%"``.

    >>> span_text("0.2", "0.2"), span_text("0.1", "0.3")
    ('0.2', '0.1 to 0.3')
    """
    return lo if lo == hi else f"{lo} to {hi}"


def signed_ci(d: float, low: float, high: float, digits: int = 3) -> str:
    """``+0.563 [+0.363, +0.762]``: a difference and its interval (a value that rounds to zero
    prints as ``+0.000``, never ``-0.000``)."""
    if not (low == low and high == high):
        return _signed(d, digits)
    return f"{_signed(d, digits)} {signed_interval(low, high, digits)}"


def _p(p: float) -> str:
    """A p value in a table cell: 4 decimals, ``<0.0001`` below that."""
    return "–" if p is None or p != p else "<0.0001" if p < 1e-4 else f"{p:.4f}"


def dashed(table: pd.DataFrame, digits: int = 3, dash: str = "—") -> pd.DataFrame:
    """``table`` as a page shows it: floats with ``digits`` decimals, and ``dash`` where a
    value is missing because it does not apply (a correlation of a constant, a PE row's
    accuracy column), never ``NaN``; a p value (a column named ``p_...`` or ``pvalue``) below
    what ``digits`` shows reads ``<0.001``, not ``0.000``. For display only: save the numeric
    table."""
    out = table.copy()
    floor = 10.0 ** -digits
    for c in out.columns:
        name = c[-1] if isinstance(c, tuple) else c
        is_p = isinstance(name, str) and (name.startswith("p_") or name == "pvalue")
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = [dash if v != v else f"<{floor:.{digits}f}" if is_p and 0 <= v < floor
                      else f"{v:.{digits}f}" for v in out[c]]
        elif out[c].dtype == object:
            out[c] = [dash if isinstance(v, float) and v != v else v for v in out[c]]
    return out


def evidence_view(table: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """A claim's cell rows (:func:`lstpe.evidence.tables.evidence_rows`) in the columns a
    page shows, the verdict beside our values so that a page's width shows both: ``n``,
    ``ours [95% CI]``, ``verdict``, ``diff vs ref [CI]``, ``ref``, ``authors@200`` (mean ± SD
    (n)), ``paper@4000``, ``p (t)`` (the pooled and Welch t-tests against the reference's seeds, the
    larger p), ``p (TOST)``,
    ``MDD`` (the smallest difference from
    the reference that the row's n would detect: alpha 0.05, power 0.8); indexed by cell."""
    rows = []
    for _, r in table.iterrows():
        auth = (f"{num(r['authors_mean'], digits)} ± {num(r['authors_sd'], digits)} "
                f"({int(r['authors_n'])})" if r["authors_mean"] == r["authors_mean"] else "–")
        paper = (f"{num(r['paper_mean'], digits)} ± {num(r['paper_sd'], digits)}"
                 if r["paper_mean"] == r["paper_mean"] else "–")
        rows.append({"cell": r["cell"], "n": int(r["n"]),
                     "ours [95% CI]": ci(r["mean"], r["ci_low"], r["ci_high"], digits),
                     "verdict": r["verdict"],
                     "diff vs ref [CI]": signed_ci(r["diff"], r["diff_low"], r["diff_high"],
                                                   digits),
                     "ref": r["ref"], "authors@200": auth, "paper@4000": paper,
                     "p (t)": _p(r["p_diff"]), "p (TOST)": _p(r["p_equiv"]),
                     "MDD": num(r["mdd"], 2)})
    return pd.DataFrame(rows).set_index("cell")


def _is_trend(r: pd.Series) -> bool:
    """A trend row of :func:`lstpe.evidence.tables.trend_row`: ``a`` alone, no ``b``."""
    return not isinstance(r["b"], str) or not r["b"]


def contrast_ci(r: pd.Series, digits: int = 3) -> str:
    """A contrast row's difference with the interval of the test that gives its verdict: the
    exact permutation test's shift interval for a pair (``−∞``/``+∞`` where the seeds cannot
    bound it), the slope's t interval for a trend. 0 lies inside exactly when the verdict is
    that no difference is shown."""
    exact = r.get("exact_low", math.nan) == r.get("exact_low", math.nan)  # NaN: a trend row
    lo, hi = ("exact_low", "exact_high") if exact else ("diff_low", "diff_high")
    return signed_ci(r["diff"], r[lo], r[hi], digits)


def contrast_view(table: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """Contrast and trend rows (:func:`lstpe.evidence.tables.contrast_rows`) as a page shows
    them: ``n``, ``diff [95% CI]`` (:func:`contrast_ci`: the verdict's interval), ``Welch
    CI``, ``p (exact)``, ``floor``, ``p (Welch)``, ``verdict``."""
    rows = []
    for _, r in table.iterrows():
        trend = _is_trend(r)
        rows.append({"contrast": r["a"] if trend else f"{r['a']} − {r['b']}",
                     "n": f"{int(r['n_a'])} models" if trend else
                     f"{int(r['n_a'])}+{int(r['n_b'])}",
                     "diff [95% CI]": contrast_ci(r, digits),
                     "Welch CI": "–" if trend else signed_interval(r["diff_low"], r["diff_high"],
                                                                   digits),
                     "p (exact)": _p(r["p_perm"]), "floor": _p(r["p_floor"]),
                     "p (Welch)": _p(r["p_welch"]), "verdict": r["verdict"]})
    return pd.DataFrame(rows).set_index("contrast")


def names(items: object, empty: str = "none", code: bool = True) -> str:
    """``a``, ``b`` and ``c``: the items in order, as Markdown code (``code``), joined as a
    list reads; ``empty`` when there are none (so a sentence stays a sentence)."""
    xs = [f"`{x}`" if code else str(x) for x in items]
    if not xs:
        return empty
    return xs[0] if len(xs) == 1 else f"{', '.join(xs[:-1])} and {xs[-1]}"


def having(table: pd.DataFrame, verdict: str, col: str = "cell") -> list[str]:
    """The ``col`` values (``cell`` of an evidence table, ``a`` or ``b`` of a contrast table)
    of the rows whose ``verdict`` is ``verdict``, in the table's order."""
    return [str(x) for x in table.loc[table["verdict"] == verdict, col]]


def reference(row: pd.Series, digits: int = 3) -> str:
    """```authors@200`: 0.954 ± 0.041 (n = 15)``: the reference an evidence row was tested
    against (its ``ref``: the authors' logs, else the paper), as the table shows it."""
    who = "authors" if str(row["ref"]).startswith("authors") else "paper"
    if not str(row["ref"]):
        return "no reference"
    n = f" (n = {int(row['authors_n'])})" if who == "authors" else ""
    return (f"`{row['ref']}`: {num(row[f'{who}_mean'], digits)} ± "
            f"{num(row[f'{who}_sd'], digits)}{n}")


def grouped(groups: dict[str, list[str]], empty: str = "none") -> str:
    """``equivalent: `a` and `b`; differs: `c```: each non-empty group of cells after its
    label (:func:`names`), joined by semicolons; ``empty`` when every group is empty."""
    parts = [f"{label}: {names(cells)}" for label, cells in groups.items() if cells]
    return "; ".join(parts) if parts else empty


def range_line(ranges: pd.DataFrame | None) -> str:
    """Our units against the range all the authors' seeds can span at the units' epoch, in
    words: how many were checked and each one outside, with the bound it crosses.

    Args:
        ranges: :func:`lstpe.references.authors_logs.authors_range_check`'s rows; None for a
            run not of the authors' recipe, which is not checked.
    """
    if ranges is None:
        return "not checked against the authors' range (these models are not of their recipe)"
    if ranges.empty:
        return "no model is at an epoch the authors logged, so none is checked against their range"
    bound = "mean ± SD·(n − 1)/√n, whatever their distribution"
    out = ranges[ranges["outside"]]
    if out.empty:
        return (f"each of the {len(ranges)} models lies inside the range all the authors' seeds "
                f"can span ({bound})")

    def one(r: Any) -> str:
        up = r.accuracy > r.high
        return (f"`{r.pe}` seed {r.seed} at {r.accuracy:.3f}, {'above' if up else 'below'} "
                f"{r.high if up else r.low:.3f}, the {'most' if up else 'least'} any of their "
                f"{r.authors_n} seeds can reach at epoch {r.epoch}")

    units = "; ".join(one(r) for r in out.itertuples())
    verb = "lies" if len(out) == 1 else "lie"
    return (f"{len(out)} of the {len(ranges)} models {verb} outside the range all the authors' "
            f"seeds can span ({bound}): {units}")


def claim_view(cells: pd.DataFrame, contrasts: pd.DataFrame | None = None,
               digits: int = 3) -> pd.DataFrame:
    """One table for a claim tested against a fixed reference (no authors' or paper's cell
    values): the cell rows of :func:`lstpe.evidence.tables.evidence_rows` (``ours [95% CI]``
    against ``ref``, the t-test's and TOST p), then the contrast and trend rows of
    :func:`~lstpe.evidence.tables.contrast_rows` (difference with the interval of its
    verdict, :func:`contrast_ci`, exact p and its floor). Columns ``n``, ``estimate [95% CI]``,
    ``against``, ``p (t)`` (a cell's test, its ``test`` column: one-sample t against an exact
    reference, pooled and Welch t against seeds, Welch against a null distribution; a
    contrast's Welch test), ``p (TOST ±margin)``, ``p (exact)``, ``floor``, ``verdict``;
    indexed by row."""
    margin = next((m for m in cells["margin"] if m == m), math.nan)
    tost = f"p (TOST ±{margin:g})" if margin == margin else "p (TOST)"
    rows = []
    for _, r in cells.iterrows():
        rows.append({"row": r["cell"], "n": str(int(r["n"])),
                     "estimate [95% CI]": ci(r["mean"], r["ci_low"], r["ci_high"], digits),
                     "against": f"{r['ref']} ({num(_ref_value(r), digits)})" if r["ref"]
                     else "–",
                     "p (t)": _p(r["p_diff"]), tost: _p(r["p_equiv"]), "p (exact)": "–",
                     "floor": "–", "verdict": r["verdict"]})
    view = contrast_view(contrasts, digits) if contrasts is not None and len(contrasts) else None
    for name, r in ([] if view is None else view.iterrows()):
        rows.append({"row": name, "n": r["n"], "estimate [95% CI]": r["diff [95% CI]"],
                     "against": "no trend" if " − " not in name else "difference 0",
                     "p (t)": r["p (Welch)"], tost: "–", "p (exact)": r["p (exact)"],
                     "floor": r["floor"], "verdict": r["verdict"]})
    return pd.DataFrame(rows).set_index("row")


_OUTCOME = {"supports": "as the paper", "contradicts": "against the paper",
            "open": "not shown at this n"}


def tests_line(verdict: Any) -> str:
    """The contrasts of a claim's verdict (:class:`lstpe.claims.Verdict` whose
    ``numbers["rows"]`` are its contrast rows, in the order of its tests) in one phrase:
    difference with its exact interval, n, exact and Holm p (TOST where the paper finds no
    difference) and what each says of the claim."""
    rows = verdict.numbers.get("rows")
    if rows is None or rows.empty:
        return "none stored"
    out = []
    for (_, r), t in zip(rows.iterrows(), verdict.tests, strict=False):
        extra = f", TOST {pval(r['p_equiv'])}" if "level" in t.name and "p_equiv" in r \
            and pd.notna(r["p_equiv"]) else ""
        out.append(f"`{r['a']}` − `{r['b']}` = {contrast_ci(r)} ({r['n_a']:.0f}+{r['n_b']:.0f}; "
                   f"exact {pval(r['p_perm'])}, Holm {pval(r['p_holm'])}{extra}): "
                   f"{_OUTCOME[t.outcome]}")
    return "; ".join(out)


def shape_line(verdict: Any) -> str:
    """The sigma curve's shape (``numbers["shape"]`` of :mod:`lstpe.claims.sigma`)."""
    s = verdict.numbers.get("shape")
    if not s:
        return "too few values of σ to say"
    return (f"over the σ with 2 or more models, within 0.05 of its best ({s['best']:.3f} at "
            f"σ = {s['best_sigma']:g}) up to "
            f"σ = {s['plateau_to']:g}, its largest fall {s['drop']:.3f} between σ = "
            f"{s['drop_from']:g} and {s['drop_to']:g} ({s['at_from']:.3f} to {s['at_to']:.3f})")


# --------------------------------------------------------------------------- key columns first


class Shown:
    """Tables as a page shows them (issue 51): ``key`` tables open, with the class
    ``lstpe-key`` (the book keeps them inside the column at phone width, see ``_css``), and
    the ``folded`` ones under a ``<details>`` summary line, one click away. Jupyter, Colab
    and the book render the HTML; plain text shows every table."""

    def __init__(self, key: list[pd.DataFrame], folded: list[pd.DataFrame],
                 summary: str) -> None:
        self.key, self.folded, self.summary = key, folded, summary

    def _repr_html_(self) -> str:
        import html

        shown = "".join(t.to_html(classes="dataframe lstpe-key", border=0) for t in self.key)
        if not self.folded:
            return shown
        body = "".join(t.to_html(classes="dataframe", border=0) for t in self.folded)
        return (f'{shown}<details class="lstpe-details"><summary>{html.escape(self.summary)}'
                f"</summary>{body}</details>")

    def __repr__(self) -> str:
        return "\n\n".join([t.to_string() for t in self.key]
                           + [self.summary] + [t.to_string() for t in self.folded])


def _ref_value(r: pd.Series) -> float:
    """The value a cell row was tested against: the authors' mean where they logged the cell,
    else the paper's."""
    return r["authors_mean"] if r["authors_mean"] == r["authors_mean"] else r["paper_mean"]


def _ref_text(r: pd.Series, digits: int) -> str:
    """A cell row's reference as the key table shows it: ``0.954 (authors@200)``; an en dash
    for a row without one."""
    return f"{num(_ref_value(r), digits)} ({r['ref']})" if r["ref"] else "–"


def evidence_key(table: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The columns a reader needs first of a claim's cell rows: ``n``, ``ours [95% CI]``,
    ``reference`` (the value the verdict tests against and whose it is), ``verdict``."""
    view = evidence_view(table, digits)
    view.insert(2, "reference", [_ref_text(r, digits) for _, r in table.iterrows()])
    return view[["n", "ours [95% CI]", "reference", "verdict"]]


def show_evidence(cells: pd.DataFrame, contrasts: pd.DataFrame | None = None,
                  digits: int = 3) -> Shown:
    """A claim's evidence against the authors' and the paper's values (chapters 5, 6, 11):
    :func:`evidence_key` and the contrasts' ``n``, ``diff [95% CI]``, ``verdict`` open;
    every column (:func:`evidence_view`, :func:`contrast_view`) folded under them."""
    key, folded = [evidence_key(cells, digits)], [evidence_view(cells, digits)]
    if contrasts is not None and len(contrasts):
        full = contrast_view(contrasts, digits)
        key.append(full[["n", "diff [95% CI]", "verdict"]])
        folded.append(full)
    return Shown(key, folded, "Every column: differences, the authors' and the paper's "
                              "values, p values (pooled t, TOST, Welch, exact) and the MDD")


def show_claim(cells: pd.DataFrame, contrasts: pd.DataFrame | None = None,
               digits: int = 3) -> Shown:
    """A claim tested against a fixed reference (chapters 8-10): :func:`claim_view`'s ``n``,
    ``estimate [95% CI]``, ``against`` and ``verdict`` open, every column folded."""
    full = claim_view(cells, contrasts, digits)
    return Shown([full[["n", "estimate [95% CI]", "against", "verdict"]]], [full],
                 "Every column: p values (t, TOST, exact) and the exact test's floor")
