"""Figures: the book's plots of measures, statistics and evidence, drawn in the house style
(:mod:`lstpe.rendering.style`).

- :mod:`~lstpe.figures.plots`         attention grids, similarity matrices, ours vs the paper,
  sigma and noise curves, kernels, models vs humans
- :mod:`~lstpe.figures.pe_plots`      learned PEs on the 4 x 4 grid, their scores over sigma
- :mod:`~lstpe.figures.report_plots`  the report's figures (sigma sweep, progress, run finals,
  noise loss)
- :mod:`~lstpe.figures.forest`        the forest plot of every evidence row
"""
