"""A real Redis Sentinel set for the tests: a master and a replica (both with a password) and one
sentinel, started on free ports in a folder and killed afterwards."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from .services import free_port

SECRET = "s3cret-pw"
SENTINEL_SECRET = "sent1nel-pw"  # the sentinel's own requirepass, when a set is started with one
SERVICE = "ddmtest"

needs_redis_server = pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")


def start(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(args, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def wait_until(check, timeout: float, what: str) -> float:
    """Seconds until check() is true (errors count as false)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if check():
                return time.monotonic() - t0
        except redis.RedisError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{what} not within {timeout} s")


class SentinelSet:
    """redis-server master + replica (both requirepass SECRET) and one redis-sentinel monitoring them as
    SERVICE (quorum 1, down after 1 s), in `folder`, on free ports. stop() kills what it started."""

    def __init__(self, folder: Path, sentinel_password: str | None = None):
        self.folder = folder
        self.sentinel_password = sentinel_password  # the sentinel's requirepass (None: none)
        self.ports = {"master": free_port(), "replica": free_port(), "sentinel": free_port()}
        self.procs: dict[str, subprocess.Popen] = {}

    def server(self, name: str, *extra: str) -> None:
        args = [
            "redis-server",
            "--port",
            str(self.ports[name]),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.folder),
        ]
        args += ["--dbfilename", f"{name}.rdb", "--save", "", "--appendonly", "no"]
        args += ["--requirepass", SECRET, "--masterauth", SECRET, *extra]
        self.procs[name] = start(args, self.folder / f"{name}.log")

    def client(self, name: str, **kw) -> redis.Redis:
        password = self.sentinel_password if name == "sentinel" else SECRET
        return redis.Redis(port=self.ports[name], password=password, socket_timeout=2.0, **kw)

    def start(self) -> SentinelSet:
        self.server("master")
        self.server("replica", "--replicaof", "127.0.0.1", str(self.ports["master"]))
        master = self.client("master")
        wait_until(lambda: master.info("replication")["connected_slaves"] == 1, 20, "the replica")
        conf = self.folder / "sentinel.conf"  # the sentinel rewrites its config file: its own copy
        conf.write_text(
            f"port {self.ports['sentinel']}\nbind 127.0.0.1\ndir {self.folder}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.ports['master']} 1\n"
            f"sentinel auth-pass {SERVICE} {SECRET}\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\nsentinel failover-timeout {SERVICE} 10000\n"
            + (f"requirepass {self.sentinel_password}\n" if self.sentinel_password else "")
        )
        self.procs["sentinel"] = start(
            ["redis-server", str(conf), "--sentinel"], self.folder / "sentinel.log"
        )
        sentinel = self.client("sentinel")
        wait_until(lambda: sentinel.sentinel_slaves(SERVICE), 20, "the sentinel's view of the replica")
        return self

    def url(self, db: int = 0, service: str = SERVICE, sentinel_password: str | None = None) -> str:
        """The set's Sentinel URL, a sentinel nobody listens on first: the next one is asked at once;
        with sentinel_password, the URL's ?sentinel_password= (percent-encoded)."""
        sentinels = f"127.0.0.1:{free_port()},127.0.0.1:{self.ports['sentinel']}"
        query = f"?sentinel_password={quote(sentinel_password, safe='')}" if sentinel_password else ""
        return f"redis+sentinel://:{SECRET}@{sentinels}/{service}/{db}{query}"

    def kill9(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait(timeout=10)
        self.procs.clear()
