"""The Latin Square Task (LST): puzzles, an exact solver, relational complexity, a generator,
the vendored data of Ito et al. and the tensors the transformers are trained on.

This module gathers the public names of three modules, so ``from lstpe import lst`` gives the
whole task (``lst.parse``, ``lst.load_split``, ...):

* :mod:`lstpe.puzzles` -- the :class:`Puzzle` type and its 16-digit string form
  (:func:`parse`), the 576 Latin squares of order 4 (:func:`latin_squares`), the exact solver
  (:func:`candidates`, :func:`solve`), relational complexity (:func:`relational_complexity`,
  :func:`relational_complexities`, :func:`complexity_confusion`; the definition is in that
  module's docstring) and drawing (:func:`render_text`, :func:`plot_puzzle`).
* :mod:`lstpe.lst_generate` -- the generator (:func:`generate`, :func:`generate_frame`) and the
  Jaccard dissimilarity of puzzles (:func:`jaccard_dissimilarity`, :func:`min_dissimilarity`).
* :mod:`lstpe.lst_data` -- the vendored data (:func:`load_human`, :func:`load_training`,
  :func:`human_accuracy`, :func:`authors_test_rows`), one-hot tensors (:func:`encode`,
  :func:`labels`) and the train / test / val splits (:class:`Split`, :func:`load_split`).

Imports go one way: ``puzzles`` <- ``lst_generate`` <- ``lst_data`` <- ``lst``. The names here
are the same objects as in those modules; to patch one (e.g. ``MAX_IDLE_DRAWS`` in a test),
patch it in the module that uses it.
"""

from __future__ import annotations

from lstpe.lst_data import (
    SPLIT_KINDS,
    SPLIT_RULES,
    TEST_SIZE,
    Split,
    authors_test_rows,
    encode,
    human_accuracy,
    human_accuracy_by_condition,
    labels,
    load_human,
    load_split,
    load_training,
    puzzles_from_frame,
    stratified_sample,
    validation_split,
)
from lstpe.lst_generate import (
    FILLED_HISTOGRAM,
    MAX_IDLE_DRAWS,
    generate,
    generate_frame,
    jaccard_dissimilarity,
    min_dissimilarity,
)
from lstpe.puzzles import (
    CONDITIONS,
    SHAPES,
    AmbiguousPuzzleError,
    Puzzle,
    UnsolvablePuzzleError,
    candidates,
    complexity_confusion,
    latin_squares,
    parse,
    plot_puzzle,
    relational_complexities,
    relational_complexity,
    render_text,
    solve,
)

__all__ = [
    # lstpe.puzzles
    "CONDITIONS", "SHAPES", "AmbiguousPuzzleError", "Puzzle", "UnsolvablePuzzleError",
    "candidates", "complexity_confusion", "latin_squares", "parse", "plot_puzzle",
    "relational_complexities", "relational_complexity", "render_text", "solve",
    # lstpe.lst_generate
    "FILLED_HISTOGRAM", "MAX_IDLE_DRAWS", "generate", "generate_frame", "jaccard_dissimilarity",
    "min_dissimilarity",
    # lstpe.lst_data
    "SPLIT_KINDS", "SPLIT_RULES", "TEST_SIZE", "Split", "authors_test_rows", "encode",
    "human_accuracy", "human_accuracy_by_condition", "labels", "load_human", "load_split",
    "load_training", "puzzles_from_frame", "stratified_sample", "validation_split",
]
