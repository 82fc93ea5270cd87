"""The UI's one Redis pool (webui/redis_pool.py): sized from DDM_UI_THREADS, and when every connection
is busy a caller waits for one (redis_wait_s) instead of failing at once with "Too many connections";
through a plain URL and through Sentinel. Real Redis servers."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
import redis

from ddm.schema.settings import Settings
from ddm.webui.config import REDIS_SPARE_CONNECTIONS, UIConfig
from ddm.webui.redis_pool import client_name, ui_redis
from tests.support.sentinel import SENTINEL_SECRET, SentinelSet, needs_redis_server


def test_the_pool_is_sized_from_the_threads():
    assert UIConfig(threads=37).redis_max_connections == 37 + REDIS_SPARE_CONNECTIONS
    assert UIConfig.from_env({"DDM_UI_THREADS": "300"}).redis_max_connections == 300 + REDIS_SPARE_CONNECTIONS


def check_blocking_pool(r: redis.Redis) -> None:
    """Two connections at most, waits of 0.5 s: a third caller waits, and gets one when one is freed."""
    assert r.ping() and r.client_getname().startswith("ddm-webui:")
    pool = r.connection_pool
    held = [pool.get_connection(), pool.get_connection()]
    t0 = time.monotonic()
    with pytest.raises(redis.ConnectionError, match="No connection available"):
        r.ping()
    assert 0.4 < time.monotonic() - t0 < 2.0  # it waited, then said so
    threading.Timer(0.2, pool.release, (held.pop(),)).start()
    assert r.ping()  # back-pressure: served as soon as a connection came back
    pool.release(held.pop())
    pool.disconnect()


def test_a_blocking_pool_on_a_plain_url(settings):
    check_blocking_pool(ui_redis(settings, max_connections=2, wait_s=0.5))


@needs_redis_server
@pytest.mark.parametrize("sentinel_password", [None, SENTINEL_SECRET])  # the Sentinel's own requirepass
def test_a_blocking_pool_through_sentinel(tmp_path, sentinel_password):
    sentinels = SentinelSet(tmp_path, sentinel_password=sentinel_password).start()
    try:
        url = sentinels.url(db=3, sentinel_password=sentinel_password)
        settings = dataclasses.replace(Settings(prefix="tpool."), redis_url=url)
        r = ui_redis(settings, max_connections=2, wait_s=0.5)
        r.set("k", b"v")
        assert sentinels.client("master", db=3).get("k") == b"v"  # the service's master, database 3
        assert r.client_getname() == client_name(settings)
        check_blocking_pool(r)
    finally:
        sentinels.stop()
