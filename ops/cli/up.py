"""`ddm up`: bring up a whole deployment on this machine (ddm.ops.up.bringup does the work)."""

from __future__ import annotations

import argparse

from ddm.ops.command_kit import add_deployment_flag


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a deployment on this machine: one expert worker per expert (or --replicas), and a router "
        "worker, against DDM_AMQP_URL / DDM_REDIS_URL (local defaults) under DDM_PREFIX. Waits until all "
        "are ready, restarts any that dies, and stops them all on Ctrl-C."
    )
    add_deployment_flag(parser)
    parser.add_argument(
        "--replicas",
        action="append",
        default=[],
        metavar="K=N",
        help="N worker replicas for expert K (repeatable, or comma-separated: 0=2,1=1; default 1 each, "
        "and 2 for an expert on neuron: one per NeuronCore of a trn1 device)",
    )
    parser.add_argument("--routers", type=int, default=1, help="router worker replicas (default: 1)")
    parser.add_argument("--max-batch", type=int, default=None, help="expert workers: rows per forward pass")
    parser.add_argument(
        "--max-wait-ms", type=float, default=None, help="expert workers: wait to fill a batch"
    )
    parser.add_argument("--buckets", default=None, help="expert workers: batch buckets, e.g. 1,2,4,8,16,32")
    parser.add_argument("--max-jobs", type=int, default=None, help="router: jobs in flight at once")
    parser.add_argument(
        "--broker-nodes",
        type=int,
        default=0,
        metavar="N",
        help="start a local N-node RabbitMQ cluster (3..9) on its own ports and data folders, run on it "
        "with quorum queues, and remove it on exit (instead of DDM_AMQP_URL; see docs/DEPLOY.md)",
    )
    parser.add_argument("--no-ui", action="store_true", help="do not start the web UI")
    parser.add_argument(
        "--ui-host",
        default="127.0.0.1",
        help="web UI address (default 127.0.0.1: this machine only; 0.0.0.0 exposes it, with no login)",
    )
    parser.add_argument("--ui-port", type=int, default=8000, help="web UI port (default 8000)")
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=600.0,
        help="seconds to wait for every heartbeat (default: 600)",
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="run in the background and return once ready (pid and log in ~/.cache/ddm/up/prefix=P/; "
        "`ddm down` stops it)",
    )
    parser.add_argument(
        "--json", action="store_true", help="with --detach: print its pid, log and state as JSON"
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=10.0,
        help="seconds between SIGTERM and SIGKILL at shutdown (default: 10)",
    )


def main(args: argparse.Namespace) -> int:
    if args.detach:
        from ddm.ops.up.detached_cli import main_detached

        return main_detached(args)
    from ddm.ops.up.bringup import UpOptions, run_up
    from ddm.runtime.logs import configure_logging

    configure_logging("ddm up")  # DDM_LOG_LEVEL, DDM_LOG_FORMAT
    options = UpOptions(
        deployment=args.deployment,
        replicas=tuple(args.replicas),
        routers=args.routers,
        max_batch=args.max_batch,
        max_wait_ms=args.max_wait_ms,
        buckets=args.buckets,
        max_jobs=args.max_jobs,
        ui=not args.no_ui,
        ui_host=args.ui_host,
        ui_port=args.ui_port,
        ready_timeout=args.ready_timeout,
        grace=args.grace,
        broker_nodes=args.broker_nodes,
    )
    return run_up(options)
