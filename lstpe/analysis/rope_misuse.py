r"""What a sequence-first rotary attention computes when it is handed batch-first input.

The authors' public code (``ljhearne/LSTNN_public``) takes its ``rope`` attention from a
labml-style module that expects **sequence-first** tensors, ``(seq, batch, d)``: it scores
``einsum('ibhd,jbhd->ijbh', rope(q), rope(k))`` with the softmax over ``j`` and rotates along
axis 0. Its training script calls it with the LST minibatch **batch-first**, ``(batch, 16, d)``.
Axis 0 is then the puzzle index and axis 1 the cell, so

* token ``t`` of puzzle ``i`` attends to token ``t`` of the *other puzzles of the minibatch*
  (rotated by their distance in the minibatch), never to another cell of its own puzzle;
* every other layer is position-wise, so cells never mix within a puzzle, and the read-out
  from token 15 makes a puzzle's logits a function of **cell 15 of every puzzle in the
  minibatch** only.

This module rebuilds that computation from scratch (our own code, not the authors'): a small
random-weight LST transformer with post-LN blocks whose attention is the sequence-first rotary
attention applied to batch-first input, and :func:`dependence_table`, which measures on a real
minibatch what each model's output for a puzzle depends on, beside the correct rotary model of
:class:`lstpe.nn.model.LSTTransformer`.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn


def _rotate_axis0(x: torch.Tensor, d_rot: int, base: float = 10000.0) -> torch.Tensor:
    """Rotate the first ``d_rot`` features of ``x`` (L0, L1, H, d) by the index along axis 0.

    Split-half pairing (feature ``i`` with ``i + d_rot/2``), frequencies
    :math:`\\text{base}^{-2i/d_{rot}}`, as a labml-style RoPE does with its "sequence" axis.
    """
    pos = torch.arange(x.shape[0], dtype=torch.float64, device=x.device)
    theta = base ** (-torch.arange(0, d_rot, 2, dtype=torch.float64, device=x.device) / d_rot)
    ang = torch.cat([pos[:, None] * theta] * 2, dim=1)[:, None, None, :]  # (L0, 1, 1, d_rot)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    xr, xp = x[..., :d_rot], x[..., d_rot:]
    half = d_rot // 2
    neg = torch.cat([-xr[..., half:], xr[..., :half]], dim=-1)
    return torch.cat([xr * cos + neg * sin, xp], dim=-1)


def seq_first_rotary_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                               rope_fraction: float = 0.5) -> torch.Tensor:
    """Rotary attention that reads axis 0 as the sequence and axis 1 as the batch.

    Args:
        q, k, v: (L0, L1, H, d_h). Meant as (seq, batch, ...); the LST code passes
            (batch, seq, ...).
        rope_fraction: share of each head's dims that is rotated (the authors' 0.5).
    Returns:
        (L0, L1, H, d_h): ``out[i, b] = sum_j softmax_j(<R_i q[i, b], R_j k[j, b]>) v[j, b]``.
    """
    d_rot = int(q.shape[-1] * rope_fraction) // 2 * 2
    scores = torch.einsum("ibhd,jbhd->ijbh", _rotate_axis0(q, d_rot), _rotate_axis0(k, d_rot))
    attn = (scores / math.sqrt(q.shape[-1])).softmax(dim=1)
    return torch.einsum("ijbh,jbhd->ibhd", attn, v)


class _Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out = nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        a, b, d = h.shape
        split = (a, b, self.heads, d // self.heads)
        att = seq_first_rotary_attention(self.q(h).view(split), self.k(h).view(split),
                                         self.v(h).view(split)).reshape(a, b, d)
        h = self.ln1(h + self.out(att))
        return self.ln2(h + self.fc2(F.gelu(self.fc1(h))))


class SeqFirstRopeLST(nn.Module):
    """A random-weight LST transformer whose attention is :func:`seq_first_rotary_attention`.

    It is called like the LST models, ``model(x)`` with ``x`` (B, 16, 5) batch-first, and passes
    that tensor unchanged to the sequence-first attention, as the authors' training script does.
    Post-LN blocks, MLP ``Linear(d, 4d) GELU Linear(4d, d)``, read-out from token 15.
    """

    def __init__(self, d_model: int = 32, n_layers: int = 2, heads: int = 1, seed: int = 0,
                 n_inputs: int = 5, n_classes: int = 4) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):  # seeded init, global RNG left alone
            torch.manual_seed(seed)
            self.embed = nn.Linear(n_inputs, d_model)
            self.blocks = nn.ModuleList(_Block(d_model, heads) for _ in range(n_layers))
            self.head = nn.Linear(d_model, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for blk in self.blocks:
            h = blk(h)
        return self.head(h[:, -1])


def _other_symbol(token: torch.Tensor) -> torch.Tensor:
    """A different one-hot token (a blank becomes a circle, symbol k becomes symbol k+1)."""
    new = torch.zeros_like(token)
    k = int(token.argmax()) if token.sum() > 0 else -1
    new[(k + 1) % token.numel()] = 1
    return new


def perturbations(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Three edits of a minibatch ``x`` (B >= 3, 16, 5), each a new tensor.

    * ``"cells 0-14 of puzzle 0"``: puzzle 0 gets the first 15 cells of puzzle 2;
    * ``"cell 15 of puzzle 1"``: puzzle 1's last cell becomes another symbol;
    * ``"order of the other puzzles"``: puzzles 1.. are reversed (puzzle 0 unchanged).
    """
    if x.shape[0] < 3:
        raise ValueError("need a minibatch of at least 3 puzzles")
    a = x.clone()
    a[0, :15] = x[2, :15]
    b = x.clone()
    b[1, 15] = _other_symbol(x[1, 15])
    c = torch.cat([x[:1], x[1:].flip(0)])
    return {"cells 0-14 of puzzle 0": a, "cell 15 of puzzle 1": b,
            "order of the other puzzles": c}


