"""At most `per_address` Socket.IO connections (Engine.IO sessions: a websocket, or a long-polling
session) open at once from one client address, whatever they do.

Two places, one count:
- ConnectionCap.middleware: WSGI middleware in front of Engine.IO (inside ProxyFix, so REMOTE_ADDR is the
  client's). A request that would open a session (a /socket.io/ request without `sid`) from an address
  at its cap is answered 429 at once: nothing of Engine.IO runs, no websocket is accepted.
- Engine.IO's connect and disconnect events (hooked by install()) keep the count exact: a session is
  counted when Engine.IO accepts it and uncounted when it closes, however it closes; requests racing
  past the middleware are refused there (Engine.IO answers 401).
"""

from __future__ import annotations

import logging
import threading
from urllib.parse import parse_qs

from ddm.webui.eio_hooks import hook
from ddm.webui.sio_guard import SOCKETIO_PATH

log = logging.getLogger(__name__)


class ConnectionCap:
    def __init__(self, per_address: int):
        self.per_address = per_address
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}  # address -> sessions open
        self._address: dict[str, str] = {}  # Engine.IO sid -> its address

    def count(self, address: str) -> int:
        with self._lock:
            return self._open.get(address, 0)

    def opened(self, eio_sid: str, address: str) -> bool:
        """Count a session Engine.IO is about to accept; False (not counted) when `address` is at its cap."""
        with self._lock:
            if self._open.get(address, 0) >= self.per_address:
                return False
            self._open[address] = self._open.get(address, 0) + 1
            self._address[eio_sid] = address
            return True

    def closed(self, eio_sid: str) -> None:
        with self._lock:
            address = self._address.pop(eio_sid, None)
            if address is None:
                return
            left = self._open[address] - 1
            if left:
                self._open[address] = left
            else:
                del self._open[address]

    def install(self, socketio) -> None:
        """Count `socketio`'s (a flask_socketio.SocketIO) Engine.IO sessions."""
        hook(
            socketio,
            "connect",
            lambda eio_sid, environ: self.opened(eio_sid, environ.get("REMOTE_ADDR") or "?"),
        )
        hook(socketio, "disconnect", lambda eio_sid, reason: self.closed(eio_sid))

    def middleware(self, app):
        """`app` (the WSGI app with Socket.IO's middleware) behind the early refusal."""

        def guarded(environ, start_response):
            address = environ.get("REMOTE_ADDR") or "?"
            opens = environ.get("PATH_INFO", "").startswith(SOCKETIO_PATH) and "sid" not in parse_qs(
                environ.get("QUERY_STRING", "")
            )
            if not opens or self.count(address) < self.per_address:
                return app(environ, start_response)
            log.info("refused a Socket.IO connection from %s: %d open", address, self.per_address)
            text = (
                f"too many connections: at most {self.per_address} Socket.IO connections from one address "
                f"({address}) at once; close a tab\n"
            ).encode()
            start_response(
                "429 TOO MANY REQUESTS",
                [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(text)))],
            )
            return [text]

        return guarded
