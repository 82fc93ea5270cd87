"""Which Flask-SocketIO async mode this process serves in: gevent under gunicorn's gevent worker (it
monkey-patches the standard library before loading the app), threading everywhere else (`ddm ui`, tests).

Under gevent an idle websocket is a greenlet (a few KiB), not a thread; threading.Lock, queue.Queue,
time.sleep, redis-py's and pika's sockets are all patched, so the UI's code runs unchanged in both.
"""

from __future__ import annotations


def gevent_patched() -> bool:
    try:
        from gevent import monkey
    except ImportError:
        return False
    return monkey.is_module_patched("socket") and monkey.is_module_patched("threading")


def async_mode() -> str:
    return "gevent" if gevent_patched() else "threading"
