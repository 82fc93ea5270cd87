"""Run the real pipeline for a test: `ddm` worker processes on the real RabbitMQ and Redis, isolated by
a unique prefix for every queue and key, torn down (processes, queues, keys) afterwards; and the waits
that go with child processes (readiness, a line of output, a job's progress)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import redis

from ddm.ops.up.supervisor import stop_processes
from ddm.schema.messages import JobSpec
from ddm.schema.names import Names
from ddm.schema.settings import Settings

from .constants import TEST_BUCKETS
from .services import AMQP_URL, REDIS_URL, cleanup_prefix, new_prefix

DDM_CLI = (sys.executable, "-m", "ddm.ops.cli")  # `ddm` as a child process of this interpreter


def service_env(prefix: str, **extra: str) -> dict[str, str]:
    """This process's environment, plus what a `ddm` child needs: the test's broker, Redis and prefix,
    one math thread, unbuffered output. `extra` (DDM_* settings) goes on top."""
    env = {**os.environ, "DDM_PREFIX": prefix, "DDM_AMQP_URL": AMQP_URL, "DDM_REDIS_URL": REDIS_URL}
    return env | {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"} | extra


def spawn_worker(
    args: list[str], name: str, env: dict[str, str], log_dir: Path, command_prefix=()
) -> subprocess.Popen:
    """`ddm worker ARGS --worker-id NAME`, its merged output in log_dir/NAME.log. command_prefix: put
    in front of the command line (e.g. `ip netns exec NAME`, to run it on another simulated host)."""
    log = open(log_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the process
    argv = [*command_prefix, *DDM_CLI, "worker", *args, "--worker-id", name]
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)


def buckets_flag(buckets=TEST_BUCKETS) -> str:
    return ",".join(str(b) for b in buckets)


class Pipeline:
    """Expert and router workers on one fresh prefix. A context manager: leaving it stops every
    process and deletes the prefix's queues and keys."""

    def __init__(
        self,
        deployment: Path,
        log_dir: Path,
        *,
        timeout_s: float = 4.0,
        max_wait_ms: float = 5.0,
        env: dict[str, str] | None = None,
    ):
        """env: more DDM_* settings for every process (e.g. a private Redis's DDM_REDIS_URL)."""
        self.deployment = deployment
        self.log_dir = log_dir
        self.prefix = new_prefix()
        self.names = Names(self.prefix)
        defaults = {
            "DDM_REQUEST_TIMEOUT_S": str(timeout_s),
            "DDM_HEARTBEAT_S": "0.5",
            "DDM_HEARTBEAT_TTL_S": "5",
            "DDM_MAX_WAIT_MS": str(max_wait_ms),
            "DDM_EXPERT_LOSS_GRACE_S": "2",  # a killed expert is known in seconds (failover tests raise it)
        }
        self.env = service_env(self.prefix, **(defaults | (env or {})))
        self.settings = Settings.from_env(self.env)
        self.procs: dict[str, subprocess.Popen] = {}
        self.redis = redis.Redis.from_url(self.settings.redis_url)

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- processes -------------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], env=None, command_prefix=()) -> subprocess.Popen:
        """env: settings of this one process on top of the pipeline's (e.g. DDM_AMQP_URL through a
        link); command_prefix: in front of its command line (tests/support/links.py gives both)."""
        env = {**self.env, **(env or {})}
        self.procs[name] = spawn_worker(args, name, env, self.log_dir, command_prefix)
        return self.procs[name]

    def start_expert(
        self, expert: int, name: str, buckets: str = buckets_flag(), extra=(), env=None, command_prefix=()
    ) -> subprocess.Popen:
        args = ["expert", "--deployment", str(self.deployment), "--expert", str(expert)]
        return self._spawn(name, [*args, "--buckets", buckets, *extra], env, command_prefix)

    def start_router(self, name: str = "router", extra=(), env=None, command_prefix=()) -> subprocess.Popen:
        args = ["router", "--deployment", str(self.deployment), *extra]
        return self._spawn(name, args, env, command_prefix)

    def start_decoder(self, name: str = "decoder", extra=(), env=None) -> subprocess.Popen:
        """A latent deployment's decoder worker (`ddm worker decoder`)."""
        return self._spawn(name, ["decoder", "--deployment", str(self.deployment), *extra], env)

    def start_text_encoder(self, name: str = "text", extra=(), env=None) -> subprocess.Popen:
        """A text deployment's prompt encoder (`ddm worker text-encoder`)."""
        return self._spawn(name, ["text-encoder", "--deployment", str(self.deployment), *extra], env)

    def up(self, experts: dict[str, int], routers=("router",)) -> Pipeline:
        """Start the named expert replicas ({name: expert id}) and routers; wait until all are ready."""
        for name, expert in experts.items():
            self.start_expert(expert, name)
        for name in routers:
            self.start_router(name)
        self.wait_ready(*experts, *routers)
        return self

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
        from ddm.client.client import Client

        return Client(settings=self.settings)

    # -- teardown --------------------------------------------------------------------------------

    def close(self) -> None:
        stop_processes(self.procs.values(), grace_s=10)
        self.procs.clear()
        cleanup_prefix(self.prefix)


