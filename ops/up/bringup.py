"""`ddm up`: bring up a whole deployment on this machine - expert workers and router - and keep it up.

Checks that RabbitMQ and Redis answer, starts `ddm worker expert` (N replicas per expert), a latent
deployment's `ddm worker decoder` or a text deployment's `ddm worker text-encoder`, and `ddm worker
router` as child processes, waits until each one's heartbeat appears in Redis, prints what runs where,
restarts a child that dies (with backoff) and stops them all on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from ddm.ops.up.extras_check import missing_extras_message
from ddm.ops.up.supervisor import MAX_START_FAILURES, ChildSpec, Supervisor, describe_exit, python_module
from ddm.ops.up.ui import port_problem, ui_child, ui_url, wait_ui
from ddm.schema.errors import ConfigError, SchemaError, expected
from ddm.schema.heartbeat import WorkerHeartbeat

NEURON_CORES_PER_DEVICE = 2  # NeuronCores of one trn1 or inf2 device (a trn2 device has 8)

START_HINT = (
    "start them with `rabbitmq-server -detached` and `redis-server --daemonize yes --bind 127.0.0.1 "
    "--port 6379` (or `docker compose up -d rabbitmq redis`), or point DDM_AMQP_URL / DDM_REDIS_URL at "
    "running ones"
)


def submit_hint(deployment) -> str:
    """A first job this deployment takes, for the ready line: a text deployment's first example prompt,
    a label of a class deployment (7 where it has eight classes or more), nothing for an unconditional
    one."""
    if deployment.conditioning.kind == "text":
        prompt = deployment.example_prompts[0] if deployment.example_prompts else "a red heart"
        return f'ddm submit --prompt "{prompt}" --wait'
    classes = deployment.sample_space.num_classes
    return f"ddm submit --label {7 if classes > 7 else 0} --wait" if classes else "ddm submit --wait"


@dataclass(frozen=True)
class UpOptions:
    """What `ddm up` brings up and how (its flags, ddm.ops.cli.up)."""

    deployment: Path | None = None  # None: resolve_deployment's default
    replicas: tuple[str, ...] = ()  # ["K=N", "K=N,K=N"]: worker replicas per expert (default_replicas)
    routers: int = 1
    max_batch: int | None = None  # expert workers' flags, passed on when set
    max_wait_ms: float | None = None
    buckets: str | None = None
    max_jobs: int | None = None  # the routers' flag
    ui: bool = True
    ui_host: str = "127.0.0.1"
    ui_port: int = 8000
    ready_timeout: float = 600.0
    grace: float = 10.0
    broker_nodes: int = 0  # > 0: a local cluster of that many RabbitMQ nodes (ops/up/broker_cluster.py)
    # replicas of a neuron expert without --replicas: one per NeuronCore of a device (trn1, inf2: 2)
    neuron_cores_per_device: int = NEURON_CORES_PER_DEVICE


def parse_replicas(
    items: list[str], num_experts: int, defaults: dict[int, int] | None = None
) -> dict[int, int]:
    """['0=2', '1=1,2=3'] -> {0: 2, 1: 1, 2: 3, ...}; an expert not named gets its entry of `defaults`,
    else 1 (default_replicas gives a neuron expert one per NeuronCore)."""
    counts = {k: (defaults or {}).get(k, 1) for k in range(num_experts)}
    for item in ",".join(items).split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        try:
            k, n = int(key), int(value)
        except ValueError:
            k = n = -1
        if not sep or not 0 <= k < num_experts or not 1 <= n <= 64:
            raise ConfigError(
                expected(f"--replicas K=N with K an expert id in 0..{num_experts - 1} and N in 1..64", item)
            )
        counts[k] = n
    return counts


def default_replicas(deployment, cores_per_device: int = NEURON_CORES_PER_DEVICE) -> dict[int, int]:
    """Worker replicas per expert when --replicas does not say: 1, and for an expert whose deployment
    device is neuron one per NeuronCore of a device (`cores_per_device`, 2 on trn1 and inf2), so one
    `ddm up` fills a device."""
    if not 1 <= cores_per_device <= 64:
        raise ConfigError(expected("NeuronCores per device in 1..64", cores_per_device))
    return {e.id: cores_per_device if e.device == "neuron" else 1 for e in deployment.experts}


def parse_core_list(text: str) -> list[int]:
    """NEURON_RT_VISIBLE_CORES's syntax, '0-3' or '4,5' or '0-1,4': the cores it names, in order."""
    cores: list[int] = []
    for part in text.replace(" ", "").split(","):
        first, sep, last = part.partition("-")
        if not (first.isdigit() and (not sep or last.isdigit())) or (sep and int(last) < int(first)):
            raise ConfigError(expected("NEURON_RT_VISIBLE_CORES as core indices and ranges (0-3, 4,5)", text))
        cores.extend(range(int(first), int(last if sep else first) + 1))
    if len(set(cores)) != len(cores):
        raise ConfigError(expected("NEURON_RT_VISIBLE_CORES naming each core once", text))
    return cores


