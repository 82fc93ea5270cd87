"""`ddm bench [--preset small] [--steps 50] [--out OUT] [--json]`: pipeline vs in-process limit vs HTTP
per step; with `--rtt-ms 0,20,50,100`: the pipeline with experts behind slow links instead
(ddm.ops.bench.wan)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path

from ddm.ops.bench.jobs import parse_ids, parse_levels, parse_rtts
from ddm.ops.command_kit import add_deployment_flag
from ddm.schema.errors import ConfigError, SchemaError, expected


def configure(parser: argparse.ArgumentParser) -> None:
    add_deployment_flag(parser)
    parser.add_argument(
        "--preset",
        default=None,
        choices=("tiny", "small", "base"),
        help="time random-weight experts of this UNet preset instead (torch 0-4, JAX 5-9, oracle routing); "
        "the cost of a forward pass does not depend on the weights",
    )
    parser.add_argument("--steps", type=int, default=50, help="solver steps per job (default 50)")
    parser.add_argument(
        "--solver", default="euler", help="every job's solver (schema/solver.py; default euler), e.g. ab2"
    )
    parser.add_argument("--grid", default="uniform", help="every job's time grid (default uniform)")
    parser.add_argument(
        "--strategy", default=None, help="routing strategy (default: top1, or oracle with --preset)"
    )
    parser.add_argument("--concurrency", type=parse_levels, default=(1, 4, 16, 64), help="default 1,4,16,64")
    parser.add_argument(
        "--limit-batches", type=parse_levels, default=(1, 4, 16, 64), help="default 1,4,16,64"
    )
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP-per-step baseline")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of every level; the table shows medians (default 3)"
    )
    parser.add_argument(
        "--rtt-ms",
        type=parse_rtts,
        default=None,
        help="WAN run: put --link-experts on other simulated hosts (network namespaces, or loopback) "
        "behind links with each of these round trips, e.g. 0,20,50,100; measures the pipeline only "
        "(no limit, no HTTP) and adds throughput / the 0 ms row",
    )
    parser.add_argument(
        "--link-experts",
        type=parse_ids,
        default=(1,),
        help="with --rtt-ms: the experts behind links (default 1)",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write every number to this JSON file")
    parser.add_argument(
        "--json", action="store_true", help="print every number as JSON on stdout (progress goes to stderr)"
    )


def main(args: argparse.Namespace) -> int:
    from ddm.ops.bench.jobs import BenchConfig
    from ddm.ops.bench.report import floor_line, table
    from ddm.ops.bench.suite import run
    from ddm.ops.bench.wan import run as run_wan
    from ddm.ops.bench.wan_report import wan_table, where_time_goes
    from ddm.schema.deployment import resolve_deployment
    from ddm.schema.solver import Grid, Solver

    if not 1 <= args.steps <= 1000:
        raise ConfigError(expected("--steps in 1..1000", args.steps))
    if not 1 <= args.repeat <= 20:
        raise ConfigError(expected("--repeat in 1..20", args.repeat))
    try:  # the jobs' solver and grid, refused here rather than by every job
        Solver.parse(args.solver), Grid.parse(args.grid)
    except SchemaError as exc:
        raise ConfigError(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="ddm-bench-") as tmp:
        work = Path(tmp)
        if args.preset:
            if args.deployment:
                raise ConfigError("expected either --deployment or --preset, not both")
            from ddm.ops.random_experts import write_label_split

            deployment = write_label_split(work / "experts", args.preset)
            strategy = args.strategy or "oracle"
        else:
            deployment = resolve_deployment(args.deployment)
            strategy = args.strategy or "top1"
        cfg = BenchConfig(
            deployment=deployment,
            steps=args.steps,
            solver=args.solver,
            grid=args.grid,
            strategy=strategy,
            limit_batches=args.limit_batches,
            concurrency=args.concurrency,
            http=not args.no_http,
            repeat=args.repeat,
            rtt_ms=args.rtt_ms or (),
            link_experts=args.link_experts,
        )
        # with --json, stdout carries the JSON alone: the progress lines go to stderr
        with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
            print(
                f"ddm bench: {deployment}, {cfg.solver} {cfg.steps} steps on the {cfg.grid} grid "
                f"(NFE {cfg.nfe}), strategy {cfg.strategy}, {cfg.repeat} repeats"
            )
            result = run_wan(cfg, work) if cfg.rtt_ms else run(cfg, work)
        if args.preset:
            result["deployment"]["path"] = f"random weights, preset {args.preset}"
    text = json.dumps(result, indent=2) + "\n"
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    if args.json:
        sys.stdout.write(text)
        return 0
    print()
    if cfg.rtt_ms:
        print(wan_table(result))
        print(where_time_goes(result))
    else:
        print(table(result))
        print(floor_line(result))
    if args.out is not None:
        print(f"\nwrote {args.out}")
    return 0
