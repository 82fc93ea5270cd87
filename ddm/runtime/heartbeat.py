"""The one writer of every worker's heartbeat record in Redis, and its reader. The counters it writes
belong to the roles (workers/stats.py WorkerStats, router/stats.py RouterStats).

    HSET   <prefix>ddm:worker:<worker_id>  WorkerHeartbeat.encode()  (the record: schema/heartbeat.py)
    EXPIRE <that key> heartbeat_ttl_s      (a worker that stops beating disappears by itself)
    SADD   <prefix>ddm:workers  worker_id  (an index; readers skip ids whose record has expired)
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

import redis

from ddm.runtime.redis_conn import redis_client
from ddm.schema.errors import SchemaError
from ddm.schema.heartbeat import WorkerHeartbeat
from ddm.schema.names import Names

log = logging.getLogger(__name__)


class Counters(Protocol):
    """What a worker hands to each beat: its counters (WorkerStats for experts, the router's stats).
    The runtime counts reconnects into it."""

    reconnects: int

    def fields(self) -> dict[str, int | float]: ...


class Heartbeat:
    """Writes the worker's record (schema/heartbeat.py WorkerHeartbeat) to Redis. A Redis outage is
    logged (once per outage), never fatal: serving requests matters more than being visible.

    static: the record's fields that do not change (role, host, region, pid, and the role's fields:
    expert_id, framework, device, queue, max_batch, max_wait_ms, buckets; or deployment); a bad value
    raises SchemaError here, at start, not at the first beat."""

    def __init__(self, redis_url: str, names: Names, worker_id: str, static: dict, ttl_s: int):
        # Short timeouts: a beat written by beat() runs on its caller's thread (BackgroundBeats keeps
        # the workers' off their broker connection's thread).
        self._redis = redis_client(redis_url, socket_timeout=2.0, connect_timeout=2.0)
        self._names = names
        self._worker_id = worker_id
        self._key = names.worker(worker_id)
        self._static = {"worker_id": worker_id, **static, "started_at": time.time()}
        self._record({}, {})  # check the static fields now
        self._ttl_s = ttl_s
        self._failing = False
        self.ok = False  # the last beat reached Redis (read by /healthz from another thread)

    @property
    def key(self) -> str:
        return self._key

    def _record(self, counters: dict, extra: dict) -> WorkerHeartbeat:
        return WorkerHeartbeat.build({**self._static, **counters, **extra, "updated_at": time.time()})

    def record(self, stats: Counters, **extra) -> WorkerHeartbeat:
        """The record as of now: static fields, stats.fields() counters, `extra` such as jobs_running."""
        return self._record(stats.fields(), extra)

    def beat(self, stats: Counters, **extra) -> bool:
        """Write the record as of now and refresh its TTL; True if Redis took it."""
        return self.write(self.record(stats, **extra))

    def write(self, record: WorkerHeartbeat) -> bool:
        """Write `record` and refresh its TTL; True if Redis took it."""
        try:
            pipe = self._redis.pipeline(transaction=False)
            pipe.hset(self._key, mapping=record.encode())
            pipe.expire(self._key, self._ttl_s)
            pipe.sadd(self._names.workers_index, self._worker_id)
            pipe.execute()
        except redis.RedisError as exc:
            if not self._failing:
                log.warning("heartbeat to Redis failed (%s); still serving, will keep trying", exc)
            self._failing = True
            self.ok = False
            return False
        if self._failing:
            log.info("heartbeat to Redis works again")
        self._failing = False
        self.ok = True
        return True

    def remove(self) -> None:
        """Delete the record on a clean stop (a crashed worker's record expires instead)."""
        try:
            pipe = self._redis.pipeline(transaction=False)
            pipe.delete(self._key)
            pipe.srem(self._names.workers_index, self._worker_id)
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("could not remove heartbeat %s (%s); it expires in %d s", self._key, exc, self._ttl_s)

    def close(self) -> None:
        self._redis.close()


class BackgroundBeats:
    """Writes a Heartbeat's records on a thread of its own. The worker snapshots its record on its own
    thread (post: no I/O) and goes on serving: a Redis write costs a round trip to Redis, which from a
    far host is the link's (50 ms behind `ddm bench --rtt-ms 50`, stalling a forward pass at every beat;
    docs/BENCHMARKS.md), and a Redis that does not answer costs the socket timeout. Only the newest
    record waits: one not yet written when the next is posted is dropped (it is older)."""

    def __init__(self, heartbeat: Heartbeat):
        self.heartbeat = heartbeat
        self._wake = threading.Condition()
        self._next: WorkerHeartbeat | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._thread.start()

    def post(self, record: WorkerHeartbeat) -> None:
        with self._wake:
            self._next = record
            self._wake.notify()

    def close(self, timeout_s: float = 5.0) -> None:
        """Write what was posted last, then stop the thread (waiting at most timeout_s for it)."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._next is None and not self._closed:
                    self._wake.wait()
                record, self._next = self._next, None
                closed = self._closed
            if record is not None:
                self.heartbeat.write(record)
            if closed:
                return


def read_live_workers(r, names: Names, skipped: set[str] | None = None) -> dict[str, WorkerHeartbeat]:
    """{worker_id: heartbeat} of every worker in the index whose heartbeat key still exists. A record
    that does not decode (or names another worker) is left out and logged once per id (`skipped`)."""
    skipped = set() if skipped is None else skipped
    ids = sorted(
        i.decode(errors="replace") if isinstance(i, bytes) else str(i)
        for i in r.smembers(names.workers_index)
    )
    pipe = r.pipeline(transaction=False)
    valid = []
    for worker_id in ids:
        try:
            pipe.hgetall(names.worker(worker_id))
        except SchemaError:  # an id another tool wrote that is not a valid worker id
            continue
        valid.append(worker_id)
    out = {}
    for worker_id, raw in zip(valid, pipe.execute(), strict=True):
        if not raw:
            continue
        try:
            beat = WorkerHeartbeat.decode(raw)
            if beat.worker_id != worker_id:
                raise SchemaError(f"the record names worker {beat.worker_id!r}")
        except SchemaError as exc:
            if worker_id not in skipped:
                log.warning("ignoring the heartbeat of worker %s: %s", worker_id, exc)
                skipped.add(worker_id)
            continue
        out[worker_id] = beat
    return out
