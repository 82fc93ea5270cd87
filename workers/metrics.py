"""Prometheus metrics and a health endpoint for the long-running workers (expert and router).

    GET /metrics   Prometheus text format, from this worker's own CollectorRegistry
    GET /healthz   200 {"ok": true, ...} while connected to RabbitMQ and Redis and consuming, else 503

Every worker builds its metrics on a private CollectorRegistry (not prometheus_client's global one), so
several workers can live in one process (tests) without clashing names. The HTTP server runs on a
daemon thread and only reads: counters are thread-safe, and health is a callable that reads flags the
worker's connection thread sets. Port from `--metrics-port` or DDM_METRICS_PORT; 0 (the default)
serves nothing, and the counters are still kept.

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
    both:   ddm_reconnects_total, ddm_ready (1 while /healthz would answer 200),
            ddm_queue_messages{queue} (messages ready in a queue the worker consumes, every heartbeat)
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from ddm.schema.errors import ConfigError, expected

log = logging.getLogger(__name__)

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
STEP_BUCKETS = (0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

Health = Callable[[], dict[str, bool]]  # named checks; healthy when all are True


class _WorkerMetrics:
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


class ExpertMetrics(_WorkerMetrics):
    def __init__(self, expert_id: int, worker_id: str):
        super().__init__("expert", worker_id)
        r, labels = self.registry, ["expert"]
        self._requests = Counter("ddm_expert_requests", "Velocity requests answered", labels, registry=r)
        self._batch = Histogram(
            "ddm_expert_batch_size",
            "Request rows per forward pass",
            labels,
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self._compute = Histogram(
            "ddm_expert_compute_seconds",
            "Time in Expert.velocity per batch",
            labels,
            buckets=FAST_BUCKETS,
            registry=r,
        )
        self._latency = Histogram(
            "ddm_expert_request_seconds",
            "Per request: received from the broker until its reply was published",
            labels,
            buckets=FAST_BUCKETS,
            registry=r,
        )
        self._dead = Counter("ddm_expert_dead_lettered", "Requests refused to ddm.dead", labels, registry=r)
        k = str(expert_id)
        self.requests = self._requests.labels(k)
        self.batch = self._batch.labels(k)
        self.compute = self._compute.labels(k)
        self.latency = self._latency.labels(k)
        self.dead_lettered = self._dead.labels(k)

    def record_batch(self, rows: int, compute_ms: float, latencies_s: list[float]) -> None:
        """One forward pass of `rows` rows; one latency per request answered from it."""
        self.batch.observe(rows)
        self.compute.observe(compute_ms / 1e3)
        self.requests.inc(len(latencies_s))
        for s in latencies_s:
            self.latency.observe(s)


class RouterMetrics(_WorkerMetrics):
    def __init__(self, worker_id: str):
        super().__init__("router", worker_id)
        r = self.registry
        self.step = Histogram(
            "ddm_router_step_seconds",
            "One denoising step of one job: its requests sent until all replies are in and mixed",
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self.steps = Counter("ddm_router_steps", "Denoising steps completed", registry=r)
        self.jobs = Counter(
            "ddm_router_jobs",
            "Jobs that reached a status here (running counts each start or resume)",
            ["status"],
            registry=r,
        )
        for status in ("running", "done", "failed", "dead_lettered"):
            self.jobs.labels(status)  # export zeros from the start, so rate() works from the first scrape
        self.in_flight = Gauge("ddm_router_jobs_in_flight", "Jobs this router is running now", registry=r)
        self.requests = Counter("ddm_router_requests", "Velocity requests sent", ["expert"], registry=r)
        self.resends = Counter("ddm_router_resends", "Velocity requests resent after a timeout", registry=r)
        self.hedges = Counter(
            "ddm_router_hedges",
            "Late velocity requests sent once more to another replica",
            ["expert"],
            registry=r,
        )
        self.expert_live = Gauge(
            "ddm_router_expert_live", "1 while an expert has a live worker (this router's view)", ["expert"],
            registry=r,
        )  # fmt: skip
        self.expert_window = Gauge(
            "ddm_router_expert_window", "Requests this router may keep in flight to an expert", ["expert"],
            registry=r,
        )  # fmt: skip


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

    def __init__(self, address, metrics: _WorkerMetrics):
        super().__init__(address, _Handler)
        self.metrics = metrics


class MetricsServer:
    """Serve /metrics and /healthz for `metrics` on a daemon thread. start() binds (a busy port raises
    OSError at once, not later on the thread); close() stops it. Binds all interfaces by default, as
    prometheus_client.start_http_server does: Prometheus and the container healthcheck must reach it."""

    def __init__(self, metrics: _WorkerMetrics, port: int, host: str = "0.0.0.0"):
        self.metrics, self.host, self.port = metrics, host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Bind and serve; returns the port (the real one when asked for port 0)."""
        self._server = _Server((self.host, self.port), self.metrics)
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


def serve_metrics(metrics: _WorkerMetrics, port: int) -> MetricsServer | None:
    """Start a MetricsServer when port > 0; None when port is 0 (off: the counters are still kept)."""
    if not 0 <= port <= 65535:
        raise ConfigError(expected("a metrics port in 0..65535 (0 = off)", port))
    if not port:
        return None
    server = MetricsServer(metrics, port)
    server.start()
    return server
