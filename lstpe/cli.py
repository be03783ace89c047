"""The ``lstpe`` command line: train PEs, sweep sigmas, run notebooks over a parameter grid.

Subcommands::

    lstpe train --preset preview --pe learn-0.2 --pe 2d-fixed --out runs/demo
    lstpe sweep --preset paper --sigmas 0.1 0.2 0.5 --out runs/sweep
    lstpe batch book/chapter.ipynb --grid seeds=[2235],[6312] -p scale='"preview"' --out runs/nb
    lstpe campaign run --minutes 120      # the reproduction, unit by unit
    lstpe reproduce run --parts table2    # the paper's named runs on a GPU (plan, pack, unpack)
    lstpe repo set-url https://github.com/you/fork   # where the book installs from

``train`` and ``sweep`` build :func:`lstpe.training.config.preset` with the given overrides and run
:func:`lstpe.training.train.train` on ``--out``. Before any training they check every value (device,
data, ``--n-train``, seeds, learning rate...) and the output folder
(:func:`lstpe.store.results.check_run_dir`: a writable folder that holds nothing, checkpoints of
this
configuration, or this finished run), and lock it (:class:`lstpe.store.results.RunLock`: a second
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
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from lstpe import repo
from lstpe.campaign import cli as campaign_cli
from lstpe.chapters.batch import run_batch
from lstpe.chapters.values import VALUE_SYNTAX, parse_grid, parse_params
from lstpe.experiments import reproduce
from lstpe.training.flags import add_training_flags


def build_config(preset_name: str, model: dict[str, int] | None = None, **overrides: Any):
    """``lstpe.training.config.preset(preset_name, **overrides)`` with optional ModelConfig
    overrides, checked by :class:`lstpe.training.config.TrainConfig` (every value, by type and
    range).

    None values are ignored (the preset's value is kept); learning rate and weight decay
    follow the optimizer unless given (see :func:`lstpe.training.config.preset`).

    Raises:
        ValueError: unknown preset, PE, optimizer, or an invalid value (naming it; a sigma
            whose float32 initialisation overflows).
    """
    from lstpe.experiments.limits import check_sigmas
    from lstpe.training.config import preset

    check_sigmas(pes=overrides.get("pes"))  # learn-1e39: finite, but inf in float32
    cfg = preset(preset_name, **{k: v for k, v in overrides.items() if v is not None})
    model = {k: v for k, v in (model or {}).items() if v is not None}
    if model:
        cfg = replace(cfg, model=replace(cfg.model, **model))
    return cfg


def summary_table(history: pd.DataFrame, pes: Sequence[str] | None = None,
                  include_diverged: bool = False) -> pd.DataFrame:
    """Final validation accuracy per PE: ``pe, seeds, diverged, epoch, val_acc_mean,
    val_acc_sd``.

    ``diverged`` counts the PE's models whose loss or logits became non-finite
    (:func:`lstpe.store.results.diverged_models`); they are left out of ``seeds``, the mean and the
    SD unless ``include_diverged`` (a PE whose every model diverged has NaN statistics).
    SD is over seeds with ddof=1 (NaN for one seed). Rows follow ``pes`` if given.
    """
    from lstpe.store.results import final_table

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
    from lstpe.store.results import describe_diverged, diverged_models

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
    (:class:`~lstpe.training.config.TrainConfig`), the device, the data and ``n_train``
    (loaded once), and the folder (:func:`lstpe.store.rundir.check_run_dir`), which is locked
    while training (:class:`lstpe.store.rundir.RunLock`).

    Raises:
        ValueError: an invalid value, a device this machine lacks, an output folder that is
            not writable, in use, damaged or holding another configuration's run.
    """
    from lstpe.runtime import pick_device
    from lstpe.store import results as res
    from lstpe.training.config import load_data
    from lstpe.training.train import train

    out = Path(out)
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
    from lstpe.runtime import PAPER_SEEDS

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
        step_mode="compile" if args.compile else None, checkpoint_every=args.checkpoint_every,
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


def cmd_sweep(args: argparse.Namespace) -> int:
    from lstpe.experiments.registry import learn_pes
    from lstpe.training.config import PAPER_SIGMAS

    pes = learn_pes(args.sigmas or PAPER_SIGMAS)
    cfg = build_config(args.preset, _model_overrides(args), pes=pes, **_train_overrides(args))
    run_training(cfg, args.out, progress=not args.no_progress,
                 include_diverged=args.include_diverged)
    return 0


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
                   help="named configuration of lstpe.training.config.preset (preview, cpu, paper)")
    p.add_argument("--n-seeds", type=int, help="use the first N of the paper's 15 seeds")
    p.add_argument("--optimizer", help="adam, adamw or sgd (default: the preset's)")
    p.add_argument("--lr", type=float, help="learning rate (default: per optimizer)")
    p.add_argument("--weight-decay", type=float, help="(default: per optimizer)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--data", help="training puzzles: paper or generated")
    p.add_argument("--variant", help="PE variant: paper or textbook")
    p.add_argument("--n-heads", type=int, help="attention heads (default: the preset's)")
    p.add_argument("--compile", action="store_true", help="torch.compile the batched model")
    add_training_flags(p)  # seeds, epochs, n-train, d-model, n-layers, device, amp, ...
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

    campaign_cli.add_campaign_parser(sub)

    reproduce.add_parser(sub)
    p = sub.add_parser("repo", help="the repository URL the book installs from (show, check, "
                       "set-url)", description=repo.__doc__.split("\n")[0])
    repo.add_arguments(p)
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
    except BrokenPipeError:  # the reader went away (``lstpe campaign plan | head``)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - nothing more is printed
        return 0
    except (ValueError, OSError) as e:
        print(f"lstpe: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(_interrupted(args), file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
