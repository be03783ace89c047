"""The Latin Square Task (LST): puzzles, an exact solver, relational complexity, a generator,
the vendored data of Ito et al. and the tensors the transformers are trained on.

This package face gathers the public names of its three modules, so ``from lstpe import lst``
gives the whole task (``lst.parse``, ``lst.load_split``, ...):

* :mod:`lstpe.lst.puzzles` -- the :class:`Puzzle` type and its 16-digit string form
  (:func:`parse`), the 576 Latin squares of order 4 (:func:`latin_squares`), the exact solver
  (:func:`candidates`, :func:`solve`), relational complexity (:func:`relational_complexity`,
  :func:`relational_complexities`, :func:`complexity_confusion`; the definition is in that
  module's docstring) and drawing (:func:`render_text`, :func:`plot_puzzle`).
* :mod:`lstpe.lst.generator` -- the generator (:func:`generate`, :func:`generate_frame`) and the
  Jaccard dissimilarity of puzzles (:func:`jaccard_dissimilarity`, :func:`min_dissimilarity`).
* :mod:`lstpe.lst.data` -- the vendored data (:func:`load_human`, :func:`load_training`,
  :func:`human_accuracy`, :func:`authors_test_rows`), one-hot tensors (:func:`encode`,
  :func:`labels`) and the train / test / val splits (:class:`Split`, :func:`load_split`).

Imports go one way: ``puzzles`` <- ``generator`` <- ``data`` <- this face. The names here
are the same objects as in those modules; to patch one (e.g. ``MAX_IDLE_DRAWS`` in a test),
patch it in the module that uses it.
"""

from __future__ import annotations

from lstpe.lst.data import (
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
from lstpe.lst.generator import (
    FILLED_HISTOGRAM,
    MAX_IDLE_DRAWS,
    generate,
    generate_frame,
    jaccard_dissimilarity,
    min_dissimilarity,
)
from lstpe.lst.puzzles import (
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
    # lstpe.lst.puzzles
    "CONDITIONS", "SHAPES", "AmbiguousPuzzleError", "Puzzle", "UnsolvablePuzzleError",
    "candidates", "complexity_confusion", "latin_squares", "parse", "plot_puzzle",
    "relational_complexities", "relational_complexity", "render_text", "solve",
    # lstpe.lst.generator
    "FILLED_HISTOGRAM", "MAX_IDLE_DRAWS", "generate", "generate_frame", "jaccard_dissimilarity",
    "min_dissimilarity",
    # lstpe.lst.data
    "SPLIT_KINDS", "SPLIT_RULES", "TEST_SIZE", "Split", "authors_test_rows", "encode",
    "human_accuracy", "human_accuracy_by_condition", "labels", "load_human", "load_split",
    "load_training", "puzzles_from_frame", "stratified_sample", "validation_split",
]
