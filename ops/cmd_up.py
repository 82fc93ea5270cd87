"""`ddm up`: bring up a whole deployment on this machine - expert workers and router - and keep it up.

Checks that RabbitMQ and Redis answer, starts `ddm worker expert` (N replicas per expert) and
`ddm worker router` as child processes, waits until each one's heartbeat appears in Redis, prints
what runs where, restarts a child that dies (with backoff) and stops them all on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from ddm.schema.errors import ConfigError, expected

START_HINT = (
    "start them with `rabbitmq-server -detached` and `redis-server --daemonize yes --bind 127.0.0.1 "
    "--port 6379` (or `docker compose up -d rabbitmq redis`), or point DDM_AMQP_URL / DDM_REDIS_URL at "
    "running ones"
)
MAX_START_FAILURES = 3  # a child that dies this often before its first heartbeat aborts `ddm up`


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a deployment on this machine: one expert worker per expert (or --replicas), and a router "
        "worker, against DDM_AMQP_URL / DDM_REDIS_URL (local defaults) under DDM_PREFIX. Waits until all "
        "are ready, restarts any that dies, and stops them all on Ctrl-C."
    )
    parser.add_argument(
        "--deployment", type=Path, default=None, help="deployment TOML (default: the shipped one)"
    )
    parser.add_argument(
        "--replicas",
        action="append",
        default=[],
        metavar="K=N",
        help="N worker replicas for expert K (repeatable, or comma-separated: 0=2,1=1; default 1 each)",
    )
    parser.add_argument("--routers", type=int, default=1, help="router worker replicas (default: 1)")
    parser.add_argument("--max-batch", type=int, default=None, help="expert workers: rows per forward pass")
    parser.add_argument(
        "--max-wait-ms", type=float, default=None, help="expert workers: wait to fill a batch"
    )
    parser.add_argument("--buckets", default=None, help="expert workers: batch buckets, e.g. 1,2,4,8,16,32")
    parser.add_argument("--max-jobs", type=int, default=None, help="router: jobs in flight at once")
    parser.add_argument("--no-ui", action="store_true", help="do not start the web UI")
    parser.add_argument(
        "--ui-host",
        default="127.0.0.1",
        help="web UI address (default 127.0.0.1: this machine only; 0.0.0.0 exposes it, with no login)",
    )
    parser.add_argument("--ui-port", type=int, default=8000, help="web UI port (default 8000)")
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=600.0,
        help="seconds to wait for every heartbeat (default: 600)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=10.0,
        help="seconds between SIGTERM and SIGKILL at shutdown (default: 10)",
    )


# ---------------------------------------------------------------- pieces (tested on their own)


def parse_replicas(items: list[str], num_experts: int) -> dict[int, int]:
    """['0=2', '1=1,2=3'] -> {0: 2, 1: 1, 2: 3, ...}; every expert of the deployment defaults to 1."""
    counts = dict.fromkeys(range(num_experts), 1)
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


def check_services(settings) -> list[str]:
    """Problems reaching RabbitMQ and Redis, one line each (empty when both answer)."""
    from ddm.schema.errors import ServiceUnavailableError
    from ddm.workers.amqp import connect
    from ddm.workers.redis_conn import connect_redis

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


def read_heartbeat(r, key: str) -> dict | None:
    """A worker's heartbeat record as a dict: a Redis hash, or a JSON string; None when absent."""
    kind = r.type(key)
    kind = kind.decode() if isinstance(kind, bytes) else kind
    if kind == "hash":
        return {k.decode(): v.decode(errors="replace") for k, v in r.hgetall(key).items()}
    if kind == "string":
        raw = r.get(key)
        try:
            value = json.loads(raw) if raw is not None else None
        except ValueError:
            return {"raw": raw.decode(errors="replace")}
        return value if isinstance(value, dict) else {"raw": value}
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


