"""The client side of the pipeline: submit jobs, read their status, follow their frames, fetch results.

    from ddm.client import Client

    with Client() as c:                                   # DDM_AMQP_URL / DDM_REDIS_URL / DDM_PREFIX
        print(c.deployment().strategies)                  # what the serving router accepts
        job = c.submit(JobSpec.new([7] * 4, steps=50))    # strategy, guidance: the deployment's defaults
        for frame in c.frames(job):                       # replays stored steps, then follows live
            print(frame.step, frame.experts)
        x = c.result(job, timeout=60)                     # float32 [4, 1, 32, 32]

The client needs no deployment file: it validates against the descriptor the serving router publishes
(Client.deployment). It writes only at submit time: it creates the job hash (status queued) and
publishes the JobSpec to ddm.jobs. Everything after that is written by the router worker, which records
the strategy and guidance it resolved; the records are schema/jobs.py, the layout docs/PROTOCOL.md.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator

import numpy as np

from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import DDMError, SchemaError, ServiceUnavailableError, expected
from ddm.schema.jobs import JobHash, decode_result, decode_traj_entry, queued_fields
from ddm.schema.messages import Frame, JobSpec, JobStatus
from ddm.schema.names import check_job_id
from ddm.schema.settings import Settings
from ddm.schema.topology import CONTENT_TYPE
from ddm.workers.redis_conn import REDIS_CONNECTION_ERRORS, connect_redis, unavailable

POLL_S = 0.5  # longest XREAD BLOCK before the job hash is looked at again (failure, expiry)
REDIS_OUTAGE_S = 120.0  # how long following a job rides out a Redis that does not answer


class JobNotFoundError(DDMError, LookupError):
    """No job hash under this id (never submitted with this prefix, or expired after job_ttl_s)."""


class JobFailedError(DDMError, RuntimeError):
    """The job ended with status failed; `error` is the router's reason."""

    def __init__(self, job_id: str, error: str):
        super().__init__(f"job {job_id} failed: {error or '(no error text stored)'}")
        self.job_id = job_id
        self.error = error


class JobTimeoutError(DDMError, TimeoutError):
    """A wait on a job ran past its timeout."""


class NoDeploymentError(ServiceUnavailableError):
    """No router has published a deployment descriptor under this prefix (none is serving, or the last
    one stopped more than heartbeat_ttl_s ago)."""


def _redis_errors(fn):
    """Turn a lost Redis connection inside a Client method into ServiceUnavailableError."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except REDIS_CONNECTION_ERRORS as exc:
            raise unavailable(self.settings.redis_url, exc) from None

    return wrapper


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class _Outage:
    """Rides out a Redis outage while a job is followed (wait, frames): retry with bounded backoff;
    give up after REDIS_OUTAGE_S, or at the caller's deadline, with ServiceUnavailableError."""

    def __init__(self, url: str, deadline: float | None):
        self.url, self.deadline = url, deadline
        self.since: float | None = None
        self.delay = 0.1

    def wait(self, exc: Exception) -> None:
        now = time.monotonic()
        self.since = now if self.since is None else self.since
        if now - self.since > REDIS_OUTAGE_S or (self.deadline is not None and now >= self.deadline):
            raise unavailable(self.url, exc) from None
        time.sleep(self.delay)
        self.delay = min(2.0, self.delay * 2)

    def clear(self) -> None:
        self.since, self.delay = None, 0.1


OUTAGE_ERRORS = (ServiceUnavailableError, *REDIS_CONNECTION_ERRORS)


def _poll_s(deadline: float | None, timed_out: Callable[[], str]) -> float:
    """How long the next blocking read may wait: POLL_S, or less when the deadline is nearer;
    JobTimeoutError(timed_out()) once it has passed."""
    left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
    if left <= 0:
        raise JobTimeoutError(timed_out())
    return left


def read_stream(r, stream: str, last_id: bytes, *, count: int, block_ms: int | None) -> list:
    """[(entry id, fields), ...] after `last_id` (XREAD, blocking up to block_ms when given)."""
    reply = r.xread({stream: last_id}, count=count, block=block_ms)
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3
        return next(iter(reply.values()))[0]
    return reply[0][1]  # RESP2: [[stream, [(id, fields), ...]]]


