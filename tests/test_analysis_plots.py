"""What the book's figures promise: labelled axes, colour bars, legends off the data, bands only
where an interval exists, colour ranges that show the structure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

from lstpe.analysis import curves  # noqa: E402
from lstpe.evidence import paper_compare  # noqa: E402
from lstpe.figures import plots  # noqa: E402
from lstpe.rendering import style  # noqa: E402
from tests.test_chapters import history  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def bands(ax) -> list:
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def legend_outside(ax) -> bool:
    """The Axes' legend is anchored off the data: right of the axes, or below them."""
    leg = ax.get_legend()
    box = leg.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    return box.x0 >= 1.0 or box.y1 <= 0.0


SPLITS = {"2d-fixed": {"train_running": 0.9, "train": 0.95, "val": 0.9, "val_dropout": 0.8},
          "learn-0.2": {"train_running": 0.9, "train": 0.95, "val": 0.7, "val_dropout": 0.7}}


def test_learning_curves_draw_bands_from_two_seeds():
    one = curves.learning_curves(history(SPLITS, seeds=(1,)))
    ax = curves.plot_learning_curves(one)
    assert bands(ax) == [] and legend_outside(ax)  # one model: no interval
    two = curves.learning_curves(history(SPLITS, seeds=(1, 2), jitter=0.01))
    assert len(bands(curves.plot_learning_curves(two))) == 2
    many = curves.learning_curves(history(SPLITS, seeds=range(6), jitter=0.3))
    ax = curves.plot_learning_curves(many)
    assert len(bands(ax)) == 2
    for b in bands(ax):  # clipped to [0, 1] although the t interval is wider
        y = b.get_paths()[0].vertices[:, 1]
        assert y.min() >= 0 and y.max() <= 1


def test_split_facets_one_panel_per_pe_and_dropout_only_where_it_differs():
    fig = curves.plot_split_facets(history(SPLITS, seeds=(1,)), ncols=5)
    a2d, alearn = fig.axes[:2]
    assert a2d.get_title() == "2d-fixed" and alearn.get_title() == "learn-0.2"
    lab = {ln.get_label() for ln in a2d.get_lines()}
    assert curves.SPLIT_STYLE["val_dropout"]["label"] in lab
    assert curves.SPLIT_STYLE["train_running"]["label"] in lab
    lab_l = {ln.get_label() for ln in alearn.get_lines()}
    assert curves.SPLIT_STYLE["val_dropout"]["label"] not in lab_l
    assert curves.SPLIT_STYLE["val"]["label"] in lab_l
    assert a2d.get_ylabel() == "accuracy" and a2d.get_xlabel() == "epoch"
    assert len(fig.legends) == 1 and bands(a2d) == []
    with pytest.raises(ValueError, match="split 'val_dropout'"):
        curves.plot_split_facets(history({"a": {"val": 0.5}}), splits=("val", "val_dropout"))


def test_sigma_curves_few_sigmas_get_distinct_colours_and_a_legend():
    acc = {f"learn-{s}": {"val": 0.9 - 0.2 * s} for s in (0.1, 0.5, 1.0, 2.0)}
    acc["2d-fixed"] = {"val": 0.95}
    ax = curves.plot_sigma_curves(history(acc), authors=False)
    assert len(ax.figure.axes) == 1  # no colour bar
    colours = [tuple(ln.get_color()) for ln in ax.get_lines()[:4]]
    assert len(set(colours)) == 4
    labels = {t.get_text() for t in ax.get_legend().get_texts()}
    assert labels == {"σ = 0.1", "σ = 0.5", "σ = 1", "σ = 2", "2d-fixed", "chance"}


def test_sigma_curves_many_sigmas_get_a_colour_bar_and_the_authors_logs():
    sig = [round(0.1 * k, 1) for k in range(1, 11)]
    acc = {f"learn-{s:g}": {"val": 0.9 - 0.2 * s} for s in sig}  # lstpe labels: learn-1
    acc["2d-fixed"] = {"val": 0.95}
    ax = curves.plot_sigma_curves(history(acc, epochs=(0, 200)), "val")
    fig = ax.figure
    assert len(fig.axes) == 2 and "σ" in fig.axes[1].get_ylabel()
    labels = {t.get_text() for t in ax.get_legend().get_texts()}
    assert labels == {"2d-fixed", "chance", "authors' logs (mean)"}
    marks = [ln for ln in ax.get_lines() if ln.get_marker() == "D"]
    # the authors logged 2d-fixed and learn-0.1 ... 2.0 at epochs 0 and 200 (<= our 200): one
    # diamond per PE at 200; at 0, where all sit at chance within a diamond's height, one
    assert sum(len(ln.get_xdata()) for ln in marks) == 11 + 1
    assert [ln.get_gid() for ln in marks if ln.get_xdata()[0] == 0] == ["every PE"]


