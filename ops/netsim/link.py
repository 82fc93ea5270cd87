"""A remote host for a worker: its own network namespace (or the loopback fallback) and one link
proxy to each service it talks to, the broker and Redis.

    with RemoteHost(settings.amqp_url, settings.redis_url, one_way_ms=25) as host:
        subprocess.Popen([*host.command_prefix, "ddm", "worker", ...], env={**env, **host.env})
        host.set_delay(50)      # every link of the host, both directions
        host.blackhole(); host.heal(); host.reset()

The proxies run in this process and listen on the root side of the namespace's veth; they connect to
the services from the root namespace, so the broker sees 127.0.0.1 (RabbitMQ's guest user is
loopback-only by default and still works).
"""

from __future__ import annotations

import contextlib
from urllib.parse import urlsplit, urlunsplit

from ddm.schema.errors import ConfigError, expected

from .netns import Namespace
from .proxy import LinkProxy

DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671, "redis": 6379, "rediss": 6379}


def url_address(url: str) -> tuple[str, int]:
    """(host, port) a service URL points at, e.g. 'amqp://guest:guest@127.0.0.1:5672/' -> ('127.0.0.1',
    5672). One URL of a TCP scheme only: a comma-separated cluster list or a unix socket has no single
    address to put a proxy in front of."""
    parts = urlsplit(url)
    if "," in url or parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ConfigError(expected(f"one URL of {', '.join(DEFAULT_PORTS)} with a host", url))
    return parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme]


def with_address(url: str, host: str, port: int) -> str:
    """The URL with its host and port replaced (user, password, vhost or db kept)."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


class RemoteHost:
    """A context manager: the namespace and the proxies are up inside it, gone after it."""

    def __init__(
        self,
        amqp_url: str,
        redis_url: str,
        *,
        one_way_ms: float = 0.0,
        jitter_ms: float = 0.0,
        isolate: bool = True,
        max_lifetime_s: float = 3600.0,
        name: str = "remote",
    ):
        self.urls = {"amqp": amqp_url, "redis": redis_url}
        self.upstreams = {service: url_address(url) for service, url in self.urls.items()}
        self.one_way_ms, self.jitter_ms = one_way_ms, jitter_ms
        self.isolate, self.max_lifetime_s, self.name = isolate, max_lifetime_s, name
        self.namespace: Namespace | None = None
        self.proxies: dict[str, LinkProxy] = {}
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> RemoteHost:
        try:
            self.namespace = self._stack.enter_context(Namespace(isolate=self.isolate))
            for service, upstream in self.upstreams.items():
                proxy = LinkProxy(
                    (self.namespace.root_ip, 0),
                    upstream,
                    one_way_ms=self.one_way_ms,
                    jitter_ms=self.jitter_ms,
                    max_lifetime_s=self.max_lifetime_s,
                    name=f"{self.name}-{service}",
                )
                self.proxies[service] = self._stack.enter_context(proxy)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    @property
    def isolated(self) -> bool:
        return self.namespace is not None and self.namespace.isolated

    @property
    def env(self) -> dict[str, str]:
        """DDM_AMQP_URL and DDM_REDIS_URL of a worker on this host: the services through its links."""
        ip = self.namespace.root_ip
        return {
            "DDM_AMQP_URL": with_address(self.urls["amqp"], ip, self.proxies["amqp"].port),
            "DDM_REDIS_URL": with_address(self.urls["redis"], ip, self.proxies["redis"].port),
        }

    @property
    def command_prefix(self) -> list[str]:
        """Put in front of a worker's command line to run it on this host (empty on loopback)."""
        return self.namespace.exec_prefix

    def set_delay(self, one_way_ms: float, jitter_ms: float = 0.0) -> None:
        for proxy in self.proxies.values():
            proxy.set_delay(one_way_ms, jitter_ms)

    def blackhole(self, drop: bool = False) -> None:
        for proxy in self.proxies.values():
            proxy.blackhole(drop=drop)

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()

    def reset(self) -> int:
        return sum(proxy.reset() for proxy in self.proxies.values())
