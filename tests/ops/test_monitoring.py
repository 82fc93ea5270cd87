"""The Grafana dashboard of the monitoring profile queries only metrics the workers really export: every
ddm_* name in its queries appears as a sample on the /metrics of a live expert worker or router."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from ddm.schema.messages import JobSpec
from tests.support.harness import Pipeline
from tests.support.services import free_port

DASHBOARD = Path(__file__).resolve().parents[2] / "ops/monitoring/grafana/dashboards/ddm.json"


def dashboard_metrics() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(exprs) >= 10
    return {name for expr in exprs for name in re.findall(r"\bddm_[a-z0-9_]+", expr)}


def sample_names(port: int) -> set[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if line and line[0] != "#"}


def test_the_dashboard_parses_and_names_the_project_metrics():
    names = dashboard_metrics()
    wanted = (
        "ddm_router_jobs_total",
        "ddm_router_steps_total",
        "ddm_expert_batch_size_sum",
        "ddm_queue_messages",
    )
    assert set(wanted) <= names  # jobs, steps/s, batch size, queue depth ...
    assert {
        "ddm_router_resends_total",
        "ddm_expert_dead_lettered_total",
        "ddm_expert_request_seconds_bucket",
    } <= names


@pytest.mark.slow
def test_every_metric_the_dashboard_queries_is_on_a_live_worker(label_split_deployment, tmp_path):
    ports = {name: free_port() for name in ("e0", "e1", "router")}
    with Pipeline(label_split_deployment, tmp_path) as pipeline:
        pipeline.start_expert(0, "e0", extra=["--metrics-port", str(ports["e0"])])
        pipeline.start_expert(1, "e1", extra=["--metrics-port", str(ports["e1"])])
        pipeline.start_router("router", extra=["--metrics-port", str(ports["router"])])
        pipeline.wait_ready("e0", "e1", "router")
        with pipeline.client() as client:  # one job through both experts: the per-expert series exist
            job_id = client.submit(JobSpec.new([0, 5], steps=2))
            client.result(job_id, timeout=120)
        exported = set().union(*(sample_names(port) for port in ports.values()))
    missing = dashboard_metrics() - exported
    assert not missing, f"the dashboard queries metrics no worker exports: {sorted(missing)}"
