"""The ``lstpe`` command line: train PEs, sweep sigmas, run notebooks over a parameter grid.

Subcommands::

    lstpe train --preset preview --pe learn-0.2 --pe 2d-fixed --out runs/demo
    lstpe sweep --preset paper --sigmas 0.1 0.2 0.5 --out runs/sweep
    lstpe batch book/chapter.ipynb --grid seeds=[2235],[6312] -p scale='"preview"' --out runs/nb

``train`` and ``sweep`` build :func:`lstpe.train.preset` with the given overrides and run
:func:`lstpe.train.train` on ``--out``. Before any training they check every value (device,
data, ``--n-train``, seeds, learning rate...) and the output folder
(:func:`lstpe.results.check_run_dir`: a writable folder that holds nothing, checkpoints of this
configuration, or this finished run), and lock it (:class:`lstpe.results.RunLock`: a second
process training into the same ``--out`` is refused). Rerunning the same command on the same
``--out`` resumes from the last checkpoint (``--checkpoint-every``); a finished run with the
same configuration is not retrained, its results are shown again; a finished run of another
configuration is never overwritten. Models whose loss or logits became non-finite are named in
a warning and left out of the printed table (``--include-diverged`` keeps them).

``batch`` executes a notebook with papermill once per point of a parameter grid. Value syntax
(for ``--grid key=v1,v2,...`` and ``-p key=value``):

* a value is read as a Python literal (``ast.literal_eval``): ``0.1``, ``2235``, ``"text"``,
  ``[2235, 6312]``, ``True``, ``None``; JSON's ``true``/``false``/``null`` are accepted too;
* a bare word made of letters, digits and ``_ . - + / :`` that is not a literal is a string:
  ``preview``, ``2d-fixed``, ``learn-0.2``;
* ``--grid`` splits its values on commas *outside* brackets and quotes, so
  ``seeds=[2235],[6312]`` is two points (``[2235]`` and ``[6312]``) and
  ``pes=["a","b"],["c"]`` is two points; ``-p`` never splits (``-p seeds=[1,2]`` is one list).

Anything else (unbalanced brackets, spaces in a bare word, an empty value, a missing ``=``)
is an error that names the bad text. Each point runs in a fresh folder ``out/<point>/`` (a
rerun replaces the previous batch's folders of the same points); ``out/collected.csv`` has the
rows of every table with the point's parameters and status, and one row for a point that
wrote no table. Every exit status: 0 success, 1 some notebooks failed, 2 bad input (unknown
preset, PE, optimizer, grid syntax, missing notebook, an output folder in use or holding
another run...), 130 interrupted.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import itertools
import json
import math
import re
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

VALUE_SYNTAX = """\
value syntax (--grid KEY=V1,V2,... and -p KEY=VALUE):
  a Python literal           0.1  2235  "text"  [2235, 6312]  True  None  (JSON true/false/null too)
  a bare word (a string)     preview  2d-fixed  learn-0.2  (letters, digits and _.-+/:)
  --grid splits on commas outside brackets and quotes:
      --grid seeds=[2235],[6312]    two points, seeds=[2235] and seeds=[6312]
      --grid sigmas=0.1,0.5         two points
  -p never splits:  -p seeds=[1,2]  is one list
  quote for your shell:  --grid 'pes=["learn-0.1"],["2d-fixed"]'
"""

_BARE_WORD = re.compile(r"^[A-Za-z0-9_.+\-/:]+$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JSON_WORDS = {"true": True, "false": False, "null": None}


# --------------------------------------------------------------------------- value syntax


def parse_value(text: str) -> Any:
    """One parameter value: a Python literal, a JSON word, or a bare word (a string).

    Examples: ``"0.1" -> 0.1``, ``"[2235]" -> [2235]``, ``"preview" -> "preview"``,
    ``"'a b'" -> "a b"``, ``"true" -> True``.

    Raises:
        ValueError: empty text, or text that is neither a literal nor a bare word.
    """
    s = text.strip()
    if not s:
        raise ValueError(f"empty parameter value in {text!r}")
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if s in _JSON_WORDS:
        return _JSON_WORDS[s]
    if _BARE_WORD.match(s):
        return s
    raise ValueError(
        f"cannot parse parameter value {text!r}: use a Python literal (0.1, [2235], 'text', "
        "True) or a bare word of letters, digits and _.-+/: (preview, learn-0.2)"
    )


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` on ``sep`` where it is outside brackets and quotes.

    ``"[1,2],[3]" -> ["[1,2]", "[3]"]``; ``"'a,b',c" -> ["'a,b'", "c"]``.

    Raises:
        ValueError: unbalanced brackets or an unterminated quote, naming the text.
    """
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    quote: str | None = None
    parts, cur = [], []
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i:i + 2])
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            stack.append(c)
        elif c in pairs:
            if not stack or stack.pop() != pairs[c]:
                raise ValueError(f"unbalanced {c!r} in {text!r}")
        elif c == sep and not stack:
            parts.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    if quote:
        raise ValueError(f"unterminated quote {quote} in {text!r}")
    if stack:
        raise ValueError(f"unclosed {stack[-1]!r} in {text!r}")
    parts.append("".join(cur))
    return parts


