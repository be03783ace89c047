"""Training checkpoints: a digest of their content, checked before a resume.

A checkpoint (:func:`lstpe.training.engine.run_chunk` writes it atomically) carries the
SHA-256 of its own content (:func:`state_digest`); :func:`verify_checkpoint` loads one and
checks it, naming the file when it is missing, empty, truncated or does not match.
:func:`_load_checkpoint` is what a resume does with a damaged one (:data:`ON_DAMAGED`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from lstpe.store import results as res

DIGEST_KEY = "sha256"
"""The key of a checkpoint's digest of its own content (:func:`state_digest`)."""


def state_digest(obj: Any) -> str:
    """SHA-256 over a checkpoint's content: every tensor's name, dtype, shape and bytes, and
    every other value's text, in a fixed order (nested dicts by key, lists in order)."""
    import hashlib

    h = hashlib.sha256()

    def walk(x: Any, name: str) -> None:
        if isinstance(x, torch.Tensor):
            t = x.detach().cpu().contiguous()
            h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(x, dict):
            for k in sorted(x, key=str):
                walk(x[k], f"{name}.{k}")
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, f"{name}[{i}]")
        else:
            h.update(f"{name}={x!r};".encode())

    walk(obj, "")
    return h.hexdigest()


ON_DAMAGED: tuple[str, ...] = ("restart", "refuse")
"""What :func:`lstpe.training.engine.run_chunk` does with a checkpoint whose content does
not match its digest: move it aside and train again from the start (a run folder of its own),
or refuse, naming it (a checkpoint that published results depend on: a long chunk's)."""


def verify_checkpoint(ckpt: Path, device: torch.device | str = "cpu",
                      hint: str | None = None) -> dict:
    """The checkpoint at ``ckpt``, loaded to ``device`` and checked against its digest
    (:data:`DIGEST_KEY` removed).

    Raises:
        lstpe.store.storage.DamagedFileError: it is missing, empty, truncated, not a training
            checkpoint, has no digest or does not match it, naming it (``hint``: what to do;
            default: delete it to restart the run).
    """
    state = res.load_torch(ckpt, "checkpoint", map_location=device, hint=hint)
    hint = hint or f"delete {ckpt} to restart the run"
    if not isinstance(state, dict) or "epoch" not in state:
        raise res.DamagedFileError(f"checkpoint {ckpt} is not a training checkpoint; {hint}")
    digest = state.pop(DIGEST_KEY, None)
    if digest is None or digest != state_digest(state):
        why = "has no digest of its content" if digest is None else \
            "does not match the digest of its content (damaged or edited)"
        raise DigestMismatch(f"checkpoint {ckpt} {why}: not resumed; {hint}", why)
    return state


class DigestMismatch(res.DamagedFileError):
    """A checkpoint whose content does not match its digest, or that has none (``why``)."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


def _load_checkpoint(ckpt: Path, device: torch.device, on_damaged: str = "restart",
                     hint: str | None = None) -> dict | None:
    """The checkpoint's state if it is whole (:func:`verify_checkpoint`). One whose content
    does not match its digest (or that has none) is, with ``on_damaged="restart"``, moved
    aside with a warning and None is returned: the chunk trains again from the start, never
    from damaged numbers; with ``"refuse"`` the error names it (nothing is moved)."""
    import warnings

    if on_damaged not in ON_DAMAGED:
        raise ValueError(f"on_damaged must be one of {ON_DAMAGED}, got {on_damaged!r}")
    try:
        return verify_checkpoint(ckpt, device, hint)
    except DigestMismatch as e:
        if on_damaged == "refuse":
            raise
        why = e.why
    aside = ckpt.with_name(f"{ckpt.name}.damaged-{int(time.time())}")
    ckpt.rename(aside)
    warnings.warn(f"checkpoint {ckpt} {why}: not resumed; it was moved to {aside} and the "
                  "training of this chunk starts again from the beginning", stacklevel=3)
    return None


def _meta_key(meta: Any) -> Any:
    """A checkpoint's meta without how it is executed (device, step mode, ...: a run moved from
    a CPU to a GPU resumes), so that only what is computed must match."""
    if not isinstance(meta, dict) or not isinstance(meta.get("configs"), list):
        return meta
    cfgs = [{k: v for k, v in c.items() if k not in res.EXECUTION_KEYS}
            if isinstance(c, dict) else c for c in meta["configs"]]
    return {**meta, "configs": cfgs}
