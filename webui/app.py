"""The web UI's app factory: Flask + Flask-SocketIO (websockets through simple-websocket), in threading mode
under Werkzeug and gevent mode under gunicorn's gevent worker (server_model.py).

    from ddm.webui.app import create_app
    app = create_app()                                 # settings from DDM_* variables
    app.extensions["socketio"].run(app, port=8000)     # what `ddm ui` does (Werkzeug, for development)

Production (one process; each websocket a greenlet, so an idle browser costs no thread):

    gunicorn -c python:ddm.webui.gunicorn_conf 'ddm.webui.app:create_app()'

In front of Socket.IO, outermost first: ProxyFix (the client's address, DDM_UI_TRUSTED_PROXIES), the
connection cap per address (connection_cap.py), the polling packet guard (sio_guard.py).

The UI reads Redis (the serving router's deployment descriptor, job hashes, trajectory streams,
heartbeats) and RabbitMQ (queue depths), and submits jobs through ddm.client.client.Client; it never
talks to an expert and needs no deployment file: strategies, defaults, class names and experts come
from the descriptor the router publishes. Without a message queue
(the default) each UI process serves its own browsers from its own tailers; pass message_queue only
to let other processes emit to this UI's browsers (Flask-SocketIO's test client refuses one).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from flask import Flask
from flask_socketio import SocketIO
from werkzeug.middleware.proxy_fix import ProxyFix

from ddm.schema.settings import Settings
from ddm.webui import backlog
from ddm.webui.access import Access
from ddm.webui.cluster import ClusterMonitor
from ddm.webui.config import UIConfig
from ddm.webui.connection_cap import ConnectionCap
from ddm.webui.events import READERS, user_room
from ddm.webui.idle import IdleSockets
from ddm.webui.job_service import JobService
from ddm.webui.keys import OPEN, KeyStore, Principal, redact
from ddm.webui.payloads import job_payload
from ddm.webui.quota import Quotas
from ddm.webui.rate_limit import RateLimiter
from ddm.webui.redis_pool import UIClient, ui_redis
from ddm.webui.server_model import async_mode
from ddm.webui.sio_guard import PollingGuard, install_websocket_guard, quiet_engineio_errors
from ddm.webui.tail import TailHub
from ddm.webui.watch_gate import WatchGate

log = logging.getLogger(__name__)
HERE = Path(__file__).resolve().parent
MAX_REQUEST_BYTES = 64 * 1024  # a job form is a few hundred bytes


class UIState:
    """Everything one app instance shares between its routes, socket events and background tasks."""

    def __init__(self, socketio: SocketIO, config: UIConfig):
        self.socketio = socketio
        self.config = config
        self.settings = config.settings
        # one bounded, blocking Redis pool for everything this UI does (redis_pool.py)
        self.redis = ui_redis(self.settings, config.redis_max_connections, config.redis_wait_s)
        self.client = UIClient(self.settings, self.redis)  # reads only; JobService has its own for submits
        self.monitor = ClusterMonitor(self.client, gone_keep_s=config.gone_keep_s)
        self.limiter = RateLimiter(config.jobs_per_minute)
        # DDM_UI_TOKEN: one door for every read and action; wrong tokens per address, as many as submits
        self.access = Access(config.token, config.jobs_per_minute, KeyStore(self.redis, self.client.names))
        self.quotas = Quotas(self.redis, self.client.names)  # the API keys' rates and concurrent jobs
        self.jobs = JobService(
            self.settings,
            self.monitor,
            self.limiter,
            self.access,
            make_client=lambda: UIClient(self.settings, self.redis),
            quotas=self.quotas,
        )
        gate = WatchGate(
            per_minute=config.watches_per_minute, per_address=config.viewers_per_address, access=self.access
        )
        self.hub = TailHub(
            socketio,
            self.client,
            gate,
            backlog_bytes=config.viewer_backlog_kb * 1024,
            stall_s=config.viewer_stall_s,
            value_range=self.monitor.value_range,
            preview=self.monitor.preview,
        )
        self.idle = IdleSockets(socketio, config.idle_s, is_watching=lambda sid: sid in self.hub.viewers)
        self.clients = 0  # connected Socket.IO clients
        self.readers: dict[str, Principal] = {}  # sid -> who, for the sockets that may read (events.py)
        self._lock = threading.Lock()
        self._overview_started = False
        self._closed = threading.Event()

    # ------------------------------------------------------------ what every page gets

    def recent_jobs(self, who: Principal = OPEN) -> list[dict[str, Any]]:
        return self.recent_view(who)["jobs"]

    def recent_view(self, who: Principal = OPEN, jobs=None) -> dict[str, Any]:
        """{"jobs": the recent jobs `who` may see} and, for a key that is not an admin's, {"others": the
        rest counted by status} (no id, no prompt, no image: keys.py redact)."""
        if jobs is None:
            jobs = [job for _, job in self.client.recent(self.config.recent_jobs) if job is not None]
        mine, others = redact(who, jobs)
        out: dict[str, Any] = {"jobs": [job_payload(job) for job in mine]}
        return out if others is None else out | {"others": others}

    def overview(self, who: Principal = OPEN, cluster=None, jobs=None) -> dict[str, Any]:
        """The cluster snapshot and the recent jobs `who` may see (pushed to every page every few seconds)."""
        out: dict[str, Any] = {"cluster": self.monitor.snapshot() if cluster is None else cluster}
        try:
            out |= self.recent_view(who, jobs)
        except Exception as exc:  # noqa: BLE001 - Redis down: the cluster snapshot says so too
            out["jobs"] = None
            out["jobs_error"] = f"cannot read recent jobs: {exc}"
        return out

    def client_connected(self) -> None:
        with self._lock:
            self.clients += 1
            start = not self._overview_started
            self._overview_started = True
        if start:
            self.socketio.start_background_task(self._overview_loop)
            self.socketio.start_background_task(self.idle.run, self._closed)

    def client_disconnected(self) -> None:
        with self._lock:
            self.clients = max(0, self.clients - 1)

    def _overview_loop(self) -> None:
        while not self._closed.wait(self.config.overview_interval_s):
            if self.clients == 0:
                continue
            try:
                self._push_overview()
            except Exception:  # noqa: BLE001 - keep pushing; the next snapshot may work
                log.exception("overview push failed")

    def _push_overview(self) -> None:
        """One reading of the cluster and the recent jobs: all of it to the admins' room (READERS), each
        signed-in user's own jobs to that user's room (events.py user_room)."""
        self._close_stale_readers()
        cluster = self.monitor.snapshot()
        try:
            jobs = [job for _, job in self.client.recent(self.config.recent_jobs) if job is not None]
        except Exception:  # noqa: BLE001 - overview() reads again and says why
            jobs = None
        self.socketio.emit("overview", self.overview(OPEN, cluster, jobs), to=READERS, namespace="/")
        for user in {who.user for who in list(self.readers.values()) if not who.admin}:
            view = self.overview(Principal(user, "read"), cluster, jobs)
            self.socketio.emit("overview", view, to=user_room(user), namespace="/")

    def _close_stale_readers(self) -> None:
        """Disconnect the sockets whose rights are gone: those that connected while the server was open,
        once a key or token is needed, and those whose key was revoked (their pages connect again and
        must give a key). One lookup per distinct key."""
        readers = list(self.readers.items())
        stale = set()
        if any(who.open for _, who in readers) and self.access.required:
            stale |= {sid for sid, who in readers if who.open}
        keyed = {who.key_id for _, who in readers if who.key_id is not None}
        revoked = self.access.keys.revoked(keyed) if keyed and self.access.keys is not None else set()
        stale |= {sid for sid, who in readers if who.key_id in revoked}
        for sid in stale:
            self.readers.pop(sid, None)
            self.socketio.server.disconnect(sid, namespace="/")

    def close(self) -> None:
        """Stop background tasks and close connections (tests; a server just exits)."""
        self._closed.set()
        self.hub.close()
        self.monitor.close()
        self.jobs.close()
        self.client.close()
        self.redis.connection_pool.disconnect()


def create_app(
    settings: Settings | None = None,
    *,
    config: UIConfig | None = None,
    message_queue: str | None = None,
) -> Flask:
    """A Flask app with its SocketIO (app.extensions["socketio"]) and UIState (app.extensions["ddm"]).

    settings: service settings (default Settings.from_env()); config: all UI settings at once (default
    UIConfig.from_env(settings=settings)).
    """
    from ddm.webui.events import register_events
    from ddm.webui.openai_api import register_openai
    from ddm.webui.routes import register_routes

    config = config or UIConfig.from_env(settings=settings)
    app = Flask(__name__, template_folder=str(HERE / "templates"), static_folder=str(HERE / "static"))
    app.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
    app.config["TEMPLATES_AUTO_RELOAD"] = False
    app.json.sort_keys = False
    engineio_log, socketio_log = quiet_engineio_errors()  # a malformed packet: one line (sio_guard.py)
    socketio = SocketIO(
        app,
        async_mode=async_mode(),  # threading, or gevent under gunicorn's gevent worker
        message_queue=message_queue,
        max_http_buffer_size=MAX_REQUEST_BYTES,
        logger=socketio_log,
        engineio_logger=engineio_log,
    )
    backlog.install(socketio)  # each connection's queue counts its bytes (backlog.py)
    install_websocket_guard(socketio)
    app.wsgi_app = PollingGuard(app.wsgi_app, MAX_REQUEST_BYTES)  # in front of Socket.IO's middleware
    cap = ConnectionCap(config.connections_per_address)
    cap.install(socketio)
    app.wsgi_app = cap.middleware(app.wsgi_app)  # a refused connection costs one short answer
    if config.trusted_proxies:
        # Outside Socket.IO's middleware and the cap, so websocket connections see the client's address
        # too. The limits are per address: behind a proxy without it, the proxy's, shared by everyone.
        n = config.trusted_proxies
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=n, x_proto=n)
    state = UIState(socketio, config)
    app.extensions["ddm"] = state
    register_routes(app, state)
    register_openai(app, state)  # /v1: the OpenAI-compatible images API (openai_api.py)
    register_events(socketio, state)
    return app
