"""lstpe: positional encodings on the Latin Square Task (LST).

A small package behind the Jupyter Book that reproduces Ito et al., "Learning positional
encodings in transformers depends on initialization". Subpackages in the order data flows,
each importing only those above it in this list:

- :mod:`lstpe.runtime`      device, repository root, results folder, CPU flags (the bottom)
- :mod:`lstpe.lst`          the task and its data: puzzles, exact solver, generator, splits
- :mod:`lstpe.nn`           positional encodings, each PE's block, attention, the model
- :mod:`lstpe.store`        run folders: atomic files, checksums, the Run type, locks, packs
- :mod:`lstpe.training`     config and presets, optimizer, engine, LST task, noise, costs, train
- :mod:`lstpe.stats`        statistics of a few seeds: intervals, tests, power, trend, chance
- :mod:`lstpe.rendering`    page rendering: the figure style, the phone layout, widgets
- :mod:`lstpe.references`   the paper's tables and the authors' training logs
- :mod:`lstpe.analysis`     measures: attention similarity, Procrustes, PE structure, humans
- :mod:`lstpe.evidence`     ours against a reference and each other, with a verdict word
- :mod:`lstpe.figures`      the book's plots
- :mod:`lstpe.brain`        masked prediction on real HCP connectivity (config to plots)
- :mod:`lstpe.tutorial`     the checks and figures of the tutorial chapters
- :mod:`lstpe.experiments`  the registry of named runs, get_run, stored models, planner, GPU driver
- :mod:`lstpe.campaign`     this project's own CPU scheduler (no chapter imports it)
- :mod:`lstpe.chapters`     what the book's chapters call: setup, tables, text, batch runs
- :mod:`lstpe.cli`, :mod:`lstpe.repo`  the ``lstpe`` command; the repository URL
"""

__version__ = "0.1.0"
