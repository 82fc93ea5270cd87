"""Malformed Socket.IO packets: a clean 400 (or a closed websocket) and one log line, never a traceback.

Engine.IO decodes a long-polling POST inside its request handler, a websocket message in its receive
loop, and Socket.IO decodes each message on a handler thread; a packet they cannot decode (JSON nested
past Python's recursion limit, an unknown packet type, invalid UTF-8, an event that is not
["name", ...]) raised there and was logged with a full traceback ("post request handler error",
"message handler error", gunicorn's "Error handling request"), while the POST still answered 200.

- PollingGuard checks a polling POST's packets with the libraries' own decoders before Engine.IO sees
  it and answers a bad one 400 with one WARNING line;
- GuardedWebSocket checks each websocket message the same way; a bad one closes the connection, as a
  protocol error does, with one WARNING line (Engine.IO reads it as the client closing: clean up as usual).
  It is a mixin over the async mode's own wrapper: threading mode's SimpleWebSocketWSGI, gevent mode's
  subclass of it (simple-websocket on gevent's classes);
- quiet_engineio_errors turns whatever else the libraries raise on a client's packet into one line (an
  error raised through the UI's own code keeps its traceback).
"""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path

from engineio import packet as eio_packet
from engineio.async_drivers._websocket_wsgi import SimpleWebSocketWSGI
from engineio.payload import Payload
from socketio import packet as sio_packet

log = logging.getLogger(__name__)
SOCKETIO_PATH = "/socket.io/"
_OUR_CODE = str(Path(__file__).resolve().parent) + os.sep  # this package's files


def _short(text: str, limit: int = 60) -> str:
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def _decoded(packet_class, what: str, data: str):
    """(the decoded packet, None), or (None, why it does not decode)."""
    try:
        return packet_class(encoded_packet=data), None
    except RecursionError:
        return None, f"expected {what}, got JSON nested too deeply to parse"
    except Exception as exc:  # noqa: BLE001 - whatever the decoder raises, the packet is bad
        return None, f"expected {what}, got {_short(data)} ({type(exc).__name__}: {exc})"


def socketio_problem(data: str) -> str | None:
    """What is wrong with one Socket.IO packet from a browser, or None."""
    pkt, problem = _decoded(sio_packet.Packet, "a Socket.IO packet", data)
    if problem:
        return problem
    kind, body = pkt.packet_type, pkt.data
    if kind == sio_packet.EVENT and not (isinstance(body, list) and body and isinstance(body[0], str)):
        return f'expected an event as ["name", ...], got {_short(data)}'
    if kind == sio_packet.ACK and not isinstance(body, list | None):
        return f"expected an acknowledgement as a list, got {_short(data)}"
    if kind == sio_packet.CONNECT and not isinstance(body, dict | None):
        return f"expected a connect packet with an object or nothing, got {_short(data)}"
    if kind not in (sio_packet.CONNECT, sio_packet.DISCONNECT, sio_packet.EVENT, sio_packet.ACK):
        no_binary = "of type 0-3 (this server takes no binary packets)"
        return f"expected a Socket.IO packet {no_binary}, got {_short(data)}"
    return None


def message_problem(message: str | bytes) -> str | None:
    """What is wrong with one Engine.IO packet (a websocket message), or None."""
    if not isinstance(message, str):
        return "expected a text message (this server takes no binary packets)"
    pkt, problem = _decoded(eio_packet.Packet, "an Engine.IO packet", message)
    if problem:
        return problem
    if not 0 <= pkt.packet_type < len(eio_packet.packet_names):
        return f"expected an Engine.IO packet of type 0-6, got {_short(message)}"
    if pkt.packet_type == eio_packet.MESSAGE:
        return socketio_problem(pkt.data) if isinstance(pkt.data, str) else "expected a text message"
    return None


