"""A sliding-window rate limit per key (a client address): submits per minute (jobs.py), watches per
minute (watch_gate.py) and wrong tokens per minute (access.py)."""

from __future__ import annotations

import collections
import threading
import time


class RateLimiter:
    """At most `limit` events per `window_s` per key (a sliding window). Thread-safe."""

    def __init__(self, limit: int, window_s: float = 60.0, clock=time.monotonic):
        self.limit = limit
        self.window_s = window_s
        self.clock = clock
        self._events: dict[str, collections.deque] = {}
        self._lock = threading.Lock()

    def hit(self, key: str) -> float | None:
        """Record one event for `key`; None if allowed, else the seconds until one is allowed again."""
        with self._lock:
            now = self.clock()
            if len(self._events) > 10_000:  # forget idle keys so memory stays bounded
                for k in [k for k, q in self._events.items() if not q or now - q[-1] > self.window_s]:
                    del self._events[k]
            q = self._events.setdefault(key, collections.deque())
            while q and now - q[0] >= self.window_s:
                q.popleft()
            if len(q) >= self.limit:
                return self.window_s - (now - q[0])
            q.append(now)
            return None

    def wait(self, key: str) -> float:
        """Seconds until `key` may have one more event (0.0: now). Records nothing."""
        with self._lock:
            q = self._events.get(key)
            if not q or len(q) < self.limit:
                return 0.0
            return max(0.0, self.window_s - (self.clock() - q[-self.limit]))

    def refund(self, key: str) -> None:
        """Give back the newest event of `key` (a request refused after it was counted)."""
        with self._lock:
            q = self._events.get(key)
            if q:
                q.pop()

    def forget(self, key: str) -> None:
        with self._lock:
            self._events.pop(key, None)

    def keys(self) -> int:
        with self._lock:
            return len(self._events)
