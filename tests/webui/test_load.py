"""Load: 50 Socket.IO clients (websocket transport) watching 20 concurrent jobs on the production
server command (gunicorn, one gevent worker). Every client must receive every step of its job,
once, in order - those that join mid-job through the replay - and the UI process's peak memory is
reported (VmHWM) and bounded.

The jobs' frames are written into Redis exactly as the router writes them (JobStore), at a steady
pace; the UI only ever reads Redis, so this measures the UI alone. Run it by itself with
`pytest -m load -s tests/webui/test_load.py`.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ddm.ops.up.supervisor import stop_processes
from ddm.ops.up.ui import PRODUCTION_COMMAND
from tests.support.harness import service_env
from tests.support.services import free_port, wait_healthy

CLIENTS = 50
JOBS = 20
STEPS = 40
LATE_CLIENTS = 15  # connect after half the steps: they get the first half replayed
STEP_INTERVAL_S = 0.05  # all 20 jobs advance one step every 50 ms (400 frames/s through the UI)
MAX_RSS_MB = 400


def rss_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = int(value.split()[0])
    return out


def worker_pid(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    assert children, "gunicorn has no worker process"
    return int(children[0])


class Watcher:
    """One browser-like client: watch one job, record every frame's step and the final status."""

    def __init__(self, url: str, job_id: str):
        import socketio

        self.job_id = job_id
        self.steps: list[int] = []
        self.final: str | None = None
        self.after_final = 0  # frames that arrived after the final status (must stay 0)
        self.done = threading.Event()
        self.sio = socketio.Client(reconnection=False)
        self.sio.on("frame", self._frame)
        self.sio.on("job", self._job)
        self.sio.connect(url, transports=["websocket"], wait_timeout=10)
        ack = self.sio.call("watch", {"job_id": job_id}, timeout=10)
        assert ack["ok"], ack

    def _frame(self, f):
        assert f["job_id"] == self.job_id
        if self.final:
            self.after_final += 1
        self.steps.append(f["step"])

    def _job(self, j):
        if j["status"] in ("done", "failed") and len(self.steps) >= STEPS:
            self.final = j["status"]
            self.done.set()


@pytest.mark.load
def test_fifty_clients_watch_twenty_jobs(fake, fake_deployment, tmp_path):
    port = free_port()
    fake.publish(fake_deployment)  # a serving router's descriptor, as the page reads it
    env = service_env(
        fake.prefix,
        DDM_UI_BIND=f"127.0.0.1:{port}",
        DDM_UI_THREADS=str(CLIENTS + 30),
        DDM_UI_VIEWERS_PER_ADDRESS=str(CLIENTS),  # every client comes from 127.0.0.1
        DDM_UI_CONNECTIONS_PER_ADDRESS=str(CLIENTS),
        DDM_LOG_LEVEL="warning",
    )
    argv = [sys.executable, "-m", *shlex.split(PRODUCTION_COMMAND)]  # python -m gunicorn -c ... 'app()'
    log = open(tmp_path / "ui.log", "wb")  # noqa: SIM115 - owned by the process
    server = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    clients: list[Watcher] = []
    try:
        wait_healthy(url, server, tmp_path / "ui.log")
        pid = worker_pid(server.pid)
        base_kb = rss_kb(pid)["VmRSS"]

        jobs = [fake.start_job(labels=(0, 3, 6, 9), steps=STEPS) for _ in range(JOBS)]
        t0 = time.monotonic()
        for i in range(CLIENTS - LATE_CLIENTS):
            clients.append(Watcher(url, jobs[i % JOBS].job_id))
        connect_s = time.monotonic() - t0

        def write(first: int, last: int) -> None:
            for step in range(first, last + 1):
                tick = time.monotonic()
                for spec in jobs:
                    fake.frame(spec, step)
                time.sleep(max(0.0, STEP_INTERVAL_S - (time.monotonic() - tick)))

        t1 = time.monotonic()
        write(1, STEPS // 2)
        for i in range(LATE_CLIENTS):  # join mid-job: replay of the first half, then live
            clients.append(Watcher(url, jobs[(i * 7) % JOBS].job_id))
        write(STEPS // 2 + 1, STEPS)
        for spec in jobs:
            fake.finish(spec)
        for c in clients:
            got = f"client of {c.job_id}: got {len(c.steps)} frames, final {c.final}"
            assert c.done.wait(timeout=30), got
        stream_s = time.monotonic() - t1
        time.sleep(0.3)

        expected = list(range(1, STEPS + 1))
        in_order = sum(c.steps == expected for c in clients)
        mem = rss_kb(pid)
        watched = len({c.job_id for c in clients})
        frames = sum(len(c.steps) for c in clients)
        report = (
            f"\nload: {len(clients)} Socket.IO clients (websocket) on {watched} concurrent jobs "
            f"x {STEPS} steps "
            f"({LATE_CLIENTS} joined mid-job); {in_order}/{len(clients)} received every step once, in order; "
            f"{frames} frames delivered in {stream_s:.1f} s; connect {connect_s:.1f} s for "
            f"{CLIENTS - LATE_CLIENTS} clients\n"
            f"load: UI worker pid {pid}: RSS {base_kb / 1024:.0f} MB idle -> {mem['VmRSS'] / 1024:.0f} MB, "
            f"peak (VmHWM) {mem['VmHWM'] / 1024:.0f} MB\n"
        )
        sys.__stdout__.write(report)
        (tmp_path / "load.txt").write_text(report)
        assert in_order == len(clients), [c.steps for c in clients if c.steps != expected][:3]
        assert all(c.final == "done" and c.after_final == 0 for c in clients)
        assert mem["VmHWM"] < MAX_RSS_MB * 1024, report
    finally:
        for c in clients:
            with contextlib.suppress(Exception):
                c.sio.disconnect()
        stop_processes([server], grace_s=20)
        log.close()
