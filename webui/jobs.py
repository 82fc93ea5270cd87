"""Submitting a job from the page: parse the form, validate it exactly as the CLI does (JobSpec, then
Client's deployment check = policy.check_strategy + labels + checkpoints), refuse a job no live
worker could serve, rate-limit per client address, then Client.submit.

Errors are SubmitError with a `kind` the page shows as a heading and an HTTP status for the API:
bad_input (400), rate_limited (429), no_worker (503), unavailable (503).
"""

from __future__ import annotations

import collections
import math
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddm.schema.errors import ConfigError, DDMError, SchemaError, ServiceUnavailableError, expected
from ddm.schema.flow import NUM_CLASSES
from ddm.schema.messages import MAX_SAMPLES, MAX_SEED, JobSpec, parse_strategy

MAX_IMAGES = MAX_SAMPLES  # JobSpec's limit on labels (images) per job
FORM_KEYS = {"labels", "n_per_label", "steps", "strategy", "guidance", "seed"}
KIND_STATUS = {"bad_input": 400, "rate_limited": 429, "no_worker": 503, "unavailable": 503}


class SubmitError(DDMError):
    """A refused submission; `kind` in KIND_STATUS, `message` is meant for a person."""

    def __init__(self, kind: str, message: str, *, retry_after_s: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after_s = retry_after_s

    @property
    def http_status(self) -> int:
        return KIND_STATUS[self.kind]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": False, "kind": self.kind, "error": self.message}
        if self.retry_after_s is not None:
            out["retry_after_s"] = math.ceil(self.retry_after_s)
        return out


# ---------------------------------------------------------------- the deployment, as the page needs it


@dataclass(frozen=True)
class DeploymentInfo:
    """Facts about the deployment for validation and display (metas only, no weights loaded)."""

    name: str | None
    path: Path | None
    experts: list[dict[str, Any]]  # [{"id", "framework", "device", "classes"}]
    strategies: tuple[str, ...]  # what the deployment can route
    oracle: dict[int, int] | None  # label -> expert, for label-split deployments
    guidance: float = 1.0  # the deployment's default guidance (the form's initial value)

    @classmethod
    def load(cls, path: Path | None) -> DeploymentInfo:
        if path is None:
            return cls(None, None, [], ("oracle", "top1", "topk:2", "full"), None)
        import numpy as np

        from ddm.router.deployment_loader import expert_label_counts
        from ddm.router.policies import oracle_table
        from ddm.schema.deployment import Deployment
        from ddm.workers.checkpoint import read_meta

        dep = Deployment.load(path)
        counts = expert_label_counts(dep)  # [K, 10]; fails if a checkpoint's meta.json is missing
        experts = []
        for entry, row in zip(dep.experts, counts, strict=True):
            meta = read_meta(entry.checkpoint)
            experts.append(
                {
                    "id": entry.id,
                    "framework": str(meta.get("framework", "?")),
                    "device": entry.device,
                    "classes": [int(c) for c in np.flatnonzero(row > 0)],
                }
            )
        table = oracle_table(counts)
        oracle = None
        if table is not None:
            oracle = {y: int(table[y].argmax()) for y in range(NUM_CLASSES)}
        strategies = (("oracle",) if oracle is not None else ()) + ("top1",)
        strategies += tuple(f"topk:{k}" for k in range(2, min(dep.num_experts, 4) + 1)) + ("full",)
        return cls(dep.name, dep.path, experts, strategies, oracle, dep.guidance)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "experts": self.experts, "strategies": list(self.strategies)}

    def experts_needed(self, spec: JobSpec) -> list[int]:
        """Expert ids the job may call: the labels' experts under the oracle, else every expert."""
        if spec.strategy == "oracle" and self.oracle is not None:
            return sorted({self.oracle[y] for y in spec.labels})
        return [e["id"] for e in self.experts]

    def describe(self, expert_id: int) -> str:
        for e in self.experts:
            if e["id"] == expert_id:
                classes = e["classes"]
                digits = (
                    f"digits {classes[0]}-{classes[-1]}"
                    if classes and classes == list(range(classes[0], classes[-1] + 1))
                    else f"digits {classes}"
                )
                return f"expert {expert_id} ({e['framework']}, {digits})"
        return f"expert {expert_id}"


