"""The vendored LST data of Ito et al. and the tensors the transformers are trained on.

* Data (``lstpe/data/lst``, see its PROVENANCE.md): the 108 human puzzles
  (:func:`load_human`), the authors' 9000 training puzzles (:func:`load_training`), per-puzzle
  human accuracy (:func:`human_accuracy`) and the authors' code's test rows
  (:func:`authors_test_rows`).
* Tensors: one-hot puzzles and answers (:func:`encode`, :func:`labels`) and the train / test /
  val splits (:class:`Split`, :func:`load_split`, :func:`validation_split`), including the
  ``generated`` pool of :mod:`lstpe.lst.generator`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd
import torch

from lstpe.lst.generator import _allocate, generate_frame
from lstpe.lst.puzzles import CONDITIONS, Puzzle, _as_values, parse, solve

_FILES = {1: "binary", 2: "ternary", 3: "quaternary"}
SPLIT_KINDS: tuple[str, ...] = ("paper", "generated")
SPLIT_RULES: tuple[str, ...] = ("code", "text")
"""How the 9000 training puzzles are split: ``code`` = the authors' code (8100 / 900), ``text``
= the paper's text (8000 per epoch, 1000 held out)."""
TEST_SIZE = 1000
"""Size of the stratified test split carved out of the 9000 training puzzles."""


# --------------------------------------------------------------------------- vendored data


def _read_csv(name: str, **kw: Any) -> pd.DataFrame:
    with resources.files("lstpe").joinpath("data", "lst", name).open("r") as f:
        return pd.read_csv(f, **kw)


def _tidy(raw: pd.DataFrame, source: str, ids: np.ndarray) -> pd.DataFrame:
    df = pd.DataFrame({
        "id": ids.astype(np.int64),
        "lst_num": pd.to_numeric(raw["LST_num"]).astype("Int64"),
        "condition": raw["condition"].to_numpy(),
        "vectors": raw["condition"].map(CONDITIONS).to_numpy().astype(np.int64),
        "puzzle": raw["puzzles"].to_numpy(),
        "answer": raw["solutions"].astype(np.int64).to_numpy(),
        "source": source,
    })
    for r in df.itertuples():  # validate every puzzle and its stored answer
        parse(r.puzzle, r.answer, r.vectors, r.id)
    return df


@lru_cache(maxsize=1)
def _human() -> pd.DataFrame:
    raw = _read_csv("puzzle_data_original.csv", dtype=str)
    return _tidy(raw, "human", raw["ID"].astype(int).to_numpy())


@lru_cache(maxsize=1)
def _training() -> pd.DataFrame:
    raw = pd.concat([_read_csv(f"generated_puzzle_data_{f}_dist80.csv", dtype=str)
                     for f in _FILES.values()], ignore_index=True)
    return _tidy(raw, "training", np.arange(len(raw)))


def load_human() -> pd.DataFrame:
    """The 108 puzzles shown to humans (the paper's validation set).

    Columns: ``id`` (the file's ``ID``, 0-107), ``lst_num`` (Int64), ``condition``, ``vectors``
    (1-3), ``puzzle`` (16-char str), ``answer`` (1-4), ``source`` ("human").
    """
    return _human().copy()


def load_training() -> pd.DataFrame:
    """The authors' 9000 training puzzles (3000 Binary, Ternary, Quaternary in that order);
    same columns as :func:`load_human`, ``id`` = row 0-8999, ``lst_num`` all missing."""
    return _training().copy()


def puzzles_from_frame(df: pd.DataFrame) -> list[Puzzle]:
    """One validated :class:`Puzzle` per row (columns ``puzzle``, ``answer``, ``vectors``,
    ``id``; the last three optional)."""
    def col(name: str) -> list:
        return list(df[name]) if name in df else [None] * len(df)

    return [parse(s, None if pd.isna(a) else int(a), None if pd.isna(v) else int(v),
                  None if pd.isna(i) else int(i))
            for s, a, v, i in zip(df["puzzle"], col("answer"), col("vectors"), col("id"),
                                  strict=True)]


def human_accuracy() -> pd.DataFrame:
    """Per-puzzle human accuracy from the trial-level file (40 participants x 108 puzzles).

    ``Null`` trials are dropped; ``LST_id - 1`` is the puzzle ``id``. Missing responses
    (``motor_key == 999``, 156 puzzle trials) are already coded ``accuracy = 0`` in the file and
    are kept as incorrect; ``accuracy`` has no NaN, but any would also count as incorrect.

    Returns:
        Columns ``id`` (0-107), ``vectors``, ``accuracy`` (mean over trials), ``n_trials``.
    """
    t = _read_csv("human_behaviour.csv")
    t = t[t["trial_type"] != "Null"].assign(id=lambda d: d["LST_id"] - 1)
    acc = (t.assign(correct=t["accuracy"].fillna(0.0)).groupby("id")
           .agg(accuracy=("correct", "mean"), n_trials=("correct", "size"),
                trial_type=("trial_type", "first")).reset_index())
    out = load_human()[["id", "vectors", "condition"]].merge(acc, on="id", how="left")
    if (out["condition"] != out["trial_type"]).any():
        raise ValueError("trial_type of the behaviour file disagrees with the puzzle condition")
    return out[["id", "vectors", "accuracy", "n_trials"]]


def human_accuracy_by_condition() -> pd.Series:
    """Mean human accuracy per relational complexity (index ``vectors`` 1-3)."""
    return human_accuracy().groupby("vectors")["accuracy"].mean()



# --------------------------------------------------------------------------- tensors


