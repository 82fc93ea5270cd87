"""`ddm worker expert|router|decoder|text-encoder`: the long-running processes of the pipeline."""

from __future__ import annotations

import argparse

from ddm.ops.command_kit import add_deployment_flag
from ddm.schema.precision import PRECISIONS


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="role", metavar="ROLE", required=True)
    e = sub.add_parser(
        "expert",
        help="serve one expert: consume ddm.expert.<K>, batch, reply",
        description="Consume velocity requests for one expert from RabbitMQ, batch them, run one forward "
        "pass per batch and reply to each request. Broker and Redis come from DDM_AMQP_URL / DDM_REDIS_URL.",
    )
    add_deployment_flag(e)
    e.add_argument("--expert", type=int, required=True, help="expert id in the deployment")
    e.add_argument("--device", default=None, help="override the deployment's device for this expert")
    e.add_argument(
        "--precision", choices=PRECISIONS, default=None, help="override the deployment's precision (fp32)"
    )
    e.add_argument("--max-batch", type=int, default=None, help="rows per forward (default $DDM_MAX_BATCH)")
    e.add_argument("--max-wait-ms", type=float, default=None, help="wait for more requests after the first")
    e.add_argument("--buckets", default=None, help="batch buckets to compile, e.g. 1,2,4,8,16,32,64")
    e.add_argument("--worker-id", default=None, help="heartbeat id (default: host-pid)")
    _add_common(e)
    r = sub.add_parser(
        "router",
        help="run sampling jobs: consume ddm.jobs, route each step, store trajectories in Redis",
        description="Consume jobs from ddm.jobs and run many at once: each step routes every sample, "
        "asks the chosen experts over RabbitMQ, mixes their velocities, takes an Euler step and writes "
        "the frame and "
        "the resumable state to Redis.",
    )
    add_deployment_flag(r)
    r.add_argument("--max-jobs", type=int, default=64, help="jobs in flight at once (the jobs prefetch)")
    r.add_argument("--worker-id", default=None, help="id in job hashes and logs (default: host-pid)")
    _add_common(r)
    d = _add_stage(
        sub,
        "decoder",
        "serve a latent deployment's decoder: consume ddm.decoder, reply with pixels",
        "Consume a latent deployment's finished latents from ddm.decoder, decode them with the "
        "deployment's [decoder] autoencoder and reply with the pixels.",
    )
    d.add_argument("--device", default=None, help="override the deployment's decoder device (cpu, cuda)")
    _add_stage(
        sub,
        "text-encoder",
        "serve a text deployment's prompt encoder: consume ddm.text, reply with embeddings",
        "Consume a text deployment's prompts from ddm.text (once per job), encode them with the "
        "deployment's [conditioning] text encoder and reply with the embeddings; the router stores them "
        "where the experts read them.",
    )


def _add_stage(sub, role: str, summary: str, description: str) -> argparse.ArgumentParser:
    """A stage beside the experts (ddm/runtime/stage.py): its deployment, worker id and metrics port."""
    parser = sub.add_parser(role, help=summary, description=description)
    add_deployment_flag(parser)
    parser.add_argument("--worker-id", default=None, help=f"heartbeat id (default: {role}-host-pid)")
    _add_common(parser)
    return parser


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus /metrics and /healthz on this port (default: $DDM_METRICS_PORT; 0 = off)",
    )


def main(args: argparse.Namespace) -> int:
    from ddm.runtime.logs import configure_logging

    configure_logging("ddm worker")  # DDM_LOG_LEVEL, DDM_LOG_FORMAT
    if args.role == "expert":
        from ddm.workers.worker import run_from_args
    elif args.role == "decoder":
        from ddm.workers.decoder_worker import run_from_args
    elif args.role == "text-encoder":
        from ddm.workers.text_encoder_worker import run_from_args
    else:
        from ddm.router.worker import run_from_args
    return int(run_from_args(args) or 0)
