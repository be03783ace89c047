"""Evidence: our seeds against a reference (the authors' logs, the paper's tables) and against
each other, one row per cell or contrast with its verdict word.

- :mod:`~lstpe.evidence.verdict`        the one rule for a row's verdict word
- :mod:`~lstpe.evidence.tables`         rows against a reference, contrasts within our units,
  trends over sigma; the evidence table of Table 1's and Table 2's claims, stacked
- :mod:`~lstpe.evidence.paper_compare`  our per-seed results lined up against one paper table
- :mod:`~lstpe.evidence.claim_tables`   the evidence tables of noise, models vs humans and brain
  networks
"""