def build_children(deployment, replicas: dict[int, int], args: argparse.Namespace) -> list:
    """ChildSpecs and their roles: [(ChildSpec, role, expert id or None)]."""
    from ddm.ops.supervisor import ChildSpec

    base = (sys.executable, "-m", "ddm.ops.cli", "worker")
    dep = ("--deployment", str(deployment.path))
    expert_flags: tuple[str, ...] = ()
    if args.max_batch is not None:
        expert_flags += ("--max-batch", str(args.max_batch))
    if args.max_wait_ms is not None:
        expert_flags += ("--max-wait-ms", str(args.max_wait_ms))
    if args.buckets is not None:
        expert_flags += ("--buckets", args.buckets)
    out = []
    threads = expert_thread_env(sum(replicas.values())) or None
    for k, n in sorted(replicas.items()):
        for i in range(n):
            name = f"up-e{k}-{i}"
            argv = (*base, "expert", *dep, "--expert", str(k), "--worker-id", name, *expert_flags)
            out.append((ChildSpec(name, argv, env=threads), "expert", k))
    router_flags = ("--max-jobs", str(args.max_jobs)) if args.max_jobs is not None else ()
    for i in range(args.routers):
        name = "up-router" if args.routers == 1 else f"up-router-{i}"
        argv = (*base, "router", *dep, "--worker-id", name, *router_flags)
        out.append((ChildSpec(name, argv), "router", None))
    return out


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


# ---------------------------------------------------------------- main


class _TerminatedError(Exception):
    """SIGTERM arrived."""


def _on_sigterm(signum, frame):
    raise _TerminatedError()


def main(args: argparse.Namespace) -> int:
    import logging

    from ddm.ops.cmd_sample import resolve_deployment
    from ddm.ops.supervisor import Supervisor, describe_exit
    from ddm.schema.deployment import Deployment
    from ddm.schema.settings import Settings, redact
    from ddm.workers.checkpoint import read_meta
    from ddm.workers.redis_conn import connect_redis

    logging.basicConfig(level=logging.INFO, format="%(asctime)s ddm up %(levelname)s %(message)s")
    logging.getLogger("pika").setLevel(logging.WARNING)  # pika logs every socket step at INFO
    if not 1 <= args.routers <= 16:
        raise ConfigError(expected("--routers in 1..16", args.routers))
    deployment = Deployment.load(resolve_deployment(args.deployment))
    replicas = parse_replicas(args.replicas, deployment.num_experts)
    metas = {e.id: read_meta(e.checkpoint) for e in deployment.experts}  # fail before starting anything
    settings = Settings.from_env()
    names = settings.names

    problems = check_services(settings)
    if problems:
        for line in problems:
            print(f"ddm up: {line}", file=sys.stderr)
        print(f"ddm up: nothing was started; {START_HINT}.", file=sys.stderr)
        return 2
    r = connect_redis(settings.redis_url)

    children = build_children(deployment, replicas, args)
    workers = [spec.name for spec, _, _ in children]  # the ones that write heartbeats
    if not args.no_ui:
        problem = _port_problem(args.ui_host, args.ui_port)
        if problem:
            print(f"ddm up: web UI: {problem}; pass --ui-port PORT or --no-ui", file=sys.stderr)
            return 2
        children.append((ui_child(deployment, args.ui_host, args.ui_port), "ui", None))
    role = {spec.name: (kind, k) for spec, kind, k in children}
    clash = _already_running(r, names, [spec.name for spec, _, _ in children])
    if clash:
        print(
            f"ddm up: {clash} is already running here under prefix {settings.prefix!r} (its heartbeat is "
            "live); stop that `ddm up` first, or set another DDM_PREFIX",
            file=sys.stderr,
        )
        return 2
    # a heartbeat left by an earlier, crashed run under the same ids would look like readiness
    r.delete(*[names.worker(spec.name) for spec, _, _ in children])
    sup = Supervisor([spec for spec, _, _ in children], grace_s=args.grace, output=sys.stdout)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    print(
        f"ddm up: deployment {deployment.name!r} ({deployment.path}); broker {redact(settings.amqp_url)}; "
        f"redis {redact(settings.redis_url)}; prefix {settings.prefix!r}",
        flush=True,
    )
    try:
        sup.start()
        if not _wait_ready(sup, r, names, args.ready_timeout, workers):
            return 1
        if not args.no_ui and not _wait_ui(sup, args.ui_host, args.ui_port, args.ready_timeout):
            return 1
        beats = {name: read_heartbeat(r, names.worker(name)) or {} for name in sup.children}
        rows = [("NAME", "PID", "ROLE", "EXPERT", "FRAMEWORK", "DEVICE", "QUEUE")]
        for name, child in sup.children.items():
            kind, k = role[name]
            beat = beats[name]
            if kind == "expert":
                framework = metas[k].get("framework", "?")
                device = str(beat.get("device") or deployment.expert(k).device)
                queue = names.expert_queue(k)
            elif kind == "ui":
                framework, device, queue = "-", "-", _ui_url(args.ui_host, args.ui_port)
            else:
                framework, device, queue = "-", str(beat.get("device") or "cpu"), names.jobs
            rows.append((name, str(child.pid), kind, "-" if k is None else str(k), framework, device, queue))
        print(format_table(rows), flush=True)
        if not args.no_ui:
            print(f"ddm up: web UI at {_ui_url(args.ui_host, args.ui_port)}", flush=True)
        print(
            "ddm up: ready. Submit with `ddm submit --label 7 --wait`; Ctrl-C stops everything.", flush=True
        )
        while True:
            for name, rc in sup.poll():
                print(
                    f"ddm up: {name} {describe_exit(rc)}; it will be restarted", file=sys.stderr, flush=True
                )
            time.sleep(0.5)
    except (KeyboardInterrupt, _TerminatedError):
        print("ddm up: stopping...", file=sys.stderr, flush=True)
        return 0
    finally:
        try:
            codes = sup.stop()
        except KeyboardInterrupt:  # a second Ctrl-C: no more grace
            codes = sup.stop(grace_s=0)
        signal.signal(signal.SIGTERM, previous)
        stopped = ", ".join(f"{n} ({describe_exit(c)})" for n, c in codes.items() if c is not None)
        print(f"ddm up: stopped {stopped or 'nothing'}", file=sys.stderr, flush=True)


