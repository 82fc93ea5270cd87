"""Service settings, read once from DDM_* environment variables into one frozen object."""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .codec import DEFAULT_MAX_BYTES
from .errors import ConfigError, expected
from .names import PREFIX_RE, Names

_INT_RE = re.compile(r"-?[0-9]+")  # stricter than int(): no spaces, no underscores, no '+'
_REGION_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_BIND_RE = re.compile(r"[A-Za-z0-9_.:-]{1,253}")  # DDM_METRICS_BIND: an IPv4/IPv6 address or a host name
_PASSWORD_RE = re.compile(r"(//[^:/@]*:)[^@/]*@")
# redis+sentinel://...?sentinel_password=: the Sentinels' own password, in the query
_QUERY_PASSWORD_RE = re.compile(r"([?&]sentinel_password=)[^&#,\s]*")
QUEUE_TYPES = ("classic", "quorum")  # DDM_QUEUE_TYPE: the work queues' type (schema/topology.py)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")  # json: one object per line, for log collectors (ddm/ops/logs.py)


def setting(default, help: str, *, within: tuple[float, float] | None = None):
    """One row of the settings table: a field's default, what it means to whoever sets it (docs/CONFIG.md)
    and, for numbers, the range it must lie in. Its variable is env_var(field name)."""
    return dataclasses.field(default=default, metadata={"help": help, "within": within})


def env_var(field: str) -> str:
    """The environment variable of a Settings field: DDM_ and its name in capitals."""
    return f"DDM_{field.upper()}"


def _fail(field: str, what: str, got: object) -> ConfigError:
    return ConfigError(f"{env_var(field)}: {expected(what, got)}")


def redact(url: str) -> str:
    """'amqp://user:secret@host/' -> 'amqp://user:***@host/', for logs and reprs; every URL of a
    comma-separated list too, and a redis+sentinel:// URL's sentinel_password."""
    return _QUERY_PASSWORD_RE.sub(r"\1***", _PASSWORD_RE.sub(r"\1***@", url))


def _is_url(value: str, schemes: tuple[str, ...]) -> bool:
    return value.startswith(schemes) and not any(c.isspace() for c in value)


def split_urls(value: str) -> tuple[str, ...]:
    """'amqp://a/,amqp://b/' -> ('amqp://a/', 'amqp://b/'): DDM_AMQP_URL may name several broker nodes of
    one cluster, separated by commas (a comma inside a password is written %2C)."""
    return tuple(value.split(","))


def check_queue_type(value: object) -> str:
    """A DDM_QUEUE_TYPE value, or a ConfigError that names the variable and the choices."""
    if value not in QUEUE_TYPES:
        what = "'classic' (one broker node) or 'quorum' (a cluster of 3 or more nodes)"
        raise ConfigError(f"{env_var('queue_type')}: {expected(what, value)}")
    return value


def queue_type_from_env(environ: Mapping[str, str] | None = None) -> str:
    """DDM_QUEUE_TYPE alone (default 'classic'), for code that declares queues without a Settings."""
    env = os.environ if environ is None else environ
    return check_queue_type(env.get(env_var("queue_type"), Settings.queue_type))


