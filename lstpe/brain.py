r"""Masked prediction of brain-region activity (the paper's second experiment) on real HCP FC.

The paper trains transformers whose tokens are brain regions to predict the activity of masked
regions from the others (HCP resting-state fMRI, 360 regions, 12 networks), then asks whether
the learned PEs recover the brain's network organisation. The HCP time series cannot be
redistributed, so this module builds the experiment on what can:

* **Data.** The package ships real HCP group functional connectivity (FC) of two *disjoint*
  groups of subjects (BrainSpace, Schaefer 100 / 400 parcels, Yeo-7 network of each parcel).
  Surrogate "timepoints" are drawn from :math:`\mathcal N(0, \mathrm{FC})`: the main group's FC
  for training, the holdout group's FC for testing (other people), then z-scored per region.
  **They are Gaussian surrogates with real HCP covariance, not the paper's time series.**
  Tokens are in a fixed random order of the parcels by default (``order="shuffled"``): the
  file lists parcels network by network within each hemisphere, which would hand a 1-D PE the
  network structure for free; the paper's point is that networks are scattered along the token
  axis. :func:`load_timeseries` takes real parcellated time series (T x R) and a partition, so
  a user with HCP access can run the paper's exact setting.
* **Model** (:class:`BatchedBrainTransformer`): M models with stacked weights. A region's
  scalar activity is embedded to ``d`` (``x w + b``), masked regions get a learned mask
  embedding instead; then the LST model's post-LN blocks (the block's additive PE, one head,
  bidirectional attention -- ``relative`` too, unlike the authors' causal LST version) and a
  per-token linear readout of the activity. Weights and PEs are drawn by
  :func:`lstpe.model.init_weights` (``n_inputs = n_classes = 1``), so ``learn-0.1`` and
  ``learn-0.2`` of a seed share every weight and the same normal draw of the PE.
* **Objective.** MSE on the masked regions. Each training sample hides a fixed fraction of the
  regions (exactly ``round(ratio * R)``); models are trained with 15/50/75/90% masking and
  tested with 90% masking on the holdout data.
* **Training** (:func:`train_brain`): all (PE, mask ratio, seed) models of one attention kind
  are trained as one batched model (loss = sum of the per-model mean losses, one Adam over the
  stacked tensors = M independent Adams, as in :mod:`lstpe.train`). A model's batches and masks
  depend only on its seed and the step, so every PE sees the same data (common random numbers)
  and a model trains the same alone or stacked.

Presets (:func:`preset`): ``paper`` (400 parcels, d=64, 4 layers, Adam 1e-4, 50k steps, the 15
seeds, the four training mask ratios; many GPU hours) and ``preview`` (100 parcels, d=64,
2 layers, 200 steps of 16 time points at Adam 3e-3, one seed, 50% masking; CPU, under a
minute). The paper does not give its batch size; we use 128. Preview numbers illustrate the
pipeline; they are not the paper's.
"""

from __future__ import annotations

import hashlib
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from lstpe import encodings as enc
from lstpe import results as res
from lstpe.encodings import PESpec, parse_pe
from lstpe.model import ModelConfig, StackedModels, _bmm
from lstpe.model import init_weights as _init_weights
from lstpe.notebook import pick_device
from lstpe.train import group_specs

PARCELLATIONS: tuple[int, ...] = (100, 400)
"""Schaefer parcellations shipped with the package."""

GROUPS: tuple[str, ...] = ("main", "holdout")
"""The two disjoint HCP groups: train on ``main``, test on ``holdout``."""

YEO7: tuple[str, ...] = ("Vis", "SomMot", "DorsAttn", "SalVentAttn", "Limbic", "Cont", "Default")
"""The Yeo 7 networks, in their conventional order."""

BRAIN_PES: tuple[str, ...] = (
    "1d-fixed", "relative", "rope", "random", "learn-0.1", "learn-0.2", "learn-1", "learn-2",
)
"""The PEs of the paper's brain experiment."""

PAPER_MASKS: tuple[float, ...] = (0.15, 0.5, 0.75, 0.9)
"""Training mask ratios of the paper (50% in the main text, the others in its appendix)."""

TEST_MASK: float = 0.9
"""Mask ratio of the paper's evaluation."""

ORDERS: tuple[str, ...] = ("shuffled", "file")
"""Token order of the parcels: a fixed random permutation, or the file's order."""

PAPER_SEEDS: tuple[int, ...] = (
    2235, 6312, 6068, 9742, 8880, 2197, 669, 6256, 3309, 2541, 8643, 7785, 195, 6914, 29,
)
"""The authors' 15 seeds (the same as the LST experiment's)."""

MASK_STREAM = 2_000_003
"""Offset added to a model's seed for the generator of its mask embedding."""

HISTORY_COLUMNS = [
    "model", "pe", "pe_name", "sigma", "seed", "train_mask", "step", "split", "mask_ratio", "mse",
]
"""Columns of the brain history table: one row per (model, step, split, mask_ratio).
``train_mask`` is the model's training mask ratio, ``mask_ratio`` the one of the evaluation."""


# --------------------------------------------------------------------------- packaged data


def _data_file(name: str):
    return resources.files("lstpe").joinpath("data", "brain", name)


def _check_parcels(n_parcels: int) -> None:
    if n_parcels not in PARCELLATIONS:
        raise ValueError(
            f"no vendored parcellation with {n_parcels!r} parcels; valid: "
            f"{', '.join(map(str, PARCELLATIONS))}"
        )


def load_fc(n_parcels: int = 100, group: str = "main") -> np.ndarray:
    """Group functional connectivity (Pearson correlation) of HCP resting state.

    Args:
        n_parcels: 100 or 400 (Schaefer parcellation).
        group: ``"main"`` or ``"holdout"`` (two disjoint groups of subjects).
    Returns:
        (R, R) float64 symmetric matrix with unit diagonal, parcels in the file's order.
    """
    _check_parcels(n_parcels)
    if group not in GROUPS:
        raise ValueError(f"unknown group {group!r}; valid: {', '.join(GROUPS)}")
    with _data_file(f"schaefer_{n_parcels}_{group}_group_fc.csv").open("r") as f:
        fc = np.loadtxt(f, delimiter=",", dtype=np.float64)
    if fc.shape != (n_parcels, n_parcels):
        raise ValueError(f"vendored FC has shape {fc.shape}, expected ({n_parcels}, {n_parcels})")
    return fc