def payload_problem(body: bytes) -> str | None:
    """What is wrong with a long-polling POST body (Engine.IO packets), or None."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"expected UTF-8 text, got the byte 0x{body[exc.start]:02x} at position {exc.start}"
    try:
        packets = Payload(encoded_payload=text).packets
    except RecursionError:
        return "expected Engine.IO packets, got JSON nested too deeply to parse"
    except Exception as exc:  # noqa: BLE001 - whatever the decoder raises, the payload is bad
        return f"expected Engine.IO packets, got {_short(text)} ({type(exc).__name__}: {exc})"
    for pkt in packets:
        if not 0 <= pkt.packet_type < len(eio_packet.packet_names) or pkt.binary:
            return f"expected text Engine.IO packets of type 0-6, got {_short(text)}"
        if pkt.packet_type == eio_packet.MESSAGE:
            problem = socketio_problem(pkt.data) if isinstance(pkt.data, str) else "expected text"
            if problem:
                return problem
    return None


class PollingGuard:
    """WSGI middleware in front of Socket.IO's: a long-polling POST whose packets do not decode gets 400."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes  # larger bodies are Engine.IO's to refuse (max_http_buffer_size)

    def __call__(self, environ, start_response):
        if environ.get("REQUEST_METHOD") != "POST" or not environ.get("PATH_INFO", "").startswith(
            SOCKETIO_PATH
        ):
            return self.app(environ, start_response)
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= self.max_bytes:
            return self.app(environ, start_response)
        body = environ["wsgi.input"].read(length)
        problem = payload_problem(body)
        if problem is None:
            environ["wsgi.input"] = io.BytesIO(body)  # what Engine.IO reads next
            return self.app(environ, start_response)
        where = environ.get("REMOTE_ADDR", "?")
        log.warning("refused a Socket.IO polling request from %s: %s", where, problem)
        text = f"bad Socket.IO request: {problem}\n".encode()
        start_response(
            "400 BAD REQUEST",
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(text)))],
        )
        return [text]


class GuardedWebSocket:
    """Mixin over Engine.IO's websocket wrapper: closes the connection on a malformed message."""

    def __call__(self, environ, start_response):
        self.remote = environ.get("REMOTE_ADDR", "?")
        return super().__call__(environ, start_response)

    def wait(self):
        message = super().wait()
        problem = None if message is None else message_problem(message)
        if problem is None:
            return message
        log.warning("closed a Socket.IO websocket from %s: %s", self.remote, problem)
        return None  # what a client closing looks like: Engine.IO ends the connection cleanly


def install_websocket_guard(socketio) -> None:
    """Serve `socketio`'s (a flask_socketio.SocketIO) websockets through GuardedWebSocket. Engine.IO has no
    other hook than its async mode's table; a wrapper that is not simple-websocket's is an error here, so
    a new async mode cannot drop the guard unnoticed."""
    eio = socketio.server.eio
    base = eio._async.get("websocket")
    if not (isinstance(base, type) and issubclass(base, SimpleWebSocketWSGI)):
        raise RuntimeError(f"the websocket guard needs simple-websocket's wrapper, got {base!r}")
    if not issubclass(base, GuardedWebSocket):
        guarded = type(f"Guarded{base.__name__}", (GuardedWebSocket, base), {})
        eio._async = {**eio._async, "websocket": guarded}


class _OneLine(logging.Filter):
    """An error raised wholly inside Engine.IO / Socket.IO (a client's malformed packet) as one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info or record.exc_info[1] is None:
            return True
        exc = record.exc_info[1]
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.startswith(_OUR_CODE):
                return True  # the UI's own code raised it: keep the traceback
            tb = tb.tb_next
        record.msg = f"{record.getMessage()}: {type(exc).__name__}: {str(exc)[:200]} (a malformed packet)"
        record.args = ()
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


ENGINEIO_LOGGER = logging.getLogger("ddm.webui.engineio")
SOCKETIO_LOGGER = logging.getLogger("ddm.webui.socketio")


def quiet_engineio_errors() -> tuple[logging.Logger, logging.Logger]:
    """The loggers to hand Engine.IO and Socket.IO: ours (no handler of their own, so no line printed
    twice), errors only (as the libraries' defaults), a client's malformed packet as one line."""
    for logger in (ENGINEIO_LOGGER, SOCKETIO_LOGGER):
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.ERROR)
        if not any(isinstance(f, _OneLine) for f in logger.filters):
            logger.addFilter(_OneLine())
    return ENGINEIO_LOGGER, SOCKETIO_LOGGER
