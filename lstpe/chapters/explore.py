"""Chapter 6's explorer: a widget for a live kernel with a static figure of the same content
for the book page (:mod:`lstpe.rendering.widgets` says how one output carries both).

* :func:`sigma_explorer` (chapter 6): pick a stored sigma and seed, see the block-1 PE's
  position x position cosine (:func:`lstpe.analysis.kernels.pe_kernels`) and the validation
  curve as the authors evaluated it beside the authors' epoch-0 / epoch-200 logs;
  :class:`SigmaExplorer` is its live part, :func:`sigma_views` the same explorer for the
  rendered page (every stored model pre-rendered, switched by two select boxes without a
  kernel), :func:`sigma_grid` its PNG twin (every stored sigma of one seed), :func:`draw_model`
  the panel pair all draw.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from lstpe.analysis.kernels import pe_kernels
from lstpe.figures.plots import draw_kernel
from lstpe.nn.encodings import parse_pe
from lstpe.rendering import style
from lstpe.rendering.widgets import (
    Control,
    WithStatic,
    close_figure,
    figure_png,
    views_html,
    with_static,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from lstpe.store.results import Run

__all__ = ["sigma_models", "curve_split", "learning_curve", "authors_points", "draw_model",
           "model_figure", "sigma_grid", "sigma_views", "SigmaExplorer", "sigma_explorer",
           "AUTHORS_EPOCHS"]

AUTHORS_EPOCHS: tuple[int, int] = (0, 200)
"""The authors' logged epochs shown beside our curves (:mod:`lstpe.references.authors_logs`)."""

# --------------------------------------------------------------------------- chapter 6


def _sigma(label: str) -> float:
    """The init std of a ``learn-<sigma>`` label (:func:`lstpe.nn.encodings.parse_pe`)."""
    return float(parse_pe(label).sigma)


def sigma_models(artifacts: Mapping[str, Any]) -> dict[str, list[int]]:
    """The learnable-PE models that have a stored PE: ``learn-<sigma>`` label -> its seeds.

    Args:
        artifacts: with ``labels`` and ``seeds`` (one per model, M each).
    Returns:
        Labels in increasing sigma, each with its seeds in increasing order.
    Raises:
        ValueError: no ``learn-<sigma>`` model.
    """
    out: dict[str, set[int]] = {}
    for lab, s in zip(artifacts["labels"], artifacts["seeds"], strict=True):
        if str(lab).startswith("learn-"):
            out.setdefault(str(lab), set()).add(int(s))
    if not out:
        raise ValueError(f"no learn-<sigma> model among {sorted(set(artifacts['labels']))}")
    return {lab: sorted(out[lab]) for lab in sorted(out, key=_sigma)}


def curve_split(history: pd.DataFrame, pe: str, seed: int) -> str:
    """``val_dropout`` (validation as the authors evaluated it) where the model has it, else
    ``val``."""
    h = history[(history["pe"] == pe) & (history["seed"] == seed)]
    return "val_dropout" if (h["split"] == "val_dropout").any() else "val"


def learning_curve(history: pd.DataFrame, pe: str, seed: int,
                   split: str | None = None) -> pd.DataFrame:
    """One model's validation accuracy per epoch (all conditions pooled).

    Args:
        history: tidy history (``pe, seed, epoch, split, condition, accuracy``).
        split: default :func:`curve_split`.
    Returns:
        Columns ``epoch, accuracy``, one row per evaluated epoch, sorted by epoch (E rows).
    Raises:
        ValueError: no rows for that model and split.
    """
    split = split or curve_split(history, pe, seed)
    h = history[(history["pe"] == pe) & (history["seed"] == seed) & (history["split"] == split)
                & (history["condition"].astype(str) == "all")]
    if h.empty:
        raise ValueError(f"no {split!r} history for {pe} seed {seed}")
    return h[["epoch", "accuracy"]].sort_values("epoch").reset_index(drop=True)


def authors_points(pe: str, epochs: tuple[int, ...] = AUTHORS_EPOCHS) -> pd.DataFrame:
    """The authors' validation accuracy (mean, SD over seeds) of ``pe`` at ``epochs``.

    Returns:
        Index ``epoch``, columns ``acc_mean, acc_sd, n_seeds``; no rows for a PE they did not
        log.
    """
    from lstpe.references import authors_logs as al

    logs = {e: al.authors_at(e) for e in epochs}
    out = pd.DataFrame([logs[e].loc[pe] for e in epochs if pe in logs[e].index],
                       columns=["acc_mean", "acc_sd", "n_seeds"])
    out.index = pd.Index([e for e in epochs if pe in logs[e].index], name="epoch")
    return out.astype({"acc_mean": "float64", "acc_sd": "float64", "n_seeds": "int64"})