def load_networks(n_parcels: int = 100) -> pd.DataFrame:
    """Yeo-7 network of each Schaefer parcel: columns ``parcel`` (1-based), ``hemisphere``,
    ``network``, in the file's order (the rows and columns of :func:`load_fc`)."""
    _check_parcels(n_parcels)
    with _data_file(f"schaefer_{n_parcels}_yeo7_networks.csv").open("r") as f:
        df = pd.read_csv(f)
    unknown = sorted(set(df["network"]) - set(YEO7))
    if unknown or len(df) != n_parcels:
        raise ValueError(f"unexpected network file: {len(df)} rows, unknown labels {unknown}")
    return df


def nearest_pd(c: np.ndarray, min_eig: float = 1e-6) -> tuple[np.ndarray, bool]:
    """A positive-definite correlation matrix near ``c`` (eigenvalue clipping).

    If the smallest eigenvalue of ``c`` is below ``min_eig``, the eigenvalues are clipped to
    ``min_eig``, the matrix rebuilt and rescaled to unit diagonal, and a warning says so.

    Returns:
        (matrix, changed).
    """
    c = np.asarray(c, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"covariance must be square, got shape {c.shape}")
    if not np.isfinite(c).all():
        raise ValueError("covariance contains NaN or infinite values")
    c = (c + c.T) / 2
    lam, vec = np.linalg.eigh(c)
    if lam[0] >= min_eig:
        return c, False
    warnings.warn(
        f"the matrix is not positive definite (smallest eigenvalue {lam[0]:.3g}); using the "
        f"nearest correlation matrix with eigenvalues >= {min_eig:g} (clipped and rescaled)",
        stacklevel=2,
    )
    fixed = (vec * np.clip(lam, min_eig, None)) @ vec.T
    s = np.sqrt(np.diag(fixed))
    fixed = fixed / s[:, None] / s[None, :]
    return (fixed + fixed.T) / 2, True


def sample_gaussian(cov: np.ndarray, n: int, seed: int, chunk: int = 65536) -> np.ndarray:
    """``n`` draws of :math:`\\mathcal N(0, \\text{cov})`: (n, R) float32 (Cholesky, chunked)."""
    if n < 1:
        raise ValueError(f"need at least one sample, got n={n}")
    chol = np.linalg.cholesky(np.asarray(cov, dtype=np.float64))
    rng = np.random.default_rng(seed)
    out = np.empty((n, chol.shape[0]), dtype=np.float32)
    for i in range(0, n, chunk):
        z = rng.standard_normal((min(chunk, n - i), chol.shape[0]))
        out[i:i + chunk] = z @ chol.T
    return out


def zscore(x: np.ndarray) -> np.ndarray:
    """Z-score each region (column) of a (T, R) array over time.

    Raises:
        ValueError: a region with zero variance (names its index).
    """
    x = np.asarray(x, dtype=np.float64)
    sd = x.std(0)
    flat = np.flatnonzero(~(sd > 0))
    if flat.size:
        raise ValueError(f"regions {flat[:10].tolist()} have zero variance; cannot z-score")
    return ((x - x.mean(0)) / sd).astype(np.float32)


@dataclass
class BrainData:
    """Train and test activity, token order and network partition.

    Attributes:
        train: (N_train, R) float32 activity, z-scored per region; column t = token t.
        test: (N_test, R) float32, same regions.
        networks: (R,) int network code of each token (index into ``network_names``).
        network_names: names of the networks.
        order: (R,) index of token t's parcel in the source (file or user array).
        source: ``"surrogate"`` or ``"timeseries"``.
        info: provenance (parcellation, groups, PSD fix, seeds, shapes...).
    """

    train: torch.Tensor
    test: torch.Tensor
    networks: np.ndarray
    network_names: tuple[str, ...]
    order: np.ndarray
    source: str
    info: dict = field(default_factory=dict)

    @property
    def n_regions(self) -> int:
        return int(self.train.shape[1])

    @property
    def labels(self) -> np.ndarray:
        """(R,) network name of each token."""
        return np.asarray(self.network_names, dtype=object)[self.networks]

    def fingerprint(self) -> str:
        """Short hash of the data (shapes, partition and a slice of values), for checkpoints."""
        h = hashlib.sha1()
        for t in (self.train[:256], self.test[:256]):
            h.update(np.ascontiguousarray(t.numpy()).tobytes())
        h.update(str((tuple(self.train.shape), tuple(self.test.shape))).encode())
        h.update(self.networks.tobytes())
        return h.hexdigest()[:16]


def token_order(n: int, order: str = "shuffled", seed: int = 0) -> np.ndarray:
    """Parcel index of each token: a fixed random permutation (``shuffled``) or ``0..n-1``."""
    if order not in ORDERS:
        raise ValueError(f"unknown token order {order!r}; valid: {', '.join(ORDERS)}")
    if order == "file":
        return np.arange(n)
    return np.random.default_rng(seed).permutation(n)


def make_surrogate(n_parcels: int = 100, n_train: int = 20_000, n_test: int = 5_000,
                   seed: int = 0, order: str = "shuffled", order_seed: int = 0) -> BrainData:
    """Gaussian surrogate time points with real HCP group covariance.

    Train: draws from N(0, FC_main); test: draws from N(0, FC_holdout) (a disjoint group of
    subjects). Each split is z-scored per region; tokens follow :func:`token_order`.
    """
    _check_parcels(n_parcels)
    order_idx = token_order(n_parcels, order, order_seed)
    nets = load_networks(n_parcels)["network"].to_numpy()
    info: dict[str, Any] = {"parcellation": f"schaefer_{n_parcels}", "partition": "yeo7",
                            "order": order, "order_seed": order_seed, "seed": seed,
                            "n_train": n_train, "n_test": n_test}
    splits = {}
    for split, group, n, s in (("train", "main", n_train, seed), ("test", "holdout", n_test,
                                                                     seed + 1)):
        cov, changed = nearest_pd(load_fc(n_parcels, group))
        info[f"{split}_group"] = group
        info[f"{split}_psd_fixed"] = changed
        x = zscore(sample_gaussian(cov, n, s))
        splits[split] = torch.from_numpy(x[:, order_idx].copy())
    codes = np.array([YEO7.index(v) for v in nets[order_idx]], dtype=np.int64)
    return BrainData(splits["train"], splits["test"], codes, YEO7, order_idx, "surrogate", info)


