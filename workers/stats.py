"""The expert worker's counters (mean_batch_size: request rows per forward pass; mean_compute_ms: time
in Expert.velocity per pass), written into its heartbeat (ddm/runtime/heartbeat.py Heartbeat)."""

from __future__ import annotations

from dataclasses import dataclass

from ddm.schema.heartbeat import EXPERT_COUNTERS


@dataclass
class WorkerStats:
    """An expert worker's counters since it started. Only the connection thread updates them; fields()
    writes schema/heartbeat.py EXPERT_COUNTERS by name."""

    requests: int = 0  # requests answered
    batches: int = 0  # forward passes (Expert.velocity calls for a batch)
    rows: int = 0  # request rows served in those passes
    compute_ms: float = 0.0  # total time in Expert.velocity
    dead_lettered: int = 0  # messages refused (poison) or that failed to compute
    reconnects: int = 0  # broker connections lost and made again (counted by the consumer runtime)

    def record_batch(self, rows: int, requests: int, compute_ms: float) -> None:
        self.batches += 1
        self.rows += rows
        self.requests += requests
        self.compute_ms += compute_ms

    @property
    def mean_batch_size(self) -> float:
        return round(self.rows / self.batches, 3) if self.batches else 0.0

    @property
    def mean_compute_ms(self) -> float:
        return round(self.compute_ms / self.batches, 3) if self.batches else 0.0

    def summary(self) -> str:
        return (
            f"{self.requests} requests in {self.batches} batches (mean {self.mean_batch_size:.1f} rows, "
            f"{self.mean_compute_ms:.1f} ms per batch), {self.dead_lettered} dead-lettered"
        )

    def fields(self) -> dict[str, int | float]:
        return {name: getattr(self, name) for name in EXPERT_COUNTERS}
