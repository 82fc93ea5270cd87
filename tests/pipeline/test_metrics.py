"""Prometheus /metrics and /healthz of the workers: real `ddm worker` processes on the real RabbitMQ and
Redis serving a job, an expert that cannot reach its broker (503), and the HTTP server on its own."""

from __future__ import annotations

import json
import threading
import time

import pytest

from ddm.router.metrics import RouterMetrics
from ddm.runtime.metrics import MetricsServer, serve_metrics
from ddm.schema.deployment import Deployment
from ddm.schema.messages import JobSpec
from ddm.schema.settings import Settings
from ddm.workers import load_expert
from ddm.workers.metrics import ExpertMetrics
from ddm.workers.worker import ExpertWorker
from tests.support.harness import Pipeline
from tests.support.metrics import get, scrape, value, wait_healthy
from tests.support.services import free_port

STEPS = 12


@pytest.fixture(scope="module")
def metered_pipeline(label_split_deployment, tmp_path_factory):
    """Expert 0 (torch) with --metrics-port, expert 1 (jax) and the router with DDM_METRICS_PORT."""
    ports = {"e0": free_port(), "e1": free_port(), "router": free_port()}
    with Pipeline(label_split_deployment, tmp_path_factory.mktemp("logs")) as pipe:
        pipe.start_expert(0, "e0", extra=("--metrics-port", str(ports["e0"])))
        pipe.env["DDM_METRICS_PORT"] = str(ports["e1"])
        pipe.start_expert(1, "e1")
        pipe.env["DDM_METRICS_PORT"] = str(ports["router"])
        pipe.start_router("router")
        pipe.wait_ready("e0", "e1", "router")
        yield pipe, ports


def test_metrics_while_and_after_a_job(metered_pipeline):
    pipe, ports = metered_pipeline
    for port in ports.values():
        assert wait_healthy(port) == {"ok": True, "consuming": True, "redis": True}
        assert value(scrape(port), "ddm_ready") == 1.0
    router0 = scrape(ports["router"])
    assert value(router0, "ddm_router_jobs_total", status="done") == 0  # exported before any job

    labels = list(range(10))  # oracle: rows 0-4 go to expert 0 (torch), 5-9 to expert 1 (jax)
    spec = JobSpec.new(labels, steps=STEPS, strategy="oracle", seed=1)
    client = pipe.client()
    client.submit(spec)
    # While it runs: every endpoint answers (the HTTP thread is not blocked by the work).
    during = {name: scrape(port) for name, port in ports.items()}
    assert all(samples for samples in during.values())
    client.result(spec.job_id, timeout=120)

    r = scrape(ports["router"])
    assert value(r, "ddm_router_jobs_total", status="running") == 1
    assert value(r, "ddm_router_jobs_total", status="done") == 1
    assert value(r, "ddm_router_jobs_total", status="failed") == 0
    assert value(r, "ddm_router_jobs_in_flight") == 0
    assert value(r, "ddm_router_steps_total") == STEPS
    assert value(r, "ddm_router_step_seconds_count") == STEPS
    assert value(r, "ddm_router_step_seconds_sum") > 0
    assert value(r, "ddm_router_requests_total", expert=0) >= STEPS
    assert value(r, "ddm_router_requests_total", expert=1) >= STEPS
    assert value(r, "ddm_reconnects_total") == 0
    assert value(r, "ddm_worker_info", role="router", worker_id="router") == 1

    for k, name in enumerate(("e0", "e1")):
        e = scrape(ports[name])
        served = value(e, "ddm_expert_requests_total", expert=k)
        assert served >= STEPS  # one request per step (more only if the router resent one)
        assert value(e, "ddm_expert_request_seconds_count", expert=k) == served
        assert value(e, "ddm_expert_batch_size_sum", expert=k) >= 5 * STEPS  # five rows per step
        batches = value(e, "ddm_expert_batch_size_count", expert=k)
        assert 1 <= batches <= served
        assert value(e, "ddm_expert_compute_seconds_count", expert=k) == batches
        assert value(e, "ddm_expert_compute_seconds_sum", expert=k) > 0
        assert value(e, "ddm_expert_dead_lettered_total", expert=k) == 0
        assert value(e, "ddm_reconnects_total") == 0
        assert value(e, "ddm_worker_info", role="expert", worker_id=name) == 1


def test_unknown_path_is_404(metered_pipeline):
    _, ports = metered_pipeline
    assert get(f"http://127.0.0.1:{ports['router']}/")[0] == 404


def test_expert_without_a_broker_is_unhealthy(label_split_deployment, prefix, redis_url):
    """A worker that cannot reach RabbitMQ answers /healthz with 503 (and keeps retrying)."""
    port = free_port()
    settings = Settings(
        amqp_url=f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F",  # nothing listens there
        redis_url=redis_url,
        prefix=prefix,
        metrics_port=port,
    )
    expert = load_expert(Deployment.load(label_split_deployment).expert(0).checkpoint, "cpu", buckets=(1, 2))
    worker = ExpertWorker(settings, label_split_deployment, 0, buckets=(1, 2), expert=expert)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = get(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                assert time.monotonic() < deadline, "the metrics server never listened"
                time.sleep(0.1)
        assert status == 503
        assert json.loads(body) == {"ok": False, "consuming": False, "redis": False}
        assert value(scrape(port), "ddm_ready") == 0
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()
    with pytest.raises(OSError):  # the server is closed with the worker
        get(f"http://127.0.0.1:{port}/healthz")


def test_server_and_registries_in_one_process():
    """Per-worker registries: two experts and a router in one process do not clash; port 0 is off."""
    a, b, router = ExpertMetrics(0, "a"), ExpertMetrics(1, "b"), RouterMetrics("r")
    a.record_batch(rows=6, compute_ms=4.0, latencies_s=[0.01, 0.02])
    assert serve_metrics(a, 0) is None
    healthy = {"consuming": True, "redis": True}
    a.set_health(lambda: healthy)
    router.set_health(lambda: 1 / 0)  # a probe that raises is unhealthy, not a crash
    servers = [MetricsServer(m, 0, host="127.0.0.1") for m in (a, b, router)]
    ports = [s.start() for s in servers]
    try:
        sa, sb = scrape(ports[0]), scrape(ports[1])
        assert value(sa, "ddm_expert_requests_total", expert=0) == 2
        assert value(sa, "ddm_expert_batch_size_sum", expert=0) == 6
        assert value(sa, "ddm_expert_compute_seconds_sum", expert=0) == pytest.approx(0.004)
        assert ("ddm_expert_requests_total", (("expert", "0"),)) not in sb  # b only knows expert 1
        assert get(f"http://127.0.0.1:{ports[0]}/healthz")[0] == 200
        healthy["redis"] = False
        assert get(f"http://127.0.0.1:{ports[0]}/healthz") == (
            503,
            '{"ok": false, "consuming": true, "redis": false}\n',
        )
        assert get(f"http://127.0.0.1:{ports[1]}/healthz")[0] == 503  # no probe set yet
        status, body = get(f"http://127.0.0.1:{ports[2]}/healthz")
        assert status == 503 and json.loads(body) == {"ok": False, "health_check": False}
    finally:
        for s in servers:
            s.close()
