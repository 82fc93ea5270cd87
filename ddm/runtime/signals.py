"""The one signal policy of every long-running worker's `run_from_args` (stages and the router), and the
one way those build their worker from the command's flags (serve_from_args)."""

from __future__ import annotations

import logging
import signal

from ddm.schema.deployment import resolve_deployment
from ddm.schema.settings import Settings

log = logging.getLogger(__name__)


def serve_until_signalled(worker) -> int:
    """Run `worker` (a stage or the router) until SIGTERM or SIGINT stops it cleanly; a second signal
    stops waiting for the work in hand. The one signal policy of every worker's `run_from_args`."""

    def on_signal(signum, frame):
        if worker.stopping:
            raise KeyboardInterrupt
        log.info("signal %d: stopping after the work in hand", signum)
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    worker.run()
    return 0


def serve_from_args(worker_class, args, *positional, **options) -> int:
    """The `run_from_args` of a worker command (`ddm worker expert|router|decoder`): builds
    worker_class(settings from the environment, the resolved --deployment, *positional,
    worker_id=--worker-id, metrics_port=--metrics-port, **options) and serves it until signalled."""
    worker = worker_class(
        Settings.from_env(),
        resolve_deployment(args.deployment),
        *positional,
        worker_id=args.worker_id,
        metrics_port=args.metrics_port,
        **options,
    )
    return serve_until_signalled(worker)