class OutputWatcher:
    """Collects a child's merged stdout/stderr lines on a thread; wait_line blocks for one."""

    def __init__(self, proc: subprocess.Popen, name: str = "ddm up"):
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


@contextlib.contextmanager
def ddm_up_with_ui(deployment: Path, prefix: str, buckets: str = "1,9"):
    """`ddm up` of `deployment` with its web UI on a free port, on the test's prefix, ready (its output
    watched); stopped afterwards. Yields (the processes' environment, the UI's URL)."""
    from tests.support.services import free_port

    port = free_port()
    env = service_env(prefix, DDM_HEARTBEAT_S="0.5", DDM_HEARTBEAT_TTL_S="3")
    argv = [*DDM_CLI, "up", "--deployment", str(deployment), "--buckets", buckets, "--ui-port", str(port)]
    proc = subprocess.Popen(
        [*argv, "--grace", "10"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        OutputWatcher(proc).wait_line("ddm up: ready.")
        yield env, f"http://127.0.0.1:{port}/"
    finally:
        stop_processes([proc], grace_s=60)


def wait_for_step(client, job_id: str, step: int, timeout: float = 120.0) -> int:
    """The job's stored step once it reaches `step` (polled from its hash through the client)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = client.status(job_id).step or 0
        if done >= step:
            return done
        time.sleep(0.05)
    raise TimeoutError(f"job {job_id} did not reach step {step}")


def local_reference(deployment_path, spec: JobSpec, init_noise: np.ndarray | None = None) -> np.ndarray:
    """What `ddm sample --local` gives for `spec` (its unset fields resolved as the router resolves them;
    from `init_noise` where given): the answer a pipeline run must equal."""
    return local_references(deployment_path, [spec], [init_noise])[0]


def local_references(deployment_path, specs: list[JobSpec], noises: list | None = None) -> list[np.ndarray]:
    """local_reference of every spec (and its initial noise, None: the seed's), loading (and compiling)
    the experts once. A latent deployment's are the final latents (decode them with
    router.deployment_loader.load_decoder, as `ddm sample`)."""
    from ddm.router.sampler import sample_local
    from ddm.schema.deployment import Deployment
    from ddm.workers.text_rows import job_velocities

    policy, velocities, descriptor = _loaded(deployment_path)
    source = Deployment.load(deployment_path).text_encoder  # a text deployment's encoder folders
    jobs = [descriptor.resolve(spec) for spec in specs]
    local = [job_velocities(velocities, job, source=source) for job in jobs]
    noises = noises or [None] * len(jobs)
    return [
        sample_local(lj.velocities, policy, job, prompt=lj.prompt, init_noise=noise)
        for lj, job, noise in zip(local, jobs, noises, strict=True)
    ]


def decoded_gap(client, job_id: str, deployment_path, spec: JobSpec) -> tuple[np.ndarray, float]:
    """A latent deployment's finished job against `ddm sample` for `spec`: (its decoded pixels, the largest
    gap of its latents and pixels from the in-process sampler's latents and their decoding)."""
    from ddm.router.deployment_loader import load_decoder
    from ddm.schema.deployment import Deployment

    pixels = client.result(job_id, timeout=30)
    latents = client.result(job_id, timeout=30, latent=True)
    want_z = local_reference(deployment_path, spec)
    want_x = load_decoder(Deployment.load(deployment_path)).decode(want_z)
    return pixels, max(float(np.abs(latents - want_z).max()), float(np.abs(pixels - want_x).max()))


_LOADED: list[tuple[object, tuple]] = []  # (fingerprint, (policy, velocities, descriptor)), newest last
_LOADED_MAX = 3  # deployments kept loaded in one test process (a few MB each)


def _loaded(deployment_path) -> tuple:
    """The deployment's policy, expert velocities and local descriptor, loaded (and the JAX buckets
    compiled) once per test process while nothing under its files changes: many tests take several
    local references of one deployment. Keyed by the Deployment record and the size and mtime of every
    file of its experts, router and decoder, so a test that rewrites a checkpoint loads it again."""
    from ddm.router.deployment_loader import describe, load_experts, load_policy
    from ddm.schema.deployment import Deployment

    deployment = Deployment.load(deployment_path)
    key = (deployment, _files_stat(deployment))
    for i, (seen, loaded) in enumerate(_LOADED):
        if seen == key:
            _LOADED.append(_LOADED.pop(i))
            return loaded
    policy = load_policy(deployment)
    velocities = {k: e.velocity for k, e in load_experts(deployment).items()}
    loaded = (policy, velocities, describe(deployment, policy, "local"))
    _LOADED[: max(0, len(_LOADED) - _LOADED_MAX + 1)] = []
    _LOADED.append((key, loaded))
    return loaded


def _files_stat(deployment) -> tuple:
    folders = [e.checkpoint for e in deployment.experts] + [
        entry.checkpoint for entry in (deployment.router, deployment.decoder) if entry and entry.checkpoint
    ]
    files = [Path(deployment.path)] + sorted(f for d in folders for f in Path(d).rglob("*") if f.is_file())
    return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)
