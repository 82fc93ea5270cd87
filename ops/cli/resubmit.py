"""`ddm resubmit JOB [--seed N]`: the same job again under a new id (its spec as submitted; a new seed if
asked), as Celery's and Ray's users expect."""

from __future__ import annotations

import argparse

from ddm.ops.cli.job_flags import JOB_ID_HELP


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Queue an earlier job's spec again under a new job id: the same labels, steps, strategy, guidance, "
        "solver, grid and prompt as submitted (what the job left to the deployment is left to it again), "
        "with --seed another seed. A job that started from a given noise (--init-noise) starts from it "
        "again (the seed then changes nothing). Prints the new job id."
    )
    parser.add_argument("job", help=JOB_ID_HELP)
    parser.add_argument("--seed", type=int, default=None, help="another seed (default: the job's)")
    parser.add_argument(
        "--queue-anyway",
        action="store_true",
        help="queue it even when no worker serves an expert it needs (it runs once one is up)",
    )
    parser.add_argument("--json", action="store_true", help="print the new job's id and spec as JSON")


def main(args: argparse.Namespace) -> int:
    from ddm.client.client import Client
    from ddm.ops.command_kit import print_json
    from ddm.schema.errors import SchemaError
    from ddm.schema.init_noise import stored_noise
    from ddm.schema.messages import JobSpec, job_options

    with Client() as client:
        job = client.job_id(args.job)
        status = client.status(job)
        submitted = status.spec
        if submitted is None:
            raise SchemaError(
                f"job {job} has no spec recorded (it came straight from the queue): nothing to repeat"
            )
        seed = {} if args.seed is None else {"seed": args.seed}
        # a job stored before null was the word carries K for an unconditional image: sent as null
        space = status.space or client.deployment().sample_space
        submitted = submitted.as_submitted(space)
        spec = JobSpec.new(submitted.labels, **job_options(submitted, **seed))
        noise = None
        if submitted.init_noise is not None:  # it started from a given noise: so does its repeat
            data = client.redis.get(client.names.init_noise(job))
            noise = stored_noise(job, data, submitted.init_noise, submitted.n, space)
        client.submit(spec, queue_anyway=args.queue_anyway, init_noise=noise)
    if args.json:
        print_json({"job_id": spec.job_id, "resubmits": job, "spec": spec.to_dict()})
    else:
        print(spec.job_id)
    return 0
