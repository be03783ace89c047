"""Statistics: summaries and tests of a few seeds' values, knowing nothing of models or papers.

- :mod:`~lstpe.stats.formulas`    the formulas the tests are built of, each written once: Welch's
  degrees of freedom, the pooled SD, TOST, the sign-flip p, the permutation test's splits
- :mod:`~lstpe.stats.seed_stats`  means, SDs, t and bootstrap intervals, t-tests, rank
  correlations, Holm's adjustment, the exact sign-flip test of paired changes, p and tau text
- :mod:`~lstpe.stats.seed_tests`  tests fit for 3-5 seeds: TOST equivalence, Welch's difference,
  the pooled and Welch tests against a reference's seeds, the exact permutation test, its floor
  and its interval; the level :data:`~lstpe.stats.seed_tests.ALPHA` and margin of every verdict
- :mod:`~lstpe.stats.power`       the smallest difference each of those tests resolves at its n
- :mod:`~lstpe.stats.trend`       a monotone trend over sigma (Kendall's tau-b, permutation p)
- :mod:`~lstpe.stats.chance`      whether a model's accuracy is above chance (binomial test)
"""
