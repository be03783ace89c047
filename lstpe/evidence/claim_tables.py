"""Evidence tables of the claims of chapters 8-10 (noise robustness, models and humans, brain
networks), built with the generic constructors of :mod:`lstpe.evidence.tables`.

Each ``*_evidence`` function returns ``(cells, contrasts)``: ``cells`` in
:data:`~lstpe.evidence.tables.ROW_COLUMNS` (one row per PE: our per-model values against a
fixed reference value, the reference's label in ``ref`` and its value in ``authors_mean``;
``authors_sd`` is 0 and ``authors_n`` a placeholder, since the reference is exact), and
``contrasts`` in :data:`~lstpe.evidence.tables.CONTRAST_COLUMNS` (within-ours pairs, exact
permutation verdicts, and a trend over sigma where the claim is about sigma).

* Noise (chapter 8, the paper's Fig. A9): :func:`noise_loss_per_model`, the accuracy each model
  loses between no noise and the largest noise level; :func:`noise_evidence` tests each PE's
  loss against none (TOST margin :data:`~lstpe.evidence.tables.MARGIN`) and the paper's
  contrasts (small against large sigma, learnable against fixed; :data:`NOISE_PAIRS`).
* Humans (chapter 9, Fig. 6 of the first version): :func:`model_human_agreement`, per model
  the cosine of its 0/1 correctness with the people's per-puzzle accuracy (the paper's
  measure), the cosine a model of the same accuracy with its errors at random puzzles would
  get, ``floor * sqrt(accuracy)`` (``floor``: the constant model's cosine), and the Pearson
  correlation ``r`` of the two vectors (the cosine after centring: 0 in expectation for errors
  at random, undefined for a model that solves every puzzle); :func:`human_evidence` tests
  each PE's ``r`` against 0 (margin :data:`R_MARGIN`) and learn-0.2 against every other PE.
* Brain networks (chapter 10, Fig. 4C): :func:`network_evidence` tests each PE's modularity
  (or clustering) z-score against its shuffled-network null (z = 0, SD 1; margin
  :data:`Z_MARGIN`), after training and, for learnable PEs, at initialisation, and contrasts
  the small-sigma PEs with ``learn-2`` and ``random``.

A single-model cell (n = 1) gets the single-case test of
:func:`lstpe.stats.seed_tests.vs_reference`; against an exact reference (SD 0) that
is undefined unless the value equals it, and the verdict says ``n=1``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lstpe.evidence import tables as ev
from lstpe.evidence.verdict import row_verdict
from lstpe.stats.seed_stats import check_range, holm
from lstpe.stats.seed_tests import ALPHA

__all__ = ["noise_loss_per_model", "noise_evidence", "NOISE_PAIRS", "model_human_agreement",
           "human_evidence", "R_MARGIN", "POOLED", "network_evidence", "Z_MARGIN", "NETWORK_PAIRS"]

NOISE_PAIRS: tuple[tuple[str, str], ...] = (
    ("learn-0.1", "learn-2"), ("learn-0.2", "learn-2"), ("learn-0.1", "learn-0.2"),
    ("learn-0.1", "2d-fixed"), ("learn-0.2", "2d-fixed"), ("learn-0.2", "1d-fixed"),
    ("learn-0.2", "random"))
"""The paper's contrasts of noise robustness: small against large sigma, the two smallest
sigmas, and learnable against fixed PEs (a pair missing from the data is left out)."""

POOLED = "every model"
"""The cell of :func:`human_evidence` that pools every model with errors."""

R_MARGIN = 0.1
"""Equivalence margin of a model-human correlation: |r| < 0.1, a negligible correlation by
the usual convention."""

Z_MARGIN = 1.0
"""Equivalence margin of a network z-score: within one null SD of the null mean."""

NETWORK_PAIRS: tuple[tuple[str, str], ...] = (
    ("learn-0.1", "learn-2"), ("learn-0.2", "learn-2"), ("learn-0.1", "random"),
    ("learn-0.2", "random"))
"""The contrasts of the paper's Fig. 4C: small-sigma learnable PEs against a large-sigma one
and against the fixed random PE."""

_PLACEHOLDER_N = 2


def _exact(value: float, label: str, cells: Sequence[str]) -> dict[str, ev.Reference]:
    return {c: ev.Reference(value, 0.0, _PLACEHOLDER_N, label) for c in cells}


def _against(values: dict[str, np.ndarray], value: float, label: str, claim: str,
             margin: float, value_range: tuple[float, float],
             seeds: dict[str, list[int]] | None = None) -> pd.DataFrame:
    cells = list(values)
    rows = ev.evidence_rows(values, _exact(value, label, cells), claim=claim, seeds=seeds,
                            margin=margin, value_range=value_range)
    rows["authors_n"] = math.nan  # an exact reference: no seeds
    one = (rows["n"] == 1) & (rows["authors_sd"] == 0)
    rows.loc[one, "verdict"] = "n=1"
    rows.loc[one, "why"] = "n=1: one model, no spread to test it by"
    return rows


def _pairs(cells: Sequence[str], pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    have = set(cells)
    return [(a, b) for a, b in pairs if a in have and b in have]


def _sigma(pe: str) -> float:
    return float(pe.split("-", 1)[1]) if pe.startswith("learn-") else math.nan


def _trend(values: dict[str, np.ndarray], claim: str, label: str) -> pd.DataFrame | None:
    pts = [(_sigma(c), v) for c, vs in values.items() if c.startswith("learn-") for v in vs]
    if len({s for s, _ in pts}) < 2 or len(pts) < 3:
        return None
    return ev.trend_row([s for s, _ in pts], [v for _, v in pts], claim=claim, label=label)


# --------------------------------------------------------------------------- noise


def noise_loss_per_model(noise: pd.DataFrame, condition: str = "all") -> pd.DataFrame:
    """Per model, accuracy at the smallest and the largest noise std and the loss between them.

    Args:
        noise: :func:`lstpe.training.noise.noise_robustness` rows (``noise, pe, seed,
            condition, accuracy``); duplicates of one (noise, pe, seed, condition) are dropped.
    Returns:
        ``pe, seed, clean, noisy, loss`` (``clean - noisy``: positive = the noise hurts),
        PEs in first-seen order, seeds ascending; ``noise_max`` in ``attrs``.
    Raises:
        ValueError: no rows for ``condition`` or fewer than two noise levels.
    """
    r = noise[noise["condition"].astype(str) == condition]
    r = r.drop_duplicates(["noise", "pe", "seed"])
    if r.empty or r["noise"].nunique() < 2:
        raise ValueError(f"need rows of condition {condition!r} at two noise levels or more")
    lo, hi = float(r["noise"].min()), float(r["noise"].max())
    t = r.pivot_table(index=["pe", "seed"], columns="noise", values="accuracy")
    out = pd.DataFrame({"clean": t[lo], "noisy": t[hi]}).dropna().reset_index()
    out["loss"] = out["clean"] - out["noisy"]
    order = {p: i for i, p in enumerate(dict.fromkeys(r["pe"]))}
    out = out.sort_values(["pe", "seed"], key=lambda s: s.map(order) if s.name == "pe" else s)
    out = out.reset_index(drop=True)
    out.attrs["noise_max"] = hi
    return out


def _by_pe(table: pd.DataFrame, value: str) -> tuple[dict[str, np.ndarray], dict[str, list]]:
    vals, seeds = {}, {}
    for pe, g in table.dropna(subset=[value]).groupby("pe", sort=False):
        vals[str(pe)] = g[value].to_numpy(float)
        seeds[str(pe)] = [int(s) for s in g["seed"]]
    return vals, seeds


def noise_evidence(losses: pd.DataFrame, pairs: Sequence[tuple[str, str]] = NOISE_PAIRS,
                   margin: float = ev.MARGIN) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each PE's loss to the largest noise level against no loss, and the paper's contrasts.

    Args:
        losses: :func:`noise_loss_per_model`.
    Returns:
        ``(cells, contrasts)`` (module docstring); ``contrasts`` ends with the trend of the
        learnable PEs' loss over sigma where there are two sigmas and three models or more.
    """
    vals, seeds = _by_pe(losses, "loss")
    claim = "small-sigma learnable PEs are the most robust to embedding noise (Fig. A9)"
    cells = _against(vals, 0.0, "no loss", claim, margin, (-1.0, 1.0), seeds)
    con = ev.contrast_rows(vals, _pairs(list(vals), pairs), claim=claim)
    trend = _trend(vals, claim, "loss over sigma (learn-σ)")
    return cells, con if trend is None else pd.concat([con, trend], ignore_index=True)


