"""A userspace TCP proxy for one simulated link: one-way delay and jitter per direction (byte order
always kept), and failures switchable at runtime: blackhole, reset, heal. This kernel has no netem
qdisc, so a link's behaviour lives here.

    with LinkProxy(("127.0.0.1", 0), ("127.0.0.1", 5672), one_way_ms=25) as link:
        url = f"amqp://guest:guest@127.0.0.1:{link.port}/"
        link.blackhole()   # nothing crosses; sockets stay open, bytes are held (or dropped)
        link.heal()        # held bytes go on, in order; new connections forward too
        link.reset()       # every current connection gets an RST on both sides

    python -m ddm.ops.netsim.proxy --listen 127.0.0.1:15672 --upstream 127.0.0.1:5672 --delay-ms 25
        (as a process: SIGUSR1 blackholes, SIGUSR2 heals, SIGHUP resets, SIGTERM/SIGINT stop)

One thread runs a selector loop over every socket; the public methods hand work to it, so only that
thread touches sockets. The TCP handshake itself is not delayed: only the bytes after it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import queue
import random
import selectors
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from .connection import Connection
from .shaping import Shape

log = logging.getLogger(__name__)
DIRECTIONS = ("up", "down")  # up: client -> upstream, down: upstream -> client
MAX_IDLE_WAIT_S = 0.5


class LinkProxy:
    """A listening socket at `listen` forwarding each connection to `upstream` through the link's
    shapes. A context manager; also stops by itself after `max_lifetime_s`."""

    def __init__(
        self,
        listen: tuple[str, int],
        upstream: tuple[str, int],
        *,
        one_way_ms: float = 0.0,
        jitter_ms: float = 0.0,
        max_lifetime_s: float = 3600.0,
        seed: int | None = None,
        name: str = "link",
    ):
        self.listen_addr, self.upstream = listen, upstream
        self.shapes = {d: Shape() for d in DIRECTIONS}
        self.set_delay(one_way_ms, jitter_ms)
        self.max_lifetime_s = max_lifetime_s
        self.name = name
        self._rng = random.Random(seed)
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._conns: list[Connection] = []
        self._registered: dict[socket.socket, int] = {}  # socket -> the selector events it waits for
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.address: tuple[str, int] | None = None
        self.connections_total = self.resets = 0
        self.bytes = dict.fromkeys(DIRECTIONS, 0)  # bytes delivered per direction
        self.bytes_dropped = 0

    # -- lifetime ----------------------------------------------------------------------------------

    def start(self) -> LinkProxy:
        self._listener = socket.create_server(self.listen_addr, backlog=64)
        self._listener.setblocking(False)
        self.address = self._listener.getsockname()[:2]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, "accept")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._deadline = time.monotonic() + self.max_lifetime_s
        self._thread = threading.Thread(target=self._loop, name=f"netsim-{self.name}", daemon=True)
        self._thread.start()
        log.info("%s: %s:%d -> %s:%d", self.name, *self.address, *self.upstream)
        return self

    def close(self) -> None:
        """Stop forwarding, close every socket (FIN) and join the loop thread."""
        if self._thread is None:
            return
        self._stop.set()
        self._wake()
        self._thread.join(timeout=10)
        if self._thread.is_alive():
            raise RuntimeError(f"netsim proxy {self.name} did not stop")

    def __enter__(self) -> LinkProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the link's behaviour, from any thread -----------------------------------------------------

    def set_delay(self, one_way_ms: float, jitter_ms: float = 0.0, direction: str | None = None) -> None:
        """One-way delay and jitter for one direction ('up' or 'down') or both; applies to bytes read
        from now on (earlier ones keep their due time, so order holds)."""
        for d in self._directions(direction):
            self.shapes[d].set_delay(one_way_ms, jitter_ms)

    def blackhole(self, direction: str | None = None, drop: bool = False) -> None:
        """Forward nothing; connections stay open. Bytes are held for heal(), or with drop discarded
        (which breaks the streams of existing connections, like a peer that lost state)."""
        for d in self._directions(direction):
            self.shapes[d].drop = drop
            self.shapes[d].blackholed = True

    def heal(self, direction: str | None = None) -> None:
        """Forward again: held bytes go on in order, existing and new connections alike."""
        for d in self._directions(direction):
            self.shapes[d].blackholed = False
            self.shapes[d].drop = False
        self._wake()

    def reset(self) -> int:
        """Close every current connection with an RST to both peers; returns how many. The listener
        stays: new connections are accepted."""
        return self._call(self._reset_all)

    def stats(self) -> dict:
        """Counters as the loop thread sees them between two rounds: a byte the far end already holds
        is counted (read from this thread, the loop may have sent it and not yet added it)."""
        return self._call(self._snapshot) or self._snapshot()  # 0: the loop has stopped, nothing moves

    def _snapshot(self) -> dict:
        return {
            "connections_total": self.connections_total,
            "connections_open": len(self._conns),
            "resets": self.resets,
            "bytes_up": self.bytes["up"],
            "bytes_down": self.bytes["down"],
            "bytes_dropped": self.bytes_dropped
            + sum(c.up.dropped + c.down.dropped for c in list(self._conns)),
        }

    def _directions(self, direction: str | None) -> tuple[str, ...]:
        if direction is None:
            return DIRECTIONS
        if direction not in DIRECTIONS:
            raise ValueError(f"expected direction 'up' or 'down', got {direction!r}")
        return (direction,)

    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run fn on the loop thread and wait for its result (0 when the loop is not running)."""
        if not self.alive:
            return 0
        done, result = threading.Event(), []
        self._calls.put((fn, done, result))
        self._wake()
        if not done.wait(timeout=10):
            raise RuntimeError(f"netsim proxy {self.name} did not answer")
        return result[0]

    def _wake(self) -> None:
        # closed, never started, or already full of wake-ups (BlockingIOError): nothing to do
        with contextlib.suppress(OSError, AttributeError):
            self._wake_w.send(b"x")

    # -- the loop thread ---------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= self._deadline:
                    log.warning("%s: max_lifetime_s=%g reached; closing", self.name, self.max_lifetime_s)
                    break
                self._register()
                for key, mask in self._sel.select(self._timeout(now)):
                    self._ready(key, mask)
                self._run_calls()
                self._flush(time.monotonic())
        finally:
            for conn in list(self._conns):
                self._drop(conn, reset=False)
            self._sel.close()
            for s in (self._listener, self._wake_r, self._wake_w):
                s.close()
            self._fail_pending_calls()

    def _timeout(self, now: float) -> float:
        dues = [d for d in (c.next_due() for c in self._conns) if d is not None]
        until = min([*dues, now + MAX_IDLE_WAIT_S, self._deadline])
        return max(0.0, until - now)

    def _register(self) -> None:
        """Make the selector wait for what each connection needs now."""
        wanted: dict[socket.socket, tuple[int, Connection]] = {}
        for conn in self._conns:
            for sock, (readable, writable) in conn.events().items():
                mask = (selectors.EVENT_READ if readable else 0) | (selectors.EVENT_WRITE if writable else 0)
                if mask:
                    wanted[sock] = (mask, conn)
        for sock in [s for s in self._registered if s not in wanted]:
            self._unregister(sock)
        for sock, (mask, conn) in wanted.items():
            if sock not in self._registered:
                self._sel.register(sock, mask, conn)
            elif self._registered[sock] != mask:
                self._sel.modify(sock, mask, conn)
            self._registered[sock] = mask

    def _unregister(self, sock: socket.socket) -> None:
        """Before the socket closes: a closed socket's fd number may come back with the next accept."""
        if self._registered.pop(sock, None) is not None:
            self._sel.unregister(sock)

    def _ready(self, key: selectors.SelectorKey, mask: int) -> None:
        if key.data == "accept":
            self._accept()
        elif key.data == "wake":
            while True:
                try:
                    if not self._wake_r.recv(4096):
                        break
                except BlockingIOError:
                    break
        else:
            self._guard(key.data, lambda: self._io(key.data, key.fileobj, mask))

    def _io(self, conn: Connection, sock: socket.socket, mask: int) -> None:
        now = time.monotonic()
        if sock is conn.upstream and conn.connecting:
            conn.connected()
            return
        ours, theirs = (conn.up, conn.down) if sock is conn.client else (conn.down, conn.up)
        if mask & selectors.EVENT_WRITE:
            theirs.blocked = False  # the pipe writing to this socket may send again
        if mask & selectors.EVENT_READ:
            ours.read(now)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except BlockingIOError:
                return
            self.connections_total += 1
            try:
                self._conns.append(Connection(client, self.upstream, self.shapes, self._rng))
            except OSError as exc:
                log.warning("%s: %s; closing the client", self.name, exc)
                client.close()

    def _flush(self, now: float) -> None:
        for conn in list(self._conns):
            if conn.connecting:
                continue
            self._guard(conn, lambda conn=conn: self._flush_one(conn, now))

    def _flush_one(self, conn: Connection, now: float) -> None:
        self.bytes["up"] += conn.up.flush(now)
        self.bytes["down"] += conn.down.flush(now)
        if conn.finished():
            self._drop(conn, reset=False)

    def _guard(self, conn: Connection, work: Callable[[], None]) -> None:
        """Run socket work of one connection; a broken socket resets the connection's other side too,
        as a broken TCP connection would."""
        if conn not in self._conns:
            return
        try:
            work()
        except OSError as exc:
            log.debug("%s: connection broke (%s)", self.name, exc)
            self._drop(conn, reset=True)

    def _drop(self, conn: Connection, reset: bool) -> None:
        self.bytes_dropped += conn.up.dropped + conn.down.dropped
        self._conns.remove(conn)
        self._unregister(conn.client)
        self._unregister(conn.upstream)
        conn.close(reset=reset)

    def _reset_all(self) -> int:
        count = len(self._conns)
        for conn in list(self._conns):
            self._drop(conn, reset=True)
        self.resets += count
        return count

    def _run_calls(self) -> None:
        self._answer_calls(lambda fn: fn())

    def _fail_pending_calls(self) -> None:
        self._answer_calls(lambda fn: 0)

    def _answer_calls(self, answer: Callable[[Callable[[], Any]], Any]) -> None:
        """Answer every queued call with answer(its function) and wake its caller."""
        while True:
            try:
                fn, done, result = self._calls.get_nowait()
            except queue.Empty:
                return
            result.append(answer(fn))
            done.set()


# -- as a process ------------------------------------------------------------------------------------


def host_port(text: str) -> tuple[str, int]:
    """'127.0.0.1:5672' -> ('127.0.0.1', 5672) (an argparse type)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--listen", type=host_port, required=True, help="HOST:PORT (port 0: any free one)")
    parser.add_argument("--upstream", type=host_port, required=True, help="HOST:PORT to forward to")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay, each direction")
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="random extra delay, order kept")
    parser.add_argument("--max-lifetime-s", type=float, default=3600.0, help="stop after this long")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    proxy = LinkProxy(
        args.listen, args.upstream, one_way_ms=args.delay_ms, jitter_ms=args.jitter_ms,
        max_lifetime_s=args.max_lifetime_s,
    )  # fmt: skip
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGUSR1, lambda *_: proxy.blackhole())
    signal.signal(signal.SIGUSR2, lambda *_: proxy.heal())
    signal.signal(signal.SIGHUP, lambda *_: threading.Thread(target=proxy.reset, daemon=True).start())
    with proxy:
        print(f"listening on {proxy.address[0]}:{proxy.port}", flush=True)  # a parent waits for this line
        while not stop.wait(0.2) and proxy.alive:
            pass
    print(f"stopped: {proxy.stats()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
