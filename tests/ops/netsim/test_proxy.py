"""The link proxy on real sockets: order under jitter, measured delay, blackhole/heal, reset, cleanup."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from ddm.ops.netsim.proxy import LinkProxy

from .servers import recv_exactly

LOOPBACK = ("127.0.0.1", 0)


def round_trip_ms(sock: socket.socket, size: int = 64) -> float:
    started = time.perf_counter()
    sock.sendall(b"p" * size)
    recv_exactly(sock, size)
    return (time.perf_counter() - started) * 1e3


def netsim_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("netsim-")]


def test_jitter_delays_bytes_but_never_reorders_them(sink_server):
    count = 3000
    with LinkProxy(LOOPBACK, sink_server.address, one_way_ms=1, jitter_ms=15, seed=1) as link:
        with socket.create_connection(link.address) as client:
            for i in range(count):
                client.sendall(struct.pack("!I", i))
                if i % 25 == 0:
                    time.sleep(0.001)  # separate reads at the proxy, each with its own random delay
        deadline = time.monotonic() + 5
        while len(sink_server.received) < 4 * count and time.monotonic() < deadline:
            time.sleep(0.01)
        # the proxy really split the stream: a reordering bug would have had chunks to swap
        assert link.stats()["bytes_up"] == 4 * count
    got = struct.unpack(f"!{count}I", bytes(sink_server.received))
    assert list(got) == list(range(count))


def test_round_trip_takes_at_least_twice_the_one_way_delay_and_follows_set_delay(echo_server):
    link = LinkProxy(LOOPBACK, echo_server.address, one_way_ms=30)
    with link, socket.create_connection(link.address) as client:
        slow = sorted(round_trip_ms(client) for _ in range(5))
        link.set_delay(5)
        fast = sorted(round_trip_ms(client) for _ in range(5))
        link.set_delay(0, direction="up")
        link.set_delay(20, direction="down")
        one_side = sorted(round_trip_ms(client) for _ in range(5))
    assert slow[0] >= 60 and slow[2] < 60 + 40, slow
    assert fast[0] >= 10 and fast[2] < 10 + 40, fast
    assert one_side[0] >= 20 and one_side[2] < 20 + 40, one_side


def test_blackhole_holds_bytes_until_heal_for_old_and_new_connections(echo_server):
    with LinkProxy(LOOPBACK, echo_server.address) as link:
        old = socket.create_connection(link.address)
        assert round_trip_ms(old) < 1000
        link.blackhole()
        old.sendall(b"held")
        new = socket.create_connection(link.address)  # the proxy accepts; nothing crosses
        new.sendall(b"also")
        for sock in (old, new):
            sock.settimeout(0.3)
            with pytest.raises(TimeoutError):
                sock.recv(16)
        link.heal()
        assert recv_exactly(old, 4) == b"held" and recv_exactly(new, 4) == b"also"
        assert round_trip_ms(new) < 1000
        old.close()
        new.close()


def wait_until(check, timeout: float = 3.0) -> None:
    """Poll check() until it is true or `timeout` s pass (the assertions after it say what was missing)."""
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)


def wait_received(server, size: int) -> bytes:
    wait_until(lambda: len(server.received) >= size)
    return bytes(server.received)


def test_blackhole_with_drop_loses_what_crossed_meanwhile(sink_server):
    with LinkProxy(LOOPBACK, sink_server.address) as link, socket.create_connection(link.address) as client:
        client.sendall(b"a")
        assert wait_received(sink_server, 1) == b"a"
        link.blackhole(direction="up", drop=True)
        client.sendall(b"lost")
        wait_until(lambda: link.stats()["bytes_dropped"] == 4)  # heal once the proxy dropped all of it
        link.heal()
        client.sendall(b"b")
        assert wait_received(sink_server, 2) == b"ab"
        assert link.stats()["bytes_up"] == 2 and link.stats()["bytes_dropped"] == 4


def test_reset_sends_rst_to_both_peers_and_the_listener_stays(echo_server):
    with LinkProxy(LOOPBACK, echo_server.address, one_way_ms=1) as link:
        client = socket.create_connection(link.address)
        assert round_trip_ms(client) < 1000
        assert link.reset() == 1
        client.settimeout(2)
        with pytest.raises(ConnectionResetError):  # an RST, not an orderly FIN (recv would return b"")
            client.recv(16)
        client.close()
        deadline = time.monotonic() + 2
        while not echo_server.errors and time.monotonic() < deadline:
            time.sleep(0.01)
        assert any(isinstance(e, ConnectionResetError) for e in echo_server.errors)
        with socket.create_connection(link.address) as again:
            assert round_trip_ms(again) < 1000
        assert link.stats()["resets"] == 1 and link.stats()["connections_total"] == 2


def test_close_and_max_lifetime_end_every_connection_and_thread(echo_server):
    with LinkProxy(LOOPBACK, echo_server.address) as link:
        client = socket.create_connection(link.address)
        assert round_trip_ms(client) < 1000
        assert netsim_threads()
    client.settimeout(2)
    assert client.recv(16) == b""  # the proxy closed its side
    client.close()
    assert not netsim_threads()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(link.address, timeout=1)

    brief = LinkProxy(LOOPBACK, echo_server.address, max_lifetime_s=0.3).start()
    time.sleep(0.6)
    assert not brief.alive and not netsim_threads()
    brief.close()


def test_runs_as_a_process_and_stops_on_sigterm(echo_server):
    host, port = echo_server.address
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddm.ops.netsim.proxy", "--listen", "127.0.0.1:0"]
        + ["--upstream", f"{host}:{port}", "--delay-ms", "10", "--max-lifetime-s", "60"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), line
        with socket.create_connection(("127.0.0.1", int(line.rsplit(":", 1)[1]))) as client:
            assert round_trip_ms(client) >= 20
            os.kill(proc.pid, signal.SIGUSR1)  # blackhole
            time.sleep(0.2)
            client.sendall(b"x")
            client.settimeout(0.3)
            with pytest.raises(TimeoutError):
                client.recv(1)
            os.kill(proc.pid, signal.SIGUSR2)  # heal
            assert recv_exactly(client, 1) == b"x"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "stopped:" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
