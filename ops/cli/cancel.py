"""`ddm cancel JOB`: ask the router to stop a job at its next step."""

from __future__ import annotations

import argparse

from ddm.ops.cli.job_flags import JOB_ID_HELP


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Cancel a job: a running job stops at its next step (its router stores that step, then marks it "
        "cancelled); a queued job that no router has taken is cancelled at once. Its frames are kept "
        "(`ddm status`, the web UI). A job that has already ended is left as it is."
    )
    parser.add_argument(
        "job",
        help=JOB_ID_HELP,
    )
    parser.add_argument("--wait", action="store_true", help="wait until the router has stopped the job")
    parser.add_argument("--timeout", type=float, default=None, help="seconds to wait at most (with --wait)")
    parser.add_argument("--json", action="store_true", help="print the job's status as JSON")


def main(args: argparse.Namespace) -> int:
    from ddm.client.client import Client
    from ddm.ops.command_kit import print_json
    from ddm.schema.messages import JobStatus

    with Client() as client:
        job = client.job_id(args.job)  # a unique prefix will do
        st = client.cancel(job)
        if args.wait and not st.status.terminal:
            st = client.wait(job, timeout=args.timeout)
    if args.json:
        print_json(st.to_dict())
    elif st.status is JobStatus.CANCELLED:
        print(f"job {st.job_id} cancelled at step {st.step}/{st.steps}")
    elif st.status.terminal and st.cancel_requested_at is None:
        print(f"job {st.job_id} had already ended ({st.status.value}); nothing to cancel")
    elif st.status.terminal:
        print(f"job {st.job_id} ended ({st.status.value}) before its router saw the cancel")
    else:
        print(
            f"job {st.job_id}: cancel requested ({st.status.value}, step {st.step}/{st.steps}); its router "
            "stops it at its next step (`ddm status` shows when)"
        )
    return 0