def _already_running(r, names, worker_ids: list[str]) -> str | None:
    """The first of `worker_ids` whose heartbeat names a live process on this host, if any."""
    import os
    import socket

    for worker_id in worker_ids:
        beat = read_heartbeat(r, names.worker(worker_id)) or {}
        try:
            pid = int(beat.get("pid", ""))
        except ValueError:
            continue
        if beat.get("host") != socket.gethostname() or pid == os.getpid():
            continue
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
    from ddm.ops.supervisor import describe_exit

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


# ---------------------------------------------------------------- the web UI child

UI_CHILD = "up-ui"


def ui_child(deployment, host: str, port: int):
    """The ChildSpec of `ddm ui` for this deployment."""
    from ddm.ops.supervisor import ChildSpec

    argv = (sys.executable, "-m", "ddm.ops.cli", "ui", "--deployment", str(deployment.path))
    return ChildSpec(UI_CHILD, (*argv, "--host", host, "--port", str(port)))


def _ui_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}/"


def _port_problem(host: str, port: int) -> str | None:
    """Why the UI could not listen on host:port (in use, bad address), or None."""
    import socket

    if not 0 < port < 65536:
        return expected("--ui-port in 1..65535", port)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            return f"cannot listen on {host}:{port} ({exc.strerror or exc})"
    return None


def _wait_ui(sup, host: str, port: int, timeout: float) -> bool:
    """Until the UI answers GET /healthz; False on timeout or a crash loop."""
    import urllib.error
    import urllib.request

    t0 = time.monotonic()
    child = sup.children[UI_CHILD]
    url = _ui_url(host, port) + "healthz"
    while True:
        sup.poll()
        if child.failures >= MAX_START_FAILURES:
            print(
                f"ddm up: {UI_CHILD} died {child.failures} times before it answered; last output:\n"
                + "\n".join(f"    {line}" for line in child.tail),
                file=sys.stderr,
                flush=True,
            )
            return False
        if child.running:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        print(f"ddm up: {UI_CHILD} ready after {time.monotonic() - t0:.1f} s", flush=True)
                        return True
            except (urllib.error.URLError, OSError):
                pass
        if time.monotonic() - t0 > timeout:
            print(f"ddm up: the web UI did not answer at {url} within {timeout:.0f} s", file=sys.stderr)
            return False
        time.sleep(0.25)
