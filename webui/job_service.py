"""Submitting and cancelling for the routes, the socket events and the OpenAI endpoint: one JobService per
app. A submit is checked in this order, and a refusal at any step gives back what the steps before it
took, so a refused request queues nothing: the token or key (access.py), the address's rate
(rate_limit.py), the key's rate (quota.py), the form (jobs.py parse_form) and the live workers, the key's
concurrent jobs (quota.py), then the broker.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import DDMError, SchemaError, ServiceUnavailableError
from ddm.schema.jobs import owner_fields
from ddm.schema.messages import JobSpec, job_options
from ddm.webui.jobs import SubmitError, describe_expert, parse_form
from ddm.webui.keys import visible
from ddm.webui.quota import JOBS_RETRY_S
from ddm.webui.rate_limit import RateLimiter


@dataclass(eq=False)  # compared and hashed by identity, as one service per app
class JobService:
    """Validation and submission for the routes and the socket events (one per app).

    access: webui.access.Access (DDM_UI_TOKEN and API keys: who may submit and cancel).
    make_client: () -> a ddm.client.client.Client (default: one on `settings`).
    quotas: webui.quota.Quotas (the keys' rates and concurrent jobs; None: not enforced)."""

    settings: Any
    monitor: Any
    limiter: RateLimiter
    access: Any
    make_client: Callable[[], Any] | None = None
    quotas: Any = None
    _client: Any = field(init=False, default=None, repr=False)
    # Client.submit is not thread-safe (one pika connection)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock, repr=False)

    @property
    def client(self):
        if self._client is None:
            from ddm.client.client import Client

            self._client = self.make_client() if self.make_client else Client(settings=self.settings)
        return self._client

    def submit(self, data: object, remote: str, token: str | None = None, **queue) -> JobSpec:
        """Validate and queue a job from form `data` sent by client address `remote` with `token`.
        A wrong token counts against the address's budget of wrong tokens (access.py); a queued job
        against the address's rate limit and the key's quotas (quota.py), and a request refused for any
        other reason gives its places back: a refused request queues nothing.
        queue: Client.submit's priority and deadline_s (the OpenAI endpoint's extras: openai_api.py)."""
        key = remote or "?"
        who = self.access.check(token, key, "submit jobs", needed="submit")
        wait = self.limiter.hit(key)  # counted first, so two requests at once cannot both take the last place
        if wait is not None:
            raise SubmitError(
                "rate_limited",
                f"too many jobs: at most {self.limiter.limit} per minute from one address; "
                f"try again in {math.ceil(wait)} s",
                retry_after_s=wait,
            )
        try:
            self._take_rate(who)
        except SubmitError:
            self.limiter.refund(key)
            raise
        try:
            spec = self._validated(data)
            self._queue(spec, queue, who)
        except MaybeQueuedError:
            raise  # whether the broker took it is unknown: nothing is given back
        except SubmitError:
            self.limiter.refund(key)
            if who.rate_per_min is not None and self.quotas is not None:
                self.quotas.refund(who.key_id, who.rate_per_min)
            raise
        return spec

    def _take_rate(self, who) -> None:
        """One submit from the key's rate (quota.py); SubmitError rate_limited when its bucket is empty."""
        if who.rate_per_min is None or self.quotas is None:
            return
        wait = self._quota_call(self.quotas.take, who.key_id, who.rate_per_min)
        if wait:
            raise SubmitError(
                "rate_limited",
                f"this API key may submit {who.rate_per_min} jobs a minute and has used them; "
                f"try again in {math.ceil(wait)} s",
                retry_after_s=wait,
            )

    def _reserve(self, who, spec: JobSpec) -> None:
        """A place among the key's concurrent jobs (quota.py); SubmitError rate_limited when all are taken."""
        if who.max_jobs is None or self.quotas is None:
            return
        active = self._quota_call(self.quotas.reserve, who.key_id, spec.job_id, who.max_jobs)
        if active is not None:
            raise SubmitError(
                "rate_limited",
                f"this API key may have {who.max_jobs} jobs queued or running at once, and has {active}; "
                f"try again when one has ended (`GET /api/jobs`)",
                retry_after_s=JOBS_RETRY_S,
            )

    @staticmethod
    def _quota_call(call, *args):
        try:
            return call(*args)
        except REDIS_CONNECTION_ERRORS as exc:
            raise SubmitError(
                "unavailable", f"cannot check the key's quota: Redis unreachable: {exc}"
            ) from None

    def _validated(self, data: object) -> JobSpec:
        try:
            descriptor, refused = self.monitor.deployment(), None
        except SubmitError as exc:  # bad input is still said first, read in the legacy space
            descriptor, refused = None, exc
        spec = _whole_spec(data) or parse_form(data, descriptor)
        if refused is not None:
            raise refused
        self.check(spec, descriptor)
        return spec

    def _queue(self, spec: JobSpec, queue: dict, who) -> None:
        """Reserve the key's place, publish, and record the owner (before the id is answered: its owner
        never sees the job without one); a failed publish gives the place back."""
        self._reserve(who, spec)
        try:
            self._publish(spec, queue)
        except MaybeQueuedError:
            raise  # the broker may have the job: its place stays taken (freed if no hash appears)
        except SubmitError:
            if who.max_jobs is not None and self.quotas is not None:
                self.quotas.release(who.key_id, spec.job_id)
            raise
        if who.owner is not None:
            self.client.redis.hset(self.client.names.job(spec.job_id), mapping=owner_fields(who.owner))

    def _publish(self, spec: JobSpec, queue: dict) -> None:
        with self._lock:
            try:
                self.client.submit(spec, check=False, **queue)  # checked above, against the live descriptor
            except SchemaError as exc:
                raise SubmitError("bad_input", str(exc)) from None
            except ServiceUnavailableError as exc:
                raise SubmitError("unavailable", str(exc)) from None
            except DDMError as exc:
                raise SubmitError("unavailable", f"the broker refused the job: {exc}") from None
            except Exception as exc:  # noqa: BLE001 - a broker connection lost mid-publish, say so plainly
                self.client.close()
                raise MaybeQueuedError(
                    "unavailable", f"could not queue the job: {type(exc).__name__}: {exc}"
                ) from None

    def cancel(self, job_id: str, remote: str, token: str | None = None):
        """Ask the router to stop a job (Client.cancel); the token a submit needs, cancelling needs too, and
        a key's user may cancel only their own jobs (another's: JobNotFoundError, as for no job)."""
        who = self.access.check(token, remote or "?", "cancel jobs", needed="submit")
        visible(who, self.client, job_id)
        with self._lock:
            return self.client.cancel(job_id)

    def check(self, spec: JobSpec, descriptor: DeploymentDescriptor) -> None:
        """The descriptor's check the CLI makes, then: a live worker per needed expert, a live decoder for a
        latent deployment, and a live router."""
        try:
            descriptor.check(spec)
        except SchemaError as exc:
            raise SubmitError("bad_input", str(exc)) from None
        try:
            live = self.monitor.live_workers()
        except (*REDIS_CONNECTION_ERRORS, ServiceUnavailableError) as exc:
            raise SubmitError("unavailable", f"cannot read worker heartbeats from Redis: {exc}") from None
        experts_up = {w.expert_id for w in live.values() if w.role == "expert"}
        missing = descriptor.unserved(spec, experts_up)
        if missing:
            who = ", ".join(describe_expert(descriptor, k) for k in missing)
            raise SubmitError(
                "no_worker",
                f"no live worker for {who}, which this job needs: its heartbeat is missing or expired. "
                f"Start one with `ddm worker expert --expert {missing[0]}` (or `ddm up`).",
            )
        if descriptor.decoder is not None and not any(w.role == "decoder" for w in live.values()):
            raise SubmitError(
                "no_worker",
                "no live decoder worker, which this latent deployment needs to turn the job's latents into "
                "pictures: its heartbeat is missing or expired. Start one with `ddm worker decoder` (or "
                "`ddm up`).",
            )
        if not any(w.role == "router" for w in live.values()):
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


class MaybeQueuedError(SubmitError):
    """The publish failed in a way that leaves unknown whether the broker took the job (a connection
    lost mid-publish): the rate's token and the key's place are not given back, since a router may run
    it (the place frees itself if the job never appears: quota.py RESERVED_GRACE_S)."""


def _whole_spec(data: object) -> JobSpec | None:
    """{"spec": a JobSpec's JSON} (HttpClient.submit: any labels, in any order, as the broker's client
    sends them) -> the JobSpec, checked by the schema, under a fresh job id; None for the page's form."""
    if not isinstance(data, dict) or "spec" not in data:
        return None
    if set(data) != {"spec"}:
        raise SubmitError("bad_input", f"a whole spec comes alone: expected only 'spec', got {sorted(data)}")
    try:
        spec = JobSpec.from_dict(data["spec"])
        spec.validate()
    except SchemaError as exc:
        raise SubmitError("bad_input", f"spec: {exc}") from None
    named = [field for field in NOT_OVER_HTTP if getattr(spec, field) is not None]
    if named:
        why = (
            "the router would POST to a URL a user of the web UI named, or start from a noise it never stored"
        )
        raise SubmitError("bad_input", f"spec: {named} cannot be set through the web UI ({why})")
    # a fresh id, as the form's jobs get: an id the user chose could say whether another's job exists
    return JobSpec.new(spec.labels, **job_options(spec))


# JobSpec fields a web user may not set: a webhook (the router would fetch any URL from its own network)
# and a given initial noise (stored only by the broker client beside the job: Client.submit init_noise)
NOT_OVER_HTTP = ("notify", "init_noise")
