"""The scheduler without a broker, for tests: a fake clock, fake experts answering in-process, jobs."""

from __future__ import annotations

import numpy as np

from ddm.router.jobrun import JobRun
from ddm.router.outbox import Outbox
from ddm.router.policies import build_policy
from ddm.router.sampler import JobArrays, initial_noise
from ddm.router.scheduler import Scheduler
from ddm.schema.messages import JobSpec, VelocityReply, VelocityRequest
from ddm.schema.resolved import ResolvedJob

LABEL_SPLIT = np.array([[5] * 5 + [0] * 5, [0] * 5 + [5] * 5])  # expert 0: labels 0-4, expert 1: 5-9
OVERLAP = np.array([[5] * 7 + [0] * 3, [0] * 3 + [5] * 7])  # labels 3-6 in both


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def velocity(k: int):
    """A known velocity field per expert (a pure function, like the real ones)."""

    def fn(x, t, y, g):
        return (-(k + 1) * x + 0.1 * y[:, None, None, None] * g[:, None, None, None]).astype(np.float32)

    return fn


EXPERTS = {0: velocity(0), 1: velocity(1)}


def answer(send, k=None) -> VelocityReply:
    req = VelocityRequest.decode(send.body)
    k = send.expert if k is None else k
    v = EXPERTS[send.expert](req.x, req.t, req.y, req.guidance)
    return VelocityReply(req.request_id, v, k, "fake", 1.0, req.batch_size)


def job(labels, steps=4, strategy="oracle", seed=0, on_expert_loss="degrade") -> JobRun:
    spec = JobSpec.new(
        labels, steps=steps, strategy=strategy, guidance=1.0, seed=seed, on_expert_loss=on_expert_loss
    )
    return JobRun(JobArrays.of(ResolvedJob.of(spec)), tag=spec.job_id, x=initial_noise(spec), step=0)


def scheduler(clock, counts=LABEL_SPLIT, kind="oracle", **kwargs) -> Scheduler:
    s = Scheduler(build_policy(kind, counts), timeout_s=10.0, clock=clock, **kwargs)
    s.reset("test")
    return s


def begin(s: Scheduler, *jobs: JobRun) -> Outbox:
    """Start jobs and flush: the Outbox holds their first requests."""
    out = Outbox()
    for j in jobs:
        s.start(j, out)
    s.flush(out)
    return out


def sweep_after(s: Scheduler, clock: FakeClock, seconds: float) -> Outbox:
    """Move the clock on by `seconds`, then sweep: the Outbox holds what the sweep did."""
    clock.now += seconds
    out = Outbox()
    s.sweep(out)
    return out