@torch.no_grad()
def logit_change(model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    """Largest change of puzzle 0's logits under each edit of :func:`perturbations`."""
    model = model.eval()
    base = model(x)[0]
    return {name: float((model(xp)[0] - base).abs().max()) for name, xp in perturbations(x).items()}


def cell15_ceiling(frame: pd.DataFrame) -> float:
    """Best accuracy of *any* rule that sees only a puzzle's cell 15 (its majority answer).

    Under the batch-first wiring a puzzle's logits see nothing of the puzzle but cell 15; the
    other puzzles of a shuffled minibatch carry no information about its answer. So this bounds
    what such a model can score, on training and validation puzzles alike.

    Args:
        frame: puzzles as :func:`lstpe.lst.load_training` / ``load_human`` return them.
    """
    from lstpe import lst

    answers = pd.Series([p.answer for p in lst.puzzles_from_frame(frame)])
    cell15 = frame["puzzle"].str[15].reset_index(drop=True)
    best = answers.groupby(cell15).agg(lambda a: a.value_counts().iloc[0]).sum()
    return float(best / len(frame))


def describe_change(v: float) -> str:
    """A table entry for reading: ``"0 (exactly)"`` or the change in scientific notation."""
    return "0 (exactly)" if v == 0 else f"{v:.1e}"


def dependence_table(x: torch.Tensor, seed: int = 0, d_model: int = 32,
                     n_layers: int = 2) -> pd.DataFrame:
    """What puzzle 0's logits depend on, for the misused and the correct rotary model.

    Rows: the three edits of :func:`perturbations`; columns: the two models. Both models are
    small, random-weight and float64 (untrained: the dependence is a property of the wiring,
    not of the weights). Entries are the largest absolute change of puzzle 0's four logits; an
    exact 0 means "does not depend on it at all".
    """
    from lstpe.nn.architecture import ModelConfig
    from lstpe.nn.model import LSTTransformer

    x = x.double()
    cfg = ModelConfig(d_model=d_model, n_layers=n_layers)
    models = {
        "authors' wiring (batch-first into seq-first)": SeqFirstRopeLST(d_model, n_layers,
                                                                        seed=seed).double(),
        "lstpe rope": LSTTransformer("rope", seed=seed, cfg=cfg).double(),
    }
    table = pd.DataFrame({name: logit_change(m, x) for name, m in models.items()})
    table.index = [f"changing {c}" for c in table.index]
    table.index.name = "puzzle 0's logits move by"
    return table