def _read_array(a, what: str) -> np.ndarray:
    if isinstance(a, (str, Path)):
        p = Path(a)
        if not p.exists():
            raise FileNotFoundError(f"{what}: no file at {p}")
        if p.suffix == ".npy":
            a = np.load(p)
        elif p.suffix in (".csv", ".txt", ".tsv"):
            a = np.loadtxt(p, delimiter="\t" if p.suffix == ".tsv" else ",")
        else:
            raise ValueError(f"{what}: unsupported file type {p.suffix!r}; use .npy, .csv, .tsv")
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a, dtype=np.float64)


def _stack_runs(runs, what: str, n_regions: int | None) -> np.ndarray:
    """One (T, R) array or a list of them (subjects/runs), each z-scored, concatenated."""
    if isinstance(runs, (list, tuple)):
        parts = list(runs)
    else:
        parts = [runs]
    if not parts:
        raise ValueError(f"{what}: no time series given")
    out = []
    for i, p in enumerate(parts):
        a = _read_array(p, f"{what}[{i}]")
        if a.ndim != 2:
            raise ValueError(f"{what}[{i}] must be a 2-D array (T timepoints x R regions), "
                             f"got shape {a.shape}")
        if n_regions is not None and a.shape[1] != n_regions:
            raise ValueError(f"{what}[{i}] has {a.shape[1]} regions (columns) but the partition "
                             f"has {n_regions} (is it transposed? expected T x R)")
        if a.shape[0] < 2:
            raise ValueError(f"{what}[{i}] has {a.shape[0]} timepoints; need at least 2")
        bad = ~np.isfinite(a)
        if bad.any():
            rows, cols = np.nonzero(bad)
            raise ValueError(f"{what}[{i}] has {bad.sum()} NaN/inf values (first at timepoint "
                             f"{rows[0]}, region {cols[0]}); clean or drop them first")
        try:
            out.append(zscore(a))
        except ValueError as e:
            raise ValueError(f"{what}[{i}]: {e}") from None
    return np.concatenate(out, 0)


def load_timeseries(train, test, partition: Sequence, network_names: Sequence[str] | None = None,
                    order: str = "file", order_seed: int = 0) -> BrainData:
    """Real parcellated time series (e.g. HCP resting state) as :class:`BrainData`.

    Args:
        train, test: (T, R) arrays, ``.npy``/``.csv``/``.tsv`` paths, or lists of them (one per
            subject or run; each is z-scored per region, then they are concatenated). Use
            different subjects for ``test`` to test generalisation to other people.
        partition: (R,) network label of each region (ints or names), e.g. the CAB-NP
            partition of the Glasser regions.
        network_names: order of the networks (default: sorted labels).
        order: token order, ``"file"`` (the columns' order) or ``"shuffled"``.
    Raises:
        ValueError: wrong shapes, NaNs/infs, zero-variance regions, or labels missing from
            ``network_names``; FileNotFoundError for a missing file.
    """
    labels = np.asarray(partition)
    if labels.ndim != 1 or labels.size < 2:
        raise ValueError(f"partition must be a 1-D vector of R >= 2 labels, got shape "
                         f"{labels.shape}")
    R = labels.size
    tr = _stack_runs(train, "train", R)
    te = _stack_runs(test, "test", R)
    names = tuple(sorted(set(labels.tolist()), key=str)) if network_names is None \
        else tuple(network_names)
    missing = sorted(set(labels.tolist()) - set(names), key=str)
    if missing:
        raise ValueError(f"partition labels {missing} are not in network_names {list(names)}")
    idx = token_order(R, order, order_seed)
    codes = np.array([names.index(v) for v in labels[idx].tolist()], dtype=np.int64)
    info = {"parcellation": f"user ({R} regions)", "partition": "user", "order": order,
            "order_seed": order_seed, "n_train": len(tr), "n_test": len(te)}
    return BrainData(torch.from_numpy(tr[:, idx].copy()), torch.from_numpy(te[:, idx].copy()),
                     codes, names, idx, "timeseries", info)


# --------------------------------------------------------------------------- masks


def n_masked(ratio: float, n_regions: int) -> int:
    """Number of regions hidden at a mask ratio: ``round(ratio * R)``, at least 1, at most R-1."""
    if not (0 < ratio < 1):
        raise ValueError(f"mask ratio must be in (0, 1), got {ratio}")
    return int(min(max(round(ratio * n_regions), 1), n_regions - 1))


def masks_from_scores(scores: torch.Tensor, ratio: float) -> torch.Tensor:
    """Boolean masks hiding the regions with the smallest scores.

    Args:
        scores: (..., R) uniform random scores.
        ratio: mask ratio.
    Returns:
        (..., R) bool, True = masked; exactly :func:`n_masked` regions per row.
    """
    return scores.argsort(-1).argsort(-1) < n_masked(ratio, scores.shape[-1])


def sample_masks(n: int, n_regions: int, ratio: float, seed: int) -> torch.Tensor:
    """(n, R) bool masks, each hiding exactly ``n_masked(ratio, R)`` uniformly chosen regions."""
    g = torch.Generator().manual_seed(int(seed))
    return masks_from_scores(torch.rand(n, n_regions, generator=g), ratio)


def _step_seed(seed: int, step: int) -> int:
    return (int(seed) * 1_000_003 + int(step) * 7919 + 17) % (2**62)


