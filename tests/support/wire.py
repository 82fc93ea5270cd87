"""Socket.IO at the wire level for load and abuse tests: Engine.IO 4 over one websocket (websocket-client),
so a client costs one socket and no thread, and reads nothing unless a Drain reads for it.

    s = WireSocket(url)                        # connects the namespace "/"
    s.emit("watch", {"job_id": j}, ack=1)      # 421["watch", {...}]
    drain = Drain([s, ...])                    # one thread reads them all, answers pings, records events
"""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import threading

import websocket


class WireSocket:
    def __init__(self, url: str, *, rcvbuf: int | None = None, timeout: float = 10.0):
        ws_url = url.replace("http://", "ws://") + "/socket.io/?EIO=4&transport=websocket"
        # a small receive buffer (set before connecting) makes a socket that does not read fill up fast
        opts = [(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)] if rcvbuf else []
        self.ws = websocket.create_connection(
            ws_url, sockopt=opts, timeout=timeout, skip_utf8_validation=True
        )
        self.ws.send("40")  # Socket.IO CONNECT to "/"
        self.lock = threading.Lock()
        self.steps: dict[str, list[int]] = {}  # job id -> steps of the frames received, in order
        self.statuses: list[str] = []
        self.acks: dict[int, object] = {}
        self.closed = False

    def emit(self, event: str, data: object, ack: int | None = None) -> None:
        self.ws.send(f"42{'' if ack is None else ack}" + json.dumps([event, data]))

    def emit_raw(self, message: str) -> None:
        """Send one Engine.IO message as it is (a malformed one, in tests)."""
        self.ws.send(message)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(Exception):
            self.ws.close(timeout=1)

    def handle(self, message: str) -> None:
        if message == "2":  # Engine.IO ping
            self.ws.send("3")
        elif message.startswith("42"):
            event, *args = json.loads(message[2:])
            with self.lock:
                if event == "frame":
                    self.steps.setdefault(args[0]["job_id"], []).append(args[0]["step"])
                elif event == "job":
                    self.statuses.append(args[0]["status"])
        elif message.startswith("43"):
            digits = len(message) - len(message[2:].lstrip("0123456789"))
            with self.lock:
                self.acks[int(message[2:digits])] = json.loads(message[digits:])[0]


class Drain(threading.Thread):
    """Reads every socket given as fast as it can (one thread, selectors)."""

    def __init__(self, sockets: list[WireSocket]):
        super().__init__(daemon=True)
        self.sel = selectors.DefaultSelector()
        for s in sockets:
            self.sel.register(s.ws.sock, selectors.EVENT_READ, s)
        self.stopped = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopped.is_set():
            for key, _ in self.sel.select(0.1):
                s: WireSocket = key.data
                try:
                    message = s.ws.recv()
                except Exception:  # noqa: BLE001 - closed by the server (or by the test)
                    self.sel.unregister(key.fileobj)
                    s.closed = True
                    continue
                if isinstance(message, str) and message:
                    s.handle(message)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