class Client:
    """Submit jobs to RabbitMQ and read them back from Redis.

    Arguments default to Settings.from_env() (DDM_AMQP_URL, DDM_REDIS_URL, DDM_PREFIX). Connections
    open lazily: status/frames/result need only Redis, submit needs both. Not thread-safe for submit
    (one pika connection); use one Client per thread.
    """

    def __init__(
        self,
        amqp_url: str | None = None,
        redis_url: str | None = None,
        prefix: str | None = None,
        *,
        settings: Settings | None = None,
    ):
        import dataclasses

        base = settings or Settings.from_env()
        overrides = {
            k: v
            for k, v in (("amqp_url", amqp_url), ("redis_url", redis_url), ("prefix", prefix))
            if v is not None
        }
        self.settings = dataclasses.replace(base, **overrides) if overrides else base
        self.names = self.settings.names
        self._redis = None
        self._amqp = None
        self._channel = None

    # ------------------------------------------------------------ connections

    @property
    def redis(self):
        """The redis.Redis connection (bytes in and out), opened on first use."""
        if self._redis is None:
            self._redis = connect_redis(self.settings.redis_url)
        return self._redis

    def _open_channel(self):
        from ddm.workers.amqp import connect, declare_topology

        self._close_amqp()
        self._amqp = connect(self.settings.amqp_url)
        channel = self._amqp.channel()
        channel.confirm_delivery()  # basic_publish returns only once the broker has the message
        declare_topology(channel, self.names, queue_type=self.settings.queue_type)
        self._channel = channel
        return channel

    def _close_amqp(self) -> None:
        if self._amqp is not None:
            with contextlib.suppress(Exception):
                self._amqp.close()
        self._amqp = self._channel = None

    def close(self) -> None:
        self._close_amqp()
        if self._redis is not None:
            with contextlib.suppress(Exception):
                self._redis.close()
            self._redis = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ submit

    @_redis_errors
    def deployment(self) -> DeploymentDescriptor:
        """The descriptor the serving router published: what a job on this prefix means (strategies,
        default strategy and guidance, labels, class names). NoDeploymentError when no router serves."""
        data = self.redis.get(self.names.deployment)
        if data is None:
            raise NoDeploymentError(
                f"no router is serving under prefix {self.names.prefix!r} (no deployment descriptor at "
                f"{self.names.deployment}): start one (`ddm up` / `ddm worker router`)"
            )
        return DeploymentDescriptor.decode(data)

    @_redis_errors
    def submit(self, spec: JobSpec, *, check: bool = True) -> str:
        """Validate `spec`, create its job hash (status queued) and queue it on ddm.jobs. Returns the job id.

        Validation happens before anything is written: the JobSpec rules (steps 1..1000, 1..64 labels in
        0..9, strategy syntax, guidance 0..20) and, with check (the default), the live deployment's
        (DeploymentDescriptor.check: a strategy it routes, labels some expert was trained on); no router
        serving raises NoDeploymentError. A strategy or guidance left None gets the deployment's default,
        resolved by the router. A job id that already exists is refused.
        """
        if not isinstance(spec, JobSpec):
            raise SchemaError(expected("a JobSpec", type(spec).__name__))
        spec.validate()
        if check:
            self.deployment().check(spec)
        body = spec.encode(max_bytes=self.settings.max_message_bytes)
        key = self.names.job(spec.job_id)
        now = time.time()

        def create(pipe) -> None:  # atomic: refuse an existing id, else write the hash and index it
            if pipe.exists(key):
                raise SchemaError(f"job {spec.job_id} already exists in Redis ({key}); submit a new job id")
            pipe.multi()
            pipe.hset(key, mapping=queued_fields(spec, now))
            pipe.zadd(self.names.jobs_index, {spec.job_id: now})

        self.redis.transaction(create, key)
        try:
            self._publish(spec.job_id, body)
        except BaseException:
            # nothing was queued: leave no queued-forever hash behind
            self.redis.delete(key)
            self.redis.zrem(self.names.jobs_index, spec.job_id)
            raise
        return spec.job_id

    def _publish(self, job_id: str, body: bytes) -> None:
        import pika

        from ddm.workers.amqp import CONNECTION_ERRORS

        props = pika.BasicProperties(
            content_type=CONTENT_TYPE,
            delivery_mode=2,  # persistent: survives a broker restart in the durable queue
            correlation_id=job_id,
            message_id=job_id,
            type=JobSpec.TYPE,
            timestamp=int(time.time()),
        )
        for attempt in (1, 2):
            channel = self._channel
            try:
                if channel is None or not channel.is_open or not self._amqp.is_open:
                    channel = self._open_channel()
                channel.basic_publish("", self.names.jobs, body, properties=props, mandatory=True)
                return
            except (pika.exceptions.UnroutableError, pika.exceptions.NackError) as exc:
                raise DDMError(f"broker refused job {job_id} on {self.names.jobs}: {exc!r}") from None
            except CONNECTION_ERRORS:
                # a cached connection can die while idle (heartbeat missed, broker restart): reopen once
                self._close_amqp()
                if attempt == 2:
                    raise

    # ------------------------------------------------------------ read

    @_redis_errors
    def status(self, job_id: str) -> JobHash:
        """The job hash, typed (schema/jobs.py JobHash). Raises JobNotFoundError for an unknown job."""
        check_job_id(job_id)
        raw = self.redis.hgetall(self.names.job(job_id))
        if not raw:
            raise JobNotFoundError(
                f"no job {job_id} in Redis at {self.names.job(job_id)} (prefix {self.names.prefix!r}): "
                f"never submitted there, or expired after job_ttl_s={self.settings.job_ttl_s}"
            )
        return JobHash.decode(job_id, raw)

    @_redis_errors
    def recent(self, limit: int = 10) -> list[tuple[str, JobHash | None]]:
        """(job id, job hash) of the newest `limit` jobs of the jobs index, newest first; None for an
        expired one."""
        ids = [_text(i) for i in self.redis.zrevrange(self.names.jobs_index, 0, max(0, limit - 1))]
        pipe = self.redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(self.names.job(job_id))
        rows = zip(ids, pipe.execute(), strict=True)
        return [(job_id, JobHash.decode(job_id, raw) if raw else None) for job_id, raw in rows]

    def frames(self, job_id: str, follow: bool = True, timeout: float | None = None) -> Iterator[Frame]:
        """Frames of a job in step order: every stored one from the start, then (follow) new ones live.

        Stops after the frame with step == steps, or once the job is done/failed and its stream is
        drained (a failed job simply ends; `result` or `status` tell why). A step already yielded is not
        yielded again (a resumed router may rewrite the step it resumed at). With follow=False, yields
        what is stored and returns. Raises JobTimeoutError after `timeout` seconds in total.
        """
        check_job_id(job_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            yield from self._frames(job_id, follow, deadline, timeout)
        except REDIS_CONNECTION_ERRORS as exc:
            raise unavailable(self.settings.redis_url, exc) from None

    def _frames(self, job_id: str, follow: bool, deadline: float | None, timeout: float | None):
        steps = self.status(job_id).steps
        stream = self.names.traj(job_id)
        last_id, last_step = b"0-0", 0
        outage = _Outage(self.settings.redis_url, deadline)
        while True:
            try:
                entries = self._next_entries(
                    job_id, stream, last_id, last_step, steps, follow, deadline, timeout
                )
            except OUTAGE_ERRORS as exc:
                outage.wait(exc)
                continue
            outage.clear()
            if entries is None:
                return
            for entry_id, fields in entries:
                last_id = entry_id
                frame = self._decode_frame(job_id, fields)
                if frame.step <= last_step:
                    continue
                last_step = frame.step
                yield frame
                if frame.step >= steps:
                    return

    def _next_entries(self, job_id, stream, last_id, last_step, steps, follow, deadline, timeout):
        """The stream entries after last_id, waiting for some when following; None when there are no
        more (not following, or the job ended and its stream is drained)."""
        entries = self._xread(stream, last_id, block_s=None)
        if entries:
            return entries
        if not follow:
            return None
        st = self.status(job_id)
        if st.status.terminal:
            return self._xread(stream, last_id, block_s=None) or None  # frames precede the status
        left = _poll_s(
            deadline,
            lambda: (
                f"job {job_id}: no frame after step {last_step}/{steps} "
                f"within {timeout} s (status {st.status.value}; is a router worker running?)"
            ),
        )
        return self._xread(stream, last_id, block_s=left)

    def _xread(self, stream: str, last_id: bytes, block_s: float | None) -> list:
        block = None if block_s is None else max(1, int(block_s * 1000))
        return read_stream(self.redis, stream, last_id, count=256, block_ms=block)

    def _decode_frame(self, job_id: str, fields: dict) -> Frame:
        return decode_traj_entry(job_id, fields, max_bytes=self.settings.max_message_bytes)

    @_redis_errors
    def wait(self, job_id: str, timeout: float | None = None) -> JobHash:
        """Block until the job is done or failed; returns its job hash (does not raise on failed).

        Wakes on every new frame (XREAD BLOCK on the stream), so it returns right after the last step.
        """
        check_job_id(job_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        stream = self.names.traj(job_id)
        last_id = b"$"  # only frames after now: they are wake-ups, not data
        outage = _Outage(self.settings.redis_url, deadline)
        while True:
            try:
                st = self.status(job_id)
                if st.status.terminal:
                    return st
                left = _poll_s(
                    deadline,
                    lambda st=st: (
                        f"job {job_id} not finished after {timeout} s: status {st.status.value}, "
                        f"step {st.step}/{st.steps} (is a router worker running? `ddm up`)"
                    ),
                )
                entries = self._xread(stream, last_id, block_s=left)
            except OUTAGE_ERRORS as exc:
                outage.wait(exc)
                continue
            outage.clear()
            if entries:
                last_id = entries[-1][0]

    @_redis_errors
    def result(self, job_id: str, timeout: float | None = None) -> np.ndarray:
        """Wait for the job and return its final latents float32 [n, 1, 32, 32] (about [-1, 1]).

        Raises JobFailedError (with the router's error text), JobTimeoutError or JobNotFoundError.
        """
        st = self.wait(job_id, timeout)
        if st.status is JobStatus.FAILED:
            raise JobFailedError(job_id, st.error or "")
        data = self.redis.get(self.names.result(job_id))
        if data is None:
            raise JobNotFoundError(
                f"job {job_id} is done but {self.names.result(job_id)} is gone (expired after "
                f"job_ttl_s={self.settings.job_ttl_s}?)"
            )
        return decode_result(job_id, data, st.n, max_bytes=self.settings.max_message_bytes)


__all__ = [
    "Client",
    "JobFailedError",
    "JobNotFoundError",
    "JobTimeoutError",
    "NoDeploymentError",
]