def noise_table() -> pd.DataFrame:
    rows = []
    for pe, base in [("a", 0.9), ("b", 0.5)]:
        for seed in (1, 2):
            for x in (0.0, 0.05, 0.1):
                rows.append({"noise": x, "pe": pe, "condition": "all", "seed": seed,
                             "accuracy": base - x + 0.01 * seed})
    return pd.DataFrame(rows)


def test_noise_heatmap_shows_the_means_on_their_own_range():
    ax = plots.plot_noise_heatmap(noise_table(), pes=["b", "a"])
    v = np.asarray(ax.images[0].get_array())
    np.testing.assert_allclose(v[0], [0.515, 0.465, 0.415])
    assert ax.images[0].get_clim() == pytest.approx((0.415, 0.915))
    assert ax.get_xlabel() == "embedding noise std"
    assert len(ax.figure.axes) == 2  # the colour bar
    assert [t.get_text() for t in ax.get_yticklabels()] == ["b", "a"]
    cells = {(t.get_position(), t.get_text()): t.get_color() for t in ax.texts}
    assert cells[((0, 0), "0.52")] == "white" and cells[((2, 0), "0.42")] == "white"  # (x, y)
    assert len(cells) == v.size and "black" in cells.values()  # above mid-range: black
    with pytest.raises(ValueError, match="no rows for PE"):
        plots.plot_noise_heatmap(noise_table(), pes=["c"])


def test_noise_curves_legend_outside():
    ax = plots.plot_noise_curves(noise_table())
    assert legend_outside(ax)


def test_pe_kernels_each_panel_on_its_off_diagonal_range():
    k1 = np.full((4, 4), 0.9)
    np.fill_diagonal(k1, 1.0)
    k1[0, 1] = k1[1, 0] = 0.8
    k2 = np.eye(4) - 0.1
    fig = plots.plot_pe_kernels({"fixed": k1, "learn": k2})
    a1, a2 = fig.axes[:2]
    assert a1.images[0].get_clim() == pytest.approx((0.8, 0.9))
    assert a2.images[0].get_clim() == pytest.approx((-0.11, -0.09))  # constant: +-0.01
    assert a1.get_xlabel() == "position" and len(fig.axes) == 4  # two colour bars
    fig = plots.plot_pe_kernels({"fixed": k1, "learn": k2}, share=True)
    assert fig.axes[0].images[0].get_clim() == pytest.approx((-0.11, 0.9))
    with pytest.raises(ValueError, match="not square"):
        plots.plot_pe_kernels({"x": np.zeros((2, 3))})


def test_attention_grid_is_labelled():
    fig = plots.plot_attention_grid(np.random.default_rng(0).random((2, 3, 16, 16)),
                                    titles=["2d-fixed", "learn-0.1"])
    axes = fig.axes[:6]
    assert axes[0].get_title() == "block 1" and axes[2].get_title() == "block 3"
    assert axes[3].get_xlabel() == "key position"
    assert axes[3].get_ylabel() == "learn-0.1\nquery position"
    assert fig.axes[-1].get_ylabel() == "attention weight"


def test_attention_grid_scales_each_model_on_its_own_range():
    """Two models whose weights differ tenfold: by default each row runs 0 to its own largest
    weight with its own colour bar (a diffuse model is not left uniformly dark); ``shared``
    (or a given ``vmax``) draws one scale and one colour bar."""
    rng = np.random.default_rng(0)
    maps = np.stack([rng.random((2, 16, 16)) * 0.1, rng.random((2, 16, 16))])
    fig = plots.plot_attention_grid(maps, titles=["2d-fixed", "learn-0.1"])
    clims = [ax.images[0].get_clim() for ax in fig.axes[:4]]
    assert clims[:2] == [(0, maps[0].max())] * 2 and clims[2:] == [(0, maps[1].max())] * 2
    assert [a.get_ylabel() for a in fig.axes[4:]] == ["attention weight"] * 2
    assert style.small_text(fig) == []
    one = plots.plot_attention_grid(maps, scale="shared")
    assert {ax.images[0].get_clim() for ax in one.axes[:4]} == {(0, maps.max())}
    assert len(one.axes) == 4 + 1
    assert len(plots.plot_attention_grid(maps, vmax=0.5).axes) == 4 + 1
    with pytest.raises(ValueError, match="scale"):
        plots.plot_attention_grid(maps, scale="column")
    plt.close("all")


