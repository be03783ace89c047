"""A fragment's attention maps at initialisation: recomputed on load, not stored.

Before its first step a model is a function of its PE, its seed and the model's shape:
:class:`lstpe.nn.model.BatchedLSTTransformer` draws each model's weights from its own seed. So
its validation attention maps at initialisation (``val_attention_init``, (1, 108, L, 16, 16)
float16: about 170 kB of a fragment's 450 kB once compressed) need not travel with every clone.

* :func:`drop_maps` (run by :func:`lstpe.experiments.fragments.publish` before a fragment is put in
  place, and once over the fragments stored before) recomputes the maps from the fragment's own
  config; only if they agree with the stored ones within :data:`MAP_ATOL` (the float16 rounding
  of the same maps computed on another CPU: 0 on the same kind of CPU, 4.9e-4 at most between
  the CPUs that trained the stored fragments) does it drop them. It keeps two witnesses:
  ``pe_init`` (the PE at initialisation, compared exactly) and ``val_attention_init_head``
  ((M, 4, L, 16, 16) float16, the maps of the first :data:`HEAD` puzzles: those of two seeds
  of the paper's model differ there by 0.10 or more). Maps that do not agree (e.g.
  computed on a GPU with TF32) stay stored.
* :func:`restore` (run by :func:`lstpe.experiments.fragments.load_fragment`) recomputes the maps
  of a fragment that has dropped them and checks both witnesses, so a change of this package's
  initialisation cannot pass unnoticed: it raises :class:`InitMismatch` naming the fragment.
  Maps once checked are kept for the rest of the process and on disk, under
  ``<cache>/init_maps/<sha256 of the artefact file>.pt`` (:func:`lstpe.runtime.cache_dir`), so
  the next kernel (another chapter, the book build) reads them instead of recomputing them;
  a cached file is used only if its shape fits the fragment and its first puzzles' maps agree
  with the fragment's witness, else it is recomputed and written again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import torch

from lstpe.lst import validation_split
from lstpe.nn.encodings import PESpec
from lstpe.nn.model import BatchedLSTTransformer
from lstpe.runtime import cache_dir
from lstpe.store import results as res
from lstpe.store.storage import utc_now
from lstpe.training.config import TrainConfig
from lstpe.training.task import predict

KEY, HEAD_KEY = "val_attention_init", "val_attention_init_head"
HEAD = 4
"""The puzzles whose maps at initialisation a fragment keeps as a witness (the first ones)."""
MAP_ATOL = 1e-3
"""Largest |difference| accepted between stored and recomputed maps (entries in [0, 1]; two
float16 steps near 1 are 9.8e-4)."""


class InitMismatch(res.DamagedFileError):
    """This code initialises a fragment's models differently from the code that trained it."""


def config_of(manifest: dict) -> TrainConfig:
    """The :class:`~lstpe.training.config.TrainConfig` a run's manifest records (keys this
    version does not know are ignored)."""
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in (manifest.get("config") or {}).items() if k in known})


