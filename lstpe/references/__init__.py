"""References: what the authors published, read from the vendored files (``lstpe/data``).

- :mod:`~lstpe.references.paper_tables`  the paper's Tables 1-6 in long form (15 seeds each)
- :mod:`~lstpe.references.authors_logs`  the authors' training logs (every 200 epochs, mean and
  SD over their seeds), the range every one of their seeds lies in, and our runs checked against
  them at the same epoch
"""
