"""The figures a reader of the built book found wanting, each checked where it failed: chapter
10's PE-distance grid and MSE bars, chapter 8's preview of Tables 4-6, chapter 6's sigma
figures and kernels, and the report's Table 2 sweep (all drawn on small synthetic inputs)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402

from lstpe import brain  # noqa: E402
from lstpe.analysis import curves  # noqa: E402
from lstpe.evidence import paper_compare  # noqa: E402
from lstpe.figures import plots, report_plots  # noqa: E402
from lstpe.figures.forest import plot_forest  # noqa: E402
from lstpe.references import authors_logs, paper_tables  # noqa: E402
from lstpe.rendering import phone, responsive, style  # noqa: E402
from tests.test_chapters import history  # noqa: E402


@pytest.fixture(autouse=True)
def _style_and_close():
    style.apply()
    yield
    plt.close("all")


def centres(line) -> np.ndarray:
    """The drawn centres (px) of a line's markers."""
    xy = np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2)
    return line.get_transform().transform(xy)


def closest(lines_a, lines_b) -> float:
    """The smallest distance (px) between a marker of ``lines_a`` and one of ``lines_b`` drawn
    by another line."""
    best = np.inf
    for la in lines_a:
        for lb in lines_b:
            if la is lb:
                continue
            a, b = centres(la), centres(lb)
            if not len(a) or not len(b):
                continue
            best = min(best, float(np.min(np.hypot(*(a[:, None, :] - b[None, :, :]).T))))
    return best


# --- chapter 10: the PE-distance grid and the MSE bars -----------------------------------------

def similarity_grid():
    nets = brain.load_networks(100)
    codes = np.array([brain.YEO7.index(v) for v in nets["network"]])
    cfg = brain.model_config(100, d_model=8, n_layers=1)
    labels = ["1d-fixed", "random", "learn-0.1", "learn-0.2", "learn-1", "learn-2"]
    arts = {"labels": labels,
            "pe_final": torch.stack([brain.initial_pe(p, 0, cfg) for p in labels]),
            "networks": codes, "network_names": list(brain.YEO7)}
    return brain.plot_pe_similarities(arts, list(range(len(labels))))


def test_pe_similarity_grid_has_no_empty_band_and_names_do_not_collide():
    """Six PEs on the 100-region Yeo-7 order (Limbic: 5 rows): the network names of
    neighbouring ticks do not run together (they did: SalVentAttn / Limbic / Cont), the two
    rows of panels sit one under the other (an empty band of about 200 px separated them),
    and the abbreviations have a key."""
    fig = similarity_grid()
    assert style.overlapping_text(fig) == []
    assert style.small_text(fig) == []
    r = fig.canvas.get_renderer()
    top, bottom = fig.axes[0], fig.axes[3]  # the first column's two panels
    gap = top.get_tightbbox(r).y0 - bottom.get_tightbbox(r).y1
    assert gap < 30, f"{gap:.0f} px of empty band between the rows"
    names = {"Vis", "SM", "DA", "SVA", "Lim", "Cont", "Def"}
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]

    def shown(ax, axis: str) -> set[str]:
        ticks = ax.get_yticklabels() if axis == "y" else ax.get_xticklabels()
        return {t.get_text() for t in ticks if t.get_visible()} - {""}

    assert set().union(*(shown(ax, "y") for ax in panels)) == names
    assert [bool(shown(ax, "y")) for ax in panels] == [True, False, False] * 2  # outer only
    assert "SVA salience / ventral attention" in fig.get_supxlabel()
    ph = phone.phone_figure(fig)  # stacked in one column: every panel names its networks
    stacked = [ax for ax in ph.axes if ax.get_label() != "<colorbar>"]
    assert len({round(ax.get_position().x0, 2) for ax in stacked}) == 1
    assert all(shown(ax, "y") == names and shown(ax, "x") == names for ax in stacked)
    assert responsive.check_figure(ph, phone.PHONE_PX) == {
        "small": [], "overlap": [], "legend": [], "cut": [], "collapsed": [], "dense": []}


def mse_summary(seeds: int) -> pd.DataFrame:
    sd = np.nan if seeds == 1 else 0.05
    return pd.DataFrame({"pe": ["relative", "learn-0.1"], "train_mean": [0.8, 0.5],
                         "train_std": [sd, sd], "train_count": [seeds, seeds],
                         "test_mean": [0.9, 0.6], "test_std": [sd, sd],
                         "test_count": [seeds, seeds]})


def test_mse_bars_promise_error_bars_only_with_two_seeds():
    """Chapter 10 wrote "error bars: SD over seeds" over one seed's bars, which have none."""
    chapter_title = "trained at 50% masked, 1 seed(s); error bars: SD over seeds"
    ax = brain.plot_mse_bars(mse_summary(1), 0.4, title=chapter_title)
    assert "SD over seeds" not in ax.get_title()
    assert ax.get_title() == "trained at 50% masked, 1 seed(s)\none seed: no error bars"
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == 2 and all(c.errorbar is None for c in bars)
    ax = brain.plot_mse_bars(mse_summary(3), 0.4, title="trained at 50% masked, 3 seed(s)")
    assert ax.get_title().endswith("error bars: SD over seeds")
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == 2 and all(c.errorbar is not None for c in bars)
    assert style.small_text(ax.figure) == []


