"""Fixtures of the pipeline tests."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
import redis

from tests.support.services import free_port


@pytest.fixture
def private_redis(tmp_path):
    """A Redis of this test's own (killing the shared one would break every other test), with an
    append-only file so a kill -9 loses nothing."""
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path)]
    argv += ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
    procs = []

    def start():
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL))
        r = redis.Redis(port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                r.ping()
                return procs[-1]
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "private redis did not start"
                time.sleep(0.05)

    assert shutil.which("redis-server"), "redis-server is needed (it runs the project's Redis)"
    start()
    yield f"redis://127.0.0.1:{port}/0", start, procs
    for p in procs:
        p.kill()
        p.wait()