def _split_key(spec: str, flag: str) -> tuple[str, str]:
    key, eq, value = spec.partition("=")
    key = key.strip()
    if not eq:
        raise ValueError(f"{flag} {spec!r} has no '='; write {flag} key=value")
    if not _KEY.match(key):
        raise ValueError(f"{flag} {spec!r}: {key!r} is not a valid parameter name")
    return key, value


def parse_grid(specs: Sequence[str]) -> dict[str, list[Any]]:
    """``["seeds=[2235],[6312]", "sigmas=0.1,0.5"]`` -> ``{"seeds": [[2235], [6312]], ...}``.

    Raises:
        ValueError: missing ``=``, bad key, duplicate key, or an unparsable value.
    """
    grid: dict[str, list[Any]] = {}
    for spec in specs:
        key, text = _split_key(spec, "--grid")
        if key in grid:
            raise ValueError(f"--grid key {key!r} is given twice")
        try:
            grid[key] = [parse_value(v) for v in split_top_level(text)]
        except ValueError as e:
            raise ValueError(f"--grid {spec!r}: {e}") from None
    return grid


def parse_params(specs: Sequence[str]) -> dict[str, Any]:
    """``["scale=preview", "epochs=3"]`` -> ``{"scale": "preview", "epochs": 3}`` (no splitting).

    Raises:
        ValueError: missing ``=``, bad or duplicate key, or an unparsable value.
    """
    out: dict[str, Any] = {}
    for spec in specs:
        key, text = _split_key(spec, "-p")
        if key in out:
            raise ValueError(f"-p key {key!r} is given twice")
        try:
            out[key] = parse_value(text)
        except ValueError as e:
            raise ValueError(f"-p {spec!r}: {e}") from None
    return out


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


# --------------------------------------------------------------------------- train / sweep


def build_config(preset_name: str, model: dict[str, int] | None = None, **overrides: Any):
    """``lstpe.train.preset(preset_name, **overrides)`` with optional ModelConfig overrides,
    checked by :func:`validate_config`.

    None values are ignored (the preset's value is kept); learning rate and weight decay
    follow the optimizer unless given (see :func:`lstpe.train.preset`).

    Raises:
        ValueError: unknown preset, PE, optimizer, or an invalid value (naming it).
    """
    from lstpe.train import preset

    cfg = preset(preset_name, **{k: v for k, v in overrides.items() if v is not None})
    model = {k: v for k, v in (model or {}).items() if v is not None}
    if model:
        cfg = replace(cfg, model=replace(cfg.model, **model))
    validate_config(cfg)
    return cfg


SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
"""Seeds must fit in a signed 64-bit integer (torch generators)."""


def validate_config(cfg) -> None:
    """Check the values :class:`lstpe.train.TrainConfig` itself does not (yet) check.

    Raises:
        ValueError: naming the value: a seed outside 64 bits, a non-finite or non-positive
            learning rate, a negative or non-finite weight decay, ``max_models`` < 1,
            ``checkpoint_every`` < 0, or ``n_train`` < 1.
    """
    for s in cfg.seeds:
        if not SEED_MIN <= int(s) <= SEED_MAX:
            raise ValueError(f"seed {s} does not fit in 64 bits (seeds must be integers in "
                             f"{SEED_MIN}..{SEED_MAX})")
    if not (math.isfinite(cfg.lr) and cfg.lr > 0):
        raise ValueError(f"the learning rate (--lr) must be a finite number > 0, got {cfg.lr}")
    if not (math.isfinite(cfg.weight_decay) and cfg.weight_decay >= 0):
        raise ValueError("the weight decay (--weight-decay) must be a finite number >= 0, got "
                         f"{cfg.weight_decay}")
    if cfg.max_models is not None and cfg.max_models < 1:
        raise ValueError(f"--max-models must be >= 1, got {cfg.max_models}")
    if cfg.checkpoint_every is None or cfg.checkpoint_every < 0:
        raise ValueError("--checkpoint-every must be >= 0 (0 = no checkpoints), got "
                         f"{cfg.checkpoint_every}")
    if cfg.n_train is not None and cfg.n_train < 1:
        raise ValueError(f"--n-train must be >= 1, got {cfg.n_train}")


