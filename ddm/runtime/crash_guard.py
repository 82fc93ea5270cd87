"""The crash-loop guard of every stage (expert, decoder, and any stage to come): a message that keeps
killing the workers that serve it is dead-lettered with the reason instead of taking every replica down.

A message that a worker can refuse (it does not decode, its numbers are out of bounds, its reply would
be invalid) is dead-lettered by that worker with the reason (ddm/runtime/deadletter.py). What remains is
a message that kills the process before it can say why: an exception that escapes every handler, a
native crash, the kernel's out-of-memory killer. The broker then hands it, redelivered, to the next
replica, and on a classic queue it would go round the replicas forever (quorum queues have a delivery
limit of their own: schema/topology.py).

How the guard tells the culprit from the messages that only shared its worker: a stage serves every
redelivered message ALONE (the expert's batcher never batches one with others), and only then counts
it, once per attempt, in Redis:

    HINCRBY <prefix>ddm:crash:<digest> attempts 1     (digest: the queue and body's SHA-256)
    HSET    <same key> last_error "<the exception that ended the worker serving it>"
    EXPIRE  <same key> RECORD_TTL_S

An attempt that is settled (replied to, or dead-lettered for a reason) deletes the record; so only
attempts that ended with their worker count, and a message handed back by a clean stop costs nothing.
When a redelivered message's attempts reach `limit`, it is dead-lettered with "crashed N workers" and
the last recorded error. A message that is delivered for the first time is never looked up: Redis stays
off the serving path, so a copy of a known poison published again costs one crash before its
redelivery finds the record.

Redis out of reach: the guard fails open (the message is served, as before the guard), using only a
quorum queue's x-delivery-count header where there is one, and does not ask Redis again for RETRY_S; a
Redis outage must not stop serving.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS, redis_client
from ddm.schema.names import Names

log = logging.getLogger(__name__)

RECORD_TTL_S = 3600  # a record outlives any redelivery chain; a poison copy within the hour dies at once
# After Redis failed to answer, it is not asked again for this long: each try can cost its timeouts on
# the serving thread, and a broker blip during a Redis outage redelivers a whole prefetch window at once.
RETRY_S = 10.0
DELIVERY_COUNT_HEADER = "x-delivery-count"  # quorum queues: earlier deliveries of this message
MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class Suspect:
    """A redelivered message about to be served alone: its record's key and the attempt it is."""

    key: str
    attempt: int


def message_digest(queue: str, body: bytes) -> str:
    """32 hex digits naming one message on one queue (the same bytes elsewhere are another message)."""
    return hashlib.sha256(queue.encode() + b"\0" + body).hexdigest()[:32]


class CrashGuard:
    """Counts the attempts at redelivered messages of a worker's queues (see the module docstring).
    Used on the worker's connection thread only; every Redis call has a short timeout."""

    def __init__(self, redis_url: str, names: Names, limit: int):
        self.limit = limit
        self._names = names
        self._redis = redis_client(redis_url, socket_timeout=2.0, connect_timeout=2.0)
        self._failing = False
        self._retry_at = 0.0  # monotonic time before which Redis is not asked (it just failed)

    def attempt(self, queue: str, body: bytes, headers: dict | None) -> tuple[Suspect | None, str | None]:
        """Count one attempt at a redelivered message. Returns (the suspect to settle or blame, None), or
        (None, the reason to dead-letter it) once it has ended `limit` workers."""
        key = self._names.crash_record(message_digest(queue, body))
        earlier = _delivery_count(headers) or 0  # the broker's count, where it keeps one (quorum queues)
        counted = self._count(key)
        attempts, last_error = counted if counted is not None else (earlier, None)
        if counted is None and attempts < self.limit:
            return None, None  # Redis out of reach: served unchecked, as before the guard
        # Each attempt before this one ended its worker (a settled one deletes the record), and so did
        # the first delivery, which was not counted (it came with others): `attempts` workers in all.
        crashed = max(attempts, earlier)
        if crashed < self.limit:
            return Suspect(key, attempts), None
        why = last_error.decode(errors="replace") if last_error else NO_ERROR_RECORDED
        return (
            None,
            f"crashed {crashed} workers: delivered {crashed + 1} times, never settled; last error: {why}",
        )

    def _count(self, key: str) -> tuple[int, bytes | None] | None:
        """(attempts including this one, the last recorded error) from Redis; None when it does not
        answer, or failed less than RETRY_S ago."""
        if self._resting():
            return None
        try:
            pipe = self._redis.pipeline()
            pipe.hincrby(key, "attempts", 1).hget(key, "last_error").expire(key, RECORD_TTL_S)
            attempts, last_error, _ = pipe.execute()
        except REDIS_CONNECTION_ERRORS as exc:
            self._failed(exc)
            return None
        self._failing = False
        return attempts, last_error

    def settled(self, suspect: Suspect) -> None:
        """The attempt ended with the message settled: it killed nobody this time."""
        self._quietly(lambda: self._redis.delete(suspect.key))

    def blame(self, suspect: Suspect, error: BaseException) -> None:
        """The worker serving `suspect` is dying of `error`: the next attempt's reason names it."""
        text = f"{type(error).__name__}: {error}"[:MAX_ERROR_CHARS]
        self._quietly(lambda: self._redis.hset(suspect.key, "last_error", text))

    def close(self) -> None:
        self._redis.close()

    def _quietly(self, write) -> None:
        if self._resting():
            return  # a record left behind expires by itself (RECORD_TTL_S)
        try:
            write()
        except REDIS_CONNECTION_ERRORS as exc:
            self._failed(exc)

    def _resting(self) -> bool:
        return self._failing and time.monotonic() < self._retry_at

    def _failed(self, exc: Exception) -> None:
        if not self._failing:  # once per outage
            log.warning("crash guard: Redis unreachable (%s); redelivered messages are served unchecked", exc)
        self._failing = True
        self._retry_at = time.monotonic() + RETRY_S


NO_ERROR_RECORDED = (
    "none recorded (the process died without raising: a signal, a native crash or the out-of-memory "
    "killer, or it lost the broker while serving it)"
)


def _delivery_count(headers: dict | None) -> int | None:
    value = (headers or {}).get(DELIVERY_COUNT_HEADER)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
