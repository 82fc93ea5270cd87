"""Many viewers against the production server (gunicorn) on the real Redis: the UI stays healthy and every
viewer gets every step once, in order.

Before: each watched job had its own tailer thread blocking in XREAD on a connection of redis-py's
default pool (at most 100). 110 viewers of different jobs exhausted it: /healthz and every API call
answered 503 "Too many connections". Now one reader thread reads every watched stream with one XREAD,
and the pool blocks for a free connection instead of failing (webui/redis_pool.py).
"""

from __future__ import annotations

import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis

from ddm.webui.config import UIConfig
from tests.support.services import REDIS_URL
from tests.support.wire import Drain, WireSocket
from tests.webui.viewing import each_watches_its_job_to_the_end, stream, wait_all_done

THREADS = 200  # DDM_UI_THREADS: the Redis pool's bound (each websocket is a greenlet, not a thread)


def ui_redis_connections(prefix: str) -> int:
    r = redis.Redis.from_url(REDIS_URL)
    try:
        return sum(c.get("name") == f"ddm-webui:{prefix}" for c in r.client_list())
    finally:
        r.close()


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


class HealthProbe(threading.Thread):
    """GET /healthz every 0.2 s until stopped; records every status code."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.codes, self.errors = url, [], []
        self.stopped = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=10) as resp:
                    self.codes.append(resp.status)
            except urllib.error.HTTPError as exc:
                self.codes.append(exc.code)
                self.errors.append(exc.read()[:200])
            except OSError as exc:
                self.codes.append(0)
                self.errors.append(repr(exc))

    def stop(self) -> list[int]:
        self.stopped.set()
        self.join(timeout=15)
        return self.codes


@pytest.mark.load
def test_150_viewers_of_150_jobs_keep_healthz_at_200(production_ui, fake):
    viewers, steps = 150, 10
    ui = production_ui(
        DDM_UI_THREADS=str(THREADS),
        DDM_UI_VIEWERS_PER_ADDRESS=str(viewers),
        DDM_UI_CONNECTIONS_PER_ADDRESS=str(viewers),  # every viewer comes from 127.0.0.1
    )
    specs = [fake.start_job(labels=(1, 7), steps=steps) for _ in range(viewers)]
    probe = HealthProbe(ui.url)
    sockets = [WireSocket(ui.url) for _ in specs]
    drain = Drain(sockets)
    try:
        each_watches_its_job_to_the_end(fake, sockets, specs, steps)
        refused = [s.acks.get(i) for i, s in enumerate(sockets) if not (s.acks.get(i) or {}).get("ok")]
        assert not refused, refused[:3]
        connections, threads = ui_redis_connections(fake.prefix), threads_of(ui.pid)
    finally:
        codes = probe.stop()
        drain.stop()
        for s in sockets:
            s.close()
    report = (
        f"\nmany viewers: {viewers} viewers of {viewers} jobs x {steps} steps: /healthz {len(codes)} probes, "
        f"codes {sorted(set(codes))}; the UI held {connections} Redis connections and ran {threads} threads\n"
    )
    sys.__stdout__.write(report)
    assert codes and set(codes) == {200}, (report, probe.errors[:3])
    assert connections <= UIConfig(threads=THREADS).redis_max_connections, report  # the pool's bound


@pytest.mark.load
def test_50_viewers_of_one_large_job_get_every_step(production_ui, fake):
    """Half watch from the start, half join mid-job (a replay of 20 frames of 64 images each, while
    the job runs on)."""
    viewers, steps = 50, 40
    ui = production_ui(DDM_UI_VIEWERS_PER_ADDRESS=str(viewers), DDM_UI_CONNECTIONS_PER_ADDRESS=str(viewers))
    spec = fake.start_job(labels=[i % 10 for i in range(64)], steps=steps)  # 87 KB per frame and viewer
    sockets = [WireSocket(ui.url) for _ in range(viewers)]
    drain = Drain(sockets)
    try:
        t0 = time.monotonic()
        for i, s in enumerate(sockets[: viewers // 2]):
            s.emit("watch", {"job_id": spec.job_id}, ack=i)
        stream(fake, [spec], steps // 2, interval_s=0.1, finish=False)
        for i, s in enumerate(sockets[viewers // 2 :]):
            s.emit("watch", {"job_id": spec.job_id}, ack=i)
        stream(fake, [spec], steps, interval_s=0.1, first=steps // 2 + 1)
        wait_all_done(sockets, [spec.job_id] * viewers, steps, timeout_s=90)
        took = time.monotonic() - t0
    finally:
        drain.stop()
        for s in sockets:
            s.close()
    sys.__stdout__.write(
        f"\nmany viewers: {viewers} viewers of one 64-image job: all {steps} steps in {took:.1f} s\n"
    )
