"""Running our code on Engine.IO's session events, beside Socket.IO's own handlers (which Engine.IO calls
with (eio_sid, environ) on connect, (eio_sid, data) on each message, (eio_sid, reason) on disconnect).
Engine.IO has one handler per event, set by Socket.IO: hook() wraps it."""

from __future__ import annotations


def hook(socketio, event: str, ours) -> None:
    """Call ours(*args) on Engine.IO's `event` of `socketio` (a flask_socketio.SocketIO): before Socket.IO's
    handler on connect and message (a connect hook returning False refuses the session, and Socket.IO
    never hears of it), after it on disconnect (however Socket.IO's handler ends)."""
    eio = socketio.server.eio
    theirs = eio.handlers[event]

    if event == "disconnect":

        def handler(eio_sid, reason=None):
            try:
                return theirs(eio_sid, reason)
            finally:
                ours(eio_sid, reason)

    else:

        def handler(*args):
            if ours(*args) is False:
                return False
            return theirs(*args)

    eio.on(event, handler)
