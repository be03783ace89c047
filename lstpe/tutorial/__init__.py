"""Small helpers behind the tutorial chapters 2-5 and 4b of the book, so their cells stay short.

* :mod:`lstpe.tutorial.lst_task`  chapter 2: lines that force the probe, the figures of the
  puzzles, human accuracy, the generator and the splits
* :mod:`lstpe.tutorial.sinusoid`  chapter 3: numerical checks of Su's derivation, the decay
  integral, clocks and counters, the 2-D encoding
* :mod:`lstpe.tutorial.rotary`    chapter 4: RoPE checks, axial RoPE, Shaw keys, ALiBi, the
  paper-vs-textbook table, the probe's attention mass
* :mod:`lstpe.tutorial.lazy_rich` chapter 4b: the lazy/rich toy (a learnable PE in one
  attention head on a grid task, trained at two initial scales), its table and figure
* :mod:`lstpe.tutorial.readable`  chapter 5: moves weights between the chapter's readable
  PE, block and model and the package's stacked model (the model code itself is in the cells)

The encodings themselves, chapter 2's relational complexity and the exercise solutions are
written out in the chapters' cells (tests/test_readable_encodings.py, tests/test_tutorial.py and
tests/test_tutorial_pages.py run them); the package keeps only what draws or checks, and the
toy's training. Every function returns a table, a number, a matplotlib Figure, a trained toy or
weights (or copies weights in place); nothing is printed.
"""
