"""The bench's pipeline with some experts on other simulated hosts: each linked expert's worker runs
in its own network namespace (ddm.ops.netsim), reaching the broker and Redis through link proxies whose
delay the WAN run sets between levels."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ddm.ops.bench.pipeline import PipelineProcesses
from ddm.ops.netsim.link import RemoteHost
from ddm.schema.errors import ConfigError, expected

LINK_LIFETIME_S = 12 * 3600.0  # a bound on the proxies, far above any bench run


class LinkedPipeline(PipelineProcesses):
    """PipelineProcesses whose workers of the `linked` experts run behind links (one host each)."""

    def __init__(self, deployment: Path, log_dir: Path, linked: tuple[int, ...]):
        super().__init__(deployment, log_dir)
        ids = [e.id for e in self.deployment.experts]
        if not set(linked) <= set(ids):
            raise ConfigError(expected(f"--link-experts among the deployment's experts {ids}", list(linked)))
        self.linked = linked
        self.hosts: dict[str, RemoteHost] = {}  # worker name -> its host
        self._links = contextlib.ExitStack()

    def __enter__(self) -> LinkedPipeline:
        try:
            for k in self.linked:
                host = RemoteHost(
                    self.settings.amqp_url, self.settings.redis_url, name=f"expert{k}",
                    max_lifetime_s=LINK_LIFETIME_S,
                )  # fmt: skip
                self.hosts[f"bench-expert{k}"] = self._links.enter_context(host)
            super().__enter__()  # stops what it started if a worker does not get ready
        except BaseException:
            self._links.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            super().__exit__(*exc)  # the workers stop before their hosts go
        finally:
            self._links.close()

    def command(self, name: str, argv: list[str]) -> list[str]:
        host = self.hosts.get(name)
        return [*(host.command_prefix if host else []), *super().command(name, argv)]

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        host = self.hosts.get(name)
        super()._spawn(name, args, {**(env or {}), **(host.env if host else {})})

    def set_rtt(self, rtt_ms: float) -> None:
        """Every link gets rtt_ms / 2 of delay each way, from the next byte on."""
        for host in self.hosts.values():
            host.set_delay(rtt_ms / 2)

    def describe_links(self) -> dict:
        """Whether the linked workers really ran on other hosts (namespaces) or on loopback."""
        hosts = list(self.hosts.values())
        return {
            "experts": list(self.linked),
            "isolated": all(h.isolated for h in hosts),
            "fallback": next((h.namespace.fallback_reason for h in hosts if not h.isolated), None),
        }
