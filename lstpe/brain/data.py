r"""Data of the brain experiment: packaged HCP connectivity, surrogate and real time series, masks.

* **Packaged data.** Real HCP group functional connectivity (FC) of two *disjoint* groups of
  subjects (BrainSpace, Schaefer 100 / 400 parcels, Yeo-7 network of each parcel):
  :func:`load_fc`, :func:`load_networks`.
* **Surrogate data** (:func:`make_surrogate`). "Timepoints" drawn from
  :math:`\mathcal N(0, \mathrm{FC})`: the main group's FC for training, the holdout group's FC
  for testing (other people), then z-scored per region. **They are Gaussian surrogates with
  real HCP covariance, not the paper's time series** (those cannot be redistributed).
* **Token order** (:func:`token_order`). A fixed random order of the parcels by default: the
  file lists parcels network by network within each hemisphere, which would hand a 1-D PE the
  network structure for free; the paper's point is that networks are scattered along the
  token axis.
* **Real data** (:func:`load_timeseries`): parcellated time series (T x R) and a partition, so
  a user with HCP access can run the paper's exact setting.
* **Masks.** Each sample hides exactly ``round(ratio * R)`` regions (:func:`n_masked`); a
  model's training rows and mask scores of a step come from ``(seed, step)`` only
  (:func:`draw_batch`).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

PARCELLATIONS: tuple[int, ...] = (100, 400)
"""Schaefer parcellations shipped with the package."""

GROUPS: tuple[str, ...] = ("main", "holdout")
"""The two disjoint HCP groups: train on ``main``, test on ``holdout``."""

YEO7: tuple[str, ...] = ("Vis", "SomMot", "DorsAttn", "SalVentAttn", "Limbic", "Cont", "Default")
"""The Yeo 7 networks, in their conventional order."""

ORDERS: tuple[str, ...] = ("shuffled", "file")
"""Token order of the parcels: a fixed random permutation, or the file's order."""

PAPER_MASKS: tuple[float, ...] = (0.15, 0.5, 0.75, 0.9)
"""Training mask ratios of the paper (50% in the main text, the others in its appendix)."""

TEST_MASK: float = 0.9
"""Mask ratio of the paper's evaluation."""


# --------------------------------------------------------------------------- packaged data


def _data_file(name: str):
    return resources.files("lstpe").joinpath("data", "brain", name)


def check_parcels(n_parcels: int) -> None:
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
    check_parcels(n_parcels)
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
    check_parcels(n_parcels)
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
    check_parcels(n_parcels)
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
