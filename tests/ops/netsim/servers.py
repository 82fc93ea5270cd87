"""Servers the link tests put a proxy in front of (an echo server and a sink that keeps what it got),
and reading a number of bytes from a socket."""

from __future__ import annotations

import contextlib
import socket
import threading


class Server:
    """A TCP server on loopback running `handle(conn)` on a thread per connection; remembers its
    connections and what each handler recorded."""

    def __init__(self, handle):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = self.sock.getsockname()
        self.handle = handle
        self.conns: list[socket.socket] = []
        self.received = bytearray()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self.handle(self, conn)
        except OSError as exc:
            self.errors.append(exc)
        finally:
            conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() of the server's thread
        self.sock.close()
        for conn in self.conns:
            conn.close()


def recv_exactly(sock: socket.socket, n: int, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            raise ConnectionError(f"closed after {len(got)} of {n} bytes")
        got += chunk
    return bytes(got)


def echo(server: Server, conn: socket.socket) -> None:
    while data := conn.recv(65536):
        conn.sendall(data)


def sink(server: Server, conn: socket.socket) -> None:
    while data := conn.recv(65536):
        server.received += data