def test_vs_paper_legend_sits_below_the_axes():
    """The legend is under the axes and their tick labels, so a label drawn at the right edge
    (chapter 6 names its 2d-fixed line there) cannot overprint it."""
    rows = [{"pe": f"learn-{s:g}", "accuracy": 0.9, "seed": k} for s in (0.1, 1.0)
            for k in range(5)]
    ax = plots.plot_vs_paper(paper_compare.compare_to_paper(pd.DataFrame(rows), 2),
                             x="sigma", chance=0.25)
    r = ax.figure.canvas.get_renderer()
    leg, ticks = ax.get_legend().get_window_extent(r), ax.xaxis.get_tightbbox(r)
    assert leg.y1 <= ticks.y0 + 1
    assert "chance" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close("all")


def test_sigma_curve_keeps_the_first_label():
    s = pd.DataFrame({"sigma": [0.1, 1.0], "mean": [0.9, 0.5], "ci_low": [0.8, 0.4],
                      "ci_high": [1.0, 0.6]})
    ax = plots.plot_sigma_curve(s, label="Adam", ylabel="validation accuracy")
    plots.plot_sigma_curve(s, ax=ax, label="AdamW")
    assert ax.get_ylabel() == "validation accuracy" and legend_outside(ax)


def test_vs_paper_on_a_log_axis():
    rows = [{"pe": f"learn-{s:g}", "accuracy": 0.9, "seed": k} for s in (0.01, 0.1)
            for k in range(2)]
    cmp = paper_compare.compare_to_paper(pd.DataFrame(rows), 4, setting="adam")
    ax = plots.plot_vs_paper(cmp, x="sigma", logx=True)
    assert ax.get_xscale() == "log"
    ours = np.sort(np.concatenate([c.lines[0].get_xdata() for c in ax.containers[:-1]]))
    np.testing.assert_allclose(ours, np.array([0.01, 0.1]) / 1.06)
    with pytest.raises(ValueError, match="logx"):
        plots.plot_vs_paper(cmp, logx=True)


def test_vs_paper_labels_chance():
    rows = [{"pe": "learn-0.2", "accuracy": 0.3, "seed": k} for k in range(2)]
    ax = plots.plot_vs_paper(paper_compare.compare_to_paper(pd.DataFrame(rows), 1), chance=0.25)
    assert "chance" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend_outside(ax)


def test_sigma_curve_band_only_with_an_interval():
    s = pd.DataFrame({"sigma": [0.1, 1.0], "n": [1, 1], "mean": [0.9, 0.5],
                      "ci_low": [-0.5, 0.1], "ci_high": [1.5, 0.9]})
    ax = plots.plot_sigma_curve(s, ylabel="x", ls="--")
    assert bands(ax) == [] and ax.get_lines()[0].get_linestyle() == "--"
    ax = plots.plot_sigma_curve(s.assign(n=2), ylabel="x")
    assert len(bands(ax)) == 1


def test_vs_paper_log_axis_ticks_at_the_sigmas():
    rows = [{"pe": f"learn-{s:g}", "accuracy": 0.9, "seed": k} for s in (0.01, 0.05)
            for k in range(2)]
    ax = plots.plot_vs_paper(paper_compare.compare_to_paper(pd.DataFrame(rows), 4, setting="sgd"),
                             x="sigma", logx=True)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.01", "0.05"]


def check_figure(fig) -> None:
    """Every axes that shows data is labelled (or shares its row's / column's labels), every
    heatmap has a colour bar, no legend sits inside an axes, and no title, label or tick runs
    into another (:func:`lstpe.rendering.style.overlapping_text`)."""
    assert style.overlapping_text(fig) == [], "titles, labels or ticks run into each other"
    fig.canvas.draw()
    cbars = {a for a in fig.axes if a.get_label() == "<colorbar>"}
    labelled_x = any(a.get_xlabel() for a in fig.axes if a not in cbars)
    labelled_y = any(a.get_ylabel() for a in fig.axes if a not in cbars)
    scales = {(im.get_clim(), im.cmap.name) for a in fig.axes for im in a.images
              if im.colorbar is not None}
    for ax in fig.axes:
        if ax in cbars or not ax.get_visible():
            continue
        if ax.lines or ax.collections or ax.images:
            assert (ax.get_xlabel() or labelled_x) and (ax.get_ylabel() or labelled_y)
        for im in ax.images:  # its own colour bar, or one shared with the same scale
            assert (im.get_clim(), im.cmap.name) in scales, "a heatmap without a colour bar"
        leg = ax.get_legend()
        if leg is not None:
            lb, ab = leg.get_window_extent(), ax.get_window_extent()
            inside = lb.x0 >= ab.x0 and lb.x1 <= ab.x1 and lb.y0 >= ab.y0 and lb.y1 <= ab.y1
            assert not inside, f"{ax.get_title()}: legend inside the axes"