def draw_model(ax_kernel: Axes, ax_curve: Axes, kernel: np.ndarray, curve: pd.DataFrame,
               authors: pd.DataFrame, pe: str, seed: int, split: str) -> None:
    """One model: its PE kernel (left) and its validation curve beside the authors' logs.

    Args:
        kernel: (n, n) position x position cosine, coloured on its off-diagonal range.
        curve: :func:`learning_curve` (``epoch, accuracy``).
        authors: :func:`authors_points` (index ``epoch``; may be empty).
        split: the curve's split, named in the legend.
    """
    draw_kernel(ax_kernel, kernel, title=f"σ = {_sigma(pe):g}, seed {seed}: block-1 PE cosine",
                fontsize=9)

    last = float(curve["accuracy"].iloc[-1])
    ax_curve.plot(curve["epoch"].to_numpy(float), curve["accuracy"].to_numpy(float), color="C0",
                  lw=1.2, label=f"ours ({split})")
    if len(authors):
        ax_curve.errorbar(authors.index.to_numpy(float), authors["acc_mean"].to_numpy(float),
                          yerr=authors["acc_sd"].to_numpy(float), fmt="D", color="k", ms=4,
                          capsize=3, label="authors' logs, mean ± SD")
    ax_curve.axhline(0.25, color="0.5", ls=":", lw=1, label="chance")
    last_epoch = max(float(curve["epoch"].max()), float(max(authors.index, default=0)))
    ax_curve.set_xlim(-0.04 * last_epoch, 1.04 * last_epoch)  # the last diamond drawn whole
    ax_curve.set_ylim(0, 1.06)  # and its error bar's cap
    ax_curve.set_xlabel("epoch", fontsize=9)
    ax_curve.set_ylabel("validation accuracy", fontsize=9)
    ax_curve.tick_params(labelsize=9)
    ref = (f"authors at {authors.index[-1]}: {authors['acc_mean'].iloc[-1]:.3f} ± "
           f"{authors['acc_sd'].iloc[-1]:.3f}" if len(authors) else "no authors' log")
    ax_curve.set_title(f"ours at {int(curve['epoch'].iloc[-1])}: {last:.3f}\n{ref}", fontsize=9)


def _model_data(history: pd.DataFrame, artifacts: Mapping[str, Any], pe: str, seed: int
                ) -> tuple[np.ndarray, pd.DataFrame, pd.DataFrame, str]:
    """What :func:`draw_model` shows of one model: kernel (n, n), curve, authors, split."""
    kernel = pe_kernels(artifacts, seed=seed, pes=[pe])[pe]
    split = curve_split(history, pe, seed)
    return kernel, learning_curve(history, pe, seed, split), authors_points(pe), split