# --------------------------------------------------------------------------- humans


def model_human_agreement(correct: pd.DataFrame, people: pd.DataFrame) -> pd.DataFrame:
    """Per model, how its correct and wrong answers line up with the people's accuracy.

    Args:
        correct: :func:`lstpe.analysis.humans.model_correct` (``pe, seed, id, correct``).
        people: per-puzzle ``id, accuracy`` of the people.
    Returns:
        ``pe, seed, accuracy, cosine, cosine_random, r`` per model (module docstring): ``r``
        NaN for a model with no errors (or no correct answer).
    Raises:
        ValueError: puzzles of the models missing from ``people``; a people's accuracy outside
            [0, 1] or a ``correct`` other than 0 and 1 (each named with its puzzle or model).
    """
    h = people.set_index("id")["accuracy"].astype(float)
    check_range(h, 0, 1, "people's accuracy", [f"puzzle id {i}" for i in h.index])
    bad = ~correct["correct"].isin((0, 1))
    if bad.any():
        r = correct[bad].iloc[0]
        raise ValueError(f"correct must be 0 or 1: {r['correct']!r} at pe {r['pe']}, seed "
                         f"{r['seed']}, puzzle id {r['id']}")
    missing = set(correct["id"]) - set(h.index)
    if missing:
        raise ValueError(f"{len(missing)} puzzle ids of the models are not in the people's")
    floor = float(h.sum() / (math.sqrt(len(h)) * np.linalg.norm(h)))
    rows = []
    for (pe, seed), g in correct.groupby(["pe", "seed"], sort=False):
        m = g["correct"].to_numpy(float)
        hv = h.loc[g["id"]].to_numpy(float)
        nm = np.linalg.norm(m)
        cos = float(m @ hv / (nm * np.linalg.norm(hv))) if nm > 0 else math.nan
        r = float(np.corrcoef(m, hv)[0, 1]) if np.ptp(m) > 0 else math.nan
        rows.append({"pe": pe, "seed": int(seed), "accuracy": float(m.mean()), "cosine": cos,
                     "cosine_random": floor * math.sqrt(float(m.mean())), "r": r})
    out = pd.DataFrame(rows)
    out.attrs["constant_cosine"] = floor
    return out


