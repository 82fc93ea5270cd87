"""Viewers that read slowly or not at all, through a real server (Werkzeug, in this process, so the test
can set the stall time) on the real Redis: a slow one falls out of the room and is caught up by the
replay, still getting every step once, in order; a silent one is disconnected after viewer_stall_s and
its backlog freed; neither holds back the others."""

from __future__ import annotations

import threading
import time

import pytest
from werkzeug.serving import make_server

from tests.support.services import free_port
from tests.support.wire import Drain, WireSocket

STEPS = 100  # 8.7 MB of frames: more than the kernel buffers a silent socket fills first (4 MB)


@pytest.fixture
def served(make_app):
    """served(**UIConfig overrides) -> (url, app): the app behind a threaded Werkzeug server."""
    servers = []

    def start(**overrides):
        app = make_app(**overrides)
        port = free_port()
        server = make_server("127.0.0.1", port, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{port}", app

    yield start
    for server in servers:
        server.shutdown()


class SlowDrain(Drain):
    """Reads one message every `pause_s`."""

    def __init__(self, sockets, pause_s: float):
        self.pause_s = pause_s
        super().__init__(sockets)

    def run(self) -> None:
        while not self.stopped.is_set():
            for key, _ in self.sel.select(0.1):
                try:
                    message = key.data.ws.recv()
                except Exception:  # noqa: BLE001 - closed
                    self.sel.unregister(key.fileobj)
                    key.data.closed = True
                    continue
                key.data.handle(message)
                time.sleep(self.pause_s)


def wait(pred, timeout_s: float, what) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, what()
        time.sleep(0.05)


def test_slow_and_silent_viewers(served, fake):
    url, app = served(viewer_backlog_kb=256, viewer_stall_s=2.0)
    hub = app.extensions["ddm"].hub
    spec = fake.start_job(labels=[i % 10 for i in range(64)], steps=STEPS)  # 87 KB per frame
    fast, slow, silent = WireSocket(url), WireSocket(url, rcvbuf=8192), WireSocket(url, rcvbuf=4096)
    drains = [Drain([fast]), SlowDrain([slow], pause_s=0.1)]
    for i, s in enumerate((fast, slow, silent)):
        s.emit("watch", {"job_id": spec.job_id}, ack=i)
    wait(lambda: hub.stats()["viewers"] == 3, 10, hub.stats)
    for step in range(1, STEPS + 1):
        fake.frame(spec, step)
        time.sleep(0.02)  # 5 times faster than the slow viewer reads: it falls out of the room
    fake.finish(spec)

    expected = list(range(1, STEPS + 1))

    def done(s):
        return s.steps.get(spec.job_id) == expected and s.statuses[-1:] == ["done"]

    wait(lambda: done(fast), 20, lambda: f"fast viewer: {fast.steps}, {fast.statuses}")
    wait(lambda: done(slow), 60, lambda: f"slow viewer: {slow.steps}, {slow.statuses}, closed {slow.closed}")
    assert not slow.closed  # slow is fine, it was never cut off
    assert hub.lagged >= 2  # the silent viewer fell out of the room once, the slow one at least once
    # the silent one took nothing for viewer_stall_s: disconnected, and the UI keeps nothing of it
    wait(lambda: hub.stats()["viewers"] == 2, 20, hub.stats)
    assert hub.dropped == 1
    assert silent.ws.sock is not None
    for d in drains:
        d.stop()
    for s in (fast, slow, silent):
        s.close()
    wait(lambda: hub.stats() == {"tailers": 0, "viewers": 0}, 10, hub.stats)
