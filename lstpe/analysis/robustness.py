"""Noise robustness (paper Fig. 5 / Appendix Fig. A9): accuracy with noisy token embeddings.

The computation lives in :mod:`lstpe.training.noise` (training stores each run's ``noise`` table
with
it); this module is its place among the analyses.
"""

from lstpe.training.noise import COLUMNS, NOISE_LEVELS, noise_robustness

__all__ = ["COLUMNS", "NOISE_LEVELS", "noise_robustness"]
