"""Reproduce the paper's training runs on a GPU: ``python scripts/reproduce.py [run|plan|...]``.

A thin entry point for :mod:`lstpe.experiments.reproduce` (see its docstring, or ``--help``).
"""

import sys

from lstpe.experiments.reproduce import main

if __name__ == "__main__":
    sys.exit(main())
