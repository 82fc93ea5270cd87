"""Dynamic batching for the expert worker, free of any broker code (so it is easy to reason about).

`Batcher` holds decoded requests waiting for the model and decides when a batch is ready: after the
first request it keeps collecting until the waiting ROWS reach max_batch or the oldest request has
waited max_wait. `serve_batch` runs ONE `Expert.velocity` over the concatenated rows (an oversize
request in slices, with a keep-alive between them), splits the result per request and encodes each
reply; if the batch as a whole fails it serves every request alone, so one bad request cannot take the
others down with it.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from ddm.runtime.stage import Delivery
from ddm.schema.errors import expected
from ddm.schema.messages import VelocityReply
from ddm.workers.text_rows import with_text


@dataclass(frozen=True)
class Outcome:
    """What became of one request: an encoded VelocityReply, or the reason it could not be served."""

    item: Delivery
    reply: bytes | None
    error: str | None


@dataclass(frozen=True)
class BatchResult:
    outcomes: list[Outcome]
    rows: int  # request rows in the batch (null-class rows for guidance not counted)
    compute_ms: float  # time spent in Expert.velocity for this batch, fallbacks included


class Batcher:
    """FIFO of pending requests plus the "is a batch ready?" rule. Not thread-safe (connection thread)."""

    def __init__(self, max_batch: int, max_wait_s: float):
        if max_batch < 1 or max_wait_s < 0:
            raise ValueError(expected("max_batch >= 1 and max_wait_s >= 0", (max_batch, max_wait_s)))
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._items: deque[Delivery] = deque()
        self._rows = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def rows(self) -> int:
        return self._rows

    def add(self, item: Delivery) -> None:
        self._items.append(item)
        self._rows += item.request.batch_size

    def wait_s(self, now: float) -> float | None:
        """Seconds until a batch is ready (0 = now); None when nothing is waiting."""
        if not self._items:
            return None
        if self._rows >= self.max_batch:
            return 0.0
        return max(0.0, self._items[0].arrived + self.max_wait_s - now)

    def take(self) -> list[Delivery]:
        """The oldest requests whose rows fit in max_batch; always at least one (an oversize request
        is served alone rather than refused: the expert splits it over its largest bucket). A redelivered
        request is served alone, and never joins a batch: if it crashes the worker, it alone is to blame
        (ddm/runtime/crash_guard.py)."""
        batch = [self._items.popleft()]
        rows = batch[0].request.batch_size
        while (
            not batch[0].redelivered
            and self._items
            and not self._items[0].redelivered
            and rows + self._items[0].request.batch_size <= self.max_batch
        ):
            rows += self._items[0].request.batch_size
            batch.append(self._items.popleft())
        self._rows -= rows
        return batch

    def drain(self) -> list[Delivery]:
        """Everything still waiting (on shutdown or when the channel died)."""
        items = list(self._items)
        self._items.clear()
        self._rows = 0
        return items


def _velocity(expert, items: list[Delivery], chunk_rows=None, between=None, lookup=None) -> np.ndarray:
    """One Expert.velocity over every row of `items`; with chunk_rows, in slices of at most that many
    rows with between() after each but the last (the worker keeps its connections alive there). A text
    deployment's rows carry embedding keys: `lookup` turns them into embeddings (workers/text_rows.py)."""
    reqs = [it.request for it in items]
    fields = ["x", "t", "y", "guidance"] + (["text_keys"] if reqs[0].text_keys is not None else [])
    columns = [np.concatenate([getattr(r, f) for r in reqs]) for f in fields]  # [R, ...], R = total rows
    velocity = expert.velocity if lookup is None else with_text(expert.velocity, lookup)
    rows = len(columns[0])
    if chunk_rows is None or rows <= chunk_rows:
        return velocity(*columns)
    parts = []
    for start in range(0, rows, chunk_rows):
        if parts and between is not None:
            between()
        parts.append(velocity(*(c[start : start + chunk_rows] for c in columns)))
    return np.concatenate(parts)


def _replies(items, v, expert_id, worker_id, compute_ms, batch_rows, precision) -> list[Outcome]:
    out, start = [], 0
    for it in items:
        part = v[start : start + it.request.batch_size]
        start += it.request.batch_size
        try:
            reply = VelocityReply(
                it.request.request_id, part, expert_id, worker_id, compute_ms, batch_rows, precision
            )
            out.append(Outcome(it, reply.encode(), None))
        except Exception as exc:  # e.g. the model produced NaN for these rows
            out.append(Outcome(it, None, f"reply refused: {type(exc).__name__}: {exc}"))
    return out


def serve_batch(
    expert,
    items: list[Delivery],
    expert_id: int,
    worker_id: str,
    *,
    chunk_rows=None,
    between=None,
    lookup=None,
) -> BatchResult:
    """Run one forward pass over all rows of `items` and encode one reply per request.

    Touches no broker state itself. If the batched call raises, each request is retried alone; a request
    that still fails gets an Outcome with its error (to be dead-lettered). chunk_rows and between: an
    oversize batch runs in slices with between() after each (the worker services its connection there,
    so a long batch does not starve its heartbeats); between must not raise.
    """
    rows = sum(it.request.batch_size for it in items)
    precision = expert.meta.precision
    t0 = time.perf_counter()
    try:
        v = _velocity(expert, items, chunk_rows, between, lookup)
        ms = (time.perf_counter() - t0) * 1e3
        if v.shape[0] != rows:
            raise RuntimeError(expected(f"{rows} velocity rows from the expert", v.shape))
        return BatchResult(_replies(items, v, expert_id, worker_id, ms, rows, precision), rows, ms)
    except Exception as exc:
        if len(items) == 1:
            ms = (time.perf_counter() - t0) * 1e3
            return BatchResult([Outcome(items[0], None, f"{type(exc).__name__}: {exc}")], rows, ms)
    outcomes = []
    for it in items:  # the batch failed: isolate the request(s) responsible
        t1 = time.perf_counter()
        try:
            v = _velocity(expert, [it], chunk_rows, between, lookup)
            ms = (time.perf_counter() - t1) * 1e3
            outcomes += _replies([it], v, expert_id, worker_id, ms, it.request.batch_size, precision)
        except Exception as exc:
            outcomes.append(Outcome(it, None, f"{type(exc).__name__}: {exc}"))
    return BatchResult(outcomes, rows, (time.perf_counter() - t0) * 1e3)
