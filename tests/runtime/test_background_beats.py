"""The heartbeat's Redis write runs off the worker's thread (ddm/runtime/heartbeat.py BackgroundBeats):
a Redis that does not answer must not stall serving, and the newest record is the one that lands.
Against the real Redis, plus a local socket that accepts and never answers (a far or hung Redis)."""

from __future__ import annotations

import socket
import time
import uuid
from types import SimpleNamespace

import redis

from ddm.runtime.heartbeat import BackgroundBeats, Heartbeat
from ddm.schema.names import Names
from tests.support.services import REDIS_URL

STATIC = {"role": "router", "host": "testhost", "region": "test-region", "pid": 1}


def counters(n: int) -> SimpleNamespace:
    return SimpleNamespace(fields=lambda: {"reconnects": n})


def test_a_posted_record_lands_and_the_newest_wins():
    names = Names(prefix=f"t{uuid.uuid4().hex[:8]}:")
    heartbeat = Heartbeat(REDIS_URL, names, "beats-test", STATIC, ttl_s=60)
    beats = BackgroundBeats(heartbeat)
    r = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        for n in range(20):
            beats.post(heartbeat.record(counters(n), jobs_running=n))
        beats.close()
        assert r.hget(heartbeat.key, "jobs_running") == "19", "the last record posted is the one in Redis"
        assert heartbeat.ok
    finally:
        heartbeat.remove()
        heartbeat.close()
        r.close()


def test_a_redis_that_never_answers_does_not_stall_the_poster():
    hung = socket.create_server(("127.0.0.1", 0))  # accepts connections (backlog), never answers
    url = f"redis://127.0.0.1:{hung.getsockname()[1]}/0"
    heartbeat = Heartbeat(url, Names(prefix="hung:"), "beats-hung", STATIC, ttl_s=60)
    beats = BackgroundBeats(heartbeat)
    try:
        started = time.monotonic()
        for n in range(5):  # a synchronous beat would wait out the 2 s socket timeout each time
            beats.post(heartbeat.record(counters(n)))
        posted_s = time.monotonic() - started
        assert posted_s < 1.0, f"posting 5 beats took {posted_s:.2f} s: the write ran on the poster's thread"
    finally:
        beats.close(timeout_s=10)
        heartbeat.close()
        hung.close()
