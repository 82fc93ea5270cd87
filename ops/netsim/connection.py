"""One proxied TCP connection: two pipes (client -> upstream, upstream -> client) of non-blocking
sockets. Only the proxy's loop thread touches these objects."""

from __future__ import annotations

import errno
import random
import socket
import struct
from collections import deque

from .shaping import Shape

CHUNK = 256 * 1024
HIGH_WATER = 4 * 1024 * 1024  # bytes held per direction before the proxy stops reading (backpressure)
LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST instead of FIN


class Pipe:
    """Bytes read from `src` wait in order, each chunk until its due time, then go to `dst`."""

    def __init__(self, src: socket.socket, dst: socket.socket, shape: Shape, rng: random.Random):
        self.src, self.dst, self.shape, self.rng = src, dst, shape, rng
        self.queue: deque[list] = deque()  # [due (monotonic s), memoryview of what is left to send]
        self.queued = 0
        self.last_due = 0.0
        self.eof = False  # src sent FIN; dst gets one once everything before it is delivered
        self.shut = False  # that FIN went out
        self.blocked = False  # dst's send buffer is full: wait until it is writable
        self.sent = 0
        self.dropped = 0

    def wants_read(self) -> bool:
        return not self.eof and self.queued < HIGH_WATER

    def read(self, now: float) -> None:
        """Take what src has. Raises OSError when the connection broke."""
        try:
            data = self.src.recv(CHUNK)
        except BlockingIOError:
            return
        if not data:
            self.eof = True
            return
        if self.shape.blackholed and self.shape.drop:
            self.dropped += len(data)
            return
        self.last_due = self.shape.due(now, self.last_due, self.rng)
        self.queue.append([self.last_due, memoryview(data)])
        self.queued += len(data)

    def next_due(self) -> float | None:
        """When this pipe next has something to send (None: nothing it can send now)."""
        if self.shape.blackholed or self.blocked:
            return None
        if self.queue:
            return self.queue[0][0]
        return 0.0 if self.eof and not self.shut else None

    def flush(self, now: float) -> int:
        """Send every chunk that is due, in order; returns the bytes sent. Raises OSError when broken."""
        sent = 0
        while self.queue and not self.shape.blackholed and self.queue[0][0] <= now:
            head = self.queue[0]
            try:
                n = self.dst.send(head[1])
            except BlockingIOError:
                n = 0
            sent += n
            self.queued -= n
            if n < len(head[1]):
                head[1] = head[1][n:]
                self.blocked = True  # the loop waits for dst to become writable
                break
            self.queue.popleft()
        if self.eof and not self.queue and not self.shut and not self.shape.blackholed:
            self.dst.shutdown(socket.SHUT_WR)
            self.shut = True
        self.sent += sent
        return sent


class Connection:
    """A client socket accepted by the proxy and its socket to the upstream (connecting at first)."""

    def __init__(self, client: socket.socket, upstream_addr, shapes: dict[str, Shape], rng: random.Random):
        self.client = client
        self.upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        for s in (self.client, self.upstream):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # the delay is ours to add
        self.up = Pipe(self.client, self.upstream, shapes["up"], rng)
        self.down = Pipe(self.upstream, self.client, shapes["down"], rng)
        self.connecting = True
        err = self.upstream.connect_ex(upstream_addr)
        if err not in (0, errno.EINPROGRESS):
            raise OSError(err, f"connect to upstream {upstream_addr}: {errno.errorcode.get(err, err)}")

    def connected(self) -> None:
        """The upstream socket became writable: the connect finished, or failed (raises OSError)."""
        err = self.upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise OSError(err, f"connect to upstream: {errno.errorcode.get(err, err)}")
        self.connecting = False

    def events(self) -> dict[socket.socket, tuple[bool, bool]]:
        """What the loop should wait for on each socket: (readable, writable)."""
        if self.connecting:  # hold the client's bytes until the upstream answers
            return {self.client: (False, False), self.upstream: (False, True)}
        return {
            self.client: (self.up.wants_read(), self.down.blocked),
            self.upstream: (self.down.wants_read(), self.up.blocked),
        }

    def next_due(self) -> float | None:
        if self.connecting:
            return None
        dues = [d for d in (self.up.next_due(), self.down.next_due()) if d is not None]
        return min(dues) if dues else None

    def finished(self) -> bool:
        """Both sides closed their half and the other side got the FIN."""
        return self.up.shut and self.down.shut

    def close(self, reset: bool = False) -> None:
        """Close both sockets; with reset, each peer gets an RST (SO_LINGER 0) instead of a FIN."""
        for s in (self.client, self.upstream):
            try:
                if reset:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
                s.close()
            except OSError:
                pass
