"""Figures laid out again for a phone (lstpe.rendering.responsive), checked by the house style.

The facts are the house style's own measures (lstpe.rendering.style): the text size a figure
shows in a column of a given width, overlapping texts, legends over text, markers cut by
their axes. A laptop figure shrunk to the phone's column breaks the first of them; its phone
rendering must break none.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from lstpe.rendering import phone, responsive, style, widgets  # noqa: E402


@pytest.fixture(autouse=True)
def _style():
    with matplotlib.rc_context(style.RC):
        yield
    plt.close("all")


def three_panels():
    """Three panels side by side sharing y, a two-column legend under the middle one."""
    fig, axes = plt.subplots(1, 3, figsize=style.figsize(1.0, 3.2), sharey=True,
                             layout="constrained")
    x = np.linspace(0, 200, 50)
    for i, ax in enumerate(axes):
        for k in range(4):
            ax.plot(x, 1 - np.exp(-x / (20 + 30 * k + 10 * i)), marker="o", markevery=10,
                    label=f"curve {k}")
        ax.set_title(f"panel {i}: accuracy")
        ax.set_xlabel("epoch")
    axes[0].set_ylabel("accuracy")
    style.legend_below(axes[1])
    return style.readable(fig)


def _png_width(png: bytes) -> int:
    return Image.open(io.BytesIO(png)).size[0]


def test_a_laptop_figure_shrunk_to_a_phone_shows_small_text():
    """The fact the phone rendering exists for: 9-pt text of a full-column figure shows at
    5-6 pt in the phone's 388-px column."""
    fig = three_panels()
    assert style.small_text(fig) == []
    small = style.small_text(fig, column_px=phone.PHONE_PX)
    assert small and max(pt for _, pt in small) < 6.0


def test_the_phone_rendering_stacks_the_panels_and_passes_every_check():
    fig = three_panels()
    ph = phone.phone_figure(fig)
    tops = sorted(ax.get_position().y0 for ax in ph.axes)
    lefts = {round(ax.get_position().x0, 3) for ax in ph.axes}
    assert len(lefts) == 1 and len(tops) == 3  # one column, three rows
    assert responsive.check_figure(ph, phone.PHONE_PX) == {
        "small": [], "overlap": [], "legend": [], "cut": [], "collapsed": [],
        "dense": []}
    buf = io.BytesIO()
    ph.savefig(buf, format="png", dpi=ph.dpi, bbox_inches="tight")
    assert _png_width(buf.getvalue()) <= phone.PHONE_PX
    assert ph.axes[2].yaxis.get_ticklabels()[1].get_visible()  # shared y: labels come back
    legend = next(ax.get_legend() for ax in ph.axes if ax.get_legend() is not None)
    assert legend._ncols == 1 and len(legend.texts) == 4
    # the laptop figure is left as it was
    assert len({round(ax.get_position().y0, 3) for ax in fig.axes}) == 1


def test_figure_html_carries_both_renderings_and_their_checks():
    fig = three_panels()
    out = responsive.figure_html(fig, alt="three panels")
    m = re.search(r'data-lstpe-check="([^"]*)"', out)
    got = json.loads(html.unescape(m.group(1)))
    assert set(got) == {"laptop", "phone"}
    found = {k: {c: v for c, v in r.items() if v} for k, r in got.items()}
    assert found == {"laptop": {}, "phone": {}}
    source = re.search(r'<source media="([^"]+)" srcset="data:image/png;base64,([^"]+)"', out)
    assert source.group(1) == responsive.PHONE_MEDIA
    assert _png_width(base64.b64decode(source.group(2))) <= phone.PHONE_PX
    laptop = re.search(r'<img src="data:image/png;base64,([^"]+)" alt="three panels"', out)
    assert phone.PHONE_PX < _png_width(base64.b64decode(laptop.group(1))) \
        <= style.COLUMN_PX


def test_a_figure_that_cannot_be_copied_says_why_and_still_shows():
    fig = three_panels()
    fig.canvas.mpl_connect("draw_event", lambda event: None)  # fine: callbacks are dropped
    fig.axes[0].xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
        lambda v, _: f"{v:g}"))  # a lambda cannot be pickled
    laptop, small, got = responsive.renderings(fig)
    assert small is None and "error" in got["phone"] and laptop[:4] == b"\x89PNG"


