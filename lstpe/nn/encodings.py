r"""Positional encodings (PEs) for the 16 tokens of a 4x4 Latin square (and for any sequence).

Every PE of the paper, plus two it lacks, is named by a short string:

=============  ==========================================================================
name           what it does
=============  ==========================================================================
``2d-fixed``   Vaswani sinusoid of the row in half the dims, of the column in the other half
``1d-fixed``   Vaswani sinusoid over the flattened positions 0..15
``learn``      learnable (16, d) tensor per block, init :math:`\mathcal N(0, \sigma^2)`
``random``     the same with std 1, frozen (Ruoss et al.)
``relative``   Shaw et al. learned key embeddings per offset :math:`j-i`
``rope``       rotary encoding of queries and keys (Su et al.)
``nope``       no positional information (bidirectional attention)
``c-nope``     no PE, causal mask (Kazemnejad et al.)
``alibi``      linear distance bias on the attention logits (Press et al.) -- not in the paper
``rope-2d``    axial rotary: half the rotated dims by row, half by column -- not in the paper
=============  ==========================================================================

A learnable PE may be named with its sigma, ``learn-0.2``. :func:`parse_pe` turns a name into a
:class:`PESpec` and rejects unknown names and negative sigmas.

Two *variants* exist where the authors' code deviates from the textbook definition:

* ``paper`` (default), the authors' code (GitHub ljhearne/LSTNN_public,
  ``lstnn/transformer_main.py``): ``relative`` is Music-Transformer-style skewed relative
  attention under a causal mask (16 relative key vectors, offsets -15..0); ``c-nope`` uses
  softmax temperature 1/100 (logits divided by 0.01); ``2d-fixed`` puts the *column* code in
  dims ``0..d/2-1`` and the row code in ``d/2..d-1`` (the text says rows first: a permutation
  of dims); ``rope`` rotates the first half of the head dims with the "split-half" pairing
  (feature ``i`` with ``i + d_rot/2``). How each PE's attention block is built (biases,
  projections, init, dropout) is in :func:`lstpe.nn.architecture.block_structure`.
* ``textbook``: ``relative`` is Shaw's bidirectional form (31 offsets); ``c-nope`` has
  temperature 1; ``2d-fixed`` rows first; ``rope`` rotates all dims with the interleaved
  pairing ``(2k, 2k+1)`` of Su et al.

Sinusoid positions are 0-based (0..15 for 1-D, 0..3 for rows and columns), as in the authors'
code; the paper's appendix writes 1-based positions, which shifts every angle by one step and
changes nothing relative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

PE_NAMES: tuple[str, ...] = (
    "2d-fixed",
    "1d-fixed",
    "learn",
    "random",
    "relative",
    "rope",
    "nope",
    "c-nope",
    "alibi",
    "rope-2d",
)
"""Every valid PE name (``learn`` may also be written ``learn-<sigma>``)."""

PAPER_PES: tuple[str, ...] = PE_NAMES[:8]
"""The eight PEs of the paper."""

ADDITIVE_PES: frozenset[str] = frozenset({"2d-fixed", "1d-fixed", "learn", "random", "nope"})
"""PEs that add a (16, d) tensor to the residual stream at every block (nope adds zeros)."""

VARIANTS: tuple[str, ...] = ("paper", "textbook")

C_NOPE_TEMPERATURE: float = 0.01
"""Softmax temperature of ``c-nope`` in the paper variant (the authors' 1/100)."""

ALIBI_SLOPE: float = 0.5
"""ALiBi slope for our single head: the first slope of the 8-head geometric sequence."""


@dataclass(frozen=True)
class PESpec:
    """A positional encoding, fully specified.

    Attributes:
        name: one of :data:`PE_NAMES`.
        sigma: init std of ``learn`` (None for every other PE).
        variant: ``"paper"`` (the authors' implementation) or ``"textbook"``.
    """

    name: str
    sigma: float | None = None
    variant: str = "paper"

    @property
    def label(self) -> str:
        """Short label used in tables: ``learn-0.2``, ``2d-fixed``, ..."""
        # 12 significant digits: the label parses back to the same sigma (":g" kept only 6)
        return f"learn-{self.sigma:.12g}" if self.name == "learn" else self.name

    @property
    def additive(self) -> bool:
        """True if the PE is a tensor added to the residual stream."""
        return self.name in ADDITIVE_PES

    @property
    def trainable(self) -> bool:
        """True if the PE has learned parameters (learn, relative)."""
        return self.name in ("learn", "relative")

    @property
    def causal(self) -> bool:
        """True if attention uses a causal mask (c-nope; relative in the paper variant)."""
        return self.name == "c-nope" or (self.name == "relative" and self.variant == "paper")

    @property
    def temperature(self) -> float:
        """Softmax temperature (logits are divided by it)."""
        if self.name == "c-nope" and self.variant == "paper":
            return C_NOPE_TEMPERATURE
        return 1.0

    @property
    def attention_kind(self) -> str:
        """How the PE acts inside attention.

        One of ``none``, ``rope``, ``rope-2d``, ``relative``, ``alibi``.

        Models can be stacked into one batched model only if their attention kinds, causal masks
        and temperatures agree (additive PEs of any kind can be mixed).
        """
        if self.name in ("rope", "rope-2d", "relative", "alibi"):
            return self.name
        return "none"


def parse_pe(name: str | PESpec, sigma: float | None = None, variant: str = "paper") -> PESpec:
    """Turn a PE name into a :class:`PESpec`.

    Args:
        name: ``"2d-fixed"``, ``"learn"`` (with ``sigma``), ``"learn-0.2"``, ... or a PESpec.
        sigma: init std for ``learn``; required unless given in the name.
        variant: ``"paper"`` or ``"textbook"``.

    Raises:
        ValueError: unknown name or variant (the message lists the valid ones), a missing or
            negative sigma, or a sigma given for a PE that has none.
    """
    if isinstance(name, PESpec):
        return name
    if variant not in VARIANTS:
        raise ValueError(f"unknown PE variant {variant!r}; valid variants: {', '.join(VARIANTS)}")
    if not isinstance(name, str):
        raise ValueError(f"PE name must be a string, got {name!r}")
    base = name
    if name.startswith("learn-"):
        base, _, tail = name.partition("-")
        try:
            named_sigma = float(tail)
        except ValueError:
            raise ValueError(
                f"cannot read sigma from PE name {name!r}; write e.g. 'learn-0.2'"
            ) from None
        if sigma is not None and not math.isclose(sigma, named_sigma):
            raise ValueError(f"PE name {name!r} contradicts sigma={sigma}")
        sigma = named_sigma
    if base not in PE_NAMES:
        raise ValueError(
            f"unknown positional encoding {name!r}; valid names: {', '.join(PE_NAMES)} "
            "(or 'learn-<sigma>')"
        )
    if base == "learn":
        if sigma is None:
            raise ValueError("PE 'learn' needs a sigma (e.g. 'learn-0.2' or sigma=0.2)")
        sigma = float(sigma)
        if not math.isfinite(sigma) or sigma < 0:
            raise ValueError(f"sigma must be a finite number >= 0, got sigma={sigma}")
    elif sigma is not None and not (isinstance(sigma, float) and math.isnan(sigma)):
        raise ValueError(f"PE {base!r} takes no sigma, got sigma={sigma}")
    else:
        sigma = None
    return PESpec(base, sigma, variant)


# --------------------------------------------------------------------------- sinusoids


def sinusoid_1d(positions: torch.Tensor | int, d: int, base: float = 10000.0) -> torch.Tensor:
    r"""Vaswani sinusoid, interleaved.

    :math:`p_{k,2i}=\sin(k\,\omega_i)`, :math:`p_{k,2i+1}=\cos(k\,\omega_i)`,
    :math:`\omega_i = \text{base}^{-2i/d}`.

    Args:
        positions: (n,) positions, or an int n for ``0..n-1``.
        d: even embedding dimension.
    Returns:
        (n, d) float32 tensor.
    """
    if d % 2:
        raise ValueError(f"sinusoid dimension must be even, got d={d}")
    if isinstance(positions, int):
        positions = torch.arange(positions)
    pos = positions.to(torch.float64)[:, None]
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(pos.shape[0], d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * omega)
    pe[:, 1::2] = torch.cos(pos * omega)
    return pe.float()


def grid_positions(rows: int = 4, cols: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column index of every token of a row-major grid: two (rows*cols,) long tensors."""
    idx = torch.arange(rows * cols)
    return idx // cols, idx % cols


def sinusoid_2d(rows: int = 4, cols: int = 4, d: int = 160, base: float = 10000.0,
                columns_first: bool = False) -> torch.Tensor:
    """2-D sinusoid: half the dims encode the row, the other half the column.

    Each half is a :func:`sinusoid_1d` of width d/2 over 0..3. ``columns_first=False``: dims
    ``0..d/2-1`` encode the row (the paper's text); ``True``: they encode the column (the
    authors' ``PositionalEncoding2D``).

    Returns:
        (rows*cols, d) float32 tensor, row-major over the grid.
    """
    if d % 4:
        raise ValueError(f"2-D sinusoid needs d divisible by 4, got d={d}")
    r, c = grid_positions(rows, cols)
    halves = [sinusoid_1d(r, d // 2, base), sinusoid_1d(c, d // 2, base)]
    return torch.cat(halves[::-1] if columns_first else halves, dim=1)


def additive_pe(
    spec: PESpec | str,
    n_layers: int,
    n_tokens: int = 16,
    d: int = 160,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The per-block additive PE tensor of a model at initialisation.

    ``learn``: N(0, sigma^2) per element, independent per block; ``random``: N(0, 1), frozen;
    ``1d-fixed`` / ``2d-fixed``: the same sinusoid at every block (2d-fixed columns first in
    the paper variant, rows first in the textbook one); ``nope`` and non-additive PEs: zeros.

    Returns:
        (n_layers, n_tokens, d) float32 tensor.
    """
    spec = parse_pe(spec)
    if spec.name in ("learn", "random"):
        std = spec.sigma if spec.name == "learn" else 1.0
        z = torch.randn(n_layers, n_tokens, d, generator=generator)
        return z * std
    if spec.name == "1d-fixed":
        return sinusoid_1d(n_tokens, d).expand(n_layers, n_tokens, d).clone()
    if spec.name == "2d-fixed":
        side = math.isqrt(n_tokens)
        if side * side != n_tokens:
            raise ValueError(f"2d-fixed needs a square number of tokens, got {n_tokens}")
        pe = sinusoid_2d(side, side, d, columns_first=spec.variant == "paper")
        return pe.expand(n_layers, n_tokens, d).clone()
    return torch.zeros(n_layers, n_tokens, d)


# --------------------------------------------------------------------------- rotary


def rope_angles(
    positions: torch.Tensor | int, d_rot: int, base: float = 10000.0
) -> torch.Tensor:
    r"""Rotation angles :math:`m\,\theta_k`, :math:`\theta_k = \text{base}^{-2k/d_{rot}}`.

    Returns:
        (n, d_rot/2) float32 tensor.
    """
    if d_rot % 2:
        raise ValueError(f"rotary dimension must be even, got {d_rot}")
    if isinstance(positions, int):
        positions = torch.arange(positions)
    theta = base ** (-torch.arange(0, d_rot, 2, dtype=torch.float64) / d_rot)
    return (positions.to(torch.float64)[:, None] * theta).float()


def rotate(x: torch.Tensor, angles: torch.Tensor, pairing: str = "interleaved") -> torch.Tensor:
    """Rotate feature pairs of ``x`` by ``angles``.

    Args:
        x: (..., n, d_rot).
        angles: (n, d_rot/2).
        pairing: ``"interleaved"`` pairs (2k, 2k+1) (Su et al.); ``"half"`` pairs
            (k, k + d_rot/2) (GPT-NeoX style, the authors' code).
    Returns:
        (..., n, d_rot), each pair rotated by its angle.
    """
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if pairing == "interleaved":
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
        return out.flatten(-2)
    if pairing == "half":
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    raise ValueError(f"unknown rotary pairing {pairing!r}; valid: 'interleaved', 'half'")


def rope_dims(spec: PESpec, d_head: int) -> int:
    """Number of rotated head dims: half of them in the paper variant, all in the textbook one."""
    d_rot = d_head // 2 if spec.variant == "paper" else d_head
    return d_rot - d_rot % (4 if spec.name == "rope-2d" else 2)


def apply_rope(spec: PESpec, x: torch.Tensor, rows: int = 4, cols: int = 4) -> torch.Tensor:
    """Apply the rotary encoding of ``spec`` (``rope`` or ``rope-2d``) to queries or keys.

    ``rope``: positions 0..n-1 of the flattened grid. ``rope-2d`` (not in the paper): the
    first half of the rotated dims by the row index, the second half by the column index,
    so scores depend only on the (row, column) offset.

    Args:
        x: (..., n, d_head) queries or keys, n = rows * cols for ``rope-2d``.
    Returns:
        (..., n, d_head); dims beyond the rotated ones pass through unchanged.
    """
    n, d_head = x.shape[-2], x.shape[-1]
    d_rot = rope_dims(spec, d_head)
    pairing = "half" if spec.variant == "paper" else "interleaved"
    xr, xp = x[..., :d_rot], x[..., d_rot:]
    if spec.name == "rope":
        xr = rotate(xr, rope_angles(n, d_rot).to(x.device), pairing)
    elif spec.name == "rope-2d":
        r, c = grid_positions(rows, cols)
        h = d_rot // 2
        xr = torch.cat(
            [
                rotate(xr[..., :h], rope_angles(r, h).to(x.device), pairing),
                rotate(xr[..., h:], rope_angles(c, h).to(x.device), pairing),
            ],
            dim=-1,
        )
    else:
        raise ValueError(f"apply_rope needs 'rope' or 'rope-2d', got {spec.name!r}")
    return torch.cat([xr, xp], dim=-1)


# --------------------------------------------------------------------------- biases and masks


def alibi_bias(n: int = 16, slope: float = ALIBI_SLOPE) -> torch.Tensor:
    """ALiBi bias ``-slope * |i - j|`` (bidirectional), added to attention logits.

    Returns:
        (n, n) float32 tensor.
    """
    i = torch.arange(n)
    return -slope * (i[:, None] - i[None, :]).abs().float()


def relative_index(n: int = 16) -> torch.Tensor:
    """Index of the Shaw relative embedding for each (query i, key j): ``j - i + n - 1``.

    Returns:
        (n, n) long tensor with values in ``0 .. 2n-2``.
    """
    i = torch.arange(n)
    return i[None, :] - i[:, None] + n - 1


def causal_mask(n: int = 16) -> torch.Tensor:
    """Boolean (n, n) mask, True where query i may attend to key j (j <= i)."""
    return torch.ones(n, n, dtype=torch.bool).tril()
