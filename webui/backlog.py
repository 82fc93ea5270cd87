"""What each browser connection has not taken yet, in bytes, and dropping a connection that stopped reading.

Engine.IO keeps one unbounded queue of outgoing packets per connection; its writer thread (websocket)
or the next long-poll GET (polling) empties it. A browser that does not read leaves everything the UI
emits to it in that queue, so the queue is where memory grows. MeteredQueue is that queue with a byte
count kept as packets go in and out (O(1) to read), installed through the Engine.IO server's
create_queue; TailHub reads it before sending a viewer more.

The writer takes every queued packet at once and then blocks on the socket, so a connection holds at
most about twice the bound it is held to: the batch being written plus the queue behind it.
"""

from __future__ import annotations

import contextlib
import logging
import queue

log = logging.getLogger(__name__)
NAMESPACE = "/"


def packet_bytes(pkt) -> int:
    data = getattr(pkt, "data", None)
    return len(data) if isinstance(data, str | bytes | bytearray) else 16


class MeteredQueue(queue.Queue):
    """queue.Queue that knows the bytes of the Engine.IO packets it holds (`nbytes`)."""

    def _init(self, maxsize: int) -> None:
        super()._init(maxsize)
        self.nbytes = 0

    def _put(self, item) -> None:  # called with the queue's mutex held
        super()._put(item)
        self.nbytes += packet_bytes(item)

    def _get(self):
        item = super()._get()
        self.nbytes -= packet_bytes(item)
        return item

    def discard(self) -> int:
        """Forget every queued packet (the connection is being closed); returns the bytes freed."""
        with self.mutex:
            freed, self.nbytes = self.nbytes, 0
            self.queue.clear()
            return freed


def install(socketio) -> None:
    """Give every Engine.IO connection of `socketio` (a flask_socketio.SocketIO) a MeteredQueue."""
    socketio.server.eio.create_queue = MeteredQueue  # the one place engineio makes a connection's queue


class Backlogs:
    """Backlog of a Socket.IO session (sid) and closing it. A sid with no Engine.IO socket (Flask-SocketIO's
    test client) has no backlog."""

    def __init__(self, socketio):
        self.sio = socketio.server  # socketio.Server
        self.eio = socketio.server.eio

    def _queue(self, sid: str) -> MeteredQueue | None:
        eio_sid = self.sio.manager.eio_sid_from_sid(sid, NAMESPACE)
        sock = self.eio.sockets.get(eio_sid) if eio_sid else None
        q = getattr(sock, "queue", None)
        return q if isinstance(q, MeteredQueue) else None

    def nbytes(self, sid: str) -> int:
        q = self._queue(sid)
        return q.nbytes if q is not None else 0

    def drop(self, sid: str, why: str) -> None:
        """Close `sid`'s connection and free what it never took. Call with no hub lock held: closing runs
        the disconnect handler, which unwatches."""
        eio_sid = self.sio.manager.eio_sid_from_sid(sid, NAMESPACE)
        sock = self.eio.sockets.get(eio_sid) if eio_sid else None
        freed = sock.queue.discard() if isinstance(getattr(sock, "queue", None), MeteredQueue) else 0
        log.warning("dropped viewer %s: %s (%d KiB unsent freed)", sid, why, freed // 1024)
        with contextlib.suppress(Exception):
            if sock is not None:
                sock.close(wait=False, abort=True)  # runs the disconnect handlers in this thread
            else:
                self.sio.disconnect(sid, namespace=NAMESPACE)
