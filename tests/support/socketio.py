"""Flask-SocketIO's test client for the web UI tests: connect to an app, wait for events, read frames."""

from __future__ import annotations

import time


def wait_for(client, pred, timeout: float = 10.0) -> list[dict]:
    """Collect received events until pred(all so far) is true; returns them all."""
    got: list[dict] = []
    deadline = time.monotonic() + timeout
    while True:
        got += client.get_received()
        if pred(got):
            return got
        assert time.monotonic() < deadline, f"timed out; received {[(e['name'], e['args']) for e in got]}"
        time.sleep(0.05)


def steps_of(events: list[dict]) -> list[int]:
    return [e["args"][0]["step"] for e in events if e["name"] == "frame"]


def statuses(events: list[dict]) -> list[str]:
    return [e["args"][0]["status"] for e in events if e["name"] == "job"]


def connect(app):
    socketio = app.extensions["socketio"]
    return socketio.test_client(app, flask_test_client=app.test_client())
