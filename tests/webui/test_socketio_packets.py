"""Malformed Socket.IO packets from a browser, against the production server (gunicorn): a long-polling
POST gets a clean 400 that says what was wrong (the session goes on), a websocket is closed (a protocol
error), and the log gets one line per bad packet and never a traceback.

Before, Engine.IO and Socket.IO raised while decoding them (JSON nested past the recursion limit, an
unknown packet type, invalid UTF-8, an event that is not ["name", ...]): each left a full traceback in
the log ("post request handler error", "message handler error"), and the POST answered 200 "ok".
"""

from __future__ import annotations

import json
import logging
import sys
import time
import urllib.error
import urllib.request

from tests.support.wire import Drain, WireSocket

DEEP = 5000  # past Python's recursion limit (1000) in json's parser
BAD = {
    "deep-event": "42" + "[" * DEEP + "]" * DEEP,
    "deep-object": '42["watch",' + '{"a":' * DEEP + "1" + "}" * DEEP + "]",
    "deep-engineio": "4" + "[" * DEEP + "]" * DEEP,
    "not-a-type": "4X garbage",
    "unknown-engineio-type": "Z",
    "bad-json": "42{not json",
    "event-not-a-list": '42{"a": 1}',
    "empty-event": "42[]",
    "connect-error": "44{}",
    "binary-event": '451-["watch",{"_placeholder":true,"num":0}]',
}


def post(url: str, body: bytes) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "text/plain"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.read().decode()


def test_bad_packets_get_a_400_and_one_log_line(production_ui, fake):
    ui = production_ui()
    base = ui.url + "/socket.io/?EIO=4&transport=polling"
    sid = json.loads(get(base)[1:])["sid"]
    session = f"{base}&sid={sid}"
    assert post(session, b"40") == (200, "OK")
    assert "\x1e40{" in "\x1e" + get(session)  # the namespace is connected

    for name, body in [*BAD.items(), ("invalid-utf8", b"42\xff\xfe")]:
        status, text = post(session, body if isinstance(body, bytes) else body.encode())
        assert status == 400, (name, status, text[:200])
        assert text.startswith("bad Socket.IO request: expected "), (name, text[:200])

    # the session still works: a watch of an unknown job is answered through its acknowledgement
    assert post(session, b'421["watch",{"job_id":"nosuchjob"}]') == (200, "OK")
    deadline = time.monotonic() + 10
    received = ""
    while "431" not in received:
        assert time.monotonic() < deadline, received
        received += get(session)
    assert '"kind":"not_found"' in received.replace(" ", "")

    for name, body in BAD.items():  # the same packets over a websocket: the server closes it
        ws = WireSocket(ui.url)
        ws.emit_raw(body)
        drain = Drain([ws])
        deadline = time.monotonic() + 10
        while not ws.closed:
            assert time.monotonic() < deadline, f"{name}: the websocket stayed open"
            time.sleep(0.05)
        drain.stop()
        ws.close()
    ws = WireSocket(ui.url)  # and a good websocket is served as ever
    drain = Drain([ws])
    ws.emit("watch", {"job_id": "nosuchjob"}, ack=7)
    deadline = time.monotonic() + 10
    while 7 not in ws.acks:
        assert time.monotonic() < deadline and not ws.closed, "no answer over the websocket"
        time.sleep(0.05)
    assert ws.acks[7]["kind"] == "not_found"
    drain.stop()
    ws.close()

    time.sleep(0.5)
    log = ui.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    polling = [line for line in log.splitlines() if "refused a Socket.IO polling request" in line]
    websocket = [line for line in log.splitlines() if "closed a Socket.IO websocket" in line]
    assert (len(polling), len(websocket)) == (len(BAD) + 1, len(BAD)), log[-3000:]
    assert len(log.splitlines()) == 2 * len(BAD) + 1, log[-3000:]  # one line per bad packet, nothing else


def record_of(fn) -> logging.LogRecord:
    try:
        fn()
    except Exception:  # noqa: BLE001 - the record is what the test looks at
        return logging.LogRecord("x", logging.ERROR, __file__, 1, "message handler error", (), sys.exc_info())
    raise AssertionError("no exception")


def test_library_errors_are_one_line_and_the_uis_own_keep_their_traceback():
    """What the Engine.IO / Socket.IO loggers get (quiet_engineio_errors), for anything the guards let by."""
    from engineio.packet import Packet

    from ddm.webui.sio_guard import quiet_engineio_errors
    from ddm.webui.viewers import stream_id

    (one_line,) = quiet_engineio_errors()[0].filters
    library = record_of(lambda: Packet(encoded_packet="Z"))  # raised inside engineio
    assert one_line.filter(library) and library.exc_info is None and library.levelno == logging.WARNING
    assert library.getMessage() == (
        "message handler error: ValueError: invalid literal for int() with base 10: 'Z' (a malformed packet)"
    )
    ours = record_of(lambda: stream_id(b"not-an-id"))  # raised in the UI's code: a bug, keep it whole
    assert one_line.filter(ours) and ours.exc_info is not None and ours.levelno == logging.ERROR