def summary_table(history: pd.DataFrame, pes: Sequence[str] | None = None,
                  include_diverged: bool = False) -> pd.DataFrame:
    """Final validation accuracy per PE: ``pe, seeds, diverged, epoch, val_acc_mean,
    val_acc_sd``.

    ``diverged`` counts the PE's models whose loss or logits became non-finite
    (:func:`lstpe.results.diverged_models`); they are left out of ``seeds``, the mean and the
    SD unless ``include_diverged`` (a PE whose every model diverged has NaN statistics).
    SD is over seeds with ddof=1 (NaN for one seed). Rows follow ``pes`` if given.
    """
    from lstpe.results import final_table

    fin = final_table(history, "val", "all", include_diverged=True)
    keep = fin if include_diverged else fin[~fin["diverged"]]
    tab = fin.groupby("pe", sort=False).agg(diverged=("diverged", "sum"),
                                            epoch=("epoch", "max"))
    stats = keep.groupby("pe", sort=False).agg(
        seeds=("seed", "nunique"), val_acc_mean=("accuracy", "mean"),
        val_acc_sd=("accuracy", "std"),
    )
    tab = tab.join(stats, how="left")
    tab["seeds"] = tab["seeds"].fillna(0).astype(int)
    tab["diverged"] = tab["diverged"].astype(int)
    tab = tab[["seeds", "diverged", "epoch", "val_acc_mean", "val_acc_sd"]]
    if pes is not None:
        tab = tab.reindex([p for p in pes if p in tab.index])
    tab.index.name = "pe"
    return tab.reset_index()


def _format_table(tab: pd.DataFrame) -> str:
    return tab.to_string(index=False, float_format=lambda v: f"{v:.3f}")


def warn_diverged(history: pd.DataFrame, include_diverged: bool = False) -> pd.DataFrame:
    """Print a warning (stderr) naming the models that diverged; return them."""
    from lstpe.results import describe_diverged, diverged_models

    div = diverged_models(history)
    if not div.empty:
        what = "kept in the table" if include_diverged else \
            "left out of the table (--include-diverged keeps them)"
        print(f"lstpe: warning: {len(div)} model(s) diverged (non-finite loss or logits), "
              f"{what}: {describe_diverged(div)}", file=sys.stderr, flush=True)
    return div


def run_training(cfg, out: str | Path, progress: bool = True,
                 include_diverged: bool = False) -> pd.DataFrame:
    """Train ``cfg`` into ``out`` (resuming / reusing what is there), print and return the
    final table.

    Everything that can be checked is checked before training: the config's values
    (:func:`validate_config`), the device, the data and ``n_train`` (loaded once), and the
    folder (:func:`lstpe.results.check_run_dir`), which is locked while training
    (:class:`lstpe.results.RunLock`).

    Raises:
        ValueError: an invalid value, a device this machine lacks, an output folder that is
            not writable, in use, damaged or holding another configuration's run.
    """
    from lstpe import results as res
    from lstpe.runtime import pick_device
    from lstpe.train import load_data, train

    out = Path(out)
    validate_config(cfg)
    device = pick_device(cfg.device)
    splits = load_data(cfg)  # --data / --n-train errors before any training
    with res.RunLock(out):
        state = res.check_run_dir(out, cfg.to_dict())
        if state == "finished":
            print(f"{out} already holds this finished run (not retrained; delete it to "
                  "retrain).")
            run = res.load(out, artifacts=False)
            history, manifest = run.history, run.manifest
        else:
            n = len(cfg.pes) * len(cfg.seeds)
            verb = "resuming" if state == "resume" else "training"
            print(f"{verb} {n} models ({len(cfg.pes)} PEs x {len(cfg.seeds)} seeds), "
                  f"{cfg.epochs} epochs, optimizer {cfg.optimizer} (lr {cfg.lr:g}, "
                  f"wd {cfg.weight_decay:g}), model d={cfg.model.d_model} "
                  f"L={cfg.model.n_layers}, device {device} -> {out}", flush=True)
            result = train(cfg, run_dir=out, progress=progress, splits=splits)
            history, manifest = result.history, result.manifest
    tab = summary_table(history, cfg.pes, include_diverged)
    print()
    print(_format_table(tab))
    wall = manifest.get("wall_time_s")
    resumed = ", resumed" if manifest.get("resumed") else ""
    print(f"\nrun dir: {out.resolve()}  (wall time {wall} s{resumed})")
    warn_diverged(history, include_diverged)
    return tab


