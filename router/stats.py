"""The router worker's counters, written into its heartbeat (ddm/runtime/heartbeat.py Heartbeat)."""

from __future__ import annotations

from dataclasses import dataclass

from ddm.schema.heartbeat import ROUTER_COUNTERS


@dataclass
class RouterStats:
    """The router worker's counters since it started; fields() writes ROUTER_COUNTERS by name."""

    jobs_done: int = 0
    jobs_failed: int = 0
    steps: int = 0
    resends: int = 0
    hedges: int = 0
    reconnects: int = 0  # counted by the consumer runtime

    def fields(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in ROUTER_COUNTERS}
