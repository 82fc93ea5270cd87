"""Prometheus metrics and a health endpoint for the long-running workers: what every worker exports
(WorkerMetrics) and the HTTP server. The roles add their own: workers/metrics.py ExpertMetrics,
router/metrics.py RouterMetrics.

    GET /metrics   Prometheus text format, from this worker's own CollectorRegistry
    GET /healthz   200 {"ok": true, ...} while connected to RabbitMQ and Redis and consuming, else 503

Every worker builds its metrics on a private CollectorRegistry (not prometheus_client's global one), so
several workers can live in one process (tests) without clashing names. The HTTP server runs on a
daemon thread and only reads: counters are thread-safe, and health is a callable that reads flags the
worker's connection thread sets. Port from `--metrics-port` or DDM_METRICS_PORT; 0 (the default)
serves nothing, and the counters are still kept. Address from DDM_METRICS_BIND (the default,
Settings.metrics_bind, is 127.0.0.1: this host only; with host networking, 0.0.0.0 would serve every
interface; an IPv6 address such as '::' gets an IPv6 socket); docker-compose.yml sets 0.0.0.0 inside
its containers, where Prometheus and the healthcheck reach it over the compose network.

Names (all prefixed ddm_):

    expert: ddm_expert_requests_total, ddm_expert_batch_size (rows per forward pass),
            ddm_expert_compute_seconds (one forward pass), ddm_expert_request_seconds (received ->
            reply published), ddm_expert_dead_lettered_total
    router: ddm_router_step_seconds (one denoising step of one job, wall time: requests sent until
            every reply is in and mixed), ddm_router_steps_total,
            ddm_router_jobs_total{status} (jobs that reached running | done | failed | dead_lettered),
            ddm_router_jobs_in_flight, ddm_router_requests_total{expert}, ddm_router_resends_total,
            ddm_router_hedges_total{expert}, ddm_router_expert_live{expert},
            ddm_router_expert_window{expert} (router/experts.py)
    all:    ddm_reconnects_total, ddm_ready (1 while /healthz would answer 200)
    queues: ddm_queue_messages{queue} (messages ready), all from the routers: the jobs queue and a
            latent deployment's decoder queue (every heartbeat), every expert queue (every look at the
            experts). Experts and decoders export none: a passive declare is a broker round trip on
            their serving thread.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from ddm.schema.errors import ConfigError, expected
from ddm.schema.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_BIND = Settings.metrics_bind  # one home for the default address: schema/settings.py

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
STEP_BUCKETS = (0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

Health = Callable[[], dict[str, bool]]  # named checks; healthy when all are True


class WorkerMetrics:
    """What every worker exports: reconnects and readiness."""

    def __init__(self, role: str, worker_id: str):
        self.registry = CollectorRegistry()
        self.reconnects = Counter(
            "ddm_reconnects", "Broker connections lost and re-established", registry=self.registry
        )
        self._health: Health = lambda: {"started": False}
        ready = Gauge("ddm_ready", "1 while /healthz answers 200", registry=self.registry)
        ready.set_function(lambda: float(healthy(self.checks())))
        info = Gauge(
            "ddm_worker_info",
            "Static facts about this worker (value 1)",
            ["role", "worker_id"],
            registry=self.registry,
        )
        info.labels(role=role, worker_id=worker_id).set(1)
        self.queue_messages = Gauge(
            "ddm_queue_messages",
            "Messages ready (not yet delivered) in a queue this worker consumes",
            ["queue"],
            registry=self.registry,
        )

    def probe_queue(self, channel, queue: str) -> None:
        """ddm_queue_messages{queue} from a passive declare: on the connection thread (pika's channel)."""
        ok = channel.queue_declare(queue, passive=True)
        self.queue_messages.labels(queue).set(ok.method.message_count)

    def set_health(self, health: Health) -> None:
        """The worker's health probe: named checks, healthy when all are True. Called from the HTTP
        thread, so it must only read flags (no broker or Redis calls)."""
        self._health = health

    def checks(self) -> dict[str, bool]:
        try:
            return {k: bool(v) for k, v in self._health().items()}
        except Exception as exc:  # a health probe must answer, not crash the server thread
            log.warning("health check raised %r", exc)
            return {"health_check": False}


def healthy(checks: dict[str, bool]) -> bool:
    return bool(checks) and all(checks.values())


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, CONTENT_TYPE_LATEST, generate_latest(self.server.metrics.registry))
        elif path == "/healthz":
            checks = self.server.metrics.checks()
            ok = healthy(checks)
            body = json.dumps({"ok": ok, **checks}).encode() + b"\n"
            self._send(200 if ok else 503, "application/json", body)
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found: try /metrics or /healthz\n")

    def _send(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args) -> None:  # scraped every few seconds: not worth a log line each
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, metrics: WorkerMetrics):
        super().__init__(address, _Handler)
        self.metrics = metrics


class _Server6(_Server):
    address_family = socket.AF_INET6  # http.server's servers are IPv4 only: '::' would not resolve


def _server_for(host: str) -> type[_Server]:
    """The server class whose socket family fits `host`: IPv6 for an address with ':' ('::', '::1'),
    IPv4 for the rest (an IPv4 address or a host name that resolves to one)."""
    return _Server6 if ":" in host else _Server


class MetricsServer:
    """Serve /metrics and /healthz for `metrics` on a daemon thread. start() binds (a busy port raises
    OSError at once, not later on the thread); close() stops it. Binds Settings.metrics_bind by default
    (127.0.0.1, this host only); a container that Prometheus scrapes passes 0.0.0.0 or '::'
    (DDM_METRICS_BIND)."""

    def __init__(self, metrics: WorkerMetrics, port: int, host: str = DEFAULT_BIND):
        self.metrics, self.host, self.port = metrics, host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Bind and serve; returns the port (the real one when asked for port 0)."""
        self._server = _server_for(self.host)((self.host, self.port), self.metrics)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()
        log.info("metrics on http://%s:%d/metrics, health on /healthz", self.host, self.port)
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def serve_metrics(metrics: WorkerMetrics, port: int, host: str = DEFAULT_BIND) -> MetricsServer | None:
    """Start a MetricsServer on host:port when port > 0; None when port is 0 (off: the counters are
    still kept)."""
    if not 0 <= port <= 65535:
        raise ConfigError(expected("a metrics port in 0..65535 (0 = off)", port))
    if not port:
        return None
    server = MetricsServer(metrics, port, host=host)
    server.start()
    return server
