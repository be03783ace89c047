"""Measures: quantities computed from trained models and their stored runs, as tidy tables.

Its one job is to measure; the statistics over seeds are :mod:`lstpe.stats` (below), the
comparison with the paper is :mod:`lstpe.evidence` and the figures :mod:`lstpe.figures` (above).
Noise robustness is measured with training (:mod:`lstpe.training.noise`).

- :mod:`~lstpe.analysis.artifacts`    reading a run's artefacts: the per-model table, checks
- :mod:`~lstpe.analysis.attention`    attention-map cosine / Jensen-Shannon alignment to
  2d-fixed (Table 3), PE x PE similarity, at initialisation and trained
- :mod:`~lstpe.analysis.procrustes`   orthogonal-Procrustes distance of learned PEs to the 2-D
  sinusoid; lazy-vs-rich movement of PEs
- :mod:`~lstpe.analysis.pe_structure` a learnable PE split into its init and learned part, the
  2-D structure of each (grid and row-column scores, permutation nulls), per unit or snapshot
- :mod:`~lstpe.analysis.learned_part` that learned part summarised per sigma
- :mod:`~lstpe.analysis.kernels`      position x position kernels of PEs
- :mod:`~lstpe.analysis.mechanism`    the mechanism per sigma in one table (learned part, init
  share, Table 3 and Procrustes at init and trained, the paper)
- :mod:`~lstpe.analysis.humans`       per-puzzle model vs human accuracy, per-condition curves
- :mod:`~lstpe.analysis.networks`     distances between one model's token PEs, modularity and
  network clustering with shuffled nulls
- :mod:`~lstpe.analysis.probe`        Su's position probe
- :mod:`~lstpe.analysis.rope_misuse`  the authors' sequence-first rope module fed batch-first input
- :mod:`~lstpe.analysis.curves`       learning curves over epochs and their figures
- :mod:`~lstpe.analysis.long_runs`    long units over epochs, their check against the stored
  200-epoch unit, and their figures
"""
