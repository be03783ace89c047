"""``lstpe batch``: run a chapter over a parameter grid with papermill and collect its tables.

Value syntax (``--grid key=v1,v2,...``, ``-p key=value``): :mod:`lstpe.chapters.values` (a Python
literal of plain values, or a bare word). Why not papermill's YAML parameter files: they hold
one point each, and a grid is what ``batch`` is for; every malformed value (a set, bytes...
too) is an error that names the bad text, before anything runs.

Each point runs in a fresh folder ``out/<point>/``; ``out/collected.csv`` has the rows of every
table with the point's parameters and status, and one row for a point that wrote no table;
``out/evidence.csv`` the evidence table of the paper's claims
(:func:`lstpe.evidence.tables.evidence_from_collected`) where the points saved per-model
accuracies (``pe, seed, accuracy, split``).

``batch`` never replaces a file it did not write: it records every file it writes in ``--out``
(the point notebooks, ``summary.csv``, ``collected.csv``) with its SHA-256 in its own index
``out/.lstpe-batch.json`` (:data:`BATCH_INDEX`), and marks its point folders
(:data:`POINT_MARKER`); before writing anything it refuses (naming them) the files and folders
it would replace that are not recorded there, or that were changed since it wrote them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

# --------------------------------------------------------------------------- grid points


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of the grid, in the order the keys and values were given."""
    keys = list(grid)
    combos = itertools.product(*(grid[k] for k in keys))
    return [dict(zip(keys, combo, strict=True)) for combo in combos]


