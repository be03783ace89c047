r"""Masked prediction of brain-region activity (the paper's second experiment) on real HCP FC.

The paper trains transformers whose tokens are brain regions to predict the activity of masked
regions from the others (HCP resting-state fMRI, 360 regions, 12 networks), then asks whether
the learned PEs recover the brain's network organisation. The HCP time series cannot be
redistributed, so the package builds the experiment on what can. This package face gathers the
public names of the modules that do the work, so ``from lstpe import brain`` is all a chapter
needs:

* :mod:`lstpe.brain.data` -- **data.** Real HCP group functional connectivity (FC) of two
  *disjoint* groups of subjects (BrainSpace, Schaefer 100 / 400 parcels, Yeo-7 networks).
  Surrogate "timepoints" are drawn from :math:`\mathcal N(0, \mathrm{FC})`: the main group's
  FC for training, the holdout group's FC for testing (other people), z-scored per region.
  **They are Gaussian surrogates with real HCP covariance, not the paper's time series.**
  Tokens are in a fixed random order of the parcels by default; :func:`load_timeseries` takes
  real parcellated time series (T x R) and a partition. Masks hide exactly
  ``round(ratio * R)`` regions; models are trained with 15/50/75/90% masking and tested with
  90% masking on the holdout data.
* :mod:`lstpe.brain.model` -- **model** (:class:`BatchedBrainTransformer`: M models with
  stacked weights, scalar activity embedded per region, a learned mask embedding, the LST
  model's post-LN blocks with bidirectional attention, a per-token readout), the masked MSE
  and the best linear predictor (:func:`linear_baseline_mse`).
* :mod:`lstpe.brain.task` -- the brain task of the training engine (batches, loss,
  evaluation; :func:`predict_masked`, :func:`evaluate`).
* :mod:`lstpe.brain.train` -- **training** (:class:`BrainConfig`, :func:`brain_preset`,
  :func:`train_brain`): every (PE, mask ratio, seed) model trained as one batched model by the
  package's one training loop (:func:`lstpe.training.engine.run_chunk`), as the LST models are.
* :mod:`lstpe.brain.analysis` -- final and mean MSEs, learning curves, network measures of
  the PEs (:func:`network_table`).
* :mod:`lstpe.brain.plots` -- the figures.
"""

from __future__ import annotations

from lstpe.brain.analysis import (
    curves,
    final_mse,
    mse_summary,
    mse_table,
    network_table,
)
from lstpe.brain.config import BRAIN_PES, BrainConfig, brain_preset, describe, masks_for
from lstpe.brain.data import (
    GROUPS,
    ORDERS,
    PAPER_MASKS,
    PARCELLATIONS,
    TEST_MASK,
    YEO7,
    BrainData,
    draw_batch,
    load_fc,
    load_networks,
    load_timeseries,
    make_surrogate,
    masks_from_scores,
    n_masked,
    nearest_pd,
    sample_gaussian,
    sample_masks,
    token_order,
    zscore,
)
from lstpe.brain.model import (
    MASK_STREAM,
    BatchedBrainTransformer,
    brain_spec,
    init_brain_weights,
    initial_pe,
    linear_baseline_mse,
    masked_mse,
    model_config,
)
from lstpe.brain.plots import (
    plot_by_network,
    plot_curves,
    plot_mse_bars,
    plot_mse_by_mask,
    plot_network_measures,
    plot_pe_similarities,
    plot_surrogate_fit,
    plot_token_order,
)
from lstpe.brain.task import BRAIN_HISTORY_COLUMNS, BrainTask, evaluate, predict_masked
from lstpe.brain.train import eval_sets, make_data, train_brain
from lstpe.nn.architecture import ModelConfig
from lstpe.runtime import PAPER_SEEDS

__all__ = [
    "BRAIN_PES", "GROUPS", "BRAIN_HISTORY_COLUMNS", "MASK_STREAM", "ORDERS", "PAPER_MASKS",
    "PAPER_SEEDS", "PARCELLATIONS", "TEST_MASK", "YEO7", "BatchedBrainTransformer",
    "BrainConfig", "BrainData", "BrainTask", "ModelConfig", "brain_spec",
    "curves", "draw_batch", "eval_sets", "evaluate", "final_mse",
    "init_brain_weights", "initial_pe",
    "linear_baseline_mse", "load_fc", "load_networks", "load_timeseries", "make_data",
    "make_surrogate", "masked_mse", "masks_from_scores", "model_config", "mse_summary", "mse_table",
    "n_masked", "nearest_pd", "network_table", "plot_by_network", "plot_mse_bars",
    "plot_network_measures", "plot_pe_similarities", "predict_masked", "brain_preset", "masks_for",
    "describe",
    "plot_curves", "plot_mse_by_mask", "plot_surrogate_fit", "plot_token_order", "sample_gaussian",
    "sample_masks", "token_order", "train_brain", "zscore",
]
