"""Explorers with a static twin (:mod:`lstpe.chapters.explore`, the chapter 2 puzzle browser):
one displayed object holds the widget view and a PNG, the book's html builders pick the PNG,
the static figure covers every stored sigma, and the widget's callbacks show the chosen model."""

from __future__ import annotations

import base64
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from lstpe import chapters as ch  # noqa: E402
from lstpe import lst  # noqa: E402
from lstpe.analysis import kernels  # noqa: E402
from lstpe.chapters import explore  # noqa: E402
from lstpe.references import authors_logs as al  # noqa: E402
from lstpe.rendering import widgets  # noqa: E402
from lstpe.store.results import Run  # noqa: E402
from lstpe.tutorial import lst_task as lt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VIEW, PNG = widgets.WIDGET_VIEW_MIME, widgets.PNG_MIME

# (label, seed) per model, in the artifacts' order; learn-2 has no val_dropout split
MODELS = [("2d-fixed", 1), ("learn-0.1", 1), ("learn-0.5", 1), ("learn-2", 1),
          ("learn-0.1", 2), ("learn-0.5", 2)]
EPOCHS = (0, 1, 2, 3)


def _acc(m: int, epoch: int, split: str) -> float:
    """A distinct accuracy per model, epoch and split (so a wrong pick shows)."""
    return 0.25 + 0.1 * m + 0.01 * epoch + (0.005 if split == "val_dropout" else 0.0)


@pytest.fixture(scope="module")
def run() -> Run:
    """A small table2-like run: 6 models, 2 blocks, 16 positions, d = 8, 4 epochs."""
    rows = []
    for m, (pe, seed) in enumerate(MODELS):
        splits = ("val",) if pe == "learn-2" else ("val", "val_dropout")
        for e in EPOCHS:
            for split in splits:
                for cond in ("all", "1"):
                    rows.append({"model": m, "pe": pe, "pe_name": pe.split("-")[0],
                                 "sigma": float(pe[6:]) if pe.startswith("learn-") else math.nan,
                                 "seed": seed, "epoch": e, "split": split, "condition": cond,
                                 "accuracy": _acc(m, e, split) + (0.3 if cond == "1" else 0),
                                 "loss": 1.0, "diverged": False})
    g = torch.Generator().manual_seed(0)
    arts = {"labels": [pe for pe, _ in MODELS], "seeds": [s for _, s in MODELS],
            "pe_final": torch.randn(len(MODELS), 2, 16, 8, generator=g),
            "pe_init": torch.randn(len(MODELS), 2, 16, 8, generator=g)}
    return Run(pd.DataFrame(rows), {"config": {"preset": "preview"}}, artifacts=arts,
               name="table2")


def _kernel(run: Run, pe: str, seed: int) -> np.ndarray:
    """``kernels.pe_kernel`` of the block-1 PE of model (pe, seed), computed here independently."""
    return kernels.pe_kernel(run.artifacts["pe_final"][MODELS.index((pe, seed)), 0].numpy())


def _kernel_panels(fig) -> list:
    return [ax for ax in fig.axes if ax.get_visible() and ax.images
            and "cosine" in ax.get_title()]


# --------------------------------------------------------------------------- the mimebundle


def test_bundle_holds_the_widget_view_and_a_png(run):
    from IPython.core.formatters import DisplayFormatter

    shown = ch.sigma_explorer(run)
    data, _ = DisplayFormatter().format(shown)  # what display() sends to the frontend
    assert data[VIEW]["model_id"] == shown.widget.model_id
    assert "needs a live kernel" in data["text/plain"]
    png = base64.b64decode(data[PNG])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png == shown.png
    assert not plt.fignum_exists(shown.figure.number)  # the inline backend won't show it twice


def test_with_static_wraps_any_widget():
    import ipywidgets as widgets

    fig, ax = plt.subplots()
    ax.plot([0, 1])
    w = widgets.IntSlider()
    b = ch.with_static(w, fig, text="a slider")._repr_mimebundle_()
    assert set(b) == {VIEW, PNG, "text/html", "text/plain"} and b["text/plain"] == "a slider"
    assert b["text/html"].startswith('<picture class="lstpe-figure"')  # the page's picture
    assert b[VIEW]["model_id"] == w.model_id
    assert not plt.fignum_exists(fig.number)


# --------------------------------------------------------------------------- the static figure


def test_static_grid_has_one_panel_per_stored_sigma(run):
    fig = ch.sigma_explorer(run).figure  # the first seed (1): learn-0.1, 0.5, 2; no 2d-fixed
    panels = _kernel_panels(fig)
    assert [ax.get_title().split(",")[0] for ax in panels] == ["σ = 0.1", "σ = 0.5", "σ = 2"]
    for ax, pe in zip(panels, ["learn-0.1", "learn-0.5", "learn-2"], strict=True):
        np.testing.assert_allclose(ax.images[0].get_array(), _kernel(run, pe, 1), rtol=1e-6)
    curves = [ax for ax in fig.axes if ax.get_visible() and ax.get_ylabel() ==
              "validation accuracy"]
    assert len(curves) == 3
    # seed 2 has two sigmas
    assert len(_kernel_panels(ch.sigma_grid(run.history, run.artifacts, seed=2))) == 2
    plt.close("all")
    with pytest.raises(ValueError, match="seed 7"):
        ch.sigma_grid(run.history, run.artifacts, seed=7)


