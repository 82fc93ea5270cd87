"""The web UI's settings: the shared service Settings plus a few UI-only knobs, read once from the env.

Everything else (DDM_REDIS_URL, DDM_AMQP_URL, DDM_PREFIX, DDM_LOG_LEVEL...) is ddm.schema.Settings.
The UI reads no deployment file: what a job means comes from the serving router's descriptor in Redis.
docs/CONFIG.md lists every variable (generated from UI_ENV_VARS, UI_HELP and the defaults below).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ddm.schema.errors import ConfigError, expected
from ddm.schema.settings import Settings

_INT_RE = re.compile(r"[0-9]{1,9}")
_BIND_RE = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):[0-9]{1,5}")
REDIS_SPARE_CONNECTIONS = 8  # Redis connections beyond DDM_UI_THREADS: the UI's own background tasks

# field -> environment variable (the fields not listed here are not read from the environment)
UI_ENV_VARS: dict[str, str] = {
    "jobs_per_minute": "DDM_UI_JOBS_PER_MINUTE",
    "recent_jobs": "DDM_UI_RECENT_JOBS",
    "trusted_proxies": "DDM_UI_TRUSTED_PROXIES",
    "token": "DDM_UI_TOKEN",
    "bind": "DDM_UI_BIND",
    "threads": "DDM_UI_THREADS",
    "watches_per_minute": "DDM_UI_WATCHES_PER_MINUTE",
    "viewers_per_address": "DDM_UI_VIEWERS_PER_ADDRESS",
    "viewer_backlog_kb": "DDM_UI_VIEWER_BACKLOG_KB",
    "connections_per_address": "DDM_UI_CONNECTIONS_PER_ADDRESS",
    "idle_s": "DDM_UI_IDLE_S",
}

# the integer fields' ranges, in field order: what __post_init__ checks and what from_env reads
UI_INT_RANGES: dict[str, tuple[int, int]] = {
    "jobs_per_minute": (1, 100_000),
    "recent_jobs": (1, 200),
    "trusted_proxies": (0, 10),
    "threads": (1, 10_000),
    "watches_per_minute": (1, 10_000),
    "viewers_per_address": (1, 10_000),
    "viewer_backlog_kb": (64, 1_048_576),
    "connections_per_address": (1, 100_000),
    "idle_s": (1, 86_400),
}


def _env_int(env: Mapping[str, str], var: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(var)
    if raw is None:
        return default
    if not _INT_RE.fullmatch(raw) or not lo <= int(raw) <= hi:
        raise ConfigError(f"{var}: {expected(f'an integer in {lo}..{hi}', raw)}")
    return int(raw)


@dataclass(frozen=True)
class UIConfig:
    settings: Settings = field(default_factory=Settings)
    jobs_per_minute: int = 30
    recent_jobs: int = 12
    trusted_proxies: int = 0
    token: str = field(default="", repr=False)  # a secret: never in a repr or a log line
    bind: str = "127.0.0.1:8000"
    threads: int = 100
    watches_per_minute: int = 30
    viewers_per_address: int = 16
    viewer_backlog_kb: int = 2048
    connections_per_address: int = 32
    idle_s: int = 600
    viewer_stall_s: float = 30.0  # a viewer whose backlog does not drain for this long is disconnected
    redis_wait_s: float = 5.0  # how long a request waits for a free Redis connection before "unavailable"
    overview_interval_s: float = 2.0  # cluster + recent jobs pushed to every page this often
    gone_keep_s: float = 900.0  # a worker whose heartbeat expired is shown as gone this long

    def __post_init__(self) -> None:
        self._check_ranges("jobs_per_minute", "recent_jobs", "trusted_proxies")
        if self.token and (len(self.token) < 8 or any(c.isspace() for c in self.token)):
            # a short token is guessed; a space would not survive the Authorization header
            raise ConfigError(f"DDM_UI_TOKEN: {expected('8 or more characters, no spaces', '(hidden)')}")
        if not _BIND_RE.fullmatch(self.bind):
            raise ConfigError(f"DDM_UI_BIND: {expected('host:port, e.g. 0.0.0.0:8000', self.bind)}")
        self._check_ranges(
            "threads",
            "watches_per_minute",
            "viewers_per_address",
            "viewer_backlog_kb",
            "connections_per_address",
            "idle_s",
        )

    def _check_ranges(self, *names: str) -> None:
        for name in names:
            lo, hi = UI_INT_RANGES[name]
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise ConfigError(expected(f"{name} in {lo}..{hi}", value))

    @property
    def redis_max_connections(self) -> int:
        """The UI's Redis pool: one connection per serving thread, plus the frame reader, the replayer,
        the overview push and a little slack (Socket.IO event handlers run on threads of their own)."""
        return self.threads + REDIS_SPARE_CONNECTIONS

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        settings: Settings | None = None,
    ) -> UIConfig:
        """Read the UI's variables; explicit arguments win over the environment."""
        env = os.environ if environ is None else environ
        var = UI_ENV_VARS
        settings = settings or Settings.from_env(env)  # read first: its errors come before the UI's
        ints = {
            name: _env_int(env, var[name], getattr(cls, name), lo, hi)
            for name, (lo, hi) in UI_INT_RANGES.items()
        }
        return cls(
            settings=settings,
            token=env.get(var["token"], cls.token),
            bind=env.get(var["bind"], cls.bind),
            **ints,
        )


