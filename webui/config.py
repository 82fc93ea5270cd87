"""The web UI's settings: the shared service Settings plus a few UI-only knobs, read once from the env.

    DDM_UI_JOBS_PER_MINUTE   job submissions allowed per client address per minute (default 30)
    DDM_UI_RECENT_JOBS       how many recent jobs the page lists (default 12)

Everything else (DDM_REDIS_URL, DDM_AMQP_URL, DDM_PREFIX, heartbeat TTL...) is ddm.schema.Settings.
The UI reads no deployment file: what a job means comes from the serving router's descriptor in Redis.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ddm.schema.errors import ConfigError, expected
from ddm.schema.settings import Settings

_INT_RE = re.compile(r"[0-9]{1,9}")


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
    overview_interval_s: float = 2.0  # cluster + recent jobs pushed to every page this often
    gone_keep_s: float = 900.0  # a worker whose heartbeat expired is shown as gone this long

    def __post_init__(self) -> None:
        if not 1 <= self.jobs_per_minute <= 100_000:
            raise ConfigError(expected("jobs_per_minute in 1..100000", self.jobs_per_minute))
        if not 1 <= self.recent_jobs <= 200:
            raise ConfigError(expected("recent_jobs in 1..200", self.recent_jobs))

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        settings: Settings | None = None,
    ) -> UIConfig:
        """Read the UI's variables; explicit arguments win over the environment."""
        env = os.environ if environ is None else environ
        return cls(
            settings=settings or Settings.from_env(env),
            jobs_per_minute=_env_int(env, "DDM_UI_JOBS_PER_MINUTE", 30, 1, 100_000),
            recent_jobs=_env_int(env, "DDM_UI_RECENT_JOBS", 12, 1, 200),
        )