def test_the_curve_is_validation_as_the_authors_evaluated_it(run):
    c = explore.learning_curve(run.history, "learn-0.5", 2)
    m = MODELS.index(("learn-0.5", 2))
    assert list(c["epoch"]) == list(EPOCHS)
    np.testing.assert_allclose(c["accuracy"], [_acc(m, e, "val_dropout") for e in EPOCHS])
    assert explore.curve_split(run.history, "learn-2", 1) == "val"  # no val_dropout: val
    a = explore.authors_points("learn-0.5")
    assert list(a.index) == [0, 200]
    assert a.loc[200, "acc_mean"] == al.authors_at(200).loc["learn-0.5", "acc_mean"]
    assert explore.authors_points("rope").empty


# --------------------------------------------------------------------------- the callbacks


def _check_shown(run: Run, x: explore.SigmaExplorer, pe: str, seed: int, split: str) -> None:
    assert x.shown == (pe, seed) and x.split == split
    want = _kernel(run, pe, seed)
    np.testing.assert_allclose(x.kernel, want, rtol=1e-6)
    ax_k, ax_c = x.figure.axes[:2]
    np.testing.assert_allclose(ax_k.images[0].get_array(), want, rtol=1e-6)  # what is drawn
    m = MODELS.index((pe, seed))
    np.testing.assert_allclose(ax_c.lines[0].get_ydata(), [_acc(m, e, split) for e in EPOCHS])
    bars = ax_c.containers[0].lines[0]  # the authors' epoch-0 / 200 means
    np.testing.assert_allclose(bars.get_ydata(),
                               [al.authors_at(e).loc[pe, "acc_mean"] for e in (0, 200)])
    assert not plt.fignum_exists(x.figure.number)


def test_widget_callbacks_show_the_chosen_sigma_and_seed(run):
    x = ch.sigma_explorer(run).live
    assert [v for _, v in x.sigma.options] == ["learn-0.1", "learn-0.5", "learn-2"]
    _check_shown(run, x, "learn-0.1", 1, "val_dropout")
    before = x.image.value
    x.sigma.value = "learn-0.5"
    _check_shown(run, x, "learn-0.5", 1, "val_dropout")
    assert x.image.value != before and x.image.value[:4] == b"\x89PNG"
    x.seed.value = 2
    _check_shown(run, x, "learn-0.5", 2, "val_dropout")
    x.sigma.value = "learn-2"  # only seed 1: the seed list follows the sigma
    assert tuple(x.seed.options) == (1,)
    _check_shown(run, x, "learn-2", 1, "val")
    x.sigma.value = "learn-0.1"  # seed 1 kept where the new sigma has it
    assert tuple(x.seed.options) == (1, 2)
    _check_shown(run, x, "learn-0.1", 1, "val_dropout")


# --------------------------------------------------------------------------- the book config


def _priority_overrides() -> list:
    import yaml

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    return cfg["sphinx"]["config"]["nb_mime_priority_overrides"]


@pytest.mark.parametrize("builder", ["html", "dirhtml", "singlehtml"])
def test_config_makes_the_page_play_the_views(run, builder):
    """The page shows the pre-rendered views (text/html), not the widget (no kernel) nor the
    PNG; a widget with a PNG only shows the PNG; a widget alone stays a widget."""
    render = pytest.importorskip("myst_nb.core.render")
    order = render.get_mime_priority(builder, _priority_overrides())
    both = ch.sigma_explorer(run)._repr_mimebundle_()
    assert next(m for m in order if m in both) == widgets.HTML_MIME
    png_only = {k: v for k, v in both.items() if k != widgets.HTML_MIME}
    assert next(m for m in order if m in png_only) == PNG
    widget_only = {VIEW: both[VIEW], "text/plain": "x"}
    assert next(m for m in order if m in widget_only) == VIEW
    plt.close("all")


def _views(html_text: str) -> dict[str, str]:
    """key -> data URL of every view of a :func:`widgets.views_html` block: an
    ``<img data-key>`` (a PNG or SVG view), or a ``<picture data-key>`` (a figure's view: its
    laptop rendering)."""
    import re

    views = dict(re.findall(r'<img data-key="([^"]+)"[^>]*src="([^"]+)"', html_text))
    views.update(re.findall(r'<picture data-key="([^"]+)".*?<img src="([^"]+)"', html_text,
                            re.S))
    return views