def _holm_cells(cells: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Per-PE cells read one by one: ``p_holm`` is Holm's adjustment of ``p_diff`` over the
    cells tested, and a ``differs`` row's word is decided again on it
    (:func:`~lstpe.evidence.verdict.row_verdict`: ``inconclusive``, or ``n=1`` for one model,
    where the adjusted p is not below ``alpha``; its ``why`` gives both p)."""
    out = cells.assign(p_holm=holm(cells["p_diff"].to_numpy(float)))
    word = [row_verdict(r.p_holm, r.p_equiv, int(r.n), alpha) if r.verdict == "differs"
            else r.verdict for r in out.itertuples()]
    lost = (out["verdict"] == "differs") & (pd.Series(word, index=out.index) != "differs")
    out.loc[lost, "why"] = [f"p = {p:.3f}, Holm over {int(out['p_diff'].notna().sum())} PEs {h:.3f}"
                            for p, h in out.loc[lost, ["p_diff", "p_holm"]].to_numpy()]
    out["verdict"] = word
    return out


def human_evidence(agreement: pd.DataFrame, best: str = "learn-0.2",
                   margin: float = R_MARGIN, pooled: str | None = POOLED
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each PE's model-human correlation ``r`` against 0 (errors at random puzzles), and
    ``best`` (the paper's most human-like PE) against every other PE. The per-PE tests are
    read one by one, so their verdicts carry Holm's adjustment over the PEs (``p_holm``;
    the pooled cell is one test and keeps its own p).

    A PE whose every model solves every puzzle has no ``r``: its row's verdict is
    ``ceiling`` (no errors to place). ``pooled``: the name of a last cell holding every model's
    ``r`` (all PEs; models are independent, PEs differ), None for none. Returns
    ``(cells, contrasts)``.
    """
    vals, seeds = _by_pe(agreement, "r")
    every = agreement.dropna(subset=["r"])
    claim = "models and people find the same puzzles hard; learn-0.2 most (Fig. 6, v1)"
    cells = _against(vals, 0.0, "errors at random", claim, margin, (-1.0, 1.0), seeds)
    ceiling = [p for p in dict.fromkeys(agreement["pe"]) if p not in vals]
    if ceiling:
        extra = pd.DataFrame([{**dict.fromkeys(ev.ROW_COLUMNS, math.nan), "claim": claim,
                               "cell": p, "n": 0, "values": "", "seeds": "",
                               "ref": "errors at random", "test": "", "verdict": "ceiling",
                               "why": "every model solves every puzzle: no errors to place"}
                              for p in ceiling], columns=list(ev.ROW_COLUMNS))
        cells = pd.concat([cells, extra], ignore_index=True)
        order = list(dict.fromkeys(agreement["pe"]))
        cells = cells.set_index("cell").loc[order].reset_index()
    cells = _holm_cells(cells)
    if pooled and len(every) >= 2:
        all_rows = _against({pooled: every["r"].to_numpy(float)}, 0.0, "errors at random",
                            claim, margin, (-1.0, 1.0))
        cells = pd.concat([cells, all_rows], ignore_index=True)
    con = ev.contrast_rows(vals, [(best, c) for c in vals if c != best], claim=claim) \
        if best in vals else pd.DataFrame(columns=list(ev.CONTRAST_COLUMNS))
    return cells, con


# --------------------------------------------------------------------------- brain


def network_evidence(net: pd.DataFrame, measure: str = "modularity",
                     pairs: Sequence[tuple[str, str]] = NETWORK_PAIRS,
                     margin: float = Z_MARGIN) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each PE's ``{measure}_z`` against its shuffled-network null (z = 0), after training and
    (learnable PEs, cell ``"<pe> (init)"``) at initialisation; contrasts on the final z.

    Args:
        net: :func:`lstpe.brain.analysis.network_table` rows with ``n_perm > 0`` (``pe``,
            ``seed``, ``stage``, ``{measure}_z``); rows without a z (PEs without a per-region
            vector) are left out.
    Returns:
        ``(cells, contrasts)``; the reference is ``shuffled networks`` (mean 0, SD 1: a
        z-score's null), so a single model gets the single-case test against it.
    Raises:
        ValueError: no ``{measure}_z`` column.
    """
    col = f"{measure}_z"
    if col not in net:
        raise ValueError(f"net lacks {col!r}: network_table(..., n_perm > 0)")
    t = net.dropna(subset=[col])
    vals: dict[str, np.ndarray] = {}
    seeds: dict[str, list[int]] = {}
    for stage in ("final", "init"):
        for pe, g in t[t["stage"] == stage].groupby("pe", sort=False):
            if stage == "init" and not str(pe).startswith("learn-"):
                continue  # a fixed PE: init is final
            key = str(pe) if stage == "final" else f"{pe} (init)"
            vals[key], seeds[key] = g[col].to_numpy(float), [int(s) for s in g["seed"]]
    claim = f"small-sigma learnable PEs learn the brain's networks ({measure}, Fig. 4C)"
    refs = {c: ev.Reference(0.0, 1.0, 10_000, "shuffled networks", seeds=False) for c in vals}
    cells = ev.evidence_rows(vals, refs, claim=claim, seeds=seeds, margin=margin,
                             value_range=(-math.inf, math.inf))
    cells["authors_n"] = math.nan
    con = ev.contrast_rows(vals, _pairs(list(vals), pairs), claim=claim)
    return cells, con