def sigma_grid(history: pd.DataFrame, artifacts: Mapping[str, Any], seed: int | None = None,
               ncols: int = 1) -> Figure:
    """The explorer's content for every stored sigma of one seed: a (kernel, curve) pair each.

    Args:
        history, artifacts: a run's (:class:`lstpe.store.results.Run`).
        seed: default the first seed of ``artifacts``.
        ncols: pairs per row.
    Returns:
        The Figure; ``fig.axes`` holds, per sigma in increasing order, its kernel and its curve
        panels first, then the colour bars.
    Raises:
        ValueError: no learnable-PE model, or none with that seed.
    """
    import matplotlib.pyplot as plt

    models = sigma_models(artifacts)
    seed = int(artifacts["seeds"][0]) if seed is None else int(seed)
    pes = [pe for pe, seeds in models.items() if seed in seeds]
    if not pes:
        raise ValueError(f"no learn-<sigma> model with seed {seed}")
    nrows = math.ceil(len(pes) / ncols)
    ncols = min(ncols, len(pes))
    fig, axes = plt.subplots(nrows, 2 * ncols, figsize=(style.WIDTH, 2.9 * nrows / ncols + 0.8),
                             squeeze=False, layout="constrained",
                             gridspec_kw={"width_ratios": [1, 1.25] * ncols})
    pairs = [(axes[i // ncols, 2 * (i % ncols)], axes[i // ncols, 2 * (i % ncols) + 1])
             for i in range(nrows * ncols)]
    for ax_k, ax_c in pairs[len(pes):]:
        ax_k.set_visible(False)
        ax_c.set_visible(False)
    for (ax_k, ax_c), pe in zip(pairs, pes, strict=False):
        kernel, curve, authors, split = _model_data(history, artifacts, pe, seed)
        draw_model(ax_k, ax_c, kernel, curve, authors, pe, seed, split)
    handles, labels = pairs[0][1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=9)
    fig.suptitle(f"Every stored σ, seed {seed}: learned block-1 PE (cosine between positions) "
                 "and validation accuracy", fontsize=10)
    return style.readable(fig)


Frame = tuple[tuple[float, float], tuple[tuple[float, float, float, float], ...]]
"""A laid-out figure's size (inches) and each axes' original position (figure fractions), in
``fig.axes`` order: :func:`model_figure` draws another model into the same frame without
laying it out again."""


def _frame(fig: Figure) -> Frame:
    """The frame of ``fig``, laid out (:data:`Frame`)."""
    from lstpe.rendering.style import lay_out

    lay_out(fig)
    size = tuple(float(x) for x in fig.get_size_inches())
    return size, tuple(tuple(ax.get_position(original=True).bounds) for ax in fig.axes)


def model_figure(history: pd.DataFrame, artifacts: Mapping[str, Any], pe: str, seed: int,
                 phone: bool = False, frame: Frame | None = None
                 ) -> tuple[Figure, tuple[np.ndarray, pd.DataFrame, str]]:
    """One model's explorer view (:func:`draw_model`, the legend under both panels), as
    wide as the page's column; the figure (closed in pyplot) and its kernel, curve, split.
    ``phone``: the same view drawn for the phone's column
    (:data:`lstpe.rendering.phone.PHONE_PX`): the kernel above the curve. ``frame``: another
    model's laid-out view of the same kind (:func:`_frame`): this one takes its size and
    panel positions instead of a layout of its own (the panels, ticks and legend are the same
    in every view; the page's checks still read each view)."""
    return _view_figure(_model_data(history, artifacts, pe, int(seed)), pe, int(seed), phone,
                        frame)


def _view_figure(data: tuple[np.ndarray, pd.DataFrame, pd.DataFrame, str], pe: str, seed: int,
                 phone: bool, frame: Frame | None
                 ) -> tuple[Figure, tuple[np.ndarray, pd.DataFrame, str]]:
    """:func:`model_figure` from the model's :func:`_model_data`."""
    import matplotlib.pyplot as plt

    from lstpe.rendering.phone import PHONE_PX

    kernel, curve, authors, split = data
    layout = "constrained" if frame is None else "none"
    if phone:
        fig, (ax_k, ax_c) = plt.subplots(2, 1, figsize=((PHONE_PX - 24) / style.DPI, 6.6),
                                         layout=layout, dpi=style.DPI)
    else:
        fig, (ax_k, ax_c) = plt.subplots(1, 2, figsize=style.figsize(1.0, 3.7),
                                         layout=layout, dpi=style.DPI,
                                         gridspec_kw={"width_ratios": [1, 1.25]})
    draw_model(ax_k, ax_c, kernel, curve, authors, pe, seed, split)
    fig.legend(*ax_c.get_legend_handles_labels(), fontsize=9, loc="outside lower center",
               ncols=1 if phone else 3)  # under the panels: inside, it would cover the curve
    if frame is not None and len(frame[1]) == len(fig.axes):
        fig.set_size_inches(*frame[0])
        for ax, pos in zip(fig.axes, frame[1], strict=True):
            ax.set_position(pos, which="both")
    elif frame is not None:  # another set of panels than the frame's: lay this one out
        fig.set_layout_engine("constrained")
    if not phone and frame is None:
        style.readable(fig)
    close_figure(fig)
    return fig, (kernel, curve, split)


ViewJob = tuple[dict[tuple[str, int], tuple], dict[bool, Frame]]
"""What every later view of :func:`sigma_views` is drawn from: each model's
:func:`_model_data`, and the first view's frame of each kind."""


def _view_html(job: ViewJob, key: tuple[str, int]) -> str:
    """One later view of :func:`sigma_views` (the laptop's and the phone's rendering, each
    drawn into its frame and checked), as HTML."""
    from lstpe.rendering.responsive import figure_html

    data, frames = job
    figs = {phone: _view_figure(data[key], *key, phone, frames[phone])[0]
            for phone in (False, True)}
    return figure_html(figs[False], phone=figs[True], alt=f"{ALT}: {key[0]}|{key[1]}",
                       fitted=True)


def sigma_views(history: pd.DataFrame, artifacts: Mapping[str, Any],
                workers: int | None = None) -> str:
    """The explorer for the rendered page: every stored (sigma, seed) model pre-rendered
    (:func:`model_figure`, for the laptop's and the phone's column) behind a sigma and a seed
    select box
    (:func:`lstpe.rendering.widgets.views_html`; a pair with no stored model says so). Each
    kind of view is laid out once, on the first model, and every other model is drawn into
    that frame (:func:`_frame`): the layout engine is the slow part of a view. The later
    views are drawn in ``workers`` processes (:class:`lstpe.runtime.Forked`; default one
    per usable CPU): the same HTML as one process draws, in about half the time on 2 cores."""
    return _views_started(history, artifacts, workers)()


def _views_started(history: pd.DataFrame, artifacts: Mapping[str, Any],
                   workers: int | None = None) -> Callable[[], str]:
    """:func:`sigma_views`, its first view drawn here and the others started in processes;
    calling the result waits for them and returns the HTML."""
    from lstpe.rendering.responsive import figure_html
    from lstpe.runtime import Forked

    models = sigma_models(artifacts)
    keys = [(pe, int(s)) for pe, seeds in models.items() for s in seeds]
    data = {k: _model_data(history, artifacts, *k) for k in keys}
    first = {phone: _view_figure(data[keys[0]], *keys[0], phone, None)[0]
             for phone in (False, True)}
    html0 = figure_html(first[False], phone=first[True], alt=f"{ALT}: {keys[0][0]}|{keys[0][1]}")
    frames = {p: _frame(f) for p, f in first.items()}  # the first view, fitted to the column
    later = Forked(_view_html, (data, frames), keys[1:], workers=workers)
    seeds = sorted({s for ss in models.values() for s in ss})
    controls = [Control("σ", tuple((pe, f"{_sigma(pe):g}") for pe in models)),
                Control("seed", tuple((str(s), str(s)) for s in seeds))]

    def done() -> str:
        views = {(pe, str(s)): v for (pe, s), v in zip(keys, [html0, *later.get()], strict=True)}
        return views_html(views, controls, alt=ALT)
    return done


ALT = "learned PE and learning curve"
"""The alt text of the explorer's views (each view's key appended)."""


class SigmaExplorer:
    """Dropdowns for a stored sigma and seed, and an image of :func:`draw_model` for it.

    Attributes:
        sigma, seed: the ``ipywidgets.Dropdown`` s (``sigma``'s values are PE labels).
        image: the ``ipywidgets.Image`` showing the chosen model.
        widget: the whole explorer (a VBox).
        shown: the (PE label, seed) drawn last.
        kernel: its (n, n) kernel; curve: its :func:`learning_curve`; split: the curve's split.
        figure: the figure drawn last (closed in pyplot; its axes stay readable).
    """

    def __init__(self, history: pd.DataFrame, artifacts: Mapping[str, Any]) -> None:
        import ipywidgets as widgets

        self.history, self.artifacts = history, artifacts
        self.models = sigma_models(artifacts)
        first = next(iter(self.models))
        self.sigma = widgets.Dropdown(
            options=[(f"{_sigma(pe):g}", pe) for pe in self.models], value=first,
            description="σ")
        self.seed = widgets.Dropdown(options=self.models[first], value=self.models[first][0],
                                     description="seed")
        self.image = widgets.Image(format="png")
        self.widget = widgets.VBox([widgets.HBox([self.sigma, self.seed]), self.image])
        self._syncing = False
        self.sigma.observe(self._on_sigma, names="value")
        self.seed.observe(self._on_seed, names="value")
        self.show(first, self.seed.value)

    def _on_sigma(self, change: Mapping[str, Any]) -> None:
        """A new sigma: offer its seeds (keeping the current one if it has it), then draw."""
        pe, seeds = change["new"], self.models[change["new"]]
        keep = self.seed.value if self.seed.value in seeds else seeds[0]
        self._syncing = True
        try:
            self.seed.options = seeds
            self.seed.value = keep
        finally:
            self._syncing = False
        self.show(pe, keep)

    def _on_seed(self, change: Mapping[str, Any]) -> None:
        if not self._syncing and change["new"] is not None:
            self.show(self.sigma.value, change["new"])

    def show(self, pe: str, seed: int) -> None:
        """Draw model (``pe``, ``seed``) into :attr:`image`."""
        fig, (self.kernel, self.curve, self.split) = model_figure(
            self.history, self.artifacts, pe, int(seed))
        self.image.value = figure_png(fig)
        self.figure, self.shown = fig, (pe, int(seed))


def sigma_explorer(run: Run, seed: int | None = None) -> WithStatic:
    """Chapter 6's explorer: :class:`SigmaExplorer` live (as ``.live``), :func:`sigma_views` on
    the rendered page (and :func:`sigma_grid` as its PNG).

    Args:
        run: a stored run of the sigma sweep (its ``history`` and ``artifacts``).
        seed: the static grid's seed (default the first stored).
    """
    views = _views_started(run.history, run.artifacts)  # drawn by other processes meanwhile
    live = SigmaExplorer(run.history, run.artifacts)
    grid = sigma_grid(run.history, run.artifacts, seed=seed)
    return with_static(live.widget, grid, png=figure_png(grid),
                       text="σ explorer: pick a σ and a seed (ipywidgets; needs a live kernel)",
                       live=live, html=views())
