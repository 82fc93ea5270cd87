"""The web UI as a child of `ddm up`: its command, its address, whether its port is free, and waiting
until it answers. Also the production command (gunicorn) the docs and `ddm ui --help` give."""

from __future__ import annotations

import sys
import time

from ddm.ops.up.supervisor import MAX_START_FAILURES, ChildSpec, Supervisor, python_module
from ddm.schema.errors import expected

UI_CHILD = "up-ui"
PRODUCTION_COMMAND = "gunicorn -c python:ddm.webui.gunicorn_conf 'ddm.webui.app:create_app()'"


def ui_child(host: str, port: int) -> ChildSpec:
    """The ChildSpec of `ddm ui` (it shows whatever the serving router's descriptor says)."""
    return ChildSpec(UI_CHILD, (*python_module("ddm.ops.cli"), "ui", "--host", host, "--port", str(port)))


def ui_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}/"


def port_problem(host: str, port: int) -> str | None:
    """Why the UI could not listen on host:port (in use, bad address), or None."""
    import socket

    if not 0 < port < 65536:
        return expected("--ui-port in 1..65535", port)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # as the UI's own server binds (Werkzeug and gunicorn set it): connections of a UI stopped a
        # moment ago linger in TIME-WAIT, which only a socket without SO_REUSEADDR is refused over; a
        # port some process listens on is still refused with it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return f"cannot listen on {host}:{port} ({exc.strerror or exc})"
    return None


def wait_ui(sup: Supervisor, host: str, port: int, timeout: float) -> bool:
    """Until the UI answers GET /healthz; False on timeout or a crash loop."""
    import urllib.error
    import urllib.request

    t0 = time.monotonic()
    child = sup.children[UI_CHILD]
    url = ui_url(host, port) + "healthz"
    while True:
        sup.poll()
        if child.failures >= MAX_START_FAILURES:
            print(
                f"ddm up: {UI_CHILD} died {child.failures} times before it answered; last output:\n"
                + "\n".join(f"    {line}" for line in child.tail),
                file=sys.stderr,
                flush=True,
            )
            return False
        if child.running:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        print(f"ddm up: {UI_CHILD} ready after {time.monotonic() - t0:.1f} s", flush=True)
                        return True
            except (urllib.error.URLError, OSError):
                pass
        if time.monotonic() - t0 > timeout:
            print(f"ddm up: the web UI did not answer at {url} within {timeout:.0f} s", file=sys.stderr)
            return False
        time.sleep(0.25)