def _train_overrides(args: argparse.Namespace) -> dict[str, Any]:
    from lstpe.train import PAPER_SEEDS

    seeds = args.seeds
    if args.n_seeds is not None:
        if seeds is not None:
            raise ValueError("give --seeds or --n-seeds, not both")
        if not 1 <= args.n_seeds <= len(PAPER_SEEDS):
            raise ValueError(f"--n-seeds must be in 1..{len(PAPER_SEEDS)}, got {args.n_seeds}")
        seeds = list(PAPER_SEEDS[:args.n_seeds])
    return dict(
        seeds=seeds, epochs=args.epochs, optimizer=args.optimizer, lr=args.lr,
        weight_decay=args.weight_decay, device=args.device, amp=args.amp or None,
        compile=args.compile or None, checkpoint_every=args.checkpoint_every,
        max_models=args.max_models, n_train=args.n_train, batch_size=args.batch_size,
        data=args.data, variant=args.variant,
    )


def _model_overrides(args: argparse.Namespace) -> dict[str, int | None]:
    return {"d_model": args.d_model, "n_layers": args.n_layers, "n_heads": args.n_heads}


def cmd_train(args: argparse.Namespace) -> int:
    cfg = build_config(args.preset, _model_overrides(args), pes=args.pe,
                       **_train_overrides(args))
    run_training(cfg, args.out, progress=not args.no_progress,
                 include_diverged=args.include_diverged)
    return 0


def sweep_pes(sigmas: Sequence[float]) -> list[str]:
    """``learn-<sigma>`` for every sigma, as given (no rounding beyond the PE label's 12
    significant digits).

    Raises:
        ValueError: a negative or non-finite sigma, or one given twice (naming it).
    """
    from lstpe.encodings import parse_pe

    pes: list[str] = []
    for s in sigmas:
        label = parse_pe("learn", sigma=float(s)).label
        if label in pes:
            raise ValueError(f"sigma {s!r} is given twice in --sigmas")
        pes.append(label)
    return pes


def cmd_sweep(args: argparse.Namespace) -> int:
    from lstpe.train import PAPER_SIGMAS

    pes = sweep_pes(args.sigmas or PAPER_SIGMAS)
    cfg = build_config(args.preset, _model_overrides(args), pes=pes, **_train_overrides(args))
    run_training(cfg, args.out, progress=not args.no_progress,
                 include_diverged=args.include_diverged)
    return 0


# --------------------------------------------------------------------------- batch


def notebook_parameters(notebook: str | Path) -> dict[str, Any]:
    """The parameters declared in a notebook's ``parameters`` cell (papermill's inspection).

    Raises:
        FileNotFoundError: no such notebook.
        ValueError: the file is not a notebook (naming it).
    """
    import nbformat
    import papermill as pm

    notebook = Path(notebook)
    if not notebook.is_file():
        raise FileNotFoundError(f"notebook not found: {notebook}")
    try:
        nbformat.read(notebook, as_version=4)
        return dict(pm.inspect_notebook(str(notebook)))
    except Exception as e:  # noqa: BLE001 - JSON, schema and papermill errors alike
        raise ValueError(f"{notebook} is not a Jupyter notebook that papermill can read "
                         f"({type(e).__name__}: {' '.join(str(e).split())[:200]})") from None


POINT_MARKER = ".lstpe-batch-point"
"""File that marks a folder ``out/<point>/`` as written by ``lstpe batch`` (a rerun may
replace it)."""


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