def initial_maps(cfg: TrainConfig, models: Sequence[tuple[PESpec, int]] | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The PEs and validation attention maps of ``cfg``'s models (or of ``models``, (PE,
    seed) pairs of ``cfg``'s shape) before training, computed on the CPU in float32
    as training computes them.

    Returns:
        ``(pe, maps)``: (M, L, n, d) float32 and (M, N, L, n, n) float16, models PE-major.
    """
    if models is None:
        models = [(sp, sd) for sp in cfg.specs for sd in cfg.seeds]
    model = BatchedLSTTransformer([m[0] for m in models], [m[1] for m in models], cfg.model)
    with torch.no_grad():  # every split's val is the 108 human puzzles
        _, maps = predict(model, validation_split().x, return_attention=True)
    return model.pe().detach().cpu(), maps.to(torch.float16).cpu()


def _pe_differs(stored: torch.Tensor, pe: torch.Tensor) -> bool:
    return tuple(stored.shape) != tuple(pe.shape) or not torch.equal(stored.float(), pe)


def drop_maps(run_dir: str | Path) -> float | None:
    """Drop a saved run's ``val_attention_init`` if this code recomputes it (module docstring).

    The artefacts and the manifest are written again (atomically each, the manifest last and
    sealed); call it on a folder no reader uses yet (a staging folder, or a copy).

    Returns:
        The largest |difference| between stored and recomputed maps if they were dropped,
        None if they stay (no maps stored, or they do not agree).
    Raises:
        DamagedFileError: the run fails verification (naming the file).
    """
    run_dir = Path(run_dir)
    run = res.load(run_dir)
    arts = run.artifacts
    if KEY not in arts or "pe_init" not in arts:
        return None
    try:
        pe, maps = initial_maps(config_of(run.manifest))
    except (ValueError, RuntimeError, TypeError):
        return None  # not this code's model: keep what was stored
    if _pe_differs(arts["pe_init"], pe) or tuple(maps.shape) != tuple(arts[KEY].shape):
        return None
    diff = float((maps.float() - arts[KEY].float()).abs().max())
    if diff > MAP_ATOL:
        return None
    kept = {k: v for k, v in arts.items() if k != KEY}
    kept[HEAD_KEY] = arts[KEY][:, :HEAD].clone()
    res.save_torch(kept, run_dir / "artifacts.pt")
    manifest = run.manifest
    manifest["files"]["artifacts.pt"] = res.file_record(run_dir / "artifacts.pt")
    manifest["init_maps"] = {"stored": False, "max_abs_diff": diff, "checked_at": utc_now(),
                             "why": "recomputed on load (lstpe.experiments.init_maps)"}
    res.save_json(res.seal_manifest(manifest), run_dir / "manifest.json")
    res.load(run_dir)  # verify what was written
    return diff


def restore(runs: Sequence[res.Run], batch: int = 32) -> None:
    """Put back the ``val_attention_init`` the runs among ``runs`` dropped (fragments, or a
    stored whole run), recomputed (``batch`` models at a time, one batched model per config)
    and checked, in place. Maps once checked are reused (keyed by the artefact file's SHA-256):
    for the rest of the process, and from the cache folder (module docstring).

    Raises:
        InitMismatch: a recomputed PE differs from its ``pe_init``, or the maps of the first
            puzzles from ``val_attention_init_head`` by more than :data:`MAP_ATOL` (naming the
            fragment).
    """
    todo = []
    for r in runs:
        if not r.artifacts or KEY in r.artifacts or HEAD_KEY not in r.artifacts:
            continue
        done = _MEMO.get(_sha(r) or "")
        if done is None:
            done = _from_disk(r)
        if done is not None:
            r.artifacts[KEY] = done
        else:
            todo.append(r)
    groups: dict[str, list[tuple[res.Run, TrainConfig]]] = {}
    for r in todo:  # models of one shape go in one batched model
        cfg = config_of(r.manifest)
        key = json.dumps({**cfg.to_dict(), "pes": None, "seeds": None}, sort_keys=True)
        groups.setdefault(key, []).append((r, cfg))
    for group in groups.values():
        for i in range(0, len(group), batch):
            part = group[i:i + batch]
            pe, maps = initial_maps(part[0][1], [(s, sd) for _, c in part
                                                 for s in c.specs for sd in c.seeds])
            at = 0
            for r, c in part:
                n = len(c.specs) * len(c.seeds)
                _check(r, pe[at:at + n], maps[at:at + n])
                at += n


_MEMO: dict[str, torch.Tensor] = {}
"""Maps already recomputed and checked in this process, by the SHA-256 of the artefact file
they were checked against (a chapter asks for Table 2 more than once)."""


CACHE = "init_maps"
"""The cache's subfolder for recomputed maps (:func:`lstpe.runtime.cache_dir`)."""


def _cache_file(sha: str) -> Path:
    return cache_dir() / CACHE / f"{sha}.pt"


def _from_disk(run: res.Run) -> torch.Tensor | None:
    """The cached maps of ``run``, if a file for its artefacts is cached and fits: float16, the
    run's models and blocks, the 108 validation puzzles, and its first puzzles' maps within
    :data:`MAP_ATOL` of the run's witness; else None (missing, unreadable or not fitting: the
    maps are recomputed, and the file written again)."""
    sha = _sha(run)
    if not sha or not _cache_file(sha).is_file():
        return None
    try:
        maps = torch.load(_cache_file(sha), map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 (a damaged cache file of any kind: recomputed)
        return None
    if not (torch.is_tensor(maps) and maps.dtype == torch.float16 and maps.dim() == 5
            and maps.shape[1] == _n_val()):
        return None
    if _witness_gap(run, maps) > MAP_ATOL:  # also inf for other models or blocks
        return None
    _MEMO[sha] = maps
    return maps


@lru_cache(maxsize=1)
def _n_val() -> int:
    return len(validation_split().x)


def _to_disk(sha: str, maps: torch.Tensor) -> None:
    """Cache ``maps`` (atomically; a cache folder that cannot be written is passed over)."""
    try:
        path = _cache_file(sha)
        path.parent.mkdir(parents=True, exist_ok=True)
        res.save_torch(maps.clone(), path)  # a clone: not the storage of the whole batch
    except (OSError, RuntimeError):
        pass


def _sha(run: res.Run) -> str | None:
    """The SHA-256 of the run's artefact file as its manifest records it (verified on load)."""
    return ((run.manifest.get("files") or {}).get("artifacts.pt") or {}).get("sha256")


def _witness_gap(run: res.Run, maps: torch.Tensor) -> float:
    """Largest |difference| between ``maps`` of the first :data:`HEAD` puzzles and the run's
    stored witness of them (inf where their shapes differ)."""
    head, kept = maps[:, :HEAD].float(), run.artifacts[HEAD_KEY].float()
    return float((head - kept).abs().max()) if head.shape == kept.shape else float("inf")


def _check(run: res.Run, pe: torch.Tensor, maps: torch.Tensor) -> None:
    arts, where = run.artifacts, f"the fragment {run.path}"
    if _pe_differs(arts["pe_init"], pe):
        raise InitMismatch(f"{where}: this code's initial PE differs from the stored pe_init, "
                           "so its attention maps at initialisation cannot be recomputed; "
                           "restore lstpe's initialisation (git log lstpe/nn)")
    gap = _witness_gap(run, maps)
    if gap > MAP_ATOL:
        raise InitMismatch(f"{where}: the attention maps this code computes at initialisation "
                           f"differ from the stored ones of the first {HEAD} puzzles (by "
                           f"{gap:.3g} > {MAP_ATOL}); "
                           "restore lstpe's initialisation (git log lstpe/nn)")
    arts[KEY] = maps
    sha = _sha(run)
    if sha:
        _MEMO[sha] = maps
        _to_disk(sha, maps)
