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
  ``<cache>/init_maps/<sha256 of the artefact file>.pt`` (:func:`lstpe.runtime.cache_dir`),
  with a record beside it (``.json``: the SHA-256 of the maps' values and what produced them,
  :func:`producer`), so the next kernel (another chapter, the book build) reads them instead of
  recomputing them. The cache is a folder anything may have written, so a cached file is read
  only if it is what this code wrote: its values hash to its record's digest, the record's
  producer is this one, the maps are finite attention distributions of the fragment's shape
  whose first puzzles agree with its witness (:func:`_fits`); else it is recomputed and written
  again. A cache hit still rebuilds the fragment's models and computes their PE and the maps of
  the first :data:`HEAD` puzzles (about a tenth of a full recomputation: 2.9 s against 23.6 s
  for 30 paper-size models on one core), checked against both witnesses as a recomputation is
  (:func:`witness_errors`), so a changed initialisation (the PE or any other weight) raises
  :class:`InitMismatch` with a warm cache as with a cold one.

Every comparison with a tolerance is written ``not gap <= atol``: a NaN is never within it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Sequence
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
ROW_ATOL = 1e-2
"""Largest |row sum - 1| of a cached map read (an attention row is a distribution over the 16
keys; 16 float16 roundings of entries near 1/16 stay far below this)."""


class InitMismatch(res.DamagedFileError):
    """This code initialises a fragment's models differently from the code that trained it."""


def config_of(manifest: dict) -> TrainConfig:
    """The :class:`~lstpe.training.config.TrainConfig` a run's manifest records (keys this
    version does not know are ignored)."""
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in (manifest.get("config") or {}).items() if k in known})


