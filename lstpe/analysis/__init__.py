"""Analyses of the paper as library functions returning tidy tables (plots kept separate).

Modules (imported lazily: ``import lstpe.analysis`` loads none of them; noise robustness is
computed with training, :mod:`lstpe.training.noise`):

- :mod:`lstpe.analysis.attention`   attention-map cosine / Jensen-Shannon alignment to 2d-fixed,
  PE x PE similarity matrix, baseline at initialisation
- :mod:`lstpe.analysis.procrustes`  orthogonal-Procrustes distance of learned PEs to the 2-D
  sinusoid; lazy-vs-rich movement of PEs and their kernels
- :mod:`lstpe.analysis.humans`      per-puzzle model vs human accuracy (cosine, Spearman,
  composite), per-condition curves
- :mod:`lstpe.analysis.seed_stats`  means, SDs, t and bootstrap CIs, t-tests, rank correlations,
  Holm's adjustment, the exact sign-flip test of paired changes
- :mod:`lstpe.analysis.paper_compare` the paper's tables and
  :func:`~lstpe.analysis.paper_compare.compare_to_paper` (verdict per row: equivalent /
  differs / inconclusive / n=1, with the minimum detectable difference)
- :mod:`lstpe.analysis.plots`       plotting helpers for those tables
- :mod:`lstpe.analysis.curves`      learning curves over epochs (separate module)
- :mod:`lstpe.analysis.networks`    distances between the token PEs of one model (plain by
  default, per-pair Procrustes as an option), modularity and network clustering
- :mod:`lstpe.analysis.probe`       Su's probe (separate module)
- :mod:`lstpe.analysis.rope_misuse` the authors' sequence-first rope module fed batch-first input
- :mod:`lstpe.analysis.widgets`    a widget with a static twin (the book page shows the picture)
- :mod:`lstpe.analysis.authors_logs` the authors' own training logs (every 200 epochs) and our
  runs against them at the same epoch, with the paper's 4000-epoch tables beside them
- :mod:`lstpe.analysis.seed_tests`  tests fit for 3-5 seeds: TOST equivalence, Welch difference
  with its CI, the pooled and Welch tests against a reference's seeds, exact permutation test
  and its floor; :mod:`lstpe.analysis.power` the smallest difference each of those tests
  resolves at its n; :mod:`lstpe.analysis.trend` the trend over sigma
- :mod:`lstpe.analysis.evidence`    one evidence table per claim of the paper, contrasts within
  our units, the stacked table; :mod:`lstpe.analysis.forest` its forest plot
- :mod:`lstpe.analysis.pe_structure` a learnable PE split into its init and the learned part,
  their 2-D structure (grid and row-column scores, permutation p-values), and the attention
  maps' at init and after training, per stored unit or per snapshot;
  :mod:`lstpe.analysis.learned_part` its learned part summarised per sigma
- :mod:`lstpe.analysis.pe_plots`    the learned PEs on the 4 x 4 grid, and their scores against
  sigma or epoch
- :mod:`lstpe.analysis.mechanism`   the mechanism claim per sigma in one evidence table (learned
  part, init share, Table 3 and Procrustes at init and trained, the paper)
- :mod:`lstpe.analysis.long_runs`   long units over epochs, their check against the stored
  200-epoch unit of the same seed, and their figure
- :mod:`lstpe.analysis.claim_tables` evidence tables of noise, humans and brain networks;
  :mod:`lstpe.analysis.report_plots` the report's figures; :mod:`lstpe.analysis.chance`,
  :mod:`lstpe.analysis.kernels`, :mod:`lstpe.analysis.style`; :mod:`lstpe.analysis.phone`
  every figure laid out again for a phone, :mod:`lstpe.analysis.responsive` both renderings
  shown and checked

Each paper claim's verdict is decided in :mod:`lstpe.claims`, one floor up.
"""

from __future__ import annotations

import importlib
from types import ModuleType

SUBMODULES: tuple[str, ...] = (
    "attention", "procrustes", "humans", "seed_stats", "paper_compare", "plots", "curves",
    "networks", "probe", "rope_misuse", "widgets", "authors_logs", "seed_tests", "power",
    "trend",
    "evidence", "forest",
    "pe_structure", "pe_plots", "learned_part", "mechanism", "long_runs", "claim_tables",
    "report_plots", "chance", "kernels", "style", "phone", "responsive",
)


def __getattr__(name: str) -> ModuleType:
    if name in SUBMODULES:
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"{__name__}.{name} is not available (module missing)") from e
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *SUBMODULES])
