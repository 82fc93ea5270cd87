"""Logging of the long-running processes (`ddm worker`, `ddm up`, `ddm ui`, the web UI under gunicorn):
one handler on stderr, at DDM_LOG_LEVEL, as text lines or as one JSON object per line
(DDM_LOG_FORMAT=json, for log collectors: Loki, CloudWatch, `docker logs` piped to jq).

    {"time": "2026-11-22T22:30:01.123Z", "level": "INFO", "logger": "ddm.workers.worker",
     "process": "ddm worker", "pid": 4242, "message": "..."}          (+ "exception" with a traceback)
"""

from __future__ import annotations

import json
import logging
import time

from ddm.schema.settings import Settings

# Libraries that log every socket step or platform probe at INFO: quieter, unless DDM_LOG_LEVEL=DEBUG.
# pika's connection attempts log each failure at ERROR with a traceback; our callers report every one
# in their own words (ddm.runtime.amqp.connect), so those loggers say nothing below CRITICAL.
QUIET = {
    "pika": logging.WARNING,
    "pika.adapters.utils.connection_workflow": logging.CRITICAL,
    "pika.adapters.utils.io_services_utils": logging.CRITICAL,
    "pika.adapters.blocking_connection": logging.CRITICAL,
    "jax._src.xla_bridge": logging.WARNING,
    "werkzeug": logging.WARNING,
}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a message with newlines stays one line)."""

    def __init__(self, process: str):
        super().__init__()
        self.process = process

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "process": self.process,
            "pid": record.process,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def formatter(process: str, log_format: str) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter(process)
    return logging.Formatter(f"%(asctime)s {process} %(name)s %(levelname)s %(message)s")


def configure_logging(
    process: str, settings: Settings | None = None, take_over: tuple[str, ...] = ()
) -> None:
    """Route every logger through one stderr handler in the configured level and format. Calling it
    again replaces the handler (no doubled lines). take_over: loggers that have handlers of their own
    (gunicorn's) and should write through this one instead."""
    settings = settings or Settings.from_env()
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(process, settings.log_format))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
    for name, level in QUIET.items():
        logging.getLogger(name).setLevel(
            root.level if root.level <= logging.DEBUG else max(level, root.level)
        )
    for name in take_over:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
