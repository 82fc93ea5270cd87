"""`ddm ui`: serve the web UI (Flask-SocketIO, threading mode) on this machine.

Binds 127.0.0.1 by default: the UI has no login, and anyone who reaches it can submit jobs (rate
limited per address). `--host 0.0.0.0` exposes it on every interface. This uses Werkzeug's server,
which is fine for one person; for a shared deployment use the production command (see
webui/gunicorn_conf.py and docs/WEBUI.md):

    gunicorn -c python:ddm.webui.gunicorn_conf 'ddm.webui.app:create_app()'
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from ddm.ops.up.ui import PRODUCTION_COMMAND
from ddm.schema.errors import ConfigError, expected

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve the web UI: submit jobs, watch each denoising step live, see which expert served it and "
        "the serving cluster. Reads DDM_REDIS_URL / DDM_AMQP_URL / DDM_PREFIX like the workers. "
        f"For production: {PRODUCTION_COMMAND}"
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: this machine only; 0.0.0.0 exposes it to the network)",
    )
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")


def main(args: argparse.Namespace) -> int:
    from ddm.runtime.logs import configure_logging
    from ddm.webui.app import create_app
    from ddm.webui.config import UIConfig

    if not 0 < args.port < 65536:
        raise ConfigError(expected("--port in 1..65535", args.port))
    configure_logging("ddm ui")  # DDM_LOG_LEVEL, DDM_LOG_FORMAT; werkzeug: no line per request
    # Werkzeug's "do not use it in a production deployment" banner, on every `ddm up`: said once, our way
    logging.getLogger("werkzeug").addFilter(lambda r: not any(b in r.getMessage() for b in DEV_BANNERS))
    config = UIConfig.from_env()  # what a job means comes from the serving router's descriptor
    app = create_app(config=config)
    socketio = app.extensions["socketio"]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"ddm ui: serving http://{shown}:{args.port}/ (prefix {config.settings.prefix!r}) on Werkzeug, for "
        f"one machine; for a shared server run {PRODUCTION_COMMAND} (docs/WEBUI.md)",
        flush=True,
    )
    if args.host not in LOOPBACK and not config.token:  # DDM_UI_TOKEN: submitting needs it
        print(
            f"ddm ui: listening on {args.host}: anyone who can reach this port can submit jobs (no login; "
            f"{config.jobs_per_minute} jobs per minute per address)",
            file=sys.stderr,
            flush=True,
        )
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # `ddm up` and service managers stop us with it
    try:
        socketio.run(
            app,
            host=args.host,
            port=args.port,
            allow_unsafe_werkzeug=True,
            use_reloader=False,
            log_output=False,
        )
    finally:
        app.extensions["ddm"].close()
    return 0


# Werkzeug's production warnings (its own, and the one it logs when Flask-SocketIO allows it anyway)
DEV_BANNERS = ("This is a development server", "appears to be used in a production deployment")


def _exit_on_sigterm(signum, frame):
    raise SystemExit(0)