def _initial(cfg: TrainConfig, models: Sequence[tuple[PESpec, int]] | None,
             n_puzzles: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    if models is None:
        models = [(sp, sd) for sp in cfg.specs for sd in cfg.seeds]
    model = BatchedLSTTransformer([m[0] for m in models], [m[1] for m in models], cfg.model)
    x = validation_split().x  # every split's val is the 108 human puzzles
    with torch.no_grad():
        _, maps = predict(model, x if n_puzzles is None else x[:n_puzzles],
                          return_attention=True)
    return model.pe().detach().cpu(), maps.to(torch.float16).cpu()


def initial_maps(cfg: TrainConfig, models: Sequence[tuple[PESpec, int]] | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The PEs and validation attention maps of ``cfg``'s models (or of ``models``, (PE,
    seed) pairs of ``cfg``'s shape) before training, computed on the CPU in float32
    as training computes them.

    Returns:
        ``(pe, maps)``: (M, L, n, d) float32 and (M, N, L, n, n) float16, models PE-major.
    """
    return _initial(cfg, models, None)


def initial_witness(cfg: TrainConfig, models: Sequence[tuple[PESpec, int]] | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`initial_maps` of the first :data:`HEAD` puzzles only: what a fragment's
    witnesses are checked against when its full maps need not be computed (a cache hit,
    ``lstpe campaign status``). The same models, built the same way: the PE and every other
    weight of this code's initialisation enter it.

    Returns:
        ``(pe, maps)``: (M, L, n, d) float32 and (M, HEAD, L, n, n) float16.
    """
    return _initial(cfg, models, HEAD)


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
    if not diff <= MAP_ATOL:  # NaN included
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


def _where(run: res.Run) -> str:
    kind = "fragment" if "campaign" in run.manifest else "run"
    return f"the {kind} {run.path}"


def dropped(run: res.Run) -> bool:
    """Whether ``run`` dropped its maps at initialisation and keeps the witnesses to recompute
    them (its artefacts loaded, ``val_attention_init`` not among them).

    Raises:
        lstpe.store.results.DamagedFileError: it dropped them (its manifest says so, or it
            keeps their witness) but lacks a witness, ``pe_init`` or
            ``val_attention_init_head`` (naming the run's folder and what is missing).
    """
    arts = run.artifacts
    if not arts or KEY in arts:
        return False
    said = (run.manifest.get("init_maps") or {}).get("stored") is False
    if not said and HEAD_KEY not in arts:
        return False  # a run that never stored maps at initialisation
    missing = [k for k in ("pe_init", HEAD_KEY) if k not in arts]
    if missing:
        raise res.DamagedFileError(
            f"{_where(run)} dropped its attention maps at initialisation ({KEY}) but its "
            f"artifacts.pt holds no {' and no '.join(missing)}, the witness they are recomputed "
            f"and checked against; restore the folder (git checkout -- {run.path}), or delete "
            "it to retrain the unit")
    return True


def _batches(runs: Sequence[res.Run], batch: int
             ) -> Iterator[tuple[list[tuple[res.Run, int]], TrainConfig,
                                 list[tuple[PESpec, int]]]]:
    """Runs of one model shape, ``batch`` at a time: (each run with its number of models),
    the config of the first, and every (PE, seed) of the part, runs in order."""
    groups: dict[str, list[tuple[res.Run, TrainConfig]]] = {}
    for r in runs:  # models of one shape go in one batched model
        cfg = config_of(r.manifest)
        key = json.dumps({**cfg.to_dict(), "pes": None, "seeds": None}, sort_keys=True)
        groups.setdefault(key, []).append((r, cfg))
    for group in groups.values():
        for i in range(0, len(group), batch):
            part = group[i:i + batch]
            yield ([(r, len(c.specs) * len(c.seeds)) for r, c in part], part[0][1],
                   [(s, sd) for _, c in part for s in c.specs for sd in c.seeds])


def witness_errors(runs: Sequence[res.Run], batch: int = 32
                   ) -> list[tuple[res.Run, res.DamagedFileError]]:
    """What this code's initialisation says of the runs among ``runs`` that dropped their
    maps (:func:`dropped`): their PE and the maps of their first :data:`HEAD` puzzles
    recomputed (:func:`initial_witness`, ``batch`` runs per batched model) and compared to
    their witnesses as :func:`restore` compares them. No full recomputation: what ``lstpe
    campaign status`` checks, and a cache hit.

    Returns:
        (run, error) for each run refused, in the order of ``runs``: an
        :class:`InitMismatch` (naming the run's folder) or a
        :class:`~lstpe.store.results.DamagedFileError` (a witness missing); empty when all
        agree.
    """
    errors: dict[int, res.DamagedFileError] = {}
    need = []
    for i, r in enumerate(runs):
        try:
            if dropped(r):
                need.append(r)
        except res.DamagedFileError as e:
            errors[i] = e
    at_of = {id(r): i for i, r in enumerate(runs)}
    for part, cfg, models in _batches(need, batch):
        try:
            pe, head = initial_witness(cfg, models)
        except (ValueError, RuntimeError, TypeError) as e:  # not a model this code builds
            for r, _ in part:
                errors[at_of[id(r)]] = InitMismatch(
                    f"{_where(r)}: this code cannot build its models ({e}), so its attention "
                    "maps at initialisation cannot be recomputed")
            continue
        at = 0
        for r, n in part:
            try:
                _check_witness(r, pe[at:at + n], head[at:at + n])
            except InitMismatch as e:
                errors[at_of[id(r)]] = e
            at += n
    return [(runs[i], errors[i]) for i in sorted(errors)]


def restore(runs: Sequence[res.Run], batch: int = 32) -> None:
    """Put back the ``val_attention_init`` the runs among ``runs`` dropped (fragments, or a
    stored whole run), recomputed (``batch`` models at a time, one batched model per config)
    and checked, in place. Maps once checked are reused (keyed by the artefact file's SHA-256):
    for the rest of the process, and from the cache folder once the witnesses are checked
    against this code's initialisation (:func:`witness_errors`; module docstring).

    Raises:
        InitMismatch: a recomputed PE differs from its ``pe_init``, or the maps of the first
            puzzles from ``val_attention_init_head`` by more than :data:`MAP_ATOL`, or this
            code computes maps that are not finite (naming the fragment).
        lstpe.store.results.DamagedFileError: a run that dropped its maps lacks a witness
            (:func:`dropped`).
    """
    todo, hits = [], []
    for r in runs:
        if not dropped(r):
            continue
        done = _MEMO.get(_sha(r) or "")
        if done is not None:  # checked in this process
            r.artifacts[KEY] = done
            continue
        cached = _from_disk(r)
        if cached is None:
            todo.append(r)
        else:
            hits.append((r, cached))
    refused = witness_errors([r for r, _ in hits], batch)
    if refused:
        raise refused[0][1]
    for r, maps in hits:
        r.artifacts[KEY] = maps
        _MEMO[_sha(r) or ""] = maps
    for part, cfg, models in _batches(todo, batch):
        pe, maps = initial_maps(cfg, models)
        at = 0
        for r, n in part:
            _check(r, pe[at:at + n], maps[at:at + n])
            at += n


_MEMO: dict[str, torch.Tensor] = {}
"""Maps already recomputed and checked in this process, by the SHA-256 of the artefact file
they were checked against (a chapter asks for Table 2 more than once)."""


CACHE = "init_maps"
"""The cache's subfolder for recomputed maps (:func:`lstpe.runtime.cache_dir`)."""


def _cache_file(sha: str) -> Path:
    return cache_dir() / CACHE / f"{sha}.pt"


def digest(maps: torch.Tensor) -> str:
    """The SHA-256 of a tensor's dtype, shape and values (not of the file that holds it)."""
    h = hashlib.sha256(f"{maps.dtype} {tuple(maps.shape)}\n".encode())
    h.update(maps.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


@lru_cache(maxsize=1)
def producer() -> dict[str, str]:
    """What produces the maps this code caches: torch's version, the SHA-256 of the sources
    that build and run the model (``lstpe/nn/*.py``, ``lstpe/training/task.py``) and that of
    the 108 validation puzzles. A cached file of another producer is recomputed."""
    import lstpe

    root = Path(lstpe.__file__).resolve().parent
    src = hashlib.sha256()
    for f in sorted([*(root / "nn").glob("*.py"), root / "training" / "task.py"]):
        src.update(f.name.encode() + b"\0" + f.read_bytes())
    return {"torch": torch.__version__, "code": src.hexdigest(),
            "puzzles": digest(validation_split().x)}


def _fits(run: res.Run, maps: object) -> bool:
    """Whether ``maps`` can be ``run``'s maps at initialisation: a float16 (M, 108, L, 16, 16)
    tensor of finite entries in [0, 1], every row summing to 1 within :data:`ROW_ATOL`, whose
    first :data:`HEAD` puzzles agree with the run's witness within :data:`MAP_ATOL` (NaN
    never does)."""
    if not (torch.is_tensor(maps) and maps.dtype == torch.float16 and maps.dim() == 5
            and maps.shape[1] == _n_val()):
        return False
    m = maps.float()
    if not (bool(torch.isfinite(m).all()) and float(m.min()) >= 0 and float(m.max()) <= 1):
        return False
    if not float((m.sum(-1) - 1).abs().max()) <= ROW_ATOL:
        return False
    return _witness_gap(run, maps) <= MAP_ATOL  # inf for other models or blocks


def _from_disk(run: res.Run) -> torch.Tensor | None:
    """The cached maps of ``run``, if its artefacts' file is cached as this code writes it:
    a record beside it (``.json``) naming this file, this :func:`producer` and the digest of
    the maps' values, and maps that :func:`_fits` the run; else None (missing, unreadable,
    of another producer, altered or not fitting: the maps are recomputed, and written
    again). The caller still checks the witnesses against this code (:func:`witness_errors`)."""
    sha = _sha(run)
    if not sha:
        return None
    path = _cache_file(sha)
    try:
        if not path.is_file():
            return None
        rec = json.loads(path.with_suffix(".json").read_text())
        maps = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 (a damaged or missing cache file of any kind: recomputed)
        return None
    if not (isinstance(rec, dict) and rec.get("artifacts_sha256") == sha
            and rec.get("producer") == producer() and torch.is_tensor(maps)
            and rec.get("maps_sha256") == digest(maps)):
        return None
    return maps if _fits(run, maps) else None


@lru_cache(maxsize=1)
def _n_val() -> int:
    return len(validation_split().x)


def _to_disk(sha: str, maps: torch.Tensor) -> None:
    """Cache ``maps`` (atomically, then its record; a cache folder that cannot be written is
    passed over)."""
    try:
        path = _cache_file(sha)
        path.parent.mkdir(parents=True, exist_ok=True)
        maps = maps.clone()  # a clone: not the storage of the whole batch
        res.save_torch(maps, path)
        res.save_json({"artifacts_sha256": sha, "maps_sha256": digest(maps),
                       "producer": producer(), "written_at": utc_now(),
                       "what": "attention maps at initialisation (lstpe.experiments.init_maps)"},
                      path.with_suffix(".json"))
    except (OSError, RuntimeError):
        pass


def _sha(run: res.Run) -> str | None:
    """The SHA-256 of the run's artefact file as its manifest records it (verified on load)."""
    return ((run.manifest.get("files") or {}).get("artifacts.pt") or {}).get("sha256")


def _witness_gap(run: res.Run, maps: torch.Tensor) -> float:
    """Largest |difference| between ``maps`` of the first :data:`HEAD` puzzles and the run's
    stored witness of them (inf where their shapes differ, NaN where either holds a NaN)."""
    head, kept = maps[:, :HEAD].float(), run.artifacts[HEAD_KEY].float()
    if head.shape != kept.shape:
        return float("inf")
    gap = (head - kept).abs()
    return float("nan") if bool(gap.isnan().any()) else float(gap.max())


def _check_witness(run: res.Run, pe: torch.Tensor, head: torch.Tensor) -> None:
    """Refuse ``run`` if this code's initial PE is not its ``pe_init`` exactly, or the maps of
    its first puzzles (``head``: those puzzles or more) not its witness within
    :data:`MAP_ATOL`."""
    arts, where = run.artifacts, _where(run)
    if _pe_differs(arts["pe_init"], pe):
        raise InitMismatch(f"{where}: this code's initial PE differs from the stored pe_init, "
                           "so its attention maps at initialisation cannot be recomputed; "
                           "restore lstpe's initialisation (git log lstpe/nn)")
    gap = _witness_gap(run, head)
    if not gap <= MAP_ATOL:
        raise InitMismatch(f"{where}: the attention maps this code computes at initialisation "
                           f"differ from the stored ones of the first {HEAD} puzzles (by "
                           f"{gap:.3g}, more than {MAP_ATOL}); "
                           "restore lstpe's initialisation (git log lstpe/nn)")


def _check(run: res.Run, pe: torch.Tensor, maps: torch.Tensor) -> None:
    _check_witness(run, pe, maps)
    if not bool(torch.isfinite(maps).all()):
        raise InitMismatch(f"{_where(run)}: the attention maps this code computes at "
                           "initialisation are not all finite, so they are not the ones it "
                           "was trained from; restore lstpe's initialisation (git log lstpe/nn)")
    run.artifacts[KEY] = maps
    sha = _sha(run)
    if sha:
        _MEMO[sha] = maps
        _to_disk(sha, maps)
