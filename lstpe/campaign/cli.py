"""``lstpe campaign``: its subcommands (plan, status, run, pair, import) and
their parser, which :mod:`lstpe.cli` mounts (:func:`add_campaign_parser`)."""

from __future__ import annotations

import argparse
import math


def cmd_campaign(args: argparse.Namespace) -> int:
    """``lstpe campaign plan | status | run | pair | import``
    (:mod:`lstpe.campaign.items`)."""
    from lstpe.campaign import items as cp
    from lstpe.campaign import status as cs
    from lstpe.experiments import fragments as fr
    from lstpe.experiments import units as un
    from lstpe.store.results import results_root

    if args.action == "plan":
        where = results_root(args.results)
        if not where.is_dir():  # a typo or a file: never "0 stored" everywhere
            how = "is not a folder" if where.exists() else "does not exist"
            raise FileNotFoundError(f"the results folder {where} {how} (--results or "
                                    "$LSTPE_RESULTS)")
        if args.keys:  # one trainable 200-epoch unit per line, in order (schedulers)
            print("\n".join(u.key for u in un.plan() if u.item not in cp.NOT_TRAINED))
            return 0
        print(cs.plan_text(args.results))
    elif args.action == "status":
        from lstpe.campaign.long_plan import resume_problems

        where = results_root(args.results)
        if not where.is_dir():  # a typo or a file: never "0 units done"
            how = "is not a folder" if where.exists() else "does not exist"
            raise FileNotFoundError(f"the results folder {where} {how} (--results or "
                                    "$LSTPE_RESULTS)")
        table = cs.status(args.results)
        print(cs.status_text(table))
        long = cs.long_table(args.results, table)
        print(cs.long_and_cpus_text(table, args.results, long))
        damaged = (table["state"] == "damaged").any() or (long["state"] == "damaged").any() \
            or bool(resume_problems(args.results))  # the resume budget (printed above)
        return 1 if damaged else 0
    elif args.action == "run":
        from lstpe.campaign.scheduler import run

        run(args.minutes, args.results, device=args.device or "auto", units=args.unit,
            max_units=args.max_units, allow_partial=args.allow_partial,
            log=lambda msg: print(msg, flush=True))
    elif args.action == "pair":
        from lstpe.campaign import precision as pr

        pair = pr.run_pair(args.results, device=args.device or "cpu",
                           log=lambda msg: print(msg, flush=True), candidate=args.candidate)
        where = pr.candidate_dir(args.results, args.device or "cpu", args.candidate)
        problems = pr.check_pair(pair)
        if problems:  # a pair that cannot decide: say why, never "yes"
            print(f"the precision pair in {where} cannot decide the precision:\n  "
                  + "\n  ".join(problems))
            return 1
        v = pr.pair_verdict(pr.pair_table(pair))
        print(v["per_pe"].to_string(index=False))
        print(f"{args.candidate} within the seed spread over epochs {v['epochs'][0]}-"
              f"{v['epochs'][1]}: {'yes' if v['ok'] else 'no'} ({where})")
    elif args.action == "import":
        units = fr.import_run(args.path, args.results, run=args.run, note=args.note or "")
        print(f"imported {len(units)} fragment(s): {', '.join(u.key for u in units)}")
    return 0


def _positive_minutes(text: str) -> float:
    """An argparse type: a positive, finite number of minutes (argparse names the option)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of minutes, got {text!r}")
    return value


def add_campaign_parser(sub: argparse._SubParsersAction) -> None:
    """Mount ``campaign`` and its subcommands on the ``lstpe`` parser's ``sub``."""
    p = sub.add_parser("campaign", help="grow results/paper one (run, PE, seed) unit at a time",
                       description="The reproduction on CPUs: the paper's recipe, 200 epochs "
                       "per unit, each unit stored as a verified fragment under "
                       "results/paper/<run>/<pe>/<seed>/ (lstpe.campaign.items).")
    csub = p.add_subparsers(dest="action", required=True)
    for name, text in (("plan", "list the units in order of value"),
                       ("status", "units done and left, hours spent and left")):
        q = csub.add_parser(name, help=text)
        q.add_argument("--results", help="results folder (default: the repository's)")
        if name == "plan":
            q.add_argument("--keys", action="store_true",
                           help="only the trainable 200-epoch units' keys, one per line")
    q = csub.add_parser("run", help="train the next units that fit in --minutes")
    q.add_argument("--minutes", type=_positive_minutes, required=True,
                   help="time budget (wall clock)")
    q.add_argument("--unit", action="append", metavar="RUN/PE/SEED",
                   help="train only this unit (repeatable), e.g. table2/learn-0.2/2235")
    q.add_argument("--max-units", type=int, default=8, help="at most this many per chunk")
    q.add_argument("--allow-partial", action="store_true",
                   help="fill the budget: start --max-units units even if they cannot "
                   "finish (the chunk pauses with a checkpoint; a later run here resumes it)")
    q.add_argument("--device", help="auto (cuda > mps > cpu), cpu, cuda, ...")
    q.add_argument("--results", help="results folder (default: the repository's)")
    q = csub.add_parser("pair", help="the precision pair: fp32 and bf16, same seeds, 30 epochs "
                        "(on a CPU with bf16 instructions, before its campaign trains bf16)")
    q.add_argument("--device", help="cpu (default) or cuda")
    q.add_argument("--candidate", choices=("bf16", "tf32"), default="bf16",
                   help="the precision judged against fp32 (tf32: on a GPU only)")
    q.add_argument("--results", help="results folder (default: the repository's)")
    q = csub.add_parser("import", help="split a finished run of the recipe into fragments")
    q.add_argument("path", help="the run folder (lstpe train --preset paper --epochs 200)")
    q.add_argument("--run", help="the registry run its units belong to, if ambiguous")
    q.add_argument("--note", help="a line kept in each fragment's manifest")
    q.add_argument("--results", help="results folder (default: the repository's)")
    p.set_defaults(func=cmd_campaign)
