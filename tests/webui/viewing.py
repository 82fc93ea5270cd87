"""Helpers of the production-server viewer tests: jobs streamed as routers stream them, and waiting until
every viewer has every step."""

from __future__ import annotations

import time

from tests.support.wire import WireSocket


def stream(fake, specs, steps: int, interval_s: float, first: int = 1, finish: bool = True) -> None:
    """Write steps first..steps of every job, one every interval_s as routers would, then finish them."""
    for step in range(first, steps + 1):
        tick = time.monotonic()
        for spec in specs:
            fake.frame(spec, step)
        time.sleep(max(0.0, interval_s - (time.monotonic() - tick)))
    for spec in specs if finish else ():
        fake.finish(spec)


def wait_all_done(sockets: list[WireSocket], jobs: list[str], steps: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for s, job_id in zip(sockets, jobs, strict=True):
        while s.steps.get(job_id, []) != list(range(1, steps + 1)) or s.statuses[-1:] != ["done"]:
            got = s.steps.get(job_id, [])
            assert not s.closed, f"viewer of {job_id} was disconnected after {len(got)} frames"
            assert time.monotonic() < deadline, f"viewer of {job_id}: steps {got}, statuses {s.statuses}"
            time.sleep(0.05)


def each_watches_its_job_to_the_end(fake, sockets: list[WireSocket], specs, steps: int) -> None:
    """Socket i watches job i; the jobs stream every step and finish; every viewer gets them all."""
    for i, (s, spec) in enumerate(zip(sockets, specs, strict=True)):
        s.emit("watch", {"job_id": spec.job_id}, ack=i)
    stream(fake, specs, steps, interval_s=0.1)
    wait_all_done(sockets, [s.job_id for s in specs], steps, timeout_s=60)