def neuron_core_env(workers: int, environ=None) -> list[dict[str, str]]:
    """NEURON_RT_VISIBLE_CORES for each of `workers` neuron workers: one core each, in order. The Neuron
    runtime gives every core it can see to the first process that opens it, and no other process may use
    them until it exits: without this the second worker of a device could not start. The cores are
    0, 1, ... or, where the user set NEURON_RT_VISIBLE_CORES, the ones it names (too few is an error)."""
    environ = os.environ if environ is None else environ
    given = environ.get("NEURON_RT_VISIBLE_CORES")
    cores = parse_core_list(given) if given else list(range(workers))
    if len(cores) < workers:
        want = f"NEURON_RT_VISIBLE_CORES naming {workers} NeuronCores, one per neuron worker"
        raise ConfigError(expected(want, given))
    return [{"NEURON_RT_VISIBLE_CORES": str(core)} for core in cores[:workers]]


def check_services(settings) -> list[str]:
    """Problems reaching RabbitMQ and Redis, one line each (empty when both answer)."""
    from ddm.runtime.amqp import connect
    from ddm.runtime.redis_conn import connect_redis
    from ddm.schema.errors import ServiceUnavailableError

    problems = []
    try:
        connect(settings.amqp_url).close()
    except ServiceUnavailableError as exc:
        problems.append(f"RabbitMQ: {exc}")
    try:
        connect_redis(settings.redis_url).close()
    except ServiceUnavailableError as exc:
        problems.append(f"Redis: {exc}")
    return problems


def read_heartbeat(r, key: str) -> WorkerHeartbeat | None:
    """A worker's heartbeat record, or None when absent or not a heartbeat (another key type, another
    program's hash): `ddm up` only reads it to show devices and to spot a worker already running."""
    try:
        raw = r.hgetall(key)
        return WorkerHeartbeat.decode(raw) if raw else None
    except (redis.ResponseError, SchemaError):
        return None


