"""The router worker's Prometheus metrics (names: ddm/runtime/metrics.py)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from ddm.runtime.metrics import STEP_BUCKETS, WorkerMetrics


class RouterMetrics(WorkerMetrics):
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
