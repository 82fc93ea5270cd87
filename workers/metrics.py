"""The expert worker's Prometheus metrics (names: ddm/runtime/metrics.py)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from ddm.runtime.metrics import BATCH_BUCKETS, FAST_BUCKETS, WorkerMetrics


class ExpertMetrics(WorkerMetrics):
    def __init__(self, expert_id: int | str, worker_id: str, role: str = "expert"):
        """role "decoder": a latent deployment's decoder worker, its series labelled expert="decoder"."""
        super().__init__(role, worker_id)
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
