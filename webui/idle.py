"""Dropping idle sockets: an Engine.IO session that watches nothing and sends no Socket.IO packet for
`idle_s` seconds is disconnected, so a connection held open for nothing does not keep a place of its
address's connection cap (connection_cap.py) for ever. Engine.IO's pings do not count as activity: a
browser answers them by itself. The page is told ("io server disconnect": it does not reconnect by
itself) and reconnects when its user comes back (static/app.js).
"""

from __future__ import annotations

import logging
import threading
import time

from ddm.webui.backlog import NAMESPACE
from ddm.webui.eio_hooks import hook

log = logging.getLogger(__name__)


class IdleSockets:
    def __init__(self, socketio, idle_s: float, is_watching, clock=time.monotonic):
        """is_watching: Socket.IO sid -> whether it watches a job now (TailHub)."""
        self.sio = socketio.server  # socketio.Server
        self.idle_s = idle_s
        self.is_watching = is_watching
        self.clock = clock
        self._last: dict[str, float] = {}  # Engine.IO sid -> when it connected or last sent a packet
        self._lock = threading.Lock()
        hook(socketio, "connect", lambda eio_sid, environ: self.touch(eio_sid))
        hook(socketio, "message", lambda eio_sid, data: self.touch(eio_sid))
        hook(socketio, "disconnect", lambda eio_sid, reason: self.forget(eio_sid))

    def touch(self, eio_sid: str) -> None:
        with self._lock:
            self._last[eio_sid] = self.clock()

    def forget(self, eio_sid: str) -> None:
        with self._lock:
            self._last.pop(eio_sid, None)

    def idle(self) -> list[tuple[str, str | None]]:
        """(Engine.IO sid, Socket.IO sid or None) of every session idle past idle_s that watches nothing."""
        cutoff = self.clock() - self.idle_s
        with self._lock:
            stale = [eio_sid for eio_sid, t in self._last.items() if t < cutoff]
        out = []
        for eio_sid in stale:
            sid = self.sio.manager.sid_from_eio_sid(eio_sid, NAMESPACE)
            if sid is None or not self.is_watching(sid):
                out.append((eio_sid, sid))
        return out

    def sweep(self) -> int:
        """Disconnect every idle session; returns how many."""
        idle = self.idle()
        for eio_sid, sid in idle:
            self.forget(eio_sid)
            log.info("disconnected an idle connection (%g s without a packet, watching nothing)", self.idle_s)
            try:
                if sid is not None:
                    self.sio.disconnect(sid, namespace=NAMESPACE)  # the page learns it was the server
                self.sio.eio.disconnect(eio_sid)  # and the session closes even if the client ignores that
            except Exception:  # noqa: BLE001 - it may have gone already
                log.debug("connection %s was gone", eio_sid, exc_info=True)
        return len(idle)

    def run(self, closed: threading.Event) -> None:
        """Sweep every few seconds until `closed` is set (a background task)."""
        while not closed.wait(min(5.0, max(0.2, self.idle_s / 4))):
            self.sweep()
