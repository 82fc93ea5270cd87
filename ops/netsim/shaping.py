"""What one direction of a simulated link does to the bytes crossing it: delay, jitter, blackhole."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass
class Shape:
    """One direction's behaviour. Set from any thread (plain attribute writes), read by the proxy loop."""

    delay_s: float = 0.0  # one-way delay added to every chunk
    jitter_s: float = 0.0  # plus a uniform random extra in [0, jitter_s)
    blackholed: bool = False  # forward nothing (sockets stay open)
    drop: bool = False  # while blackholed: discard what arrives instead of holding it for heal()

    def due(self, now: float, last_due: float, rng: random.Random) -> float:
        """When a chunk read at `now` may leave. Never before the chunk read ahead of it: jitter
        delays bytes but must not reorder a TCP stream."""
        extra = rng.uniform(0.0, self.jitter_s) if self.jitter_s > 0 else 0.0
        return max(last_due, now + self.delay_s + extra)

    def set_delay(self, one_way_ms: float, jitter_ms: float = 0.0) -> None:
        if one_way_ms < 0 or jitter_ms < 0:
            raise ValueError(f"expected delay and jitter >= 0 ms, got {one_way_ms} and {jitter_ms}")
        self.delay_s, self.jitter_s = one_way_ms / 1e3, jitter_ms / 1e3
