"""Runs on disk: atomic files and checksums (:mod:`~lstpe.store.storage`), the history table,
the Run type and its manifest (:mod:`~lstpe.store.results`), run folders and locks
(:mod:`~lstpe.store.rundir`), packs (:mod:`~lstpe.store.pack`), and one folder per
model trained in segments (:mod:`~lstpe.store.model`).
"""
