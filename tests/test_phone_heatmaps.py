"""A heatmap's cell values stay readable at a phone's width, and chapter 7's starred grids stay
large there (issue 77, item 8).

Chapter 7b's attention-cosine matrix of Table 1's ten PEs printed its cell values into each
other at 420 px ("1.000.270.400.29..."): :func:`lstpe.rendering.style.crowded_cell_labels`
measures each value against its cell, :func:`lstpe.rendering.responsive.check_figure` reports
it (``dense``, which the built book's figure test reads), and the phone's layout writes the
values with fewer digits or leaves them out (:func:`lstpe.rendering.phone._fit_cell_labels`).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from lstpe.figures import pe_plots, plots  # noqa: E402
from lstpe.rendering import phone, responsive, style  # noqa: E402

PES = ["2d-fixed", "learn-0.2", "relative", "random", "rope", "1d-fixed", "nope", "c-nope",
       "alibi", "rope-2d"]


def _similarity(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    a = rng.uniform(0.2, 1.0, (n, n))
    a = (a + a.T) / 2
    np.fill_diagonal(a, 1.0)
    names = (PES * (n // len(PES) + 1))[:n]
    names = [f"{p}#{i}" if n > len(PES) else p for i, p in enumerate(names)]
    return pd.DataFrame(a, index=names, columns=names)


def _chapter_7b_figure(n: int = len(PES)) -> plt.Figure:
    """The figure as chapter 7b draws it ("Every PE against every other")."""
    ax = plots.plot_similarity_matrix(_similarity(n))
    ax.figure.set_size_inches(7.5, 6)
    ax.set_title("attention-map cosine between PEs")
    return ax.figure


def _labels(fig: plt.Figure) -> list:
    return [t for ax in fig.axes for t in style.cell_labels(ax)[0]]


def test_cell_labels_are_the_values_inside_the_image() -> None:
    fig = _chapter_7b_figure()
    ax = fig.axes[0]
    labels, cell = style.cell_labels(ax)
    assert len(labels) == len(PES) ** 2
    assert labels[1].get_text() == f"{_similarity(10).iat[0, 1]:.2f}"
    style.lay_out(fig)
    assert cell == pytest.approx(ax.images[0].get_window_extent().width / len(PES), rel=0.05)
    assert style.cell_labels(fig.axes[1]) == ([], float("inf"))  # the colour bar has no cells
    plt.close(fig)


def test_the_check_fails_when_a_value_is_wider_than_its_cell() -> None:
    """Shrunk to a phone's width as it was (no new layout), the values overlap: the check
    names them; at the laptop's width the same figure passes."""
    fig = _chapter_7b_figure()
    style.readable(fig)
    assert responsive.check_figure(fig, style.COLUMN_PX)["dense"] == []
    fig.set_size_inches(phone.PHONE_PX / style.DPI, 4.0)
    crowded = style.crowded_cell_labels(fig)
    assert crowded and all(w > cell - 2 for _, w, cell in crowded)
    assert responsive.check_figure(fig, phone.PHONE_PX)["dense"] == [list(c) for c in crowded]
    plt.close(fig)


def test_the_phone_writes_fewer_digits_where_two_decimals_do_not_fit() -> None:
    fig = _chapter_7b_figure()
    ph = phone.phone_figure(fig)
    assert responsive.check_figure(ph, phone.PHONE_PX)["dense"] == []
    texts = [t.get_text() for t in _labels(ph) if t.get_visible()]
    assert len(texts) == len(PES) ** 2  # every value is still written
    assert "1" in texts and all(not t.startswith("0.") for t in texts)  # ".53", not "0.53"
    assert [t.get_text() for t in _labels(fig)][:2] == ["1.00", f"{_similarity(10).iat[0, 1]:.2f}"]
    plt.close(fig)
    plt.close(ph)


def test_the_phone_leaves_the_values_out_where_no_digits_fit() -> None:
    fig = _chapter_7b_figure(30)
    ph = phone.phone_figure(fig)
    assert responsive.check_figure(ph, phone.PHONE_PX)["dense"] == []
    assert not any(t.get_visible() for t in _labels(ph))
    plt.close(fig)
    plt.close(ph)


@pytest.mark.parametrize(("text", "digits", "short"), [
    ("0.27", 2, ".27"), ("1.00", 2, "1"), ("0.996", 2, "1"), ("-0.31", 2, "-.31"),
    ("0.27", 1, ".3"), ("12.34", 1, "12.3"), ("\u22120.40", 1, "-.4"), ("n/a", 1, "n/a")])
def test_short_numbers(text: str, digits: int, short: str) -> None:
    assert phone._short_number(text, digits) == short


def test_the_noise_heatmap_keeps_its_two_decimals_on_a_phone() -> None:
    """Chapter 8's accuracy-under-noise heatmap has six wide cells per row: nothing to shorten."""
    rows = [{"noise": x, "pe": p, "condition": "all", "accuracy": 0.9 - x - 0.01 * i}
            for x in (0.0, 0.02, 0.04, 0.06, 0.08, 0.1) for i, p in enumerate(PES[:8])]
    ax = plots.plot_noise_heatmap(pd.DataFrame(rows))
    ph = phone.phone_figure(ax.figure)
    assert responsive.check_figure(ph, phone.PHONE_PX)["dense"] == []
    assert all(len(t.get_text()) == 4 for t in _labels(ph))  # "0.90": as drawn
    plt.close(ax.figure)
    plt.close(ph)


def test_the_starred_grids_are_large_on_a_phone_under_short_titles() -> None:
    """Chapter 7's grids (one inner cell, a small and a large sigma): one-line panel titles on
    the laptop, two lines at most on the phone (the PE's name above the part), and each grid
    drawn at least half the phone's column wide."""
    rng = np.random.default_rng(1)
    pairs = {pe: (rng.normal(size=(16, 160)) * s, rng.normal(size=(16, 160)) * s)
             for pe, s in (("learn-0.1", 0.1), ("learn-2", 2.0))}
    fig = pe_plots.plot_pe_grid(pairs)
    grids = [ax for ax in fig.axes if ax.images]
    assert len(grids) == 6 and all("\n" not in ax.get_title() for ax in grids)
    ph = phone.phone_figure(fig)
    shown = [ax for ax in ph.axes if ax.images]
    style.lay_out(ph)
    assert all(ax.get_title().count("\n") <= 1 for ax in shown)
    assert min(ax.get_window_extent().width for ax in shown) >= 0.5 * phone.PHONE_PX
    assert all(not v for v in responsive.check_figure(ph, phone.PHONE_PX).values())
    plt.close(fig)
    plt.close(ph)
