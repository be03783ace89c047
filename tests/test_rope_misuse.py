"""The authors' rope wiring (sequence-first attention fed batch-first input), rebuilt and probed."""

from __future__ import annotations

import torch

from lstpe import lst
from lstpe.analysis import rope_misuse as rm
from lstpe.nn.architecture import ModelConfig
from lstpe.nn.model import LSTTransformer


def _batch(n: int = 6) -> torch.Tensor:
    return lst.load_split("paper", seed=0)["val"].x[:n].double()


def test_seq_first_attention_mixes_along_axis_0_only() -> None:
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 5, 4, 1, 8, generator=g, dtype=torch.float64)
    out = rm.seq_first_rotary_attention(q, k, v)
    v2 = v.clone()
    v2[:, 2] += 1.0  # change every "sequence" element of column 2 of axis 1
    out2 = rm.seq_first_rotary_attention(q, k, v2)
    changed = (out2 - out).abs().amax(dim=(0, 2, 3))
    assert torch.equal(changed != 0, torch.tensor([False, False, True, False]))


def test_misused_rope_ignores_the_puzzles_own_cells_exactly() -> None:
    x = _batch()
    model = rm.SeqFirstRopeLST(d_model=16, n_layers=2, seed=1).double()
    change = rm.logit_change(model, x)
    assert change["cells 0-14 of puzzle 0"] == 0.0
    assert change["cell 15 of puzzle 1"] > 1e-6
    assert change["order of the other puzzles"] > 1e-6


def test_lstpe_rope_depends_on_the_puzzle_and_nothing_else() -> None:
    x = _batch()
    model = LSTTransformer("rope", seed=1, cfg=ModelConfig(d_model=16, n_layers=2)).double()
    change = rm.logit_change(model, x)
    assert change["cells 0-14 of puzzle 0"] > 1e-6
    assert change["cell 15 of puzzle 1"] == 0.0
    assert change["order of the other puzzles"] == 0.0


def test_dependence_table_is_the_two_opposite_patterns() -> None:
    t = rm.dependence_table(_batch(), seed=0, d_model=16)
    bad, good = t.iloc[:, 0], t.iloc[:, 1]
    assert bad.iloc[0] == 0 and (bad.iloc[1:] > 0).all()
    assert good.iloc[0] > 0 and (good.iloc[1:] == 0).all()


def test_model_init_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    a = torch.rand(3)
    torch.manual_seed(123)
    rm.SeqFirstRopeLST(seed=5)
    assert torch.equal(torch.rand(3), a)


def test_cell15_ceiling_is_far_below_the_published_rope_row() -> None:
    train = rm.cell15_ceiling(lst.load_training())
    human = rm.cell15_ceiling(lst.load_human())
    assert 0.25 <= train < 0.3  # the published rope row: training 1.000
    assert 0.25 <= human < 0.4  # validation 0.805


def test_describe_change() -> None:
    assert rm.describe_change(0.0) == "0 (exactly)"
    assert rm.describe_change(0.0123) == "1.2e-02"