def draw_batch(seed: int, step: int, n_rows: int, batch_size: int, n_regions: int,
               device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """The training rows and mask scores of one model's step: from ``(seed, step)`` only.

    Returns:
        row indices (B,) and uniform scores (B, R) (turned into masks by
        :func:`masks_from_scores`; so the 50% mask of a step is inside its 75% mask).
    """
    g = torch.Generator(device=device).manual_seed(_step_seed(seed, step))
    idx = torch.randint(n_rows, (batch_size,), generator=g, device=device)
    scores = torch.rand(batch_size, n_regions, generator=g, device=device)
    return idx, scores


# --------------------------------------------------------------------------- model


def model_config(n_regions: int, d_model: int = 64, n_layers: int = 4, n_heads: int = 1,
                 mlp_ratio: int = 4) -> ModelConfig:
    """A :class:`~lstpe.model.ModelConfig` for R region tokens with scalar input and output."""
    return ModelConfig(d_model=d_model, n_layers=n_layers, n_heads=n_heads, mlp_ratio=mlp_ratio,
                       n_tokens=n_regions, n_inputs=1, n_classes=1)


def brain_spec(pe: str | PESpec, variant: str = "paper", relative_causal: bool = False) -> PESpec:
    """The PE spec used in the brain model.

    The brain model is bidirectional, so ``relative`` uses Shaw's bidirectional form (the
    ``textbook`` variant) unless ``relative_causal`` asks for the authors' causal LST version.
    Causal PEs (``c-nope``) are rejected.
    """
    spec = parse_pe(pe, variant=variant)
    if spec.name == "relative" and spec.causal and not relative_causal:
        spec = PESpec("relative", None, "textbook")
    if spec.causal and spec.name != "relative":
        raise ValueError(f"PE {spec.label!r} is causal; the brain model is bidirectional. "
                         f"Valid PEs: {', '.join(n for n in enc.PE_NAMES if n != 'c-nope')}")
    return spec


def init_weights(spec: PESpec, seed: int, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """:func:`lstpe.model.init_weights` plus ``mask.emb (d,)`` (U(-1, 1), own generator)."""
    w = _init_weights(spec, seed, cfg)
    g = torch.Generator().manual_seed(int(seed) + MASK_STREAM)
    w["mask.emb"] = torch.rand(cfg.d_model, generator=g) * 2 - 1
    return w


def initial_pe(pe: str | PESpec, seed: int, cfg: ModelConfig) -> torch.Tensor:
    """The additive PE of a model at initialisation, (L, R, d) (regenerated from its seed)."""
    w = init_weights(parse_pe(pe), seed, cfg)
    return w["pe.fixed"] + w["pe.learn"] * w["pe.mask"]


class BatchedBrainTransformer(StackedModels):
    """M masked-activity transformers with stacked weights, run as one model.

    Per model::

        h_r = x_r w_emb + b_emb   (observed region r)    or   e_mask   (masked region)
        for each block l:  h = h + PE_l ; h = LN(h + Attn(h)) ; h = LN(h + MLP(h))
        y_r = h_r w_out + b_out   predicted activity of every region

    Args:
        specs: one PE per model (any mix).
        seeds: one seed per model.
        cfg: sizes; ``n_tokens`` = number of regions, ``n_inputs = n_classes = 1``.
    """

    def __init__(self, specs: Sequence[PESpec | str], seeds: Sequence[int],
                 cfg: ModelConfig) -> None:
        if cfg.n_inputs != 1 or cfg.n_classes != 1:
            raise ValueError("the brain model needs n_inputs=1 and n_classes=1; use "
                             "lstpe.brain.model_config")
        super().__init__(specs, seeds, cfg, init_weights)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, return_attention: bool = False):
        """Predict every region's activity.

        Args:
            x: (M, B, R) activity per model, or (B, R) shared by all models.
            mask: bool, same shape rules as x; True = masked (its value in x is ignored).
            return_attention: also return attention weights (M, B, L, R, R), head-averaged.
        Returns:
            predictions (M, B, R) [and attention].
        """
        M, cfg = self.n_models, self.cfg
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(M, *x.shape)
        if mask.dim() == 2:
            mask = mask.unsqueeze(0).expand(M, *mask.shape)
        R = cfg.n_tokens
        if x.dim() != 3 or x.shape[0] != M or x.shape[-1] != R or mask.shape != x.shape:
            raise ValueError(f"expected x and mask of shape (M={M}, B, R={R}) or (B, {R}), got "
                             f"{tuple(x.shape)} and {tuple(mask.shape)}")
        x = x.masked_fill(mask, 0.0)
        h = x[..., None] * self.embed_w[:, None] + self.embed_b[:, None, None]
        h = torch.where(mask[..., None], self.mask_emb[:, None, None], h)
        h, maps = self.blocks(h, return_attention)
        y = _bmm(h, self.head_w, self.head_b).squeeze(-1)
        return (y, torch.stack(maps, 2)) if return_attention else y


def masked_mse(pred: torch.Tensor, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean squared error over the masked entries, per model: (M, B, R) x3 -> (M,)."""
    m = mask.to(pred.dtype)
    return ((pred - x) ** 2 * m).sum((1, 2)) / m.sum((1, 2))


@torch.no_grad()
def predict(model: BatchedBrainTransformer, x: torch.Tensor, mask: torch.Tensor,
            chunk: int = 256, amp: bool = False) -> torch.Tensor:
    """Predictions (M, N, R) of all models on shared inputs x, mask (N, R), in chunks."""
    device = next(model.parameters()).device
    out = []
    for i in range(0, x.shape[0], chunk):
        with torch.autocast(device.type, torch.bfloat16, enabled=amp and device.type == "cuda"):
            y = model(x[i:i + chunk].to(device), mask[i:i + chunk].to(device))
        out.append(y.float())
    return torch.cat(out, 1)


@torch.no_grad()
def evaluate(model: BatchedBrainTransformer, x: torch.Tensor, mask: torch.Tensor,
             chunk: int = 256, amp: bool = False) -> np.ndarray:
    """Masked MSE of every model on shared inputs x, mask (N, R): (M,) numpy."""
    device = next(model.parameters()).device
    se = torch.zeros(model.n_models, device=device, dtype=torch.float64)
    count = 0.0
    for i in range(0, x.shape[0], chunk):
        xb, mb = x[i:i + chunk].to(device), mask[i:i + chunk].to(device)
        with torch.autocast(device.type, torch.bfloat16, enabled=amp and device.type == "cuda"):
            y = model(xb, mb).float()
        se += (((y - xb) ** 2) * mb).sum((1, 2)).double()
        count += float(mb.sum())
    return (se / count).cpu().numpy()


def linear_baseline_mse(cov: np.ndarray | torch.Tensor, x: torch.Tensor, mask: torch.Tensor,
                        chunk: int = 256) -> float:
    r"""MSE of the best linear predictor for a Gaussian with covariance ``cov``.

    Each masked region is predicted by the conditional mean
    :math:`\hat x_m = \Sigma_{mo}\Sigma_{oo}^{-1} x_o` from the observed ones. For Gaussian
    data with covariance ``cov`` no predictor does better on average, whatever the
    architecture; with ``cov`` estimated on the training split it is a strong reference for
    the test split too.

    Args:
        cov: (R, R) covariance (e.g. of the training split).
        x, mask: (N, R) data and masks; every row must hide the same number of regions.
    """
    cov = torch.as_tensor(np.asarray(cov), dtype=torch.float64)
    x, mask = x.double().cpu(), mask.cpu()
    k = mask.sum(1)
    if not (k == k[0]).all():
        raise ValueError("every row of the mask must hide the same number of regions")
    se, n = 0.0, 0
    for i in range(0, x.shape[0], chunk):
        xb, mb = x[i:i + chunk], mask[i:i + chunk]
        order = mb.to(torch.int8).argsort(dim=1, stable=True)  # observed first, then masked
        n_obs = int((~mb[0]).sum())
        o, m = order[:, :n_obs], order[:, n_obs:]
        s_oo = cov[o[:, :, None], o[:, None, :]]
        s_mo = cov[m[:, :, None], o[:, None, :]]
        xo, xm = xb.gather(1, o), xb.gather(1, m)
        pred = (s_mo @ torch.linalg.solve(s_oo, xo[..., None]))[..., 0]
        se += float(((pred - xm) ** 2).sum())
        n += xm.numel()
    return se / n


# --------------------------------------------------------------------------- training


@dataclass
class BrainConfig:
    """Everything that defines a brain run (saved in the manifest).

    Attributes:
        pes: PE names; each is trained with every training mask ratio and seed.
        seeds: model seeds (init, batches and masks).
        train_masks: training mask ratios.
        test_mask: mask ratio of the evaluations on the test split (the paper's 0.9).
        steps: optimizer steps; ``batch_size`` time points per step and model.
        lr: Adam learning rate (no weight decay, no dropout, as in the paper).
        n_parcels: Schaefer parcellation of the surrogate data (100 or 400).
        n_train, n_test: surrogate time points per split.
        n_eval: time points of each fixed evaluation set.
        eval_every: steps between evaluations (plus step 0 and the last).
        data_seed: seed of the surrogate data and the evaluation masks.
        order, order_seed: token order (:func:`token_order`).
        relative_causal: use the authors' causal ``relative`` (default: bidirectional).
        d_model, n_layers, n_heads, mlp_ratio: model sizes.
        checkpoint_every: steps between checkpoints (0 = never).
        max_models: split groups larger than this into chunks (memory).
    """

    pes: list[str] = field(default_factory=lambda: list(BRAIN_PES))
    seeds: list[int] = field(default_factory=lambda: list(PAPER_SEEDS))
    train_masks: list[float] = field(default_factory=lambda: [0.5])
    test_mask: float = TEST_MASK
    steps: int = 50_000
    batch_size: int = 128
    lr: float = 1e-4
    n_parcels: int = 400
    n_train: int = 70 * 4800
    n_test: int = 30 * 4800
    n_eval: int = 2048
    eval_every: int = 500
    data_seed: int = 0
    order: str = "shuffled"
    order_seed: int = 0
    relative_causal: bool = False
    variant: str = "paper"
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 1
    mlp_ratio: int = 4
    device: str = "auto"
    amp: bool = False
    compile: bool = False
    checkpoint_every: int = 1000
    max_models: int | None = None

    def __post_init__(self) -> None:
        self.pes = [self.spec(p).label for p in self.pes]
        self.seeds = [int(s) for s in self.seeds]
        self.train_masks = [float(r) for r in self.train_masks]
        if not self.pes or not self.seeds or not self.train_masks:
            raise ValueError("BrainConfig needs at least one PE, one seed and one train mask")
        for name, vals in (("pes", self.pes), ("seeds", self.seeds),
                           ("train_masks", self.train_masks)):
            if len(set(vals)) != len(vals):
                raise ValueError(f"duplicate entries in BrainConfig.{name}: {vals}")
        for r in [*self.train_masks, self.test_mask]:
            n_masked(r, 2)  # validates 0 < r < 1
        for name in ("steps", "batch_size", "n_train", "n_test", "n_eval", "eval_every",
                     "d_model", "n_layers", "n_heads", "mlp_ratio"):
            if getattr(self, name) < 1:
                raise ValueError(f"BrainConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        _check_parcels(self.n_parcels)
        token_order(2, self.order)  # validates the order name

    def spec(self, pe: str) -> PESpec:
        return brain_spec(pe, self.variant, self.relative_causal)

    @property
    def models(self) -> list[tuple[PESpec, float, int]]:
        """(spec, train mask, seed) of every model, in model-id order."""
        return [(self.spec(p), r, s) for p in self.pes for r in self.train_masks
                for s in self.seeds]

    def schedule(self) -> list[int]:
        """Steps at which the models are evaluated (0 = at initialisation)."""
        return sorted(set(range(0, self.steps + 1, self.eval_every)) | {self.steps})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def preset(name: str, **overrides: Any) -> BrainConfig:
    """``paper`` or ``preview`` configuration, with keyword overrides (None values ignored)."""
    if name == "paper":
        base = BrainConfig(train_masks=list(PAPER_MASKS), max_models=15)
    elif name == "preview":
        base = BrainConfig(
            seeds=[PAPER_SEEDS[0]], train_masks=[0.5], steps=200, batch_size=16, lr=3e-3,
            n_parcels=100, n_train=20_000, n_test=5_000, n_eval=96, eval_every=50,
            n_layers=2, checkpoint_every=0,
        )
    else:
        raise ValueError(f"unknown preset {name!r}; valid presets: paper, preview")
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def make_data(cfg: BrainConfig) -> BrainData:
    """The surrogate data of a config."""
    return make_surrogate(cfg.n_parcels, cfg.n_train, cfg.n_test, cfg.data_seed, cfg.order,
                          cfg.order_seed)


def eval_sets(cfg: BrainConfig, data: BrainData) -> dict[tuple[str, float], tuple]:
    """Fixed evaluation sets ``{(split, ratio): (x (n, R), mask (n, R))}``, shared by all models.

    Train split at every training ratio and the test ratio; test split at the test ratio.
    """
    out = {}
    ratios = {"train": sorted(set(cfg.train_masks) | {cfg.test_mask}), "test": [cfg.test_mask]}
    for si, split in enumerate(("train", "test")):
        x = getattr(data, split)
        g = torch.Generator().manual_seed(cfg.data_seed * 31 + si)
        rows = torch.randperm(len(x), generator=g)[:cfg.n_eval].sort().values
        for r in ratios[split]:
            seed = cfg.data_seed * 1009 + si * 101 + int(round(r * 1000))
            out[(split, r)] = (x[rows], sample_masks(len(rows), data.n_regions, r, seed))
    return out


@dataclass
class BrainResult:
    """What :func:`train_brain` returns."""

    config: BrainConfig
    history: pd.DataFrame
    models: list[BatchedBrainTransformer]
    artifacts: dict[str, Any]
    manifest: dict[str, Any]
    data: BrainData
    run_dir: Path | None = None


def _rows(ids, models, step: int, split: str, ratio: float, mse) -> list[dict]:
    rows = []
    for j, mid in enumerate(ids):
        spec, tm, seed = models[mid]
        rows.append({"model": mid, "pe": spec.label, "pe_name": spec.name,
                     "sigma": spec.sigma if spec.sigma is not None else math.nan, "seed": seed,
                     "train_mask": tm, "step": step, "split": split, "mask_ratio": ratio,
                     "mse": float(mse[j])})
    return rows


def train_brain(cfg: BrainConfig, run_dir: str | Path | None = None,
                data: BrainData | None = None, progress: bool = True) -> BrainResult:
    """Train every (PE, train mask, seed) model of ``cfg``, batched by attention kind.

    Args:
        cfg: the run's configuration.
        run_dir: if given, checkpoints go to ``run_dir/checkpoints`` (resumed when present)
            and the finished run is saved there (history.csv, manifest.json, artifacts.pt).
        data: real data from :func:`load_timeseries` (default: the config's surrogate).
        progress: tqdm progress bars.
    Returns:
        :class:`BrainResult`; model ``i`` is ``cfg.models[i]``.
    """
    t0 = time.perf_counter()
    device = pick_device(cfg.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    data = data if data is not None else make_data(cfg)
    R = data.n_regions
    mcfg = model_config(R, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.mlp_ratio)
    models = cfg.models
    chunks = []
    for grp in group_specs([m[0] for m in models]):
        step = cfg.max_models or len(grp)
        chunks += [grp[i:i + step] for i in range(0, len(grp), step)]
    sets = {k: (x.to(device), m.to(device)) for k, (x, m) in eval_sets(cfg, data).items()}
    x_train = data.train.to(device)
    run_dir = Path(run_dir) if run_dir else None
    history: list[dict] = []
    trained, pes = [], []
    for ci, ids in enumerate(chunks):
        model, h = _train_chunk(cfg, ci, ids, mcfg, x_train, sets, data, device, run_dir,
                                progress, len(chunks))
        history += h
        trained.append(model)
        pes.append(model.pe().detach().cpu())
    hist = pd.DataFrame(history, columns=HISTORY_COLUMNS)
    hist = hist.sort_values(["model", "step", "split", "mask_ratio"]).reset_index(drop=True)
    order = [i for ids in chunks for i in ids]
    inv = torch.as_tensor(np.argsort(order))
    cov = np.cov(data.train.numpy(), rowvar=False)
    baseline = {f"{s}@{r:g}": linear_baseline_mse(cov, x.cpu(), m.cpu())
                for (s, r), (x, m) in sets.items()}
    artifacts = {
        "labels": [m[0].label for m in models], "seeds": [m[2] for m in models],
        "train_masks": [m[1] for m in models], "pe_final": torch.cat(pes, 0)[inv],
        "networks": data.networks, "network_names": list(data.network_names),
        "order": data.order, "linear_baseline": baseline, "model_config": mcfg.to_dict(),
    }
    manifest = res.make_manifest(cfg.to_dict(), device, time.perf_counter() - t0,
                                 n_models=len(models), kind="brain-train", data=data.info,
                                 data_source=data.source, data_fingerprint=data.fingerprint(),
                                 linear_baseline=baseline)
    if run_dir is not None:
        res.save_run(run_dir, hist, manifest, artifacts)
    return BrainResult(cfg, hist, trained, artifacts, manifest, data, run_dir)


def _train_chunk(cfg, ci, ids, mcfg, x_train, sets, data, device, run_dir, progress, n_chunks):
    models = cfg.models
    specs = [models[i][0] for i in ids]
    seeds = [models[i][2] for i in ids]
    ratios = [models[i][1] for i in ids]
    model = BatchedBrainTransformer(specs, seeds, mcfg).to(device)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
    fwd = torch.compile(model) if cfg.compile else model
    uniq = sorted(set(seeds))
    sidx = torch.tensor([uniq.index(s) for s in seeds], device=device)
    k = torch.tensor([n_masked(float(r), data.n_regions) for r in ratios], device=device)
    ckpt = run_dir / "checkpoints" / f"chunk{ci}.pt" if run_dir else None
    fingerprint = data.fingerprint()
    history: list[dict] = []
    start = 0
    if ckpt is not None and ckpt.exists():
        state = torch.load(ckpt, map_location=device, weights_only=False)
        if (state["config"] != cfg.to_dict() or state["ids"] != list(ids)
                or state.get("data") != fingerprint):
            raise ValueError(f"checkpoint {ckpt} was written by a different configuration or "
                             "data; use a new run_dir or delete the checkpoint")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        history, start = state["history"], state["step"]
    schedule = set(cfg.schedule())

    def run_eval(step: int) -> None:
        model.eval()
        for (split, r), (x, m) in sets.items():
            history.extend(_rows(ids, models, step, split, r, evaluate(model, x, m, amp=cfg.amp)))
        model.train()

    if start == 0:
        run_eval(0)
    use_amp = cfg.amp and device.type == "cuda"
    bar = range(start + 1, cfg.steps + 1)
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(bar, desc=f"group {ci + 1}/{n_chunks} ({len(ids)} models: "
                   f"{specs[0].label}...)", initial=start, total=cfg.steps, leave=False)
    model.train()
    N, B, R = x_train.shape[0], cfg.batch_size, data.n_regions
    for step in bar:
        draws = [draw_batch(s, step, N, B, R, device) for s in uniq]
        idx = torch.stack([d[0] for d in draws])[sidx]  # (M, B)
        rank = torch.stack([d[1] for d in draws]).argsort(-1).argsort(-1)[sidx]  # (M, B, R)
        mask = rank < k[:, None, None]
        x = x_train[idx]
        with torch.autocast(device.type, torch.bfloat16, enabled=use_amp):
            pred = fwd(x, mask)
        loss = masked_mse(pred.float(), x, mask).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step in schedule:
            run_eval(step)
        if ckpt is not None and cfg.checkpoint_every and (
            step % cfg.checkpoint_every == 0 or step == cfg.steps
        ):
            res.save_torch({"config": cfg.to_dict(), "ids": list(ids), "step": step,
                            "data": fingerprint, "model": model.state_dict(),
                            "opt": opt.state_dict(), "history": history}, ckpt)
    model.eval()
    return model, history


# --------------------------------------------------------------------------- analysis helpers


def final_mse(history: pd.DataFrame, split: str = "test", mask_ratio: float = TEST_MASK,
              train_mask: float | None = None) -> pd.DataFrame:
    """Rows of the history at the last step for one split and evaluation mask ratio.

    Args:
        train_mask: keep only models trained at this ratio (default: all).
    """
    h = history[(history["split"] == split) & np.isclose(history["mask_ratio"], mask_ratio)]
    if train_mask is not None:
        h = h[np.isclose(h["train_mask"], train_mask)]
    if h.empty:
        raise ValueError(f"no history rows for split={split!r}, mask_ratio={mask_ratio}, "
                         f"train_mask={train_mask}; available splits "
                         f"{sorted(history['split'].unique())}, ratios "
                         f"{sorted(history['mask_ratio'].unique())}")
    return h[h["step"] == h["step"].max()].reset_index(drop=True)


def mse_summary(history: pd.DataFrame, train_mask: float, test_mask: float = TEST_MASK
                ) -> pd.DataFrame:
    """Mean and SD over seeds of the final train and test MSE per PE (at ``test_mask``),
    sorted from highest to lowest test MSE as in the paper's Fig. 3D."""
    parts = []
    for split in ("train", "test"):
        f = final_mse(history, split, test_mask, train_mask)
        g = f.groupby("pe")["mse"].agg(["mean", "std", "count"])
        parts.append(g.add_prefix(f"{split}_"))
    out = pd.concat(parts, axis=1).sort_values("test_mean", ascending=False)
    return out.reset_index()


def network_table(artifacts: dict, model_cfg: ModelConfig | dict | None = None,
                  align: str = "none", n_perm: int = 0, seed: int = 0,
                  stages: Sequence[str] = ("final",), models: Sequence[int] | None = None
                  ) -> pd.DataFrame:
    """Modularity and network clustering of every model's PE against the run's partition.

    Args:
        artifacts: a run's artefacts (``pe_final``, ``labels``, ``seeds``, ``networks``...).
        model_cfg: for ``stage="init"`` (regenerates the initial PEs); default: the run's.
        align: ``"none"`` (default: plain Frobenius distances between the tokens' PEs) or
            ``"pair"`` (an orthogonal Procrustes rotation fitted per pair of tokens, the
            literal reading of the paper's Sec. 3.4); see
            :func:`lstpe.analysis.networks.pe_distance_matrix`.
        n_perm: shuffled-partition null size (0 = no null).
        stages: ``"final"`` and/or ``"init"``.
        models: model indices to measure (default: all).
    Returns:
        one row per (model, stage): model, pe, seed, train_mask, stage, modularity, clustering
        (+ z and p with ``n_perm``) and ``note``. Measures are NaN, with the reason in
        ``note``, for PEs without a per-region vector (rope, relative, nope) and for PEs whose
        tokens are all at the same distance (1d-fixed with ``align="pair"``; not reached with
        plain distances unless two tokens' PEs are all equal).
    """
    from lstpe.analysis import networks as nw

    bad = sorted(set(stages) - {"final", "init"})
    if bad:
        raise ValueError(f"unknown stages {bad}; valid: 'final', 'init'")
    mc = model_cfg or artifacts.get("model_config")
    mc = ModelConfig(**mc) if isinstance(mc, dict) else mc
    names = artifacts["network_names"]
    part = [names[c] for c in np.asarray(artifacts["networks"])]
    rows = []
    keep = set(range(len(artifacts["labels"]))) if models is None else set(models)
    for m, (pe, mseed, tm) in enumerate(zip(artifacts["labels"], artifacts["seeds"],
                                            artifacts["train_masks"], strict=True)):
        if m not in keep:
            continue
        spec = parse_pe(pe)
        done: dict[str, dict] = {}
        for stage in stages:
            row = {"model": m, "pe": pe, "seed": mseed, "train_mask": tm, "stage": stage,
                   "note": ""}
            if not spec.additive or spec.name == "nope":
                row.update(modularity=math.nan, clustering=math.nan,
                           note="no per-region PE vector")
            elif spec.name != "learn" and done:  # a fixed PE: init == final
                row.update(next(iter(done.values())))
            else:
                p = artifacts["pe_final"][m] if stage == "final" else initial_pe(spec, mseed, mc)
                try:
                    done[stage] = nw.network_measures(p, part, align, n_perm, seed)
                except ValueError as e:
                    if "distances are equal" not in str(e):
                        raise
                    done[stage] = {"modularity": math.nan, "clustering": math.nan,
                                   "note": f"all tokens equidistant (align={align!r})"}
                row.update(done[stage])
            rows.append(row)
    return pd.DataFrame(rows)


def curves(history: pd.DataFrame, split: str = "test", mask_ratio: float = TEST_MASK,
           train_mask: float | None = None) -> pd.DataFrame:
    """Mean MSE over seeds per step (rows) and PE (columns) for one split and mask ratio."""
    h = history[(history["split"] == split) & np.isclose(history["mask_ratio"], mask_ratio)]
    if train_mask is not None:
        h = h[np.isclose(h["train_mask"], train_mask)]
    if h.empty:
        raise ValueError(f"no history rows for split={split!r}, mask_ratio={mask_ratio}, "
                         f"train_mask={train_mask}")
    return h.pivot_table(index="step", columns="pe", values="mse", aggfunc="mean")


def plot_by_network(w: np.ndarray, networks: np.ndarray, names: Sequence[str], ax=None,
                    title: str = "", sort: bool = True, **imshow_kw):
    """Show an (R, R) matrix with tokens grouped by network (boundaries and network names).

    Args:
        w: (R, R) matrix in token order.
        networks: (R,) network code of each token; names: the codes' names.
        sort: group the tokens by network (False: token order, networks as a colour strip).
    """
    import matplotlib.pyplot as plt

    from lstpe.analysis.networks import network_order

    ax = ax or plt.gca()
    codes = np.asarray(networks)
    order = network_order(codes, range(len(names))) if sort else np.arange(len(codes))
    im = ax.imshow(np.asarray(w)[np.ix_(order, order)], interpolation="nearest", **imshow_kw)
    ax.grid(False)
    if sort:
        sizes = np.bincount(codes, minlength=len(names))
        edges = np.cumsum(sizes)
        for e in edges[:-1]:
            ax.axhline(e - 0.5, color="w", lw=0.6)
            ax.axvline(e - 0.5, color="w", lw=0.6)
        centres = edges - sizes / 2 - 0.5
        keep = sizes > 0
        ax.set_xticks(centres[keep], np.asarray(names)[keep], rotation=90, fontsize=7)
        ax.set_yticks(centres[keep], np.asarray(names)[keep], fontsize=7)
    else:
        ax.set_xlabel("token (region) index")
        ax.set_ylabel("token (region) index")
    ax.set_title(title)
    return im


def plot_mse_bars(summary: pd.DataFrame, baseline: float | None = None, ax=None,
                  title: str = ""):
    """Final train and test MSE per PE as paired bars with SD error bars (the paper's Fig. 3D).

    Args:
        summary: :func:`mse_summary` output (sorted as it should be drawn).
        baseline: the linear predictor's test MSE, drawn as a dashed line.
    """
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(8, 3.8))[1]
    x = np.arange(len(summary))
    ax.bar(x - 0.2, summary["train_mean"], 0.4, yerr=summary["train_std"].fillna(0),
           label="train (main)")
    ax.bar(x + 0.2, summary["test_mean"], 0.4, yerr=summary["test_std"].fillna(0),
           label="test (holdout)")
    lows = [summary[["train_mean", "test_mean"]].min().min()]
    if baseline is not None:
        ax.axhline(baseline, color="k", ls="--", lw=1, label="linear baseline (test)")
        lows.append(baseline)
    ax.set_ylim(0.9 * min(lows), None)
    ax.set_xticks(x, summary["pe"], rotation=30)
    ax.set(ylabel=f"MSE at {TEST_MASK:.0%} masked", title=title)
    ax.legend(fontsize=8)
    return ax


def plot_pe_similarities(artifacts: dict, models: Sequence[int], vmin: float = 0.0,
                         vmax: float = 1.0, align: str = "none"):
    """One :func:`plot_by_network` panel of :func:`~lstpe.analysis.networks.pe_similarity`
    per model (additive PEs). Returns the Figure.

    Args:
        artifacts: a run's artefacts (``pe_final`` (M, L, R, d), ``labels``, ``networks``,
            ``network_names``).
        models: indices of the models to show.
        align: ``"none"`` (plain distances, default) or ``"pair"`` (per-pair Procrustes); with
            ``"pair"`` a PE whose distances are all equal (``1d-fixed``) gets a note instead
            of a panel, since its similarity is undefined.
    """
    import matplotlib.pyplot as plt

    from lstpe.analysis.networks import pe_similarity

    names, nets = artifacts["network_names"], np.asarray(artifacts["networks"])
    cols = max(1, (len(models) + 1) // 2)
    fig, axes = plt.subplots(2, cols, figsize=(3.3 * cols, 7), squeeze=False)
    im = None
    for ax, i in zip(axes.flat, models, strict=False):
        label = artifacts["labels"][i]
        try:
            im = plot_by_network(pe_similarity(artifacts["pe_final"][i], align), nets, names,
                                 ax=ax, title=label, vmin=vmin, vmax=vmax)
        except ValueError as e:  # all distances equal (1d-fixed, align="pair"): W undefined
            if "distances are equal" not in str(e):
                raise
            ax.text(0.5, 0.5, f"all distances equal\n(align={align!r})", ha="center",
                    va="center")
            ax.set_title(label)
            ax.axis("off")
    for ax in axes.flat[len(models):]:
        ax.axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes, fraction=0.02, label="1 - scaled distance")
    return fig


def plot_network_measures(table: pd.DataFrame, order: Sequence[str]):
    """Modularity and network clustering per PE: after training (mean, SD over seeds), at
    initialisation, and the shuffled-network null mean (:func:`network_table` output with
    stages ``init`` and ``final``). Returns the Figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    x = np.arange(len(order))
    g = table.groupby(["stage", "pe"])
    for ax, m in zip(axes, ["modularity", "clustering"], strict=True):
        mean, sd = g[m].mean(), g[m].std().fillna(0)
        ax.errorbar(x, mean["final"][order], yerr=sd["final"][order], fmt="o", capsize=3,
                    label="after training (mean, SD over seeds)")
        ax.plot(x, mean["init"][order], "o", mfc="none", color="k", label="at initialisation")
        ax.plot(x, g[f"{m}_null_mean"].mean()["final"][order], "_", ms=18, color="r",
                label="shuffled-network null (mean)")
        ax.set_xticks(x, list(order), rotation=30)
        ax.set(ylabel=m, title=f"{m} of the PE vs the Yeo-7 networks")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