# ---------------------------------------------------------------- form -> JobSpec


def _number(data: Mapping, key: str, default: Any, *, integer: bool) -> Any:
    value = data.get(key, default)
    if value is None and default is not None:
        value = default
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SubmitError("bad_input", f"{key}: {expected(kind, value)}")
    if integer and isinstance(value, float):
        if not value.is_integer():
            raise SubmitError("bad_input", f"{key}: {expected(kind, value)}")
        value = int(value)
    if not math.isfinite(value):
        raise SubmitError("bad_input", f"{key}: {expected('a finite number', value)}")
    return value


def parse_form(data: object, default_guidance: float = 1.0) -> JobSpec:
    """The page's form (JSON) -> JobSpec, or SubmitError(bad_input) saying what is wrong.

    {"labels": [0..9, ...] or "all", "n_per_label": 1.., "steps": 1..1000, "strategy": "oracle" |
    "top1" | "topk:K" | "full", "guidance": 0..20, "seed": 0..2^32-1 or null (a random one)}.
    Images are laid out row by row: row r holds sample r of each chosen label, in label order.
    """
    if not isinstance(data, Mapping):
        raise SubmitError("bad_input", expected("a JSON object with the job's fields", type(data).__name__))
    unknown = sorted(set(map(str, data)) - FORM_KEYS)
    if unknown:
        raise SubmitError("bad_input", expected(f"only the fields {sorted(FORM_KEYS)}", unknown))
    raw = data.get("labels")
    if raw == "all":
        labels = list(range(NUM_CLASSES))
    elif isinstance(raw, list) and raw:
        labels = []
        for y in raw:
            if isinstance(y, bool) or not isinstance(y, int) or not 0 <= y < NUM_CLASSES:
                raise SubmitError("bad_input", f"labels: {expected('digits 0..9', y)}")
            labels.append(y)
        if len(set(labels)) != len(labels):
            raise SubmitError("bad_input", f"labels: {expected('each digit at most once', raw)}")
    else:
        raise SubmitError("bad_input", "labels: choose at least one digit (or all ten)")
    n = _number(data, "n_per_label", 1, integer=True)
    if not 1 <= n <= MAX_IMAGES:
        raise SubmitError("bad_input", f"images per digit: {expected(f'1..{MAX_IMAGES}', n)}")
    if len(labels) * n > MAX_IMAGES:
        raise SubmitError(
            "bad_input",
            f"{len(labels)} digits x {n} per digit = {len(labels) * n} images; "
            f"a job has at most {MAX_IMAGES}",
        )
    steps = _number(data, "steps", 50, integer=True)
    guidance = _number(data, "guidance", default_guidance, integer=False)
    seed = data.get("seed")
    seed = random.randint(0, MAX_SEED) if seed is None else _number(data, "seed", None, integer=True)
    strategy = data.get("strategy", "oracle")
    if not isinstance(strategy, str):
        raise SubmitError("bad_input", f"strategy: {expected('a string', strategy)}")
    try:
        parse_strategy(strategy)
        return JobSpec.new(
            [y for _ in range(n) for y in sorted(labels)],
            steps=steps,
            strategy=strategy,
            guidance=float(guidance),
            seed=seed,
        )
    except SchemaError as exc:
        raise SubmitError("bad_input", str(exc)) from None


# ---------------------------------------------------------------- rate limit