def _slug(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    text = re.sub(r"[\[\]{}()'\" ]", "", text).replace(",", "+")
    text = re.sub(r"[^A-Za-z0-9._+\-]", "-", text)
    return text or "empty"


def point_name(point: dict[str, Any], max_len: int = 120) -> str:
    """A file-name-safe name of a grid point: ``seeds=2235__sigmas=0.1``.

    Long names are cut and suffixed with a short hash of the full point.
    """
    name = "__".join(f"{k}={_slug(v)}" for k, v in point.items()) or "default"
    if len(name) > max_len:
        digest = hashlib.sha1(json.dumps(point, sort_keys=True, default=str).encode())
        name = name[:max_len - 9] + "~" + digest.hexdigest()[:8]
    return name


# --------------------------------------------------------------------------- running


def kernel_language(kernel: str) -> str:
    """The language of the installed Jupyter kernel ``kernel`` (``python`` for ``python3``).

    Raises:
        ValueError: no such kernel (listing the installed ones).
    """
    from jupyter_client.kernelspec import NoSuchKernel, find_kernel_specs, get_kernel_spec

    try:
        return get_kernel_spec(kernel).language
    except NoSuchKernel:
        raise ValueError(f"unknown Jupyter kernel {kernel!r}; installed kernels: "
                         f"{', '.join(sorted(find_kernel_specs())) or '(none)'}") from None


def notebook_parameters(notebook: str | Path, kernel: str | None = None) -> dict[str, Any]:
    """The parameters declared in a notebook's ``parameters`` cell (papermill's inspection).

    ``kernel``: the Jupyter kernel that will run the notebook; its name and language choose
    the parameter syntax, also for a notebook without a kernelspec (None: the notebook's own
    kernelspec, which must then exist).

    Raises:
        FileNotFoundError: no such notebook.
        ValueError: the file is not a notebook (naming it), or an unknown kernel.
    """
    import nbformat
    from papermill.translators import papermill_translators
    from papermill.utils import nb_kernel_name, nb_language

    notebook = Path(notebook)
    if not notebook.is_file():
        raise FileNotFoundError(f"notebook not found: {notebook}")
    language = kernel_language(kernel) if kernel is not None else None
    try:
        nb = nbformat.read(notebook, as_version=4)
        cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        if not cells:
            return {}
        translator = papermill_translators.find_translator(nb_kernel_name(nb, kernel),
                                                           nb_language(nb, language))
        try:
            found = translator.inspect(cells[0])
        except NotImplementedError:  # a language without parameter inspection
            return {}
        return {p.name: p._asdict() for p in found}
    except Exception as e:  # noqa: BLE001 - JSON, schema and papermill errors alike
        raise ValueError(f"{notebook} is not a Jupyter notebook that papermill can read "
                         f"({type(e).__name__}: {' '.join(str(e).split())[:200]})") from None


POINT_MARKER = ".lstpe-batch-point"
"""File that marks a folder ``out/<point>/`` as written by ``lstpe batch`` (a rerun may
replace it)."""

BATCH_INDEX = ".lstpe-batch.json"
"""``lstpe batch``'s record of the files it wrote in ``--out``: ``{"files": {name: sha256}}``
(``null`` while a file is being written). A rerun replaces only the files recorded here whose
content is still what it wrote."""

_OWN_FILES = ("summary.csv", "collected.csv", "evidence.csv")


def _cell(value: Any) -> Any:
    return value if isinstance(value, (int, float, str, bool)) or value is None \
        else json.dumps(value)


def collect_results(out: Path, points: Sequence[dict[str, Any]], names: Sequence[str],
                    statuses: Sequence[str] | None = None,
                    params: dict[str, Any] | None = None) -> pd.DataFrame | None:
    """Concatenate every CSV under ``out/<point>/`` with the point's parameters as columns.

    The parameters are the fixed ``params`` (``-p``) and the point's grid values; their
    columns are named by their key, or ``grid_<key>`` if a CSV already has a column of that
    name. More columns: ``point`` (the point's name), ``status`` (``ok`` or ``failed:
    ...``, if ``statuses`` are given) and ``csv`` (the CSV's path relative to its point
    folder); each is named ``batch_<name>`` if a CSV has a column of that name. A point
    without any CSV gets one row (grid values, point, status; ``csv`` empty). Integer columns
    stay integers (nullable where a point has no value). Returns None if there are no points.
    """
    statuses = list(statuses) if statuses is not None else [None] * len(points)
    frames: list[tuple[dict[str, Any], str, str | None, str | None, pd.DataFrame]] = []
    for point, name, status in zip(points, names, statuses, strict=True):
        folder = out / name
        csvs = sorted(folder.rglob("*.csv")) if folder.is_dir() else []
        for csv in csvs:
            frames.append((point, name, status, str(csv.relative_to(folder)),
                           pd.read_csv(csv)))
        if not csvs:
            frames.append((point, name, status, None, pd.DataFrame(index=[0])))
    if not frames:
        return None
    taken = set().union(*(set(f.columns) for *_, f in frames))
    meta = {m: m if m not in taken else f"batch_{m}" for m in ("point", "status", "csv")}
    parts = []
    ints: dict[str, bool] = {}
    for point, name, status, table, frame in frames:
        frame = frame.copy()
        for col in frame.columns:
            ok = pd.api.types.is_integer_dtype(frame[col]) or frame[col].isna().all()
            ints[col] = ints.get(col, True) and ok
        for key, value in {**(params or {}), **point}.items():
            col = f"grid_{key}" if key in taken else key
            frame[col] = _cell(value)
        frame[meta["point"]] = name
        if status is not None:
            frame[meta["status"]] = status
        frame[meta["csv"]] = table
        parts.append(frame)
    got = pd.concat(parts, ignore_index=True)
    for col, is_int in ints.items():
        if is_int and not got[col].isna().all() and got[col].dtype.kind == "f":
            got[col] = got[col].astype("Int64")
    return got


def _read_index(out: Path) -> dict[str, str | None]:
    """The files :data:`BATCH_INDEX` records (ValueError naming it if it is not one)."""
    path = out / BATCH_INDEX
    if not path.exists():
        return {}
    try:
        files = json.loads(path.read_text())["files"]
        if not all(isinstance(k, str) and (v is None or isinstance(v, str))
                   for k, v in files.items()):
            raise ValueError("not a map of names to digests")
        return dict(files)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path} is not lstpe batch's index ({type(e).__name__}: {e}); "
                         "move it away or use another --out") from None


def _write_index(out: Path, files: dict[str, str | None]) -> None:
    from lstpe.store.storage import atomic_write

    files = {k: v for k, v in files.items() if v is None or (out / k).exists()}
    text = json.dumps({"files": dict(sorted(files.items()))}, indent=1) + "\n"
    atomic_write(out / BATCH_INDEX, lambda p: p.write_text(text))


