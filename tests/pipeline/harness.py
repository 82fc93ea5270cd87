"""Run the real pipeline for a test: worker processes on the real RabbitMQ and Redis, isolated by a
unique prefix for every queue and key, torn down (processes, queues, keys) afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import redis

from ddm.ops.cleanup import delete_prefix
from ddm.ops.supervisor import stop_processes
from ddm.schema.names import Names
from ddm.schema.settings import Settings

AMQP_URL = os.environ.get("DDM_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
REDIS_URL = os.environ.get("DDM_REDIS_URL", "redis://127.0.0.1:6379/0")


class Pipeline:
    def __init__(self, deployment: Path, log_dir: Path, *, timeout_s: float = 4.0, max_wait_ms: float = 5.0):
        self.deployment = deployment
        self.log_dir = log_dir
        self.prefix = f"t{uuid.uuid4().hex[:10]}."
        self.names = Names(self.prefix)
        self.env = {
            **os.environ,
            "DDM_PREFIX": self.prefix,
            "DDM_AMQP_URL": AMQP_URL,
            "DDM_REDIS_URL": REDIS_URL,
            "DDM_REQUEST_TIMEOUT_S": str(timeout_s),
            "DDM_HEARTBEAT_S": "0.5",
            "DDM_HEARTBEAT_TTL_S": "5",
            "DDM_MAX_WAIT_MS": str(max_wait_ms),
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
        }
        self.settings = Settings.from_env(self.env)
        self.procs: dict[str, subprocess.Popen] = {}
        self.redis = redis.Redis.from_url(REDIS_URL)

    # -- processes -------------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "ddm.ops.cli", "worker", *args, "--worker-id", name],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs[name] = proc
        return proc

    def start_expert(
        self, expert: int, name: str, buckets: str = "1,2,4,8,16,32", extra=()
    ) -> subprocess.Popen:
        return self._spawn(
            name,
            [
                "expert",
                "--deployment",
                str(self.deployment),
                "--expert",
                str(expert),
                "--buckets",
                buckets,
                *extra,
            ],
        )

    def start_router(self, name: str = "router") -> subprocess.Popen:
        return self._spawn(name, ["router", "--deployment", str(self.deployment)])

    def wait_ready(self, *names: str, timeout: float = 180.0) -> None:
        """Until every named worker has written its heartbeat."""
        deadline = time.monotonic() + timeout
        for name in names:
            while not self.redis.exists(self.names.worker(name)):
                proc = self.procs[name]
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {proc.returncode}; see {self.log_dir / (name + '.log')}"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{name} not ready after {timeout} s; see {self.log_dir / (name + '.log')}"
                    )
                time.sleep(0.1)

    def heartbeat(self, name: str) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.redis.hgetall(self.names.worker(name)).items()}

    def counter(self, name: str, field: str, at_least: int, timeout: float = 10.0) -> int:
        """A heartbeat counter once it reaches `at_least` (heartbeats lag the work by up to one period),
        or its last value after `timeout` so the caller's assertion shows what was seen."""
        deadline = time.monotonic() + timeout
        while True:
            value = int(self.heartbeat(name).get(field, 0))
            if value >= at_least or time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    def kill9(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def client(self):
        from ddm.router.client import Client

        return Client(amqp_url=AMQP_URL, redis_url=REDIS_URL, prefix=self.prefix)

    # -- teardown --------------------------------------------------------------------------------

    def close(self) -> None:
        stop_processes(self.procs.values(), grace_s=10)
        self.procs.clear()
        cleanup_prefix(self.prefix)


def cleanup_prefix(prefix: str, experts: int = 8) -> None:
    """Delete every Redis key and every queue/exchange a test made under `prefix`."""
    delete_prefix(AMQP_URL, REDIS_URL, prefix, range(experts))


class OutputWatcher:
    """Collects a child's merged stdout/stderr lines on a thread; wait_line blocks for one."""

    def __init__(self, proc: subprocess.Popen, name: str = "ddm up"):
        import threading

        self.proc, self.name, self.lines = proc, name, []
        self.reader = threading.Thread(target=lambda: self.lines.extend(proc.stdout), daemon=True)
        self.reader.start()

    def tail(self, n: int = 40) -> str:
        return "".join(self.lines[-n:])

    def wait_line(self, text: str, timeout: float = 240.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if hit := next((x for x in list(self.lines) if text in x), None):
                return hit
            assert self.proc.poll() is None, f"{self.name} exited:\n" + self.tail()
            time.sleep(0.2)
        raise AssertionError(f"no {text!r} from {self.name}:\n" + self.tail())