def _fresh_point_folders(out: Path, names: Sequence[str]) -> None:
    """Remove the previous batch's results of these points (folders with the marker, their
    notebooks, and the old ``collected.csv`` / ``summary.csv``), so nothing stale is
    collected; refuse a folder of that name that ``lstpe batch`` did not write."""
    for name in names:
        folder = out / name
        if folder.exists() and not (folder / POINT_MARKER).exists() and (
                not folder.is_dir() or any(folder.iterdir())):
            raise ValueError(f"{folder} exists and was not written by lstpe batch; move it "
                             "away or use another --out")
    for name in names:
        shutil.rmtree(out / name, ignore_errors=True)
        (out / f"{name}.ipynb").unlink(missing_ok=True)
    for stale in ("collected.csv", "summary.csv"):
        (out / stale).unlink(missing_ok=True)


def run_batch(notebook: str | Path, grid: dict[str, list[Any]], params: dict[str, Any],
              out: str | Path, kernel: str = "python3", progress: bool = False) -> pd.DataFrame:
    """Execute ``notebook`` with papermill at every grid point; collect the result tables.

    Every point gets a fresh folder ``out/<point>/`` (the previous batch's folder of that
    point is replaced) and writes ``out/<point>.ipynb``; ``results_out=out/<point>/`` is passed
    if the notebook declares a ``results_out`` parameter. Writes ``out/summary.csv`` (one row
    per point: status, CSV files, seconds) and ``out/collected.csv`` (see
    :func:`collect_results`: every table row with the point's parameters and status). Returns
    the summary.

    Raises:
        FileNotFoundError: no such notebook.
        ValueError: not a notebook, a grid or ``-p`` key the notebook does not declare, a key
            given in both, ``results_out`` given by hand, or a point folder that lstpe batch
            did not write.
    """
    import papermill as pm

    from lstpe import results as res

    notebook = Path(notebook)
    declared = notebook_parameters(notebook)
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
    out = res.ensure_writable_dir(Path(out).resolve())
    points = grid_points(grid)
    names: list[str] = []
    for p in points:
        name = point_name(p)
        if name in names:  # two values with the same slug
            name = f"{name}~{len(names)}"
        names.append(name)
    _fresh_point_folders(out, names)
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
        try:
            pm.execute_notebook(str(notebook), str(target), parameters=parameters,
                                kernel_name=kernel, cwd=str(notebook.resolve().parent),
                                progress_bar=progress)
        except Exception as e:  # noqa: BLE001 - a failed point is reported, others go on
            what = f"{getattr(e, 'ename', '')}: {getattr(e, 'evalue', '')}" \
                if hasattr(e, "ename") else f"{type(e).__name__}: {e}"
            status = "failed: " + " ".join(what.split())[:200]
            print(f"    {status}", flush=True)
        n_csv = len(list((out / name).rglob("*.csv")))
        rows.append({"point": name, "status": status, "csv_files": n_csv,
                     "seconds": round(time.perf_counter() - t0, 1), "notebook": target.name,
                     **{k: _cell(v) for k, v in point.items() if k not in
                        ("point", "status", "csv_files", "seconds", "notebook")}})
    summary = pd.DataFrame(rows)
    collected = collect_results(out, points, names, summary["status"].tolist(), params)
    res.save_table(summary, out / "summary.csv")
    if collected is not None:
        res.save_table(collected, out / "collected.csv")
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


def cmd_batch(args: argparse.Namespace) -> int:
    notebook = Path(args.notebook)
    if not notebook.is_file():
        raise FileNotFoundError(f"notebook not found: {notebook}")
    grid = parse_grid(args.grid or [])
    params = parse_params(args.param or [])
    try:
        import papermill  # noqa: F401
    except ImportError:
        raise ValueError("lstpe batch needs papermill: pip install 'lstpe[book]'") from None
    from jupyter_client.kernelspec import find_kernel_specs

    kernels = find_kernel_specs()
    if args.kernel not in kernels:
        raise ValueError(f"unknown Jupyter kernel {args.kernel!r}; installed kernels: "
                         f"{', '.join(sorted(kernels)) or '(none)'}")
    summary = run_batch(notebook, grid, params, args.out, kernel=args.kernel)
    return 0 if (summary["status"] == "ok").all() else 1


# --------------------------------------------------------------------------- parser