def _ours(out: Path, name: str, index: dict[str, str | None]) -> bool:
    """``out/name`` is absent, or a file lstpe batch wrote (recorded, content unchanged)."""
    from lstpe.store.storage import sha256_file

    path = out / name
    if not path.exists() and not path.is_symlink():
        return True
    if name not in index or not path.is_file() or path.is_symlink():
        return False
    return index[name] is None or sha256_file(path) == index[name]


def foreign_paths(out: Path, names: Sequence[str]) -> list[str]:
    """What a batch of these point names would replace in ``out`` that it did not write:
    point folders without :data:`POINT_MARKER` (an empty folder is fine), point notebooks,
    ``summary.csv`` and ``collected.csv`` not recorded in :data:`BATCH_INDEX` or changed
    since."""
    index = _read_index(out)
    bad = []
    for name in names:
        folder = out / name
        if (folder.exists() or folder.is_symlink()) and not (
                folder.is_dir() and not folder.is_symlink()
                and ((folder / POINT_MARKER).is_file() or not any(folder.iterdir()))):
            bad.append(f"{name}/")
        if not _ours(out, f"{name}.ipynb", index):
            bad.append(f"{name}.ipynb")
    bad += [f for f in _OWN_FILES if not _ours(out, f, index)]
    return bad


def _fresh_point_folders(out: Path, names: Sequence[str]) -> dict[str, str | None]:
    """Refuse (naming them) the paths of ``out`` this batch would replace that lstpe batch did
    not write (:func:`foreign_paths`); then remove the previous batch's results of these
    points (their folders and notebooks) and its ``collected.csv`` / ``summary.csv``, so
    nothing stale is collected. Returns the updated index."""
    bad = foreign_paths(out, names)
    if bad:
        raise ValueError(f"{out} holds {', '.join(bad)}: each was not written by lstpe batch "
                         f"(or was changed since; see {BATCH_INDEX}); move them away or use "
                         "another --out (nothing was written)")
    index = _read_index(out)
    for name in names:
        shutil.rmtree(out / name, ignore_errors=True)
        (out / f"{name}.ipynb").unlink(missing_ok=True)
    for stale in _OWN_FILES:
        (out / stale).unlink(missing_ok=True)
    _write_index(out, index)
    return index


def _record(out: Path, index: dict[str, str | None], name: str, done: bool) -> None:
    """Record ``out/name`` in the index: before writing it (``done=False``: being written)
    and after (its SHA-256)."""
    from lstpe.store.storage import sha256_file

    path = out / name
    if not done:
        index[name] = None
    elif path.is_file():
        index[name] = sha256_file(path)
    else:
        index.pop(name, None)
    _write_index(out, index)


def _results_dir(value: Any) -> dict[str, Any]:
    """``{"results_dir": <absolute folder>}`` for a ``results_dir`` given to ``lstpe batch``
    (relative to the folder lstpe batch runs in, not the notebook's, where papermill runs it);
    ``{}`` for None or an empty value.

    Raises:
        ValueError: the folder does not exist or is a file (named).
    """
    if value is None or value == "":
        return {}
    folder = Path(str(value)).expanduser().resolve()
    if not folder.is_dir():
        how = "is a file" if folder.exists() else "does not exist"
        raise ValueError(f"results_dir {str(value)!r} {how} (resolved against "
                         f"{Path.cwd()}: {folder})")
    return {"results_dir": str(folder)}


