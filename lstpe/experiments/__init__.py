"""The paper's experiments: the registry of named runs (:mod:`lstpe.experiments.registry`,
whose names are this package's face), :mod:`~lstpe.experiments.runs` (``get_run``), the
planner, the campaign, the GPU driver and the CPU-scale search.
"""

from lstpe.experiments.registry import *  # noqa: F401,F403