class RateLimiter:
    """At most `limit` events per `window_s` per key (a sliding window). Thread-safe."""

    def __init__(self, limit: int, window_s: float = 60.0, clock=time.monotonic):
        self.limit = limit
        self.window_s = window_s
        self.clock = clock
        self._events: dict[str, collections.deque] = {}
        self._lock = threading.Lock()

    def hit(self, key: str) -> float | None:
        """Record one event for `key`; None if allowed, else the seconds until one is allowed again."""
        with self._lock:
            now = self.clock()
            if len(self._events) > 10_000:  # forget idle keys so memory stays bounded
                for k in [k for k, q in self._events.items() if not q or now - q[-1] > self.window_s]:
                    del self._events[k]
            q = self._events.setdefault(key, collections.deque())
            while q and now - q[0] >= self.window_s:
                q.popleft()
            if len(q) >= self.limit:
                return self.window_s - (now - q[0])
            q.append(now)
            return None


# ---------------------------------------------------------------- submit


class JobService:
    """Validation and submission for the routes and the socket events (one per app)."""

    def __init__(self, settings, info: DeploymentInfo, monitor, limiter: RateLimiter):
        self.settings = settings
        self.info = info
        self.monitor = monitor
        self.limiter = limiter
        self._client = None
        self._lock = threading.Lock()  # Client.submit is not thread-safe (one pika connection)

    @property
    def client(self):
        if self._client is None:
            from ddm.router.client import Client

            self._client = Client(settings=self.settings)
        return self._client

    def submit(self, data: object, remote: str) -> JobSpec:
        """Validate and queue a job from form `data` sent by client address `remote`."""
        wait = self.limiter.hit(remote or "?")
        if wait is not None:
            raise SubmitError(
                "rate_limited",
                f"too many jobs: at most {self.limiter.limit} per minute from one address; "
                f"try again in {math.ceil(wait)} s",
                retry_after_s=wait,
            )
        spec = parse_form(data, self.info.guidance)
        self.check(spec)
        with self._lock:
            try:
                self.client.submit(spec, check_deployment=False)  # checked above, against our deployment
            except SchemaError as exc:
                raise SubmitError("bad_input", str(exc)) from None
            except ServiceUnavailableError as exc:
                raise SubmitError("unavailable", str(exc)) from None
            except DDMError as exc:
                raise SubmitError("unavailable", f"the broker refused the job: {exc}") from None
            except Exception as exc:  # noqa: BLE001 - a broker connection lost mid-publish, say so plainly
                self.client.close()
                raise SubmitError(
                    "unavailable", f"could not queue the job: {type(exc).__name__}: {exc}"
                ) from None
        return spec

    def check(self, spec: JobSpec) -> None:
        """The deployment check the CLI makes, then: a live router and a live worker per needed expert."""
        if self.info.path is not None:
            from ddm.router.client import check_against_deployment

            try:
                check_against_deployment(spec, self.info.path)
            except (SchemaError, ConfigError) as exc:
                raise SubmitError("bad_input", str(exc)) from None
        try:
            live = self.monitor.live_workers()
        except Exception as exc:  # noqa: BLE001 - Redis down
            raise SubmitError("unavailable", f"cannot read worker heartbeats from Redis: {exc}") from None
        experts_up = {w.get("expert_id") for w in live.values() if w.get("role") == "expert"}
        needed = self.info.experts_needed(spec)
        if not needed and not experts_up:
            raise SubmitError("no_worker", "no expert worker is running (no live heartbeat); start `ddm up`")
        missing = [k for k in needed if k not in experts_up]
        if missing:
            who = ", ".join(self.info.describe(k) for k in missing)
            dep = f" --deployment {self.info.path}" if self.info.path else ""
            raise SubmitError(
                "no_worker",
                f"no live worker for {who}, which this job needs: its heartbeat is missing or expired. "
                f"Start one with `ddm worker expert{dep} --expert {missing[0]}` (or `ddm up`).",
            )
        if not any(w.get("role") == "router" for w in live.values()):
            raise SubmitError(
                "no_worker",
                "no live router worker: the job would wait in the queue. Start one with "
                "`ddm worker router` (or `ddm up`).",
            )

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
