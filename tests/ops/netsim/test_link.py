"""A remote host for a worker: real AMQP and Redis traffic through its links, from inside a namespace
and through the loopback fallback; the URLs a worker gets."""

from __future__ import annotations

import subprocess
import sys
import time

import pika
import pytest
import redis

from ddm.ops.netsim.link import url_address, with_address
from ddm.ops.netsim.netns import list_namespaces, unavailable
from ddm.schema.errors import ConfigError
from tests.support.links import spawn_args, worker_link

# Publish one message to a queue of our own and read it back, and a Redis round trip: the AMQP and
# Redis work a worker does, in a process on the far side of the links.
ROUND_TRIP = """
import os, sys, pika, redis
queue, key = sys.argv[1], sys.argv[2]
conn = pika.BlockingConnection(pika.URLParameters(os.environ["DDM_AMQP_URL"]))
ch = conn.channel()
ch.queue_declare(queue, exclusive=True)
ch.basic_publish("", queue, b"across the link")
for method, props, body in ch.consume(queue, inactivity_timeout=10):
    ch.basic_ack(method.delivery_tag)
    break
conn.close()
r = redis.Redis.from_url(os.environ["DDM_REDIS_URL"])
r.set(key, body, ex=60)
print(body.decode(), r.get(key).decode())
"""


def test_amqp_and_redis_through_links_from_inside_a_namespace(prefix):
    if unavailable() is not None:
        pytest.skip("network namespaces need root and `ip`")
    with worker_link(one_way_ms=5) as link:
        assert link.isolated and link.env["DDM_AMQP_URL"].startswith(
            f"amqp://guest:guest@{link.namespace.root_ip}:"
        )
        started = time.perf_counter()
        argv = [
            *spawn_args(link)["command_prefix"],
            sys.executable,
            "-c",
            ROUND_TRIP,
            f"{prefix}q",
            f"{prefix}k",
        ]
        out = subprocess.run(argv, env=link.env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split() == ["across", "the", "link", "across", "the", "link"]
        # the guest user is loopback-only in RabbitMQ: it got in because the proxy connects from 127.0.0.1
        stats = {name: proxy.stats() for name, proxy in link.proxies.items()}
        assert stats["amqp"]["connections_total"] == 1 and stats["redis"]["connections_total"] == 1
        assert all(s["bytes_up"] > 0 and s["bytes_down"] > 0 for s in stats.values())
        assert time.perf_counter() - started > 0.01  # several round trips of 10 ms at least
        name = link.namespace.name
    assert name not in list_namespaces()


def test_amqp_through_the_loopback_fallback(prefix):
    with worker_link(one_way_ms=10, isolate=False) as link:
        assert not link.isolated and link.command_prefix == []
        assert link.env["DDM_AMQP_URL"].startswith("amqp://guest:guest@127.0.0.1:")
        conn = pika.BlockingConnection(pika.URLParameters(link.env["DDM_AMQP_URL"]))
        ch = conn.channel()
        ch.queue_declare(f"{prefix}q", exclusive=True)
        started = time.perf_counter()
        ch.basic_publish("", f"{prefix}q", b"hello")
        method, _, body = next(ch.consume(f"{prefix}q", inactivity_timeout=10))
        assert body == b"hello" and time.perf_counter() - started >= 0.02  # a round trip of 2 x 10 ms
        ch.basic_ack(method.delivery_tag)
        link.reset()  # the broker connection breaks like a reset TCP link
        with pytest.raises(pika.exceptions.AMQPError):
            for _ in range(50):
                conn.process_data_events(time_limit=0.1)
        r = redis.Redis.from_url(link.env["DDM_REDIS_URL"])
        assert r.ping()
        r.close()


def test_worker_urls_keep_credentials_and_vhost():
    assert url_address("amqp://u:p@10.0.0.5:5673/%2F") == ("10.0.0.5", 5673)
    assert url_address("redis://127.0.0.1/0") == ("127.0.0.1", 6379)
    assert (
        with_address("amqp://u:p@127.0.0.1:5672/%2F", "10.213.0.1", 4000) == "amqp://u:p@10.213.0.1:4000/%2F"
    )
    assert with_address("redis://127.0.0.1:6379/3", "10.213.0.1", 4001) == "redis://10.213.0.1:4001/3"
    for url in ("unix:///run/redis.sock", "amqp://a:5672/,amqp://b:5672/"):
        with pytest.raises(ConfigError):
            url_address(url)