def test_a_wide_legend_inside_its_panel_keeps_the_panel_whole_on_the_phone():
    """A one-panel figure laid out once by ``tight_layout`` with a two-column legend inside
    its axes (chapter 11's sigma sweep): on the phone the legend gets one column and the
    panel keeps most of the figure's height. Narrowing the legend in place had left it
    placed far below the axes, constrained layout then gave up ("axes sizes collapsed"), and
    the panel was drawn a sixth of the figure tall; the check reports that as ``collapsed``."""
    fig, ax = plt.subplots(figsize=style.figsize(1.0, 3.8))
    x = np.linspace(0.1, 2.0, 20)
    ax.fill_between(x, 0.1, 0.2, color="0.85", label="authors @200, 95% CI")
    for k, label in enumerate(["authors @200, mean", "paper @4000", "ours @200, each seed",
                               "ours @200, mean and 95% CI"]):
        ax.plot(x, 0.9 - 0.02 * k - x / 10, marker="os^D"[k], label=label)
    ax.set(xlabel="sigma of the learnable PE's initialisation", ylabel="validation accuracy",
           ylim=(0, 1.05))
    ax.legend(loc="lower left", fontsize=9, ncol=2, frameon=False)
    fig.tight_layout()
    ph = phone.phone_figure(fig)
    assert ph.axes[0].get_legend()._ncols == 1
    assert ph.axes[0].get_position().height > 0.6
    assert responsive.check_figure(ph, phone.PHONE_PX) == {
        "small": [], "overlap": [], "legend": [], "cut": [], "collapsed": [],
        "dense": []}


@pytest.mark.filterwarnings("ignore:constrained_layout not applied:UserWarning")
def test_a_collapsed_layout_is_reported():
    """Constrained layout cannot fit a legend taller than the figure beside its panel: the
    check names the collapse."""
    fig, ax = plt.subplots(figsize=(3.0, 1.2), layout="constrained")
    for k in range(12):
        ax.plot([0, 1], [k, k], label=f"curve {k}")
    style.legend_below(ax, ncols=1)
    assert responsive.check_figure(fig, phone.PHONE_PX)["collapsed"]


def test_overlapping_ticks_are_flagged_then_mended_on_the_phone():
    """A laptop figure whose 9 category names fit; at the phone's width they would
    run together: the phone rendering turns them upright."""
    fig, ax = plt.subplots(figsize=style.figsize(1.0, 3.0), layout="constrained")
    names = [f"name-{i:02d}" for i in range(9)]
    ax.bar(names, np.arange(len(names)))
    style.readable(fig)
    assert style.overlapping_text(fig) == []
    narrow = phone._copy(fig)
    narrow.set_size_inches(phone.PHONE_PX / style.DPI, 3.0)
    assert style.overlapping_text(narrow) != []
    mended = phone.phone_figure(fig)
    assert responsive.check_figure(mended, phone.PHONE_PX)["overlap"] == []


def test_explorer_views_of_figures_become_switchable_pictures():
    figs = {(k,): three_panels() for k in ("a", "b")}
    out = widgets.views_html(figs, [widgets.Control("which", (("a", "A"), ("b", "B")))])
    pics = re.findall(r"<picture data-key=\"(\w)\"( hidden)? ", out)
    assert pics == [("a", ""), ("b", " hidden")]
    assert "querySelectorAll('[data-key]')" in html.unescape(out)


def test_install_shows_figures_as_pictures_in_ipython():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    responsive.install()
    fig = three_panels()
    data, _ = ip.display_formatter.format(fig)
    assert data["text/html"].startswith('<picture class="lstpe-figure"')
    ip.events.trigger("pre_run_cell", None)  # registered again before every cell, not twice
    names = [getattr(f, "__qualname__", "") for f in ip.events.callbacks["pre_run_cell"]]
    assert names.count("install.<locals>.register") == 1


