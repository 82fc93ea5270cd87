"""Simulated hosts: a namespace with a veth pair, isolated from the root namespace's loopback, removed
afterwards (also after an exception and with a process still inside), and the loopback fallback."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ddm.ops.netsim import netns
from ddm.ops.netsim.netns import Namespace, list_namespaces, unavailable
from ddm.ops.netsim.proxy import LinkProxy

from .servers import recv_exactly

needs_netns = pytest.mark.skipif(unavailable() is not None, reason="network namespaces need root and `ip`")


def links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout


def connect_from(ns: Namespace, host: str, port: int, timeout: float = 1.0) -> str:
    """Connect from inside the namespace; 'ok' or the exception's name."""
    code = (
        "import socket, sys\n"
        "try:\n"
        f"    s = socket.create_connection(({host!r}, {port}), timeout={timeout}); s.sendall(b'ping')\n"
        "    print('ok' if s.recv(4) == b'ping' else 'bad')\n"
        "except OSError as e:\n"
        "    print(type(e).__name__)\n"
    )
    return ns.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20).stdout.strip()


@needs_netns
def test_namespace_reaches_its_veth_peer_but_not_the_root_loopback(echo_server):
    with Namespace() as ns:
        assert ns.isolated and ns.fallback_reason is None
        assert ns.name in list_namespaces() and ns.root_ip.startswith("10.213.")
        inner = ns.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
        assert f"inet {ns.inner_ip}/30" in inner
        with LinkProxy((ns.root_ip, 0), echo_server.address) as proxy:
            assert connect_from(ns, ns.root_ip, proxy.port) == "ok"
        # the echo server listens on the root namespace's loopback: not reachable from this "host"
        assert connect_from(ns, "127.0.0.1", echo_server.address[1]) == "ConnectionRefusedError"
        name, veth = ns.name, ns._veth
        assert veth in links()
    assert name not in list_namespaces() and veth not in links()


@needs_netns
def test_exceptions_and_processes_left_inside_do_not_leak_the_namespace():
    sleeper = None
    try:
        with pytest.raises(RuntimeError, match="boom"), Namespace() as ns:
            name = ns.name
            sleeper = subprocess.Popen([*ns.exec_prefix, "sleep", "60"])
            deadline = time.monotonic() + 5
            while sleeper.pid not in ns._pids() and time.monotonic() < deadline:
                time.sleep(0.01)  # `ip netns exec` enters the namespace a moment after it starts
            raise RuntimeError("boom")
        assert sleeper.wait(timeout=10) == -signal.SIGTERM  # stopped by the namespace's cleanup
        assert name not in list_namespaces()
    finally:
        if sleeper is not None and sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


def test_loopback_fallback_says_so(caplog):
    caplog.set_level(logging.WARNING, logger="ddm.ops.netsim.netns")
    with Namespace(isolate=False) as ns:
        assert not ns.isolated and ns.exec_prefix == [] and ns.root_ip == ns.inner_ip == "127.0.0.1"
        assert "isolate=False" in ns.fallback_reason
    assert "falling back to loopback" in caplog.text


@needs_netns
def test_failed_creation_falls_back_and_removes_what_it_made(monkeypatch, echo_server):
    real_ip, made = netns._ip, []

    def veth_fails(*args, **kwargs):
        if args[:2] == ("link", "add"):  # the namespace exists by now: it must not be left behind
            # this process's only: tests in other processes make namespaces of their own meanwhile
            made.extend(n for n in list_namespaces() if n.startswith(f"ddm-ns-{os.getpid()}-"))
            raise subprocess.CalledProcessError(2, ["ip", *args], stderr="RTNETLINK answers: no veth")
        return real_ip(*args, **kwargs)

    monkeypatch.setattr(netns, "_ip", veth_fails)
    with Namespace() as ns:
        assert not ns.isolated and "no veth" in ns.fallback_reason and ns.exec_prefix == []
        proxy = LinkProxy((ns.root_ip, 0), echo_server.address)  # still usable, on loopback
        with proxy, socket.create_connection(proxy.address) as client:
            client.sendall(b"x")
            assert recv_exactly(client, 1) == b"x"
    assert made and not set(made) & set(list_namespaces())
