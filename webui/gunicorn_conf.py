"""gunicorn settings for the web UI - the one production command (docker-compose uses it too):

    gunicorn -c python:ddm.webui.gunicorn_conf 'ddm.webui.app:create_app()'

One worker process (its tailers and rooms live in memory; more processes would need sticky sessions)
with gevent's worker: it monkey-patches the standard library before loading the app, the app sees it
and runs Flask-SocketIO in gevent mode (server_model.py), and each websocket is a greenlet, not a thread.
Measured with 500 idle websockets: gthread with 100 threads served 100 and /healthz timed out; gevent
served all 500 and answered /healthz in 2 ms (docs/BENCHMARKS.md, "The web UI's server model").
DDM_UI_BIND is read by ddm.webui.config (docs/CONFIG.md); the log level and format are every process's
DDM_LOG_LEVEL and DDM_LOG_FORMAT.
"""

from ddm.webui.config import UIConfig

_config = UIConfig.from_env()

bind = _config.bind
workers = 1
worker_class = "gevent"
# Connections the worker holds at once (gunicorn's default is 1000); one address holds at most
# DDM_UI_CONNECTIONS_PER_ADDRESS Socket.IO connections of them (connection_cap.py)
worker_connections = 4000
timeout = 60  # the worker's heartbeat to the arbiter; a greenlet that blocks the loop that long is a bug
graceful_timeout = 10
keepalive = 5
accesslog = None
errorlog = "-"
loglevel = _config.settings.log_level.lower()
# gunicorn >= 27: no control socket (the UI has no need of one, and two instances would share one path)
control_socket_disable = True


def _take_over_logging() -> None:
    """The app's loggers and gunicorn's own through one handler, in DDM_LOG_FORMAT."""
    from ddm.runtime.logs import configure_logging

    configure_logging("ddm ui", _config.settings, take_over=("gunicorn.error",))


def on_starting(server) -> None:  # the master process
    _take_over_logging()


def post_worker_init(worker) -> None:  # each worker process
    _take_over_logging()