# --- chapter 8: the preview of Tables 4-6 ------------------------------------------------------

def preview_run(pes, scale: str = "preview") -> SimpleNamespace:
    rng = np.random.default_rng(0)
    f = pd.DataFrame([{"pe": p, "seed": s, "accuracy": 0.25 + rng.normal(0, 0.01)}
                      for p in pes for s in (1, 2)])
    return SimpleNamespace(final=lambda split: f, scale=scale, config={"epochs": 8})


def test_run_finals_read_chance_as_chance():
    """Runs at chance drawn on an axis zoomed to 0.20-0.26 look like effects: the accuracy
    axis spans 0 to 1 and shows chance."""
    from lstpe.experiments.registry import TABLE4_SIGMAS, learn_pes, tables56_pes

    runs = {"Table 4, SGD": preview_run(learn_pes(TABLE4_SIGMAS)),
            "Tables 5-6, AdamW (wd 0.1)": preview_run(
                tables56_pes([round(0.1 * k, 1) for k in range(1, 21)]))}
    fig = report_plots.plot_run_finals(runs)
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 2
    for ax in panels:
        lo, hi = ax.get_ylim()
        assert lo <= 0.2 and hi >= 1.0
        chance = [ln for ln in ax.get_lines() if ln.get_label().startswith("chance")]
        assert chance and np.allclose(chance[0].get_ydata(), 0.25)
        assert "preview: illustrates the analysis, tests nothing" in ax.get_title()
    assert style.small_text(fig) == [] and style.overlapping_text(fig) == []
    assert style.markers_at_edge(fig) == []
    with pytest.raises(ValueError, match="no runs"):
        report_plots.plot_run_finals({})


# --- chapter 6: the sigma figures and the kernels ----------------------------------------------

def sigma_history() -> pd.DataFrame:
    sig = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.5, 2.0]
    acc = {f"learn-{s:g}": {"val_dropout": 0.95 - 0.25 * s} for s in sig}
    acc["2d-fixed"] = {"val_dropout": 0.99}
    return history(acc, epochs=(0, 100, 200))


def test_sigma_curves_diamonds_do_not_hide_each_other():
    """The authors' epoch-200 means of learn-0.1, 0.2, 0.3 and 0.5 lie within 0.01 of 0.95:
    their diamonds were drawn on top of each other. Every two diamonds at one epoch are now a
    few px apart, the legend clears the colour bar it ran into, and its text is 9 pt."""
    ax = curves.plot_sigma_curves(sigma_history(), "val_dropout")
    fig = ax.figure
    marks = [ln for ln in ax.get_lines() if ln.get_marker() == "D"]
    assert sum(200 in ln.get_xdata() for ln in marks) == 12  # 11 sigmas and 2d-fixed
    assert closest(marks, marks) >= 5.0
    assert style.legend_clashes(fig) == []
    assert style.small_text(fig) == [] and style.overlapping_text(fig) == []
    assert style.markers_at_edge(fig, margin_px=0.0) == []
    lo, hi = ax.get_ylim()
    assert lo <= 0.0 and hi >= 1.0


def test_swarm_offsets_clear_every_pair():
    y = [10.0, 10.0, 10.5, 30.0, 11.0]
    dx = style.swarm_offsets(y, 8.0)
    pts = np.c_[dx, y]
    assert min(np.hypot(*(a - b)) for a, b in itertools.combinations(pts, 2)) >= 8.0 - 1e-9
    assert dx[3] == 0.0  # nothing in its way
    assert (style.swarm_offsets(y, 8.0, side="left") <= 0).all()
    assert (style.swarm_offsets(y, 8.0, side="right") >= 0).all()


def sweep_inputs():
    rows = [{"pe": "learn-0.1", "accuracy": a} for a in (1.0, 0.99, 0.97)]
    rows += [{"pe": "learn-1", "accuracy": a} for a in (0.9, 0.88, 0.91)]
    rows += [{"pe": "learn-2", "accuracy": a} for a in (0.39, 0.37, 0.40)]
    paper = paper_tables.load_paper_tables().query("table == '2' and metric == 'val_acc'")
    return pd.DataFrame(rows), authors_logs.authors_at(200), paper


def test_sigma_sweep_holds_every_point_and_dodges_ours_from_the_paper():
    """A seed at accuracy 1.0 sat on the frame (ylim 1.02) with its error bar's cap cut off;
    at sigma = 2 our mean diamond covered the paper's square."""
    fig = report_plots.plot_sigma_sweep(*sweep_inputs())
    ax = fig.axes[0]
    assert style.markers_at_edge(fig) == []
    paper = [ln for ln in ax.get_lines() if ln.get_label() == "paper @4000"]
    ours = [ln for ln in ax.get_lines() if ln.get_marker() == "D"]
    assert paper and ours and closest(paper, ours) >= 5.0
    assert style.small_text(fig) == [] and style.overlapping_text(fig) == []