def run_batch(notebook: str | Path, grid: dict[str, list[Any]], params: dict[str, Any],
              out: str | Path, kernel: str = "python3", progress: bool = False) -> pd.DataFrame:
    """Execute ``notebook`` with papermill at every grid point; collect the result tables.

    Every point gets a fresh folder ``out/<point>/`` (the previous batch's folder of that
    point is replaced) and writes ``out/<point>.ipynb``; ``results_out=out/<point>/`` is passed
    if the notebook declares a ``results_out`` parameter. Writes ``out/summary.csv`` (one row
    per point: status, CSV files, seconds) and ``out/collected.csv`` (see
    :func:`collect_results`: every table row with the point's parameters and status). Returns
    the summary. ``kernel`` runs every point, whatever kernelspec the notebook has (or lacks).
    Files of ``out`` that lstpe batch did not write are never replaced (module docstring).

    Raises:
        FileNotFoundError: no such notebook.
        ValueError: not a notebook, an unknown kernel, a grid or ``-p`` key the notebook does
            not declare, a key given in both, ``results_out`` given by hand, or a point folder,
            point notebook, ``summary.csv`` or ``collected.csv`` in ``out`` that lstpe batch
            did not write (all named; nothing is written then).
    """
    import papermill as pm

    from lstpe.store import results as res

    inside = [f for f in (Path(out).resolve(), *Path(out).resolve().parents)
              if (f / "manifest.json").is_file()]  # never into a stored run (pack carries it)
    if inside:
        raise ValueError(f"--out {out} lies inside the run folder {inside[0]}: choose another")
    notebook = Path(notebook)
    declared = notebook_parameters(notebook, kernel)
    language = kernel_language(kernel)
    both = sorted(set(grid) & set(params))
    if both:
        raise ValueError(f"parameter(s) {', '.join(both)} given both in --grid and -p")
    for key in [*grid, *params]:
        if key == "results_out":
            raise ValueError("results_out is set by lstpe batch (out/<point>/); do not pass it")
        if key not in declared:
            raise ValueError(
                f"notebook {notebook} has no parameter {key!r}; its parameters: "
                f"{', '.join(declared) or '(none: add a cell tagged parameters)'}"
            )
    params = {**params, **_results_dir(params.get("results_dir"))}
    grid = {**grid, **({"results_dir": [_results_dir(v)["results_dir"] for v in
                                        grid["results_dir"]]} if "results_dir" in grid else {})}
    out = res.ensure_writable_dir(Path(out).resolve())
    points = grid_points(grid)
    names: list[str] = []
    for p in points:
        name = point_name(p)
        if name in names:  # two values with the same slug
            name = f"{name}~{len(names)}"
        names.append(name)
    index = _fresh_point_folders(out, names)
    rows = []
    for i, (point, name) in enumerate(zip(points, names, strict=True)):
        parameters = {**params, **point}
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / POINT_MARKER).write_text(json.dumps(parameters, default=str) + "\n")
        if "results_out" in declared:
            parameters["results_out"] = str(out / name) + "/"
        target = out / f"{name}.ipynb"
        print(f"[{i + 1}/{len(points)}] {name} ...", flush=True)
        t0 = time.perf_counter()
        status = "ok"
        _record(out, index, target.name, done=False)
        try:
            pm.execute_notebook(str(notebook), str(target), parameters=parameters,
                                kernel_name=kernel, language=language,
                                cwd=str(notebook.resolve().parent), progress_bar=progress)
        except Exception as e:  # noqa: BLE001 - a failed point is reported, others go on
            what = f"{getattr(e, 'ename', '')}: {getattr(e, 'evalue', '')}" \
                if hasattr(e, "ename") else f"{type(e).__name__}: {e}"
            status = "failed: " + " ".join(what.split())[:200]
            print(f"    {status}", flush=True)
        _record(out, index, target.name, done=True)
        n_csv = len(list((out / name).rglob("*.csv")))
        rows.append({"point": name, "status": status, "csv_files": n_csv,
                     "seconds": round(time.perf_counter() - t0, 1), "notebook": target.name,
                     **{k: _cell(v) for k, v in point.items() if k not in
                        ("point", "status", "csv_files", "seconds", "notebook")}})
    summary = pd.DataFrame(rows)
    collected = collect_results(out, points, names, summary["status"].tolist(), params)
    from lstpe.evidence.tables import evidence_from_collected

    evidence = evidence_from_collected(collected)  # per-model accuracies -> claims' evidence
    for table, file in ((summary, "summary.csv"), (collected, "collected.csv"),
                        (evidence, "evidence.csv")):
        if table is not None:
            _record(out, index, file, done=False)
            res.save_table(table, out / file)
            _record(out, index, file, done=True)
    print()
    print(summary.to_string(index=False))
    n_failed = int((summary["status"] != "ok").sum())
    print(f"\ncollected {len(collected) if collected is not None else 0} rows from "
          f"{summary['csv_files'].sum()} CSV files -> {out / 'collected.csv'}"
          + ("" if "results_out" in declared else
             " (the notebook declares no results_out parameter: no tables)"))
    if n_failed:
        print(f"lstpe: {n_failed} of {len(points)} point(s) failed (see the status column)",
              file=sys.stderr)
    return summary


