"""Where the metrics and health server listens: 127.0.0.1 unless DDM_METRICS_BIND says otherwise."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from ddm.runtime.metrics import DEFAULT_BIND, WorkerMetrics, serve_metrics
from ddm.schema.errors import ConfigError
from ddm.schema.settings import Settings


def test_the_default_is_this_host_only():
    assert Settings().metrics_bind == "127.0.0.1"
    assert Settings.from_env({}).metrics_bind == "127.0.0.1"
    assert Settings.metrics_bind == DEFAULT_BIND  # the server's default is the settings' one


@pytest.mark.parametrize("value", ["0.0.0.0", "::", "::1", "10.1.2.3", "metrics.internal"])
def test_an_address_or_host_name_is_taken(value):
    assert Settings.from_env({"DDM_METRICS_BIND": value}).metrics_bind == value


def _has_ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    ("value", "url_host"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("0.0.0.0", "127.0.0.1"),
        ("localhost", "127.0.0.1"),
        ("::1", "[::1]"),
        ("::", "[::1]"),
    ],
)
def test_every_accepted_form_binds_and_serves(value, url_host):
    """An address DDM_METRICS_BIND takes is one the server can listen on: an IPv6 one too (the IPv4-only
    server died at start with socket.gaierror on '::')."""
    if ":" in value and not _has_ipv6_loopback():
        pytest.skip("this kernel has no IPv6 loopback")
    metrics = WorkerMetrics("expert", "w-bind6")
    metrics.set_health(lambda: {"consuming": True})
    server = serve_metrics(metrics, _free_port(), Settings.from_env({"DDM_METRICS_BIND": value}).metrics_bind)
    try:
        with urllib.request.urlopen(f"http://{url_host}:{server.port}/healthz", timeout=5) as reply:
            assert reply.status == 200
    finally:
        server.close()


@pytest.mark.parametrize("value", ["", "0.0.0.0 ", "http://0.0.0.0", "a b"])
def test_anything_else_names_the_variable(value):
    with pytest.raises(ConfigError, match="DDM_METRICS_BIND"):
        Settings.from_env({"DDM_METRICS_BIND": value})


def test_serve_metrics_binds_the_address_it_is_given():
    metrics = WorkerMetrics("expert", "w-bind")
    metrics.set_health(lambda: {"consuming": True})
    # serve_metrics treats port 0 as "off": find a free port first
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = serve_metrics(metrics, port)  # the default: 127.0.0.1
    try:
        assert server is not None and server.host == "127.0.0.1"
        assert server._server.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as reply:
            assert reply.status == 200
    finally:
        server.close()
    server = serve_metrics(metrics, port, "0.0.0.0")
    try:
        assert server._server.server_address[0] == "0.0.0.0"
    finally:
        server.close()
