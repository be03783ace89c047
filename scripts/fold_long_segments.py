"""Fold each long model's published segment folders into its one model folder, with proof.

    python scripts/fold_long_segments.py [--results results] [--dry-run]

Before this form, a long model was stored as one folder per 200 epochs::

    results/long/<run>/<pe>/<seed>/e0200/   history.csv, artifacts.pt, manifest.json
    results/long/<run>/<pe>/<seed>/e0400/   ...

Now the model folder itself holds them (:mod:`lstpe.store.model`): one ``history.csv``,
``snapshots/eNNNN.pt`` and one manifest keeping every segment's manifest verbatim. A model
folder already in that form with segment folders after it (segments published by older code)
gets those appended.

For each model, the script reads the old segments as the old code did (each verified, the
chain checked), writes the new form into a temporary folder, reads it back with the package's
reader, and proves, before touching the store:

* the history is the same table (values and dtypes), row for row;
* the PE snapshots and attention maps are equal tensors at the same epochs;
* every segment's manifest is kept unchanged;
* every old file's content is held: each segment's ``history.csv`` bytes (cut from the new
  file), its ``artifacts.pt`` (the snapshot file, byte for byte) and its manifest.

Only then are the new files moved into the model folder and the old segment folders deleted;
a model whose proof fails is left as it was and named, and the script exits 1. Prints one line
per model and the count.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from lstpe.experiments import long_units as lu
from lstpe.store import model as mf
from lstpe.store import results as res


def old_segments(folder: Path) -> list[Path]:
    """The segment folders (``eNNNN``) under ``folder``, in epoch order."""
    return sorted(p for p in folder.glob("e[0-9][0-9][0-9][0-9]") if p.is_dir())


def read_old(folder: Path, key: str, prev_sha: str | None, prev_to: int) -> list[res.Run]:
    """The old segments, each verified, the chain checked from (``prev_sha``, ``prev_to``)."""
    runs = []
    for p in old_segments(folder):
        r = res.load(p)
        info = r.manifest.get("long") or {}
        if info.get("from_epoch") != prev_to or info.get("previous") != prev_sha or \
                info.get("unit") != key or info.get("to_epoch") != int(p.name[1:]):
            raise ValueError(f"{p} does not follow the segment before it")
        prev_sha, prev_to = r.manifest[res.MANIFEST_HASH_KEY], info["to_epoch"]
        runs.append(r)
    return runs


def drop_folded(folder: Path) -> None:
    """Delete the old segment folders the model folder already holds byte for byte (a run of
    this script killed while it deleted them); one it holds otherwise stops the fold."""
    man = mf.read(folder)
    data, held = mf.history_bytes(folder, man), {s.checksum: s for s in mf.segments(folder, man)}
    for p in old_segments(folder):
        seg = held.get(res.read_manifest(p)[res.MANIFEST_HASH_KEY])
        if seg is None:
            continue
        if mf.segment_bytes(data, seg) != (p / "history.csv").read_bytes() or \
                (folder / seg.snapshot).read_bytes() != (p / "artifacts.pt").read_bytes():
            raise ValueError(f"{p} is folded into {folder} already, but with other bytes")
        shutil.rmtree(p)


def joined(hists: list[pd.DataFrame], arts: list[dict[str, Any]]) -> dict[str, Any]:
    """What the old ``load_long`` returned of the segments, for comparison."""
    atts = [a for a in arts if "val_attention" in a]
    return {"history": pd.concat(hists, ignore_index=True),
            "pe_epochs": [e for a in arts for e in a["pe_epochs"]],
            "pe": torch.cat([a["pe"] for a in arts]),
            "attention_epochs": [e for a in atts for e in a["attention_epochs"]],
            "val_attention": torch.cat([a["val_attention"] for a in atts]) if atts else None}


def proof(before: dict[str, Any], after: dict[str, Any], runs: list[res.Run],
          tmp: Path) -> list[str]:
    """What differs between the old segments and the folded folder ``tmp``; [] if nothing."""
    out = []
    hb, ha = before["history"], after["history"]
    if not (hb.equals(ha) and list(hb.dtypes) == list(ha.dtypes)):
        out.append("history")
    for k in ("pe_epochs", "attention_epochs"):
        if list(before[k]) != list(after[k]):
            out.append(k)
    for k in ("pe", "val_attention"):
        x, y = before[k], after[k]
        if (x is None) != (y is None) or (x is not None and not (
                x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y))):
            out.append(k)
    man = mf.read(tmp)
    out += mf.segment_problems(tmp, man)
    segs = mf.segments(tmp, man)[-len(runs):]
    data = mf.history_bytes(tmp, man)
    for r, seg in zip(runs, segs, strict=True):
        if seg.manifest != r.manifest:
            out.append(f"{r.path}: manifest")
        if mf.segment_bytes(data, seg) != (r.path / "history.csv").read_bytes():
            out.append(f"{r.path}: history.csv bytes")
        if (tmp / seg.snapshot).read_bytes() != (r.path / "artifacts.pt").read_bytes():
            out.append(f"{r.path}: artifacts.pt bytes")
    return out


def fold(folder: Path, key: str, dry_run: bool) -> tuple[str, int]:
    """Fold ``folder``'s segment folders; (a line, how many segments it folded)."""
    have = lu.load_model(folder, key)  # a folder already folded, or None
    if have:
        drop_folded(folder)
    prev = mf.segments(folder)[-1].checksum if have else None
    runs = read_old(folder, key, prev, have["epoch"] if have else 0)
    if not runs:
        return f"{key}: nothing to fold", 0
    tmp = folder.parent / f".{folder.name}.fold.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name in ("history.csv", "manifest.json"):
        if (folder / name).exists():
            shutil.copy2(folder / name, tmp / name)
    if (folder / "snapshots").exists():
        shutil.copytree(folder / "snapshots", tmp / "snapshots")
    for r in runs:
        mf.append_segment(tmp, r.path, key)
    k = len(runs)
    arts = [res.load_torch(tmp / s.snapshot) for s in mf.segments(tmp)[:-k]]
    before = joined(([have["history"]] if have else []) + [r.history for r in runs],
                    arts + [r.artifacts for r in runs])
    diff = proof(before, lu.load_model(tmp, key), runs, tmp)
    if diff:
        shutil.rmtree(tmp)
        raise ValueError(f"{key}: the folded form differs in {diff}; left as it was")
    if dry_run:
        shutil.rmtree(tmp)
        return f"{key}: {k} segment(s) would fold, identical", k
    (folder / "snapshots").mkdir(exist_ok=True)
    for s in mf.segments(tmp)[-k:]:
        (tmp / s.snapshot).replace(folder / s.snapshot)
    (tmp / "history.csv").replace(folder / "history.csv")
    (tmp / "manifest.json").replace(folder / "manifest.json")
    shutil.rmtree(tmp)
    again = lu.load_model(folder, key)
    if proof(before, again, runs, folder):
        raise ValueError(f"{key}: the folded folder differs once moved; the old segment "
                         "folders are kept")
    for r in runs:
        shutil.rmtree(r.path)
    return (f"{key}: {k} segment(s) folded to epoch {again['epoch']}, "
            f"{len(before['history'])} history rows and {len(before['pe_epochs'])} PE "
            "snapshots identical, every old file held"), k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=None, help="the results folder (default: results/)")
    ap.add_argument("--dry-run", action="store_true", help="prove, change nothing")
    args = ap.parse_args()
    root = lu.long_root(args.results)
    keys = sorted({str(p.parent.relative_to(root)) for p in root.rglob("e[0-9][0-9][0-9][0-9]")
                   if p.is_dir() and not p.relative_to(root).parts[0].startswith(("_", "."))})
    models = segs = failed = 0
    for key in keys:
        try:
            line, n = fold(root / key, key, args.dry_run)
        except (OSError, ValueError) as e:
            print(f"FAILED {e}", flush=True)
            failed += 1
            continue
        models, segs = models + (n > 0), segs + n
        print(line, flush=True)
    print(f"{models} model(s), {segs} segment(s) {'provable' if args.dry_run else 'folded'}, "
          f"identical; {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