def _add_training_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="preview",
                   help="named configuration of lstpe.train.preset (paper, preview)")
    p.add_argument("--seeds", type=int, nargs="+", help="model seeds (default: the preset's)")
    p.add_argument("--n-seeds", type=int, help="use the first N of the paper's 15 seeds")
    p.add_argument("--epochs", type=int)
    p.add_argument("--optimizer", help="adam, adamw or sgd (default: the preset's)")
    p.add_argument("--lr", type=float, help="learning rate (default: per optimizer)")
    p.add_argument("--weight-decay", type=float, help="(default: per optimizer)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--n-train", type=int, help="stratified subset of the training puzzles")
    p.add_argument("--data", help="training puzzles: paper or generated")
    p.add_argument("--variant", help="PE variant: paper or textbook")
    p.add_argument("--d-model", type=int, help="model width (default: the preset's)")
    p.add_argument("--n-layers", type=int, help="number of blocks (default: the preset's)")
    p.add_argument("--n-heads", type=int, help="attention heads (default: the preset's)")
    p.add_argument("--device", help="auto (cuda > mps > cpu), cpu, cuda, ...")
    p.add_argument("--amp", action="store_true", help="bf16 autocast (CUDA or CPU)")
    p.add_argument("--compile", action="store_true", help="torch.compile the batched model")
    p.add_argument("--checkpoint-every", type=int, help="epochs between checkpoints (0 = none)")
    p.add_argument("--max-models", type=int, help="at most this many models per batch (memory)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--include-diverged", action="store_true",
                   help="keep models with a non-finite loss or logits in the printed table")
    p.add_argument("--out", required=True, help="run directory (resumed if it exists)")


def build_parser() -> argparse.ArgumentParser:
    """The ``lstpe`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="lstpe", description="Positional encodings on the Latin Square Task.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train PEs x seeds as one batched run",
                       description="Train every (PE, seed) of a preset, batched; rerun the same "
                       "command on the same --out to resume.")
    p.add_argument("--pe", action="extend", nargs="+", metavar="NAME",
                   help="PE name (repeatable): 2d-fixed, learn-0.2, rope, ... "
                   "(default: the preset's)")
    _add_training_options(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("sweep", help="learn-<sigma> for every sigma, all seeds, one run",
                       description="Sweep the init std of the learnable PE.")
    p.add_argument("--sigmas", type=float, nargs="+",
                   help="sigmas of learn-<sigma> (default: 0.1 0.2 ... 2.0, Table 2)")
    _add_training_options(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("batch", help="run a notebook over a parameter grid (papermill)",
                       description="Execute a notebook with papermill at every point of a "
                       "parameter grid; write DIR/<point>.ipynb, pass results_out=DIR/<point>/ "
                       "if the notebook declares it, and concatenate the CSVs found there into "
                       "DIR/collected.csv.", epilog=VALUE_SYNTAX,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notebook", help="the .ipynb to execute (needs a cell tagged 'parameters')")
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2",
                   help="a grid axis (repeatable); the cartesian product is run")
    p.add_argument("-p", "--param", action="append", metavar="KEY=VALUE",
                   help="a parameter fixed for every point (repeatable)")
    p.add_argument("--out", required=True, help="folder for the executed notebooks")
    p.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    p.set_defaults(func=cmd_batch)
    return parser


def _interrupted(args: argparse.Namespace) -> str:
    """The Ctrl-C message: promise a resume only when a checkpoint exists."""
    if getattr(args, "command", None) in ("train", "sweep"):
        ckpts = Path(args.out) / "checkpoints"
        if ckpts.is_dir() and any(ckpts.glob("*.pt")):
            return ("lstpe: interrupted; rerun the same command with the same --out to resume "
                    f"from the last checkpoint in {ckpts}")
        return ("lstpe: interrupted before any checkpoint was written (--checkpoint-every 0, "
                "or the first interval had not ended); a rerun starts from the beginning")
    return "lstpe: interrupted"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lstpe`` command; returns the exit status.

    0 success, 1 some notebooks of ``batch`` failed, 2 bad arguments or input (including an
    output folder that is in use, not writable, damaged or holding another run), 130
    interrupted.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse's own errors (exit 2) and --help (exit 0)
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 2)
    try:
        return int(args.func(args))
    except (ValueError, OSError) as e:
        print(f"lstpe: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(_interrupted(args), file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
