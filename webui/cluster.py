"""The serving cluster as the page shows it: live workers from their Redis heartbeats (schema/heartbeat.py),
queue depths from RabbitMQ (passive queue_declare: message and consumer counts; no management API
needed), and the deployment the serving router published (its descriptor: experts, strategies, class
names, defaults).

A worker is alive while its heartbeat key exists (it expires DDM_HEARTBEAT_TTL_S after the last
beat). Workers seen alive by this process and then gone stay listed as gone for a while, so a crash
is visible instead of a card silently vanishing.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ddm.runtime.heartbeat import read_live_workers
from ddm.runtime.queue_probe import QueueProbe
from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS
from ddm.schema.autoencoder_card import DecoderInfo
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import SchemaError, ServiceUnavailableError
from ddm.schema.heartbeat import WorkerHeartbeat
from ddm.webui.jobs import SubmitError, deployment_payload
from ddm.webui.pixels import DEFAULT_RANGE

SPACE_MAX_AGE_S = 5.0  # how long the sample space read with a descriptor is trusted for drawing frames

log = logging.getLogger(__name__)


class ClusterMonitor:
    """Builds (and caches for `max_age_s`) the cluster snapshot the page renders, and reads the serving
    router's deployment descriptor for the page and for submissions."""

    def __init__(self, client, *, gone_keep_s: float = 900.0, max_age_s: float = 1.0):
        self.client = client  # ddm.client.client.Client: its settings and (lazy) redis connection
        self.settings = client.settings
        self.names = client.names
        self.gone_keep_s = gone_keep_s
        self.max_age_s = max_age_s
        self._probe = QueueProbe(self.settings.amqp_url)
        self._seen: dict[str, tuple[float, dict]] = {}  # worker_id -> (last seen alive, beat)
        self._skipped: set[str] = set()  # worker ids whose malformed heartbeat was logged
        self._lock = threading.Lock()
        self._cached: tuple[float, dict] | None = None
        # (read at, the descriptor or None): what frames and results are drawn with
        self._drawn: tuple[float, DeploymentDescriptor | None] = (-SPACE_MAX_AGE_S, None)

    def live_workers(self) -> dict[str, WorkerHeartbeat]:
        return read_live_workers(self.client.redis, self.names, self._skipped)

    def deployment(self) -> DeploymentDescriptor:
        """The live descriptor, or SubmitError: no_deployment (no router serves), unavailable."""
        from ddm.client.errors import NoDeploymentError

        try:
            descriptor = self.client.deployment()
        except NoDeploymentError as exc:
            raise SubmitError("no_deployment", str(exc)) from None
        except ServiceUnavailableError as exc:
            raise SubmitError("unavailable", str(exc)) from None
        except SchemaError as exc:
            raise SubmitError(
                "unavailable", f"the published deployment descriptor is malformed: {exc}"
            ) from None
        self._drawn = (time.monotonic(), descriptor)
        return descriptor

    def _drawing_descriptor(self) -> DeploymentDescriptor | None:
        """The serving descriptor read at most SPACE_MAX_AGE_S ago, None when no router serves."""
        read_at, descriptor = self._drawn
        if time.monotonic() - read_at > SPACE_MAX_AGE_S:
            try:
                self.deployment()
            except Exception:  # noqa: BLE001 - no descriptor to read: frames are still drawn, from [-1, 1]
                self._drawn = (time.monotonic(), None)
            read_at, descriptor = self._drawn
        return descriptor

    def value_range(self, shape: tuple[int, ...]) -> tuple[float, float]:
        """The value range images of `shape` ([C, H, W]) are drawn from: the serving deployment's sample
        space's (or its decoder's pixels') where its shape is that one, else [-1, 1] (a job of a
        deployment served before, or no router serving now)."""
        descriptor = self._drawing_descriptor()
        for space in (descriptor.sample_space, descriptor.image_space) if descriptor else ():
            if tuple(space.shape) == tuple(shape):
                return space.value_range
        return DEFAULT_RANGE

    def preview(self, shape: tuple[int, ...]) -> DecoderInfo | None:
        """The serving latent deployment's decoder (its linear preview) for frames of latent `shape`;
        None for a pixel deployment, another shape or no router serving."""
        descriptor = self._drawing_descriptor()
        if descriptor is None or descriptor.decoder is None or descriptor.sample_space.shape != tuple(shape):
            return None
        return descriptor.decoder

    def deployment_view(self) -> dict[str, Any]:
        """{"deployment": the descriptor for the page, or None, "deployment_error": why not, or None}."""
        try:
            return {"deployment": deployment_payload(self.deployment()), "deployment_error": None}
        except SubmitError as exc:
            return {"deployment": None, "deployment_error": exc.message}

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            now = time.monotonic()
            if self._cached is not None and now - self._cached[0] < self.max_age_s:
                return self._cached[1]
            snap = self._build()
            self._cached = (now, snap)
            return snap

    def _workers(self, now: float, errors: list[str]) -> list[dict[str, Any]]:
        """Live workers, and those seen alive here that have gone (for gone_keep_s)."""
        try:
            live = self.live_workers()
        except (*REDIS_CONNECTION_ERRORS, ServiceUnavailableError) as exc:
            errors.append(f"Redis unreachable at the UI's DDM_REDIS_URL: {exc}")
            return []
        workers = []
        for worker_id, beat in live.items():
            self._seen[worker_id] = (now, beat.to_dict())
        for worker_id, (seen_at, beat) in list(self._seen.items()):
            alive = worker_id in live
            if not alive and now - seen_at > self.gone_keep_s:
                del self._seen[worker_id]
                continue
            age = round(now - beat["updated_at"], 1)
            workers.append({**beat, "alive": alive, "age_s": age})
        return workers

    def _build(self) -> dict[str, Any]:
        now = time.time()
        errors: list[str] = []
        workers = self._workers(now, errors)
        view = self.deployment_view()
        experts = view["deployment"]["experts"] if view["deployment"] else []
        expert_ids = sorted(
            {e["id"] for e in experts}
            | {w["expert_id"] for w in workers if w.get("role") == "expert" and "expert_id" in w}
        )
        queue_names = {self.names.expert_queue(k): k for k in expert_ids}
        queues: dict[str, Any] = {}
        try:
            depths = self._probe.depths([self.names.jobs, *queue_names])
            queues = {"jobs": depths[self.names.jobs]}
            queues |= {str(k): depths[q] for q, k in queue_names.items()}
        except Exception as exc:  # noqa: BLE001 - any broker trouble is shown, never fatal
            self._probe.close()
            errors.append(f"RabbitMQ unreachable at the UI's DDM_AMQP_URL: {type(exc).__name__}: {exc}")
            queues = {}
        workers.sort(key=lambda w: (w.get("role") != "router", w.get("expert_id", -1), w["worker_id"]))
        return {
            "time": now,
            "workers": workers,
            "queues": queues,
            "queue_names": {str(k): q for q, k in queue_names.items()} | {"jobs": self.names.jobs},
            "experts": experts,
            **view,
            "errors": errors,
            "heartbeat_ttl_s": self.settings.heartbeat_ttl_s,
        }

    def close(self) -> None:
        with self._lock:
            self._probe.close()
