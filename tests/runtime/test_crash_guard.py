"""The crash-loop guard's counting on the real Redis (ddm/runtime/crash_guard.py): attempts at a
redelivered message count up while they end their workers, a settled one forgets, the error a worker
dies of is in the reason; with Redis out of reach it serves unchecked, fast, and still honours a quorum
queue's delivery count."""

from __future__ import annotations

import time

from ddm.runtime.crash_guard import CrashGuard
from ddm.schema.names import Names


def test_attempts_count_until_the_limit_and_the_reason_names_the_last_error(prefix, redis_url):
    guard = CrashGuard(redis_url, Names(prefix), limit=3)
    suspects = []
    for _ in range(2):
        suspect, reason = guard.attempt("q", b"poison", None)
        assert reason is None
        suspects.append(suspect)
    guard.blame(suspects[-1], RuntimeError("out of memory in the forward pass"))
    suspect, reason = guard.attempt("q", b"poison", None)
    assert suspect is None and reason.startswith("crashed 3 workers: delivered 4 times, never settled")
    assert reason.endswith("last error: RuntimeError: out of memory in the forward pass")
    innocent, _ = guard.attempt("q", b"innocent", None)
    guard.settled(innocent)  # served fine this time: forgotten
    again, reason = guard.attempt("q", b"innocent", None)
    assert reason is None and again.attempt == 1
    guard.close()


def test_without_redis_it_serves_unchecked_and_fast_but_reads_a_quorum_count(prefix):
    guard = CrashGuard("redis://127.0.0.1:1/0", Names(prefix), limit=3)
    assert guard.attempt("q", b"m", None) == (None, None)  # Redis refused: served, as before the guard
    rest_ends = guard._retry_at
    asked = []
    real = guard._redis.pipeline
    guard._redis.pipeline = lambda *a, **k: asked.append(1) or real(*a, **k)
    for _ in range(50):
        assert guard.attempt("q", b"m", None) == (None, None)
    assert asked == [], "not asked again while it rests"
    assert guard._retry_at == rest_ends, "resting does not lengthen the rest (it would never end)"
    guard._retry_at = time.monotonic()  # its rest is over: asked once more (and refused again)
    assert guard.attempt("q", b"m", None) == (None, None) and asked == [1]
    _, reason = guard.attempt("q", b"m", {"x-delivery-count": 3})
    assert reason.startswith("crashed 3 workers") and "none recorded" in reason
    guard.close()