def test_every_figure_of_the_chapters_passes_the_checks():
    from lstpe import lst
    from lstpe.analysis import humans as hu
    from lstpe.lst import validation_split
    from tests.test_analysis_humans import logits_for

    h = history(SPLITS, seeds=range(6), jitter=0.01)
    acc = {f"learn-{s}": {"val": 0.9 - 0.2 * s} for s in (0.1, 0.5, 1.0)}
    s = pd.DataFrame({"sigma": [0.1, 1.0], "n": [5, 5], "mean": [0.9, 0.5],
                      "ci_low": [0.8, 0.4], "ci_high": [1.0, 0.6]})
    cmp = paper_compare.compare_to_paper(pd.DataFrame(
        [{"pe": "learn-0.2", "accuracy": 0.3, "seed": k} for k in range(5)]), 1)
    y = validation_split().y
    arts = {"labels": ["2d-fixed", "2d-fixed"], "seeds": [1, 2],
            "val_logits": np.stack([logits_for(y).numpy(), logits_for(y * 0).numpy()])}
    k = np.eye(4) * 0.5 + 0.5
    figs = [
        curves.plot_split_facets(h),
        curves.plot_learning_curves(curves.learning_curves(h)).figure,
        curves.plot_sigma_curves(history(acc)).figure,
        plots.plot_noise_heatmap(noise_table()).figure,
        plots.plot_noise_curves(noise_table()).figure,
        plots.plot_pe_kernels({"a": k, "b": k * 0.9}),
        plots.plot_attention_grid(np.random.default_rng(0).random((2, 2, 16, 16))),
        plots.plot_sigma_curve(s, label="x", ylabel="y").figure,
        plots.plot_vs_paper(cmp, chance=0.25).figure,
        plots.plot_human_scatter(hu.puzzle_accuracy(arts), lst.human_accuracy(),
                                 "2d-fixed").figure,
        plots.plot_condition_curves(hu.condition_accuracy(arts)).figure,
    ]
    for fig in figs:
        check_figure(fig)


def test_legend_outside():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    plots.legend_outside(ax)
    assert legend_outside(ax)


def test_overlapping_text_finds_titles_that_run_together():
    """Two narrow panels with long titles collide; short titles do not."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(6, 2))
    for ax in axes:
        ax.set_yticks([])
        ax.set_title("a title far too long for its panel, running into the next one")
    assert style.overlapping_text(fig)
    for ax in axes:
        ax.set_title("short")
    assert style.overlapping_text(fig) == []
    plt.close(fig)


def test_progress_has_one_bar_per_part_and_counts_model_epochs():
    """plot_progress: a part of 200-epoch models shows models stored; a part of long runs the
    model-epochs reached over its targets (3 models at 500 of 1000 and 3 at 500 of 4000 in
    two parts: 0.5 and 0.125), labelled by the parts' names, never 'item N'."""
    import pandas as pd

    from lstpe.figures import report_plots

    progress = pd.DataFrame({"what": ["Table 2 core", "the whole plan"], "units": [6, 6],
                             "done": [3, 3]}, index=pd.Index(["1", "all"], name="item"))
    long = pd.DataFrame({"item": [4, 6, 6], "units": [3, 3, 1], "epoch": [500, 500, 4000],
                         "target": [1000, 4000, 4000]})
    fig = report_plots.plot_progress(progress, long, {4: "mechanism to 1000",
                                                      6: "mechanism to 4000"})
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["Table 2 core", "mechanism to 1000", "mechanism to 4000"]
    widths = [p.get_width() for p in ax.patches][3:]  # after the three grey backgrounds
    assert widths == pytest.approx([0.5, 0.5, (3 * 500 + 4000) / (4 * 4000)])
    assert [t.get_text() for t in ax.texts] == ["3/6 models", "0/3 models at target",
                                                "1/4 models at target"]
