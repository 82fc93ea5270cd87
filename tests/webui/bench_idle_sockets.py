"""Benchmark: what N idle websockets from one address cost the production UI, per gunicorn worker class.

    python -m tests.webui.bench_idle_sockets --worker gthread --worker gevent --sockets 500

For each worker class: start the production command (webui/gunicorn_conf.py, its worker class replaced,
gthread with the 100 threads it had; the per-address connection cap lifted, to measure the model alone)
on a prefix of its own, open N websockets that connect Socket.IO and then say nothing, and print the
serving process's resident memory and threads, how many sockets connected, and /healthz's latency
(median and worst of 20 probes, a probe that takes over 5 s counts as a timeout). Numbers go to
docs/BENCHMARKS.md ("The web UI's server model").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PROBES = 20
PROBE_TIMEOUT_S = 5.0


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def healthz_latencies(url: str) -> list[float | None]:
    out: list[float | None] = []
    for _ in range(PROBES):
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=PROBE_TIMEOUT_S) as resp:
                resp.read()
            out.append(time.monotonic() - t0)
        except OSError:
            out.append(None)
        time.sleep(0.05)
    return out


def open_idle(url: str, n: int) -> tuple[list, int]:
    """N websockets that connect and then say nothing (the connect itself may be refused or time out)."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.wire import WireSocket

    def one(_):
        try:
            return WireSocket(url, timeout=2.0)
        except Exception:  # noqa: BLE001 - refused or timed out: counted, not fatal
            return None

    with ThreadPoolExecutor(64) as pool:
        opened = list(pool.map(one, range(n)))
    sockets = [s for s in opened if s is not None]
    return sockets, n - len(sockets)


def run(worker: str, n: int, env_extra: dict[str, str]) -> str:
    import shlex
    import subprocess

    from ddm.ops.up.ui import PRODUCTION_COMMAND
    from tests.support import services
    from tests.support.fakes import FakeCluster, write_fake_deployment
    from tests.support.harness import service_env

    prefix = services.new_prefix()
    fake = FakeCluster(prefix)
    tmp = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    fake.publish(write_fake_deployment(tmp / "dep"))
    conf = tmp / "conf.py"
    # threads: the gthread pool the production command had before gevent (DDM_UI_THREADS, 100); gevent
    # ignores it
    conf.write_text(
        f"from ddm.webui.gunicorn_conf import *  # noqa\nworker_class = {worker!r}\nthreads = 100\n"
    )
    port = services.free_port()
    env = service_env(prefix, DDM_UI_BIND=f"127.0.0.1:{port}", DDM_LOG_LEVEL="error", **env_extra)
    argv = [sys.executable, "-m", *shlex.split(PRODUCTION_COMMAND)]
    argv[argv.index("python:ddm.webui.gunicorn_conf")] = f"python:{conf.stem}"
    log = tmp / "ui.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, env={**env, "PYTHONPATH": f"{tmp}:{Path.cwd()}"}, stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}"
    sockets: list = []
    try:
        services.wait_healthy(url, proc, log)
        pid = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
        base_rss = _status(pid, "VmRSS") / 1024
        t0 = time.monotonic()
        sockets, failed = open_idle(url, n)
        took = time.monotonic() - t0
        time.sleep(1.0)
        rss, threads = _status(pid, "VmRSS") / 1024, _status(pid, "Threads")
        lat = healthz_latencies(url)
    finally:
        for s in sockets:
            s.close()
        proc.terminate()
        proc.wait(timeout=30)
        fake.close()
        services.cleanup_prefix(prefix)
    ok = [x for x in lat if x is not None]
    timeouts = len(lat) - len(ok)
    median = f"{1000 * statistics.median(ok):.0f} ms" if ok else "-"
    worst = f"{1000 * max(ok):.0f} ms" if ok else "-"
    return (
        f"{worker:8s} {n} idle websockets: {len(sockets)} connected, {failed} refused or timed out "
        f"(opened in {took:.1f} s); serving process RSS {base_rss:.0f} -> {rss:.0f} MB, {threads} threads; "
        f"/healthz median {median}, worst {worst}, {timeouts}/{len(lat)} timed out (> {PROBE_TIMEOUT_S:g} s)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", action="append", choices=["gthread", "gevent"], help="repeatable")
    ap.add_argument("--sockets", type=int, default=500)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the UI, repeatable")
    args = ap.parse_args()
    # the server model alone: no connection cap in the way (it would refuse all but 32 of one address)
    env = {"DDM_UI_CONNECTIONS_PER_ADDRESS": "100000", **dict(e.split("=", 1) for e in args.env)}
    for worker in args.worker or ["gthread", "gevent"]:
        print(run(worker, args.sockets, env), flush=True)


if __name__ == "__main__":
    main()
