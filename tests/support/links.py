"""A worker of a test's Pipeline on another simulated host, behind links with delay and failures
(ddm.ops.netsim: a network namespace and a proxy to the broker and one to Redis).

    with worker_link(one_way_ms=25) as link, Pipeline(deployment, tmp_path) as p:
        p.start_expert(1, "e1", **spawn_args(link))      # expert 1 runs on the far side
        p.start_expert(0, "e0")
        p.start_router()
        p.wait_ready("e0", "e1", "router")
        link.blackhole(); ...; link.heal()                 # or set_delay(ms), reset()

Enter the link before the Pipeline so the Pipeline stops its processes before the namespace goes
(the namespace would stop what is still inside it anyway, with a warning). On a machine without
namespaces the link falls back to proxies on loopback: link.isolated says which.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ddm.ops.netsim.link import RemoteHost

from .services import AMQP_URL, REDIS_URL


@contextmanager
def worker_link(
    one_way_ms: float = 0.0,
    jitter_ms: float = 0.0,
    *,
    isolate: bool = True,
    amqp_url: str = AMQP_URL,
    redis_url: str = REDIS_URL,
    max_lifetime_s: float = 900.0,
) -> Iterator[RemoteHost]:
    """A remote host whose links lead to the test's broker and Redis (pass the URLs a Pipeline was given
    through its `env`, if any)."""
    host = RemoteHost(
        amqp_url,
        redis_url,
        one_way_ms=one_way_ms,
        jitter_ms=jitter_ms,
        isolate=isolate,
        max_lifetime_s=max_lifetime_s,
        name="test-link",
    )
    with host:
        yield host


def spawn_args(link: RemoteHost) -> dict:
    """Keyword arguments of Pipeline.start_expert / start_router that start a worker on the link's host."""
    return {"env": link.env, "command_prefix": link.command_prefix}