def encode(puzzles: Sequence[Puzzle] | Sequence[str]) -> torch.Tensor:
    """(N, 16, 5) float32 one-hot: digit k in 1-5 -> channel k-1 (the probe is channel 4),
    a blank is all zeros (as in the paper). Token order is row-major."""
    a = torch.from_numpy(_as_values(puzzles))
    return (a[:, :, None] == torch.arange(1, 6)).to(torch.float32)


def labels(puzzles: Sequence[Puzzle] | Sequence[str]) -> torch.Tensor:
    """(N,) int64 class ``answer - 1`` (solved when the answer is not stored)."""
    ps = [parse(p) if isinstance(p, str) else p for p in puzzles]
    return torch.tensor([(p.answer if p.answer is not None else solve(p)) - 1 for p in ps],
                        dtype=torch.long)


@dataclass
class Split:
    """A data split as tensors.

    Attributes:
        x: (N, 16, 5) float32 one-hot puzzles (:func:`encode`). y: (N,) int64 answer - 1.
        vectors: (N,) int64 complexity 1-3. ids: (N,) int64 ``id`` of the source frame.
        name: "train", "test" or "val".
    """

    x: torch.Tensor
    y: torch.Tensor
    vectors: torch.Tensor
    ids: torch.Tensor
    name: str

    def __len__(self) -> int:
        return int(self.x.shape[0])


def _split(df: pd.DataFrame, name: str) -> Split:
    # torch.tensor copies: the frame's arrays may be read-only views (pandas copy-on-write)
    return Split(encode(list(df["puzzle"])), torch.tensor(df["answer"].to_numpy() - 1),
                 torch.tensor(df["vectors"].to_numpy()), torch.tensor(df["id"].to_numpy()),
                 name)


def validation_split() -> Split:
    """The paper's validation split: the 108 human puzzles as tensors, ordered by ``id``."""
    return _split(load_human(), "val")


def stratified_sample(strata: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted positions of a stratified random sample of size ``n`` (proportional quotas)."""
    levels, counts = np.unique(strata, return_counts=True)
    pick = [rng.permutation(np.flatnonzero(strata == lv))[:q]
            for lv, q in zip(levels, _allocate(counts, n), strict=True)]
    return np.sort(np.concatenate(pick))


@lru_cache(maxsize=4)
def _generated_training(seed: int) -> pd.DataFrame:
    return generate_frame(3000, seed, exclude=puzzles_from_frame(load_human()))


def authors_test_rows() -> np.ndarray:
    """The 900 rows (of :func:`load_training`) that the authors' code held out as test set.

    Their code split the 9000 puzzles with scikit-learn's ``train_test_split(range(9000),
    condition, stratify=condition, test_size=0.1, random_state=42)`` (``get_curriculum("All")``
    in ``lstnn/curricula.py`` of their repository, at commit eef1642; the file was removed from
    the public tree later), 300 per condition, the three files concatenated binary, ternary,
    quaternary. The rows are vendored in ``data/lst/authors_test_split.csv`` (computed once with
    scikit-learn 1.9.1, see PROVENANCE.md), so no scikit-learn is needed here.
    """
    rows = _read_csv("authors_test_split.csv")["row"].to_numpy(np.int64)
    if len(rows) != 900 or len(np.unique(rows)) != 900:
        raise ValueError("data/lst/authors_test_split.csv is damaged: expected 900 distinct rows")
    return rows


def load_split(kind: str = "paper", seed: int = 0, n_train: int | None = None,
               rule: str = "code") -> dict[str, Split]:
    """Train / test / val splits as tensors.

    ``paper``: the authors' 9000 training puzzles, split by ``rule``: ``code`` (default) =
    the authors' code, 8100 train / 900 test (:func:`authors_test_rows`, fixed, ``seed``
    unused for the split); ``text`` = the paper's text, 8000 / 1000 stratified by complexity
    (334/333/333 test puzzles), drawn with ``numpy.random.default_rng(seed)``.
    ``generated``: 3 x 3000 puzzles of :func:`generate_frame` (``seed``, excluding puzzles
    within Jaccard 0.8 of the human ones), split 8000 / 1000 (``rule`` must be ``text``).
    ``val`` is always the 108 human puzzles. ``n_train`` keeps a stratified random subset of
    the train split (preview runs). Splits are ordered by ``id``.
    """
    if kind not in SPLIT_KINDS:
        raise ValueError(f"unknown split kind {kind!r}; valid kinds: {', '.join(SPLIT_KINDS)}")
    if rule not in SPLIT_RULES:
        raise ValueError(f"unknown split rule {rule!r}; valid rules: {', '.join(SPLIT_RULES)}")
    if kind == "generated" and rule == "code":
        rule = "text"  # the code's split exists only for the authors' puzzles
    pool = load_training() if kind == "paper" else _generated_training(seed).copy()
    rng = np.random.default_rng(seed)
    strata = pool["vectors"].to_numpy()
    test = authors_test_rows() if rule == "code" else stratified_sample(strata, TEST_SIZE, rng)
    train = np.setdiff1d(np.arange(len(pool)), test)
    if n_train is not None:
        if isinstance(n_train, bool) or int(n_train) != n_train or not 1 <= n_train <= len(train):
            raise ValueError(f"n_train must be an integer in 1..{len(train)}, got {n_train!r}")
        train = train[stratified_sample(strata[train], int(n_train), rng)]
    test = np.sort(test)
    return {"train": _split(pool.iloc[train], "train"), "test": _split(pool.iloc[test], "test"),
            "val": validation_split()}
