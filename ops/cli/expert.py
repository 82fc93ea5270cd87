"""`ddm expert selftest --deployment D --expert K --device DEV`: does this device compute what the CPU
computes, bucket by bucket (ddm.workers.selftest)?"""

from __future__ import annotations

import argparse

from ddm.ops.command_kit import add_deployment_flag
from ddm.schema.precision import PRECISIONS


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = sub.add_parser(
        "selftest",
        help="compare an expert's velocities on a device with the CPU's, at every batch bucket",
        description="Load one expert of a deployment on a device (compiling, or loading from the trace "
        "cache, every batch bucket), then compare each bucket's velocities on fixed inputs with the same "
        "checkpoint on the CPU in fp32. Prints load, compile and warm-up time and per-bucket latency; exits "
        "1 naming the buckets that differ by more than the precision's tolerance.",
    )
    add_deployment_flag(s)
    s.add_argument("--expert", type=int, required=True, help="expert id in the deployment")
    s.add_argument("--device", default=None, help="device to test (default: the deployment's)")
    s.add_argument("--precision", choices=PRECISIONS, default=None, help="default: the deployment's")
    s.add_argument("--buckets", default=None, help="batch buckets, e.g. 1,2,4,8 (default: the worker's)")
    s.add_argument("--json", action="store_true", help="print the report as JSON")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.cli.exit_codes import FAILURE, OK
    from ddm.schema.deployment import Deployment, resolve_deployment
    from ddm.workers.buckets import parse_bucket_flag
    from ddm.workers.expert import DEFAULT_BUCKETS
    from ddm.workers.selftest import selftest

    entry = Deployment.load(resolve_deployment(args.deployment)).expert(args.expert)
    buckets = parse_bucket_flag(args.buckets) or DEFAULT_BUCKETS
    report = selftest(
        entry.checkpoint, args.device or entry.device, args.precision or entry.precision, buckets
    )
    if args.json:
        from ddm.ops.command_kit import print_json

        print_json(report.to_json())
    else:
        print("\n".join(report.lines()))
    return OK if report.ok else FAILURE
