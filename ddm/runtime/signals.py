"""The one signal policy of every long-running worker's `run_from_args` (stages and the router)."""

from __future__ import annotations

import logging
import signal

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