@dataclass(frozen=True)
class Settings:
    """Everything a service reads from its environment. Build with Settings.from_env()."""

    amqp_url: str = setting(
        "amqp://guest:guest@127.0.0.1:5672/%2F",
        "RabbitMQ URL; several nodes of one cluster separated by commas (a comma in a password is written "
        "%2C). amqps:// for TLS, with `ssl_options` in the query (docs/DEPLOY.md).",
    )
    redis_url: str = setting(
        "redis://127.0.0.1:6379/0",
        "Redis URL: redis://, rediss:// (TLS), unix://, or "
        "redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service-name[/db]"
        "[?sentinel_password=password] for Redis Sentinel (the password is the master's; sentinel_password "
        "the Sentinels' own requirepass).",
    )
    prefix: str = setting(
        "",
        "Put before every queue name and Redis key, so several deployments (or tests) share one broker "
        "and one Redis.",
    )
    request_timeout_s: float = setting(
        10.0,
        "Router: how long it waits for an expert's reply before resending the request.",
        within=(0.001, 3600.0),
    )
    max_batch: int = setting(
        32,
        "Expert worker: most request rows merged into one forward pass (`--max-batch`).",
        within=(1, 4096),
    )
    # expert worker: longest wait to fill a batch. 0: a router already sends each expert one request
    # with every row due, and requests that arrive during a forward pass still batch into the next one;
    # waiting would only add latency at low load.
    max_wait_ms: float = setting(
        0.0,
        "Expert worker: longest wait to fill a batch after the first request (0: serve at once).",
        within=(0.0, 10000.0),
    )
    job_ttl_s: int = setting(
        86400,
        "A job's Redis keys (hash, trajectory, state, result) expire this long after it ends (done, "
        "failed or cancelled).",
        within=(1, 365 * 86400),
    )
    queued_ttl_s: int = setting(
        86400,
        "A queued job's hash (and with it its place in the queue) expires this long after its submit "
        "unless a router starts it: a client that died before publishing, or a message that never "
        "reaches a router, leaves no job waiting forever ahead of the others. A router that takes such a "
        "job later still runs it (under a hash of its own); set it above the longest wait in ddm.jobs.",
        within=(1, 365 * 86400),
    )
    heartbeat_s: float = setting(
        2.0,
        "Workers: seconds between two heartbeats in Redis.",
        within=(0.01, 3600.0),
    )
    heartbeat_ttl_s: int = setting(
        10,
        "A worker whose heartbeat is older than this is gone (must exceed DDM_HEARTBEAT_S).",
        within=(1, 86400),
    )
    region: str = setting(
        "local",
        "Shown with the worker in its heartbeat (`ddm workers`, the UI's cluster panel).",
    )
    data_dir: str = setting(
        "data",
        "Datasets folder (`ddm data`, `partition`, `train`, `eval`).",
    )
    max_message_bytes: int = setting(
        DEFAULT_MAX_BYTES,
        "Largest message any process decodes; bigger ones are refused (dead-lettered).",
        within=(1024, 1 << 30),
    )
    deployment: str = setting(
        "",
        "Deployment TOML used when a command gets no --deployment (empty: the shipped one).",
    )
    metrics_port: int = setting(
        0,
        "Workers: serve Prometheus /metrics and /healthz on this TCP port (0: off).",
        within=(0, 65535),
    )
    metrics_bind: str = setting(
        "127.0.0.1",
        "Workers: the address the /metrics and /healthz server listens on. 127.0.0.1: this host only "
        "(safe where a worker shares the host's network); 0.0.0.0: every interface, as in a container "
        "that Prometheus scrapes (docker-compose.yml sets it there).",
    )
    log_level: str = setting(
        "INFO",
        "Long-running processes (workers, `ddm up`, the web UI): DEBUG, INFO, WARNING or ERROR.",
    )
    log_format: str = setting(
        "text",
        "Their log lines: text, or json (one object per line: time, level, logger, process, message).",
    )
    jax_cache_dir: str = setting(
        "~/.cache/ddm/jax",
        "JAX's persistent compile cache: a restarted JAX expert loads its compiled batch buckets instead "
        "of compiling them again (off: no cache).",
    )
    trace_cache_dir: str = setting(
        "~/.cache/ddm/traced",
        "PyTorch expert on neuron or cpu-traced: the traced model of every batch bucket, saved and keyed "
        "by weights digest, bucket, toolchain versions and compiler arguments, so a restart compiles "
        "nothing (off: no cache). Writable only by the worker: its files are loaded as code.",
    )
    queue_type: str = setting(
        "classic",
        "The work queues' type: classic (one broker node) or quorum (a cluster of 3+ nodes). Every "
        "process of a deployment must agree.",
    )
    expert_grace_s: float = setting(
        30.0,
        "Router: how long a step whose oracle or top-1 expert has no live replica waits for one before "
        "its job fails (mixing strategies renormalise over the live experts instead).",
        within=(0.0, 86400.0),
    )
    expert_loss_grace_s: float = setting(
        10.0,
        "Router: an expert counts as gone only after it has had no consumer (or, with requests waiting, "
        "no heartbeat and no progress) for this long: a broker failover or a Redis outage shorter than "
        "this changes no job.",
        within=(0.0, 86400.0),
    )
    hedge_floor_ms: float = setting(
        250.0,
        "Router: a request still unanswered after its expert's recent p99 latency, and at least this "
        "long, is sent once more to another replica.",
        within=(0.0, 3600000.0),
    )
    hedge_max_fraction: float = setting(
        0.05,
        "Router: at most this fraction of requests is hedged (0 turns hedging off).",
        within=(0.0, 1.0),
    )
    crash_limit: int = setting(
        3,
        "Expert and decoder workers: a message whose serving ended this many workers (an exception "
        "that escaped, a native crash, the out-of-memory killer) is dead-lettered with the last error on "
        "its next delivery instead of being served again (ddm/runtime/crash_guard.py).",
        within=(1, 100),
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.metadata.get("within") is not None:
                self._check_number(f.name, int if f.type == "int" else float, *f.metadata["within"])
        self._check_amqp_urls()
        self._check_url("redis_url", ("redis://", "rediss://", "unix://", "redis+sentinel://"))
        if not isinstance(self.prefix, str) or not PREFIX_RE.fullmatch(self.prefix):
            raise _fail("prefix", "0..64 chars [A-Za-z0-9_.:-]", self.prefix)
        if self.heartbeat_ttl_s <= self.heartbeat_s:
            # otherwise a live worker's key expires between two beats
            raise _fail(
                "heartbeat_ttl_s", f"more than DDM_HEARTBEAT_S={self.heartbeat_s}", self.heartbeat_ttl_s
            )
        if not isinstance(self.region, str) or not _REGION_RE.fullmatch(self.region):
            raise _fail("region", "1..64 chars [A-Za-z0-9_.-]", self.region)
        if not isinstance(self.data_dir, str) or not self.data_dir or "\x00" in self.data_dir:
            raise _fail("data_dir", "a non-empty path", self.data_dir)
        if not isinstance(self.metrics_bind, str) or not _BIND_RE.fullmatch(self.metrics_bind):
            raise _fail(
                "metrics_bind", "an IP address or host name to listen on (e.g. 127.0.0.1)", self.metrics_bind
            )
        if not isinstance(self.deployment, str) or "\x00" in self.deployment:
            raise _fail("deployment", "a path (or empty for the shipped deployment)", self.deployment)
        self._check_choice("log_level", LOG_LEVELS, upper=True)
        self._check_choice("log_format", LOG_FORMATS)
        if not isinstance(self.jax_cache_dir, str) or "\x00" in self.jax_cache_dir:
            raise _fail("jax_cache_dir", "a path (or off)", self.jax_cache_dir)
        if not isinstance(self.trace_cache_dir, str) or "\x00" in self.trace_cache_dir:
            raise _fail("trace_cache_dir", "a path (or off)", self.trace_cache_dir)
        check_queue_type(self.queue_type)

    def _check_amqp_urls(self) -> None:
        """One URL, or several nodes of one cluster separated by commas, each checked alone."""
        schemes = ("amqp://", "amqps://")
        if not isinstance(self.amqp_url, str) or "," not in self.amqp_url:
            self._check_url("amqp_url", schemes)
            return
        urls = split_urls(self.amqp_url)
        for i, url in enumerate(urls, 1):
            if not _is_url(url, schemes):
                # the part itself is not shown: it may be the tail of a password cut at a comma
                what = (
                    "comma-separated URLs each starting with amqp:// or amqps:// (a comma inside a "
                    f"password is written %2C; URL {i} of {len(urls)} is not one)"
                )
                raise _fail("amqp_url", what, redact(self.amqp_url))

    @property
    def amqp_urls(self) -> tuple[str, ...]:
        """Every broker address of DDM_AMQP_URL (one, or the nodes of a cluster)."""
        return split_urls(self.amqp_url)

    def _check_url(self, field: str, schemes: tuple[str, ...]) -> None:
        value = getattr(self, field)
        if not isinstance(value, str) or not _is_url(value, schemes):
            raise _fail(field, f"URL starting with {' or '.join(schemes)}", value)

    def _check_choice(self, field: str, choices: tuple[str, ...], upper: bool = False) -> None:
        value = getattr(self, field)
        if upper and isinstance(value, str):
            value = value.upper()  # DDM_LOG_LEVEL=info works as logging's INFO
        if value not in choices:
            raise _fail(field, f"one of {', '.join(choices)}", getattr(self, field))
        object.__setattr__(self, field, value)

    def _check_number(self, field: str, kind: type, lo: float, hi: float) -> None:
        value = getattr(self, field)
        ok_type = isinstance(value, int) if kind is int else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type or not math.isfinite(value) or not lo <= value <= hi:
            raise _fail(field, f"{kind.__name__} in [{lo}, {hi}]", value)
        object.__setattr__(self, field, kind(value))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read DDM_* variables from `environ` (default os.environ); unset ones keep their defaults."""
        env = os.environ if environ is None else environ
        kwargs: dict[str, object] = {}
        for f in dataclasses.fields(cls):
            var = env_var(f.name)
            if var not in env:
                continue
            raw = env[var]
            if f.type == "int":
                if not _INT_RE.fullmatch(raw):
                    raise ConfigError(f"{var}: {expected('an integer', raw)}")
                kwargs[f.name] = int(raw)
            elif f.type == "float":
                try:
                    kwargs[f.name] = float(raw)
                except ValueError:
                    raise ConfigError(f"{var}: {expected('a number', raw)}") from None
            else:
                kwargs[f.name] = raw
        return cls(**kwargs)

    def __repr__(self) -> str:
        # dataclass's repr would print the broker password into every log line that shows settings
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        parts = [f"{k}={redact(v) if k.endswith('_url') else v!r}" for k, v in values.items()]
        return f"Settings({', '.join(parts)})"

    @property
    def names(self) -> Names:
        """Queue names and Redis keys under this deployment's prefix."""
        return Names(self.prefix)


# Derived from the one table above (field -> its variable, field -> its help): docs/CONFIG.md is generated
# from them and the defaults (`python -m ddm.ops.config_doc > docs/CONFIG.md`); a test keeps it equal.
ENV_VARS: dict[str, str] = {f.name: env_var(f.name) for f in dataclasses.fields(Settings)}
HELP: dict[str, str] = {f.name: f.metadata["help"] for f in dataclasses.fields(Settings)}
