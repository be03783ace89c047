r"""Dropout masks from a counter-based hash: each model's masks depend on its own key only.

The authors' sinusoidal PE modules (``2d-fixed``, ``1d-fixed``) carry ``Dropout(p=0.1)`` on
embedding + PE at every block. When many models train as one batched model, a shared random
stream would make a model's masks depend on its batch-mates. Here the mask of element ``e``
of model ``m`` is a pure function of ``(key_m, e)``:

.. math::
    u = h(h(e) \oplus \text{key}_m) / 2^{32},\qquad \text{keep} \iff u \ge p

with ``h`` a 32-bit integer mixing function (Mueller's ``0x45d9f3b`` hash) and
``key_m = h(h(h(seed) ^ epoch) ^ step)`` (:func:`step_key`). A model trained alone or in any
batch gets the same masks, the masks are the same on CPU and GPU, and no generator state has to
be carried through checkpoints or CUDA graphs (the keys are a small integer tensor).

All arithmetic is on int64 tensors holding values below :math:`2^{32}`; each product of such
a value with the 27-bit multiplier stays below :math:`2^{63}`, so nothing overflows. Nothing is
computed in float64 (:func:`keep_threshold`), so the masks are made on MPS too.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

_MASK32 = 0xFFFFFFFF
_MULT = 0x45D9F3B
EVAL_STEP = 2**31 - 1
"""The ``step`` used for keys of a dropout-active evaluation (outside any training step)."""


def mix32(x: torch.Tensor | int) -> torch.Tensor | int:
    """Mueller's 32-bit mixing function on int64 tensors (or Python ints) below 2^32."""
    x = x ^ (x >> 16)
    x = (x * _MULT) & _MASK32
    x = x ^ (x >> 16)
    x = (x * _MULT) & _MASK32
    return x ^ (x >> 16)


def step_key(seed: int, epoch: int, step: int) -> int:
    """The dropout key of one model at one optimizer step (a Python int below 2^32)."""
    k = mix32(int(seed) & _MASK32)
    k = mix32(k ^ (int(epoch) & _MASK32))
    return int(mix32(k ^ (int(step) & _MASK32)))


def keys_tensor(seeds: list[int], epoch: int | Sequence[int], step: int,
                device: torch.device | str = "cpu") -> torch.Tensor:
    """(len(seeds),) int64 keys for :func:`keep_mask`; ``epoch`` is one epoch for every seed,
    or one per seed (models at different epochs in one chunk)."""
    eps = [epoch] * len(seeds) if isinstance(epoch, int) else list(epoch)
    return torch.tensor([step_key(s, e, step) for s, e in zip(seeds, eps, strict=True)],
                        dtype=torch.int64, device=device)


def keep_threshold(p: torch.Tensor) -> torch.Tensor:
    """(K,) int64 thresholds ``floor(p * 2^32)`` of drop probabilities p (K,) in [0, 1).

    Computed in float32 on p's own device, no float64 (which MPS does not have): p is a
    float32 value, and multiplying a float32 by a power of two only shifts its exponent (no
    rounding; the product stays below 2^32, far from overflow), so the float32 product is
    the same real number as ``float64(p) * 2^32`` and the truncating cast gives the same
    int64: bit-identical masks to the float64 computation (``tests/test_devices.py``).
    """
    return (p.to(torch.float32) * 2.0**32).to(torch.int64)


def keep_mask(keys: torch.Tensor, shape: tuple[int, ...], p: torch.Tensor,
              offset: int = 0) -> torch.Tensor:
    """Inverted-dropout multipliers for each model.

    Args:
        keys: (K,) int64 keys, one per model.
        shape: the per-model shape of the masked tensor, e.g. (B, n, d).
        p: (K,) drop probabilities in [0, 1).
        offset: added to the element counter (use a different one per block).
    Returns:
        (K, *shape) float32: 0 where dropped, 1/(1-p) where kept.
    """
    n = 1
    for s in shape:
        n *= int(s)
    e = torch.arange(offset, offset + n, device=keys.device, dtype=torch.int64) & _MASK32
    u = mix32(mix32(e)[None, :] ^ keys[:, None])  # (K, n) uniform integers in [0, 2^32)
    thresh = keep_threshold(p)[:, None]
    keep = (u >= thresh).to(torch.float32)
    scale = (1.0 / (1.0 - p.to(torch.float32)))[:, None]
    return (keep * scale).view(keys.shape[0], *shape)