UI_HELP: dict[str, str] = {
    "jobs_per_minute": "Job submissions allowed per client address per minute.",
    "recent_jobs": "How many recent jobs the page lists.",
    "trusted_proxies": "How many reverse proxies in front of the UI to trust for X-Forwarded-For and "
    "X-Forwarded-Proto (werkzeug's ProxyFix), so the rate limit applies per client, not per proxy. 0: "
    "the headers are ignored (set it only behind a proxy that overwrites them, or clients could pick "
    "their own address).",
    "token": "When set, everything but the page, its static files, `/healthz` and `/api/config` needs this "
    "token: every job, result and cluster read, submitting, cancelling and watching (`Authorization: Bearer "
    "TOKEN` over HTTP; Socket.IO: `auth: {token}` on connect, or an event's `token`; the page sends what "
    "its token field holds). A wrong token counts against its client address, at most "
    "DDM_UI_JOBS_PER_MINUTE a minute on all paths together; past that the address is refused "
    "(`rate_limited`) until the minute frees a place. It is an admin API key: it sees and cancels every "
    "job. Empty: anyone who reaches the UI may read, submit and watch, unless per-user API keys exist "
    "(`ddm keys create`, docs/DEPLOY.md section 14): then a key or this token is needed.",
    "bind": "gunicorn: host:port to listen on (0.0.0.0:8000 in a container).",
    "threads": "Requests and Socket.IO events that may use Redis at once: the UI's Redis pool holds at most "
    "this many connections plus a few for its own tasks; a request that finds them all busy waits for "
    f"one (up to {UIConfig.redis_wait_s:g} s) instead of failing. (gunicorn serves with gevent: an idle "
    "browser holds no thread, docs/WEBUI.md.)",
    "watches_per_minute": "Watch requests one browser connection (Socket.IO socket) may make per minute; "
    "each replays the job's steps so far. Over it: refused, kind `too_many_watches`.",
    "viewers_per_address": "Connections from one client address that may watch jobs at once. Over it: "
    "refused, kind `too_many_watches`.",
    "viewer_backlog_kb": "Frames a connection has not yet taken, in KiB, beyond which it gets no more "
    "until it drains (a slow browser catches up through the replay); one that does not drain within "
    f"{UIConfig.viewer_stall_s:g} s is disconnected and its backlog freed.",
    "connections_per_address": "Socket.IO connections (a browser tab holds one) from one client address "
    "open at once, watching or not. Over it: the connection is refused with 429 before the server does "
    "anything for it. Behind a proxy set DDM_UI_TRUSTED_PROXIES, or every browser shares the proxy's "
    "address.",
    "idle_s": "Seconds a Socket.IO connection that watches no job and sends nothing may stay open; then "
    "it is disconnected (the page reconnects when its user comes back).",
}
