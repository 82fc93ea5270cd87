"""Fixtures: an echo server and a sink server on loopback (tests/ops/netsim/servers.py)."""

from __future__ import annotations

import pytest

from .servers import Server, echo, sink


@pytest.fixture
def echo_server():
    server = Server(echo)
    yield server
    server.close()


@pytest.fixture
def sink_server():
    server = Server(sink)
    yield server
    server.close()