def test_report_intervals_clipped_at_zero_keep_their_caps_in_view():
    """Two seeds far apart (n = 2: t = 12.7) give a 95% interval clipped to [0, 1]: its cap sat
    on the frame at 0 in the report's sweep (ylim 0) and forest (xlim 0) once learn-1.4 had
    a second seed."""
    final, authors, paper = sweep_inputs()
    final = pd.concat([final, pd.DataFrame({"pe": "learn-1.4", "accuracy": [0.25, 0.95]})])
    assert style.markers_at_edge(report_plots.plot_sigma_sweep(final, authors, paper)) == []
    row = {"kind": "cell", "n": 2, "values": "0.25 0.95", "mean": 0.6, "ci_low": 0.0,
           "ci_high": 1.0, "authors_mean": 0.66, "authors_sd": 0.16, "authors_n": 15,
           "paper_mean": float("nan"), "paper_sd": float("nan"), "verdict": "agrees",
           "ref": "authors@200"}
    rows = [dict(row, cell="learn-1.4"), dict(row, cell="learn-1", values="0.9 0.91",
                                               mean=0.905, ci_low=0.84, ci_high=0.97)]
    assert style.markers_at_edge(plot_forest(pd.DataFrame(rows))) == []


def test_table2_figure_names_its_reference_inside_the_axes():
    """Chapter 6 wrote "2d-fixed (ours)" past the axes' right edge, widening the PNG; the
    figure draws its reference line and name itself, inside the axes, and every marker has
    room inside the frame."""
    rows = [{"pe": f"learn-{s:g}", "accuracy": a, "seed": k} for s, a in
            [(0.1, 0.94), (0.2, 0.96), (1.0, 0.9), (2.0, 0.39)] for k in range(3)]
    cmp = paper_compare.compare_to_paper(pd.DataFrame(rows), 2)
    ax = plots.plot_vs_paper(cmp, x="sigma", chance=0.25, reference=(0.993, "2d-fixed (ours)"))
    fig = ax.figure
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    (name,) = [t for t in ax.texts if t.get_text() == "2d-fixed (ours)"]
    box, frame = name.get_window_extent(r), ax.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 <= frame.y1
    assert style.markers_at_edge(fig) == []
    assert style.small_text(fig) == [] and style.legend_clashes(fig) == []


def test_pe_kernels_text_is_readable_at_the_column():
    """Eleven kernels (2d-fixed and ten sigmas) showed their ticks at about 6.4 pt."""
    k = np.eye(16) * 0.5 + 0.5
    fig = plots.plot_pe_kernels({f"learn-{i}": k * (1 - 0.01 * i) for i in range(11)},
                                suptitle="cosine between positions, block-1 PE after training")
    assert style.small_text(fig) == []
    assert style.overlapping_text(fig) == []
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 11 + 11  # and a bar each


def test_noise_loss_names_the_fixed_pes_and_puts_sigmas_on_their_axis():
    """Chapter 8's per-model noise loss: the 28 PE names on one axis ran into each other at
    45 degrees. Now the named PEs stand upright in one panel and the learnable PEs sit at
    their sigma on a number axis; every model is a dot, each PE's square sits at its mean
    with its interval, and both the laptop's and the phone's renderings pass the checks."""
    from lstpe.evidence import claim_tables as ct

    pes = ["2d-fixed", "rope", "learn-0.1", "learn-0.5", "learn-2"]
    rows = [{"noise": nz, "pe": pe, "seed": s, "condition": "all",
             "accuracy": 0.9 - nz * (i + 1) * 0.1 - 0.01 * s}
            for i, pe in enumerate(pes) for s in (1, 2, 3) for nz in (0.0, 0.1)]
    losses = ct.noise_loss_per_model(pd.DataFrame(rows))
    cells = pd.DataFrame({"cell": pes, "mean": [0.01, 0.02, 0.03, 0.04, 0.05],
                          "ci_low": [0.0] * 5, "ci_high": [0.1] * 5})
    fig = report_plots.plot_noise_loss(losses, cells, 0.1)
    named, swept = fig.axes[:2]
    assert [t.get_text() for t in named.get_xticklabels()] == ["2d-fixed", "rope"]
    dots = [ln for ln in swept.get_lines() if ln.get_marker() == "o"]
    assert sorted(float(ln.get_xdata()[0]) for ln in dots) == [0.1, 0.5, 2.0]
    assert sum(len(ln.get_ydata()) for ax in (named, swept) for ln in ax.get_lines()
               if ln.get_marker() == "o") == 15  # every model
    squares = [c.lines[0] for c in swept.containers]
    np.testing.assert_allclose([float(s.get_ydata()[0]) for s in squares], [0.03, 0.04, 0.05])
    _, _, checks = responsive.renderings(fig)
    assert all(not v for r in checks.values() for v in r.values()), checks
    with pytest.raises(ValueError, match="learn-9"):
        report_plots.plot_noise_loss(losses, pd.concat(
            [cells, pd.DataFrame([{"cell": "learn-9", "mean": 0, "ci_low": 0, "ci_high": 0}])]),
            0.1)