def expert_thread_env(expert_workers: int, environ=None, cpus: int | None = None) -> dict[str, str]:
    """OMP_NUM_THREADS for each expert worker: the cores shared out among them (at least 1), unless the
    user set it. With the default (all cores per process) every worker's OpenMP threads spin against
    the others, the router and the broker: on 2 cores one job ran at 0.68 images/s with default threads
    and 1.08 with one thread per worker (docs/BENCHMARKS.md)."""
    environ = os.environ if environ is None else environ
    if "OMP_NUM_THREADS" in environ:
        return {}
    cpus = cpus or os.cpu_count() or 1
    return {"OMP_NUM_THREADS": str(max(1, cpus // max(1, expert_workers)))}


def build_children(deployment, replicas: dict[int, int], options: UpOptions, environ=None) -> list:
    """ChildSpecs and their roles: [(ChildSpec, role, expert id or None)]. Every worker of a neuron
    expert gets its own NeuronCore (neuron_core_env), counted over all the neuron experts started here,
    so two of them never share a core."""
    base = (*python_module("ddm.ops.cli"), "worker")
    dep = ("--deployment", str(deployment.path))
    expert_flags: tuple[str, ...] = ()
    if options.max_batch is not None:
        expert_flags += ("--max-batch", str(options.max_batch))
    if options.max_wait_ms is not None:
        expert_flags += ("--max-wait-ms", str(options.max_wait_ms))
    if options.buckets is not None:
        expert_flags += ("--buckets", options.buckets)
    out = []
    threads = expert_thread_env(sum(replicas.values()), environ)
    on_neuron = {e.id for e in deployment.experts if e.device == "neuron"}
    cores = iter(neuron_core_env(sum(n for k, n in replicas.items() if k in on_neuron), environ))
    for k, n in sorted(replicas.items()):
        for i in range(n):
            name = f"up-e{k}-{i}"
            argv = (*base, "expert", *dep, "--expert", str(k), "--worker-id", name, *expert_flags)
            env = {**threads, **(next(cores) if k in on_neuron else {})}
            out.append((ChildSpec(name, argv, env=env or None), "expert", k))
    if deployment.decoder is not None:  # a latent deployment's decoder stage: one replica
        argv = (*base, "decoder", *dep, "--worker-id", "up-decoder")
        out.append((ChildSpec("up-decoder", argv, env=threads or None), "decoder", None))
    if deployment.conditioning.kind == "text":  # a text deployment's prompt encoder: one replica
        argv = (*base, "text-encoder", *dep, "--worker-id", "up-text")
        out.append((ChildSpec("up-text", argv, env=threads or None), "text-encoder", None))
    router_flags = ("--max-jobs", str(options.max_jobs)) if options.max_jobs is not None else ()
    for i in range(options.routers):
        name = "up-router" if options.routers == 1 else f"up-router-{i}"
        argv = (*base, "router", *dep, "--worker-id", name, *router_flags)
        out.append((ChildSpec(name, argv), "router", None))
    return out


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


# ---------------------------------------------------------------- run


class _TerminatedError(Exception):
    """SIGTERM arrived."""


def _on_sigterm(signum, frame):
    raise _TerminatedError()


def _say(line: str, error: bool = False) -> None:
    print(f"ddm up: {line}", file=sys.stderr if error else sys.stdout, flush=True)


def run_up(options: UpOptions) -> int:
    """Bring the deployment up and keep it up until Ctrl-C or SIGTERM; the exit code of `ddm up`."""
    from ddm.runtime.redis_conn import connect_redis
    from ddm.schema.deployment import Deployment, resolve_deployment
    from ddm.schema.settings import Settings
    from ddm.workers.checkpoint import read_meta

    if not 1 <= options.routers <= 16:
        raise ConfigError(expected("--routers in 1..16", options.routers))
    deployment = Deployment.load(resolve_deployment(options.deployment))
    defaults = default_replicas(deployment, options.neuron_cores_per_device)
    replicas = parse_replicas(list(options.replicas), deployment.num_experts, defaults)
    metas = {e.id: read_meta(e.checkpoint) for e in deployment.experts}  # fail before starting anything
    if missing := missing_extras_message(deployment, metas, options.ui):
        _say(missing, error=True)
        return 1  # this environment, not the flags
    if options.broker_nodes:
        return _run_on_local_cluster(options)
    settings = Settings.from_env()
    problems = check_services(settings)
    if problems:
        for line in problems:
            _say(line, error=True)
        _say(f"nothing was started; {START_HINT}.", error=True)
        return 1  # a runtime failure (ddm.ops.cli.exit_codes): the services, not the flags
    r = connect_redis(settings.redis_url)
    children = build_children(deployment, replicas, options)
    workers = [spec.name for spec, _, _ in children]  # the ones that write heartbeats
    if options.ui:
        problem = port_problem(options.ui_host, options.ui_port)
        if problem:
            _say(f"web UI: {problem}; pass --ui-port PORT or --no-ui", error=True)
            return 1
        children.append((ui_child(options.ui_host, options.ui_port), "ui", None))
    clash = _already_running(r, settings.names, [spec.name for spec, _, _ in children])
    if clash:
        _say(
            f"{clash} is already running here under prefix {settings.prefix!r} (its heartbeat is live); "
            "stop that `ddm up` first, or set another DDM_PREFIX",
            error=True,
        )
        return 1
    # a heartbeat left by an earlier, crashed run under the same ids would look like readiness
    r.delete(*[settings.names.worker(spec.name) for spec, _, _ in children])
    up = _Running(options, deployment, settings, r, metas, children)
    return up.supervise(workers)


def _run_on_local_cluster(options: UpOptions) -> int:
    """--broker-nodes N: start a local N-node RabbitMQ cluster, bring the deployment up on it with
    quorum queues (its DDM_AMQP_URL lists every node), stop and remove the cluster afterwards."""
    import dataclasses

    from ddm.ops.up.broker_cluster import BrokerCluster

    if not 3 <= options.broker_nodes <= 9:
        why = "--broker-nodes in 3..9 (quorum queues survive the loss of a minority: 3 nodes tolerate 1)"
        raise ConfigError(expected(why, options.broker_nodes))
    cluster = BrokerCluster(options.broker_nodes)
    _say(f"starting a local {options.broker_nodes}-node RabbitMQ cluster in {cluster.folder}")
    previous = signal.signal(signal.SIGTERM, _on_sigterm)  # a SIGTERM during the boot stops the nodes
    saved = {k: os.environ.get(k) for k in cluster.service_env()}
    try:
        for line in cluster.start().lines():
            _say(f"broker cluster: {line}")
        signal.signal(signal.SIGTERM, previous)
        os.environ.update(cluster.service_env())  # for Settings.from_env() and every child
        return run_up(dataclasses.replace(options, broker_nodes=0))
    except _TerminatedError:
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _say("stopping the broker cluster", error=True)
        cluster.stop()


class _Running:
    """A bring-up past its checks: the supervisor, and what the table of what runs where needs."""

    def __init__(self, options: UpOptions, deployment, settings, r, metas: dict, children: list):
        self.options, self.deployment, self.settings = options, deployment, settings
        self.r, self.metas = r, metas
        self.names = settings.names
        self.role = {spec.name: (kind, k) for spec, kind, k in children}
        specs = [spec for spec, _, _ in children]
        self.sup = Supervisor(specs, grace_s=options.grace, output=sys.stdout)

    def supervise(self, workers: list[str]) -> int:
        from ddm.schema.settings import redact

        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        s, o = self.settings, self.options
        _say(
            f"deployment {self.deployment.name!r} ({self.deployment.path}); broker {redact(s.amqp_url)}; "
            f"redis {redact(s.redis_url)}; prefix {s.prefix!r}"
        )
        try:
            self.sup.start()
            if not _wait_ready(self.sup, self.r, self.names, o.ready_timeout, workers):
                return 1
            if o.ui and not wait_ui(self.sup, o.ui_host, o.ui_port, o.ready_timeout):
                return 1
            print(format_table(self.table()), flush=True)
            if o.ui:
                _say(f"web UI at {ui_url(o.ui_host, o.ui_port)}")
            _say(
                f"ready. Submit with `{submit_hint(self.deployment)}`. Stop everything with Ctrl-C here, or "
                "`ddm down` when it runs detached (`ddm logs -f` follows it then)."
            )
            while True:
                for name, rc in self.sup.poll():
                    _say(f"{name} {describe_exit(rc)}; it will be restarted", error=True)
                time.sleep(0.5)
        except (KeyboardInterrupt, _TerminatedError):
            _say("stopping...", error=True)
            return 0
        finally:
            try:
                codes = self.sup.stop()
            except KeyboardInterrupt:  # a second Ctrl-C: no more grace
                codes = self.sup.stop(grace_s=0)
            signal.signal(signal.SIGTERM, previous)
            stopped = ", ".join(f"{n} ({describe_exit(c)})" for n, c in codes.items() if c is not None)
            _say(f"stopped {stopped or 'nothing'}", error=True)

    def table(self) -> list[tuple[str, ...]]:
        """One row per child: name, pid, role, expert, framework, device, queue (or the UI's URL)."""
        rows = [("NAME", "PID", "ROLE", "EXPERT", "FRAMEWORK", "DEVICE", "QUEUE")]
        for name, child in self.sup.children.items():
            kind, k = self.role[name]
            beat = read_heartbeat(self.r, self.names.worker(name))
            seen = beat.device if beat is not None else None
            if kind == "expert":
                framework = self.metas[k].get("framework", "?")
                device = str(seen or self.deployment.expert(k).device)
                core = (child.spec.env or {}).get("NEURON_RT_VISIBLE_CORES")
                device += f" (core {core})" if core is not None else ""
                queue = self.names.expert_queue(k)
            elif kind == "ui":
                framework, device, queue = "-", "-", ui_url(self.options.ui_host, self.options.ui_port)
            elif kind == "decoder":
                framework, device, queue = (
                    "torch",
                    str(seen or self.deployment.decoder.device),
                    self.names.decoder_queue,
                )
            elif kind == "text-encoder":
                framework, device, queue = "torch", "cpu", self.names.text_queue
            else:
                framework, device, queue = "-", str(seen or "cpu"), self.names.jobs
            rows.append((name, str(child.pid), kind, "-" if k is None else str(k), framework, device, queue))
        return rows


def _already_running(r, names, worker_ids: list[str]) -> str | None:
    """The first of `worker_ids` whose heartbeat names a live process on this host, if any."""
    import socket

    for worker_id in worker_ids:
        beat = read_heartbeat(r, names.worker(worker_id))
        if beat is None or beat.pid is None or beat.host != socket.gethostname() or beat.pid == os.getpid():
            continue
        pid = beat.pid
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass  # alive, someone else's
        return f"{worker_id} (pid {pid})"
    return None


def _wait_ready(sup, r, names, timeout: float, waiting: list[str] | None = None) -> bool:
    """Poll children and heartbeat keys until each of `waiting` (default: every child) has one;
    False on timeout or a crash loop."""
    t0 = time.monotonic()
    pending = set(sup.children if waiting is None else waiting)
    while pending:
        for name, rc in sup.poll():
            print(f"ddm up: {name} {describe_exit(rc)} before it was ready", file=sys.stderr, flush=True)
        for name in sorted(pending):
            child = sup.children[name]
            if child.failures >= MAX_START_FAILURES:
                print(
                    f"ddm up: {name} died {child.failures} times before its first heartbeat; last output:\n"
                    + "\n".join(f"    {line}" for line in child.tail)
                    + f"\nddm up: command: {' '.join(child.spec.argv)}",
                    file=sys.stderr,
                    flush=True,
                )
                return False
            if child.running and r.exists(names.worker(name)):
                pending.discard(name)
                print(f"ddm up: {name} ready after {time.monotonic() - t0:.1f} s", flush=True)
        if pending and time.monotonic() - t0 > timeout:
            print(
                f"ddm up: not ready after {timeout:.0f} s: {', '.join(sorted(pending))} (no heartbeat at "
                f"{names.worker(sorted(pending)[0])}); raise --ready-timeout if they are still compiling",
                file=sys.stderr,
                flush=True,
            )
            return False
        time.sleep(0.25)
    return True
