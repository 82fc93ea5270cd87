"""An expert worker whose expert dies of one request, as a process: `python -m tests.support.poison_worker
DEPLOYMENT EXPERT WORKER_ID`. The real expert of the deployment serves every other request exactly; a
request whose x holds POISON anywhere raises a BaseException from inside the forward pass, which no
handler of the worker catches (as a native crash or an escaped bug would end it): the process exits
with the request unacked, and the broker redelivers it to the next replica."""

from __future__ import annotations

import sys

import numpy as np

POISON = 1234.5  # finite and within the declared magnitude: nothing refuses it before the forward pass


class Poisoned(BaseException):  # noqa: N818 - named for what the test reads in the dead letter's reason
    """What the poison request does to the worker that serves it."""


class PoisonSensitive:
    """The loaded expert, plus the poison."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def velocity(self, x, t, y, guidance=1.0):
        if (np.asarray(x) == POISON).any():
            raise Poisoned("this request kills the worker that serves it")
        return self.inner.velocity(x, t, y, guidance)


def main(deployment: str, expert_id: str, worker_id: str) -> int:
    from ddm.runtime.logs import configure_logging
    from ddm.schema.deployment import Deployment
    from ddm.schema.settings import Settings
    from ddm.workers import load_expert
    from ddm.workers.worker import ExpertWorker

    from .constants import TEST_BUCKETS

    settings = Settings.from_env()
    configure_logging(worker_id, settings)
    entry = Deployment.load(deployment).expert(int(expert_id))
    expert = PoisonSensitive(load_expert(entry.checkpoint, "cpu", TEST_BUCKETS))
    worker = ExpertWorker(settings, deployment, int(expert_id), worker_id=worker_id, expert=expert)
    worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
