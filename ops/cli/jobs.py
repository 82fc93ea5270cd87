"""`ddm jobs`: the recent jobs with one status (running, queued, failed, done, cancelled), newest first."""

from __future__ import annotations

import argparse

from ddm.schema.messages import JobStatus


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "List the newest jobs of the jobs index in Redis (DDM_REDIS_URL, DDM_PREFIX), optionally only those "
        "with one status. Jobs past their TTL (DDM_JOB_TTL_S) are gone from the index."
    )
    parser.add_argument(
        "--status",
        choices=[s.value for s in JobStatus],
        default=None,
        help="only jobs with this status",
    )
    parser.add_argument("--limit", type=int, default=20, metavar="N", help="list at most N jobs")
    parser.add_argument(
        "--scan",
        type=int,
        default=10_000,
        metavar="M",
        help="look at no more than the M newest jobs",
    )
    parser.add_argument("--json", action="store_true", help="print the jobs as a JSON list of job hashes")


def main(args: argparse.Namespace) -> int:
    from ddm.client.client import Client
    from ddm.ops.cli.status import format_recent
    from ddm.ops.command_kit import print_json

    with Client() as client:
        jobs = client.find(args.status, limit=args.limit, scan=args.scan)
        if args.json:
            print_json([job.to_dict() for job in jobs])
        elif jobs:
            print(format_recent([(job.job_id, job) for job in jobs]))
        else:
            which = f"{args.status} jobs" if args.status else "jobs"
            print(f"no {which} among the {args.scan} newest under prefix {client.names.prefix!r}")
    return 0