def test_a_wide_table_of_heatmaps_is_stacked_with_its_row_names_and_colour_bars():
    """A 2 x 3 table of heatmaps, rows named by their first panel's y label, a colour bar
    beside each: on the phone each panel carries its row's name in its title, every colour bar
    stays beside its own panel (same height band, to its right) and the checks pass; a panel
    that holds only a legend becomes the figure's legend."""
    fig, axes = plt.subplots(2, 3, figsize=style.figsize(1.0, 4.6), layout="constrained")
    rng = np.random.default_rng(0)
    for r, name in enumerate(("learn-0.1\nrow", "learn-2\nrow")):
        for c, ax in enumerate(axes[r]):
            im = ax.imshow(rng.random((4, 4)))
            fig.colorbar(im, ax=ax, label="cosine")
            ax.set_title(["init", "learned", "final"][c])
        axes[r, 0].set_ylabel(name)
    readable = style.readable(fig)
    ph = phone.phone_figure(readable)
    ph.canvas.draw()
    panels = [a for a in ph.axes if a.get_label() != "<colorbar>"]
    titles = sorted(a.get_title() for a in panels)
    assert titles[0] == "learn-0.1\nfinal" and titles[-1] == "learn-2\nlearned"
    for cax in [a for a in ph.axes if a.get_label() == "<colorbar>"]:
        owner = cax._colorbar.mappable.axes
        ob, cb = owner.get_position(), cax.get_position()
        assert cb.x0 >= ob.x1 - 1e-3 and cb.x0 - ob.x1 < 0.1  # just right of its panel
        assert min(ob.y1, cb.y1) - max(ob.y0, cb.y0) > 0.5 * ob.height  # in its height band
    assert all(not v for v in responsive.check_figure(ph, phone.PHONE_PX).values())

    fig2, (ax, key) = plt.subplots(1, 2, figsize=style.figsize(1.0, 3.0))
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set(xlabel="x", ylabel="y")
    key.axis("off")
    key.legend(*ax.get_legend_handles_labels())
    ph2 = phone.phone_figure(style.readable(fig2))
    assert len(ph2.axes) == 1 and len(ph2.legends) + (ph2.axes[0].get_legend() is not None) == 1


def test_a_painted_view_is_cropped_to_the_png_a_save_draws():
    """A view drawn into a frame (no layout engine) is painted once by its checks and its PNG
    cropped from that canvas: the size ``bbox_inches="tight"`` saves (to the pixel), the
    same picture (under 1% of pixels differ, by text antialiasing at another offset), and a
    figure with text outside its canvas is drawn again instead, as a save draws it."""
    from PIL import Image

    def view(outside: bool):
        fig, (a, b) = plt.subplots(1, 2, layout="constrained", dpi=style.DPI, figsize=(7, 3.5))
        a.imshow(np.random.default_rng(0).random((16, 16)))
        fig.colorbar(a.images[0], ax=a)
        b.plot([0, 200], [0.2, 0.9], "D-")
        b.set_title("ours at 200: 0.963\nauthors at 200: 0.947 ± 0.027")
        fig.legend(["x"], loc="outside lower center")
        fig.canvas.draw()
        fig.set_layout_engine("none")
        if outside:
            fig.text(1.02, 0.5, "beyond the edge")
        return fig

    for outside in (False, True):
        fig = view(outside)
        responsive.check_figure(fig, style.COLUMN_PX, paint=True)
        got = np.asarray(Image.open(io.BytesIO(responsive._painted_png(fig))).convert("RGB"))
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches="tight")
        ref = np.asarray(Image.open(buf).convert("RGB"))
        assert abs(got.shape[0] - ref.shape[0]) <= 1 and abs(got.shape[1] - ref.shape[1]) <= 1
        h, w = min(got.shape[0], ref.shape[0]), min(got.shape[1], ref.shape[1])
        differ = (np.abs(got[:h, :w].astype(int) - ref[:h, :w]).max(-1) > 0).mean()
        assert differ < (0.01 if not outside else 1e-9), differ  # outside: drawn as a save
        assert got.min() < 50 and (got == 255).mean() > 0.3  # ink on a white page
        plt.close(fig)


def test_a_just_checked_figure_saves_the_same_png_without_drawing_it_again():
    """After :func:`responsive.check_figure` laid out a figure without a layout engine (an
    explorer's later views), the PNG read from that draw's tight box is byte for byte the one
    ``bbox_inches="tight"`` saves."""
    fig, (a, b) = plt.subplots(1, 2, layout="none", dpi=style.DPI)
    a.imshow(np.random.default_rng(0).random((16, 16)))
    fig.colorbar(a.images[0], ax=a)
    b.plot([0, 200], [0.2, 0.9], "D-")
    b.set_title("ours at 200: 0.963\nauthors at 200: 0.947 ± 0.027")
    fig.legend(["x"], loc="lower center")
    responsive.check_figure(fig, style.COLUMN_PX)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches="tight")
    assert responsive._png(fig, drawn=True) == buf.getvalue()
    plt.close(fig)
