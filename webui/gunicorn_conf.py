"""gunicorn settings for the web UI - the one production command (docker-compose uses it too):

    gunicorn -c python:ddm.webui.gunicorn_conf 'ddm.webui.app:create_app()'

One worker process (its tailers and rooms live in memory; more processes would need sticky sessions)
with a pool of threads: Flask-SocketIO's threading mode serves each websocket on a thread of its own
(simple-websocket takes over gunicorn's socket), so DDM_UI_THREADS bounds the browsers served at once.
DDM_UI_BIND and DDM_UI_THREADS are read by ddm.webui.config (docs/CONFIG.md); the log level and
format are every process's DDM_LOG_LEVEL and DDM_LOG_FORMAT.
"""

from ddm.webui.config import UIConfig

_config = UIConfig.from_env()

bind = _config.bind
workers = 1
worker_class = "gthread"
threads = _config.threads
timeout = 60  # the worker's heartbeat to the arbiter; long-lived websockets run on pool threads
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
