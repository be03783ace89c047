"""The paper's experiments: the registry of named runs (:mod:`lstpe.experiments.registry`,
whose names are this package's face), :mod:`~lstpe.experiments.runs` (``get_run``), the
stored models a page reads, the planner and the GPU/cluster driver
(:mod:`~lstpe.experiments.reproduce`). This project's own CPU scheduler is
:mod:`lstpe.campaign`, which nothing here imports.
"""

from lstpe.experiments.registry import *  # noqa: F401,F403