def test_the_page_views_hold_every_stored_model(run):
    """Chapter 6 on the page: one pre-rendered view per stored learn-<sigma> model (2d-fixed
    has no sigma), keyed 'label|seed', the select boxes offer exactly the stored sigmas and
    seeds, and only the first sigma's first seed shows before the reader picks."""
    import html as h

    text = h.unescape(ch.sigma_explorer(run).html)
    views = _views(text)
    assert set(views) == {f"{pe}|{s}" for pe, s in MODELS if pe != "2d-fixed"}
    assert all(v.startswith("data:image/png;base64,iVBOR") for v in views.values())
    assert re.findall(r'<option value="([^"]+)"', text) == ["learn-0.1", "learn-0.5",
                                                             "learn-2", "1", "2"]
    shown = re.findall(r'<picture data-key="([^"]+)" class=', text)  # not hidden
    assert shown == ["learn-0.1|1"]
    assert text.count("<source media=") == len(views)  # each with its phone rendering
    assert "oninput=" in text and "<script" not in text  # plays without a library
    plt.close("all")


def test_later_views_are_drawn_into_the_first_views_frame_and_keep_their_checks(run):
    """The page's views share one layout per kind: a later model's figure takes the first
    view's size and panel positions (no layout engine of its own), its own kernel and curve
    drawn there, and each view on the page still carries both renderings' checks."""
    import html as h
    import json

    from lstpe.rendering.responsive import CHECK_ATTR

    for phone in (False, True):
        first, _ = explore.model_figure(run.history, run.artifacts, "learn-0.1", 1, phone=phone)
        frame = explore._frame(first)
        later, (k, _, _) = explore.model_figure(run.history, run.artifacts, "learn-0.5", 2,
                                                phone=phone, frame=frame)
        assert later.get_layout_engine() is None
        assert tuple(later.get_size_inches()) == pytest.approx(frame[0])
        np.testing.assert_allclose([ax.get_position(original=True).bounds for ax in later.axes],
                                   frame[1])
        np.testing.assert_allclose(k, _kernel(run, "learn-0.5", 2))
        panel = _kernel_panels(later)[0]
        np.testing.assert_allclose(panel.images[0].get_array(), k)
        assert "seed 2" in panel.get_title()
    text = explore.sigma_views(run.history, run.artifacts)
    checks = [json.loads(h.unescape(c)) for c in re.findall(rf'{CHECK_ATTR}="([^"]*)"', text)]
    assert len(checks) == len(_views(h.unescape(text))) == 5
    assert all(set(c) == {"laptop", "phone"} and set(c["phone"]) >= {"small", "cut"}
               for c in checks)
    plt.close("all")


def test_the_views_two_processes_draw_are_the_ones_one_process_draws(run):
    """The page's later views drawn in two forked processes make the same HTML, byte for byte,
    as one process drawing them all (same PNGs, same checks, same order)."""
    one = explore.sigma_views(run.history, run.artifacts, workers=1)
    two = explore.sigma_views(run.history, run.artifacts, workers=2)
    assert len(_views(one)) == 5 and two == one
    plt.close("all")


def test_views_html_refuses_a_key_of_the_wrong_length():
    with pytest.raises(ValueError, match="one value per control"):
        widgets.views_html({("a",): b"x"}, [widgets.Control("a", (("a", "a"),)),
                                            widgets.Control("b", (("b", "b"),))])


# --------------------------------------------------------------------------- chapter 2


def test_puzzle_browser_has_a_static_gallery(human_frame):
    puzzles = lst.puzzles_from_frame(human_frame)[:5]
    acc = lst.human_accuracy()
    shown = lt.puzzle_browser(puzzles, acc)
    b = shown._repr_mimebundle_()
    assert b[VIEW]["model_id"] == shown.widget.model_id
    assert base64.b64decode(b[PNG])[:4] == b"\x89PNG"
    panels = [ax for ax in shown.figure.axes if ax.get_visible()]
    assert [ax.get_title().split()[0] for ax in panels] == [f"#{i}" for i in range(5)]
    assert panels[3].get_title().endswith(f"{acc.set_index('id').loc[3, 'accuracy']:.2f}")
    shown.widget.children[0].value = 4  # the slider still drives the live view
    assert plt.get_fignums() == []
    views = _views(shown.html)  # the page: every puzzle, answer hidden (0) and revealed (1)
    assert set(views) == {f"{i}|{r}" for i in range(5) for r in (0, 1)}
    svg = {k: base64.b64decode(v.split(",", 1)[1]).decode() for k, v in views.items()}
    for i, p in enumerate(puzzles):  # one shape per filled cell, the answer's only revealed
        filled = sum(1 for row in p.grid for v in row if v) - (p.grid[p.probe[0]][p.probe[1]] != 0)
        assert svg[f"{i}|0"].count("fill-opacity=\"1.0\"") >= filled
        assert "fill-opacity=\"0.3\"" in svg[f"{i}|1"]
        assert "fill-opacity=\"0.3\"" not in svg[f"{i}|0"]
        assert f"#{i}: {p.vectors}-vector" in svg[f"{i}|0"]
