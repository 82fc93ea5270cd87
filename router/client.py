"""The client side of the pipeline: submit jobs, read their status, follow their frames, fetch results.

    from ddm.client import Client

    with Client() as c:                                   # DDM_AMQP_URL / DDM_REDIS_URL / DDM_PREFIX
        job = c.submit(JobSpec.new([7] * 4, steps=50, strategy="top1"))
        for frame in c.frames(job):                       # replays stored steps, then follows live
            print(frame.step, frame.experts)
        x = c.result(job, timeout=60)                     # float32 [4, 1, 32, 32]

The client writes only at submit time: it creates the job hash (status queued) and publishes the JobSpec
to ddm.jobs. Everything after that is written by the router worker; the Redis layout is in
docs/PROTOCOL.md ("Redis layout").
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ddm.router.store import FRAME_FIELD
from ddm.schema.codec import unpackb
from ddm.schema.deployment import DEFAULT_DEPLOYMENT, Deployment
from ddm.schema.errors import DDMError, SchemaError, expected
from ddm.schema.flow import IMAGE_SHAPE, NUM_CLASSES
from ddm.schema.messages import Frame, JobSpec, JobStatus
from ddm.schema.names import check_job_id
from ddm.schema.settings import Settings
from ddm.schema.topology import CONTENT_TYPE
from ddm.workers.redis_conn import REDIS_CONNECTION_ERRORS, connect_redis, unavailable

# The shipped deployment, relative to the working directory (the same default as `ddm sample`).

# Job hash fields (all stored as strings) and how the client reads them back.
INT_FIELDS = ("step", "steps", "n", "resumed_from", "attempts")
FLOAT_FIELDS = ("created_at", "started_at", "updated_at", "finished_at", "mean_step_ms")
POLL_S = 0.5  # longest XREAD BLOCK before the job hash is looked at again (failure, expiry)


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


def _redis_errors(fn):
    """Turn a lost Redis connection inside a Client method into ServiceUnavailableError."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except REDIS_CONNECTION_ERRORS as exc:
            raise unavailable(self.settings.redis_url, exc) from None

    return wrapper


def check_against_deployment(spec: JobSpec, deployment: str | Path | Deployment) -> Deployment:
    """Refuse a spec the deployment cannot serve: strategy, experts present, labels some expert knows.

    Reads each expert's meta.json only (no weights are loaded). Raises SchemaError or ConfigError.
    """
    from ddm.router.deployment_loader import expert_label_counts, load_policy
    from ddm.router.policies import LabelTableRouter, RoutingPolicy, oracle_table

    dep = deployment if isinstance(deployment, Deployment) else Deployment.load(deployment)
    where = f"deployment {dep.name!r} ({dep.path})"
    counts = expert_label_counts(dep)  # [K, 10]; fails if an expert's checkpoint or meta is missing
    known = sorted(int(y) for y in np.flatnonzero(counts.sum(axis=0) > 0))
    unknown = sorted({y for y in spec.labels if y not in known})
    if unknown:
        raise SchemaError(
            f"{where}: " + expected(f"labels some expert was trained on {known}", f"labels {unknown}")
        )
    if dep.router.kind == "learned":
        # Which strategies it can route needs no network: a stand-in router over the same K experts.
        table = oracle_table(counts)
        policy = RoutingPolicy(
            router=LabelTableRouter(np.zeros((NUM_CLASSES + 1, dep.num_experts), np.float32)),
            oracle=LabelTableRouter(table) if table is not None else None,
        )
    else:
        policy = load_policy(dep)
    try:
        policy.check_strategy(spec.strategy)  # the same check the router worker makes
    except SchemaError as exc:
        raise SchemaError(f"{where}: {exc}") from None
    return dep


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def decode_job_hash(job_id: str, raw: dict) -> dict[str, Any]:
    """The job hash as stored (bytes -> bytes) -> a dict with typed values.

    status -> JobStatus; INT_FIELDS -> int; FLOAT_FIELDS -> float; spec -> dict (JobSpec.to_dict());
    an empty string means "not set yet" and becomes None; other fields stay str. Adds "job_id".
    """
    out: dict[str, Any] = {"job_id": job_id}
    for k, v in raw.items():
        key, text = _text(k), _text(v)
        if key in INT_FIELDS or key in FLOAT_FIELDS:
            if text == "":
                out[key] = None
                continue
            try:
                out[key] = int(text) if key in INT_FIELDS else float(text)
            except ValueError:
                raise SchemaError(f"job {job_id} hash field {key}: {expected('a number', text)}") from None
        elif key == "status":
            try:
                out[key] = JobStatus(text)
            except ValueError:
                raise SchemaError(
                    f"job {job_id}: " + expected(f"status in {[s.value for s in JobStatus]}", text)
                ) from None
        elif key == "spec":
            out[key] = JobSpec.from_json(text).to_dict()
        else:
            out[key] = text
    if "status" not in out:
        raise SchemaError(f"job {job_id}: hash without a status field (fields {sorted(out)})")
    return out


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
        declare_topology(channel, self.names)
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
    def submit(
        self,
        spec: JobSpec,
        deployment: str | Path | Deployment | None = None,
        *,
        check_deployment: bool = True,
    ) -> str:
        """Validate `spec`, create its job hash (status queued) and queue it on ddm.jobs. Returns the job id.

        Validation happens before anything is written: the JobSpec rules (steps 1..1000, 1..64 labels in
        0..9, strategy syntax, guidance 0..20) and, when `deployment` is given or the shipped default
        exists, that the deployment supports the strategy, has every expert's checkpoint and knows every
        label. A job id that already exists is refused.
        """
        if not isinstance(spec, JobSpec):
            raise SchemaError(expected("a JobSpec", type(spec).__name__))
        spec.validate()
        if check_deployment:
            if deployment is None and self.settings.deployment:
                deployment = Path(self.settings.deployment)  # $DDM_DEPLOYMENT, as the workers use
            elif deployment is None and DEFAULT_DEPLOYMENT.is_file():
                deployment = DEFAULT_DEPLOYMENT
            if deployment is not None:
                check_against_deployment(spec, deployment)
        body = spec.encode(max_bytes=self.settings.max_message_bytes)
        key = self.names.job(spec.job_id)
        r = self.redis
        now = f"{time.time():.6f}"
        if not r.hsetnx(key, "spec", spec.to_json()):
            raise SchemaError(f"job {spec.job_id} already exists in Redis ({key}); submit a new job id")
        pipe = r.pipeline(transaction=True)
        pipe.hset(
            key,
            mapping={
                "status": JobStatus.QUEUED.value,
                "step": "0",
                "steps": str(spec.steps),
                "n": str(spec.n),
                "strategy": spec.strategy,
                "created_at": now,
                "updated_at": now,
            },
        )
        pipe.zadd(self.names.jobs_index, {spec.job_id: float(now)})
        pipe.execute()
        try:
            self._publish(spec.job_id, body)
        except BaseException:
            # nothing was queued: leave no queued-forever hash behind
            r.delete(key)
            r.zrem(self.names.jobs_index, spec.job_id)
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
            type="job_spec",
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
    def status(self, job_id: str) -> dict[str, Any]:
        """The job hash, typed (see decode_job_hash). Raises JobNotFoundError for an unknown job."""
        check_job_id(job_id)
        raw = self.redis.hgetall(self.names.job(job_id))
        if not raw:
            raise JobNotFoundError(
                f"no job {job_id} in Redis at {self.names.job(job_id)} (prefix {self.names.prefix!r}): "
                f"never submitted there, or expired after job_ttl_s={self.settings.job_ttl_s}"
            )
        return decode_job_hash(job_id, raw)

    @_redis_errors
    def recent(self, limit: int = 10) -> list[dict[str, Any]]:
        """The newest `limit` jobs of the jobs index, newest first; expired ones have status None."""
        ids = [_text(i) for i in self.redis.zrevrange(self.names.jobs_index, 0, max(0, limit - 1))]
        pipe = self.redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(self.names.job(job_id))
        out = []
        for job_id, raw in zip(ids, pipe.execute(), strict=True):
            out.append(decode_job_hash(job_id, raw) if raw else {"job_id": job_id, "status": None})
        return out

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
        steps = self.status(job_id)["steps"]
        stream = self.names.traj(job_id)
        last_id, last_step = b"0-0", 0
        while True:
            entries = self._xread(stream, last_id, block_s=None)
            if not entries:
                if not follow:
                    return
                st = self.status(job_id)
                if st["status"].terminal:
                    entries = self._xread(stream, last_id, block_s=None)  # frames precede the status
                    if not entries:
                        return
                else:
                    left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
                    if left <= 0:
                        raise JobTimeoutError(
                            f"job {job_id}: no frame after step {last_step}/{steps} within {timeout} s "
                            f"(status {st['status'].value}; is a router worker running?)"
                        )
                    entries = self._xread(stream, last_id, block_s=left)
            for entry_id, fields in entries:
                last_id = entry_id
                frame = self._decode_frame(job_id, fields)
                if frame.step <= last_step:
                    continue
                last_step = frame.step
                yield frame
                if frame.step >= steps:
                    return

    def _xread(self, stream: str, last_id: bytes, block_s: float | None) -> list:
        block = None if block_s is None else max(1, int(block_s * 1000))
        reply = self.redis.xread({stream: last_id}, count=256, block=block)
        if not reply:
            return []
        if isinstance(reply, dict):  # RESP3
            return next(iter(reply.values()))[0]
        return reply[0][1]  # RESP2: [[stream, [(id, fields), ...]]]

    def _decode_frame(self, job_id: str, fields: dict) -> Frame:
        data = fields.get(FRAME_FIELD)
        if data is None:
            raise SchemaError(
                f"job {job_id}: " + expected("trajectory entries with one field 'frame'", sorted(fields))
            )
        frame = Frame.decode(data, max_bytes=self.settings.max_message_bytes)
        if frame.job_id != job_id:
            raise SchemaError(f"stream of job {job_id}: " + expected(f"frame.job_id {job_id}", frame.job_id))
        return frame

    @_redis_errors
    def wait(self, job_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the job is done or failed; returns its status dict (does not raise on failed).

        Wakes on every new frame (XREAD BLOCK on the stream), so it returns right after the last step.
        """
        check_job_id(job_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        stream = self.names.traj(job_id)
        last_id = b"$"  # only frames after now: they are wake-ups, not data
        while True:
            st = self.status(job_id)
            if st["status"].terminal:
                return st
            left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
            if left <= 0:
                raise JobTimeoutError(
                    f"job {job_id} not finished after {timeout} s: status {st['status'].value}, "
                    f"step {st.get('step')}/{st.get('steps')} (is a router worker running? `ddm up`)"
                )
            entries = self._xread(stream, last_id, block_s=left)
            if entries:
                last_id = entries[-1][0]

    @_redis_errors
    def result(self, job_id: str, timeout: float | None = None) -> np.ndarray:
        """Wait for the job and return its final latents float32 [n, 1, 32, 32] (about [-1, 1]).

        Raises JobFailedError (with the router's error text), JobTimeoutError or JobNotFoundError.
        """
        st = self.wait(job_id, timeout)
        if st["status"] is JobStatus.FAILED:
            raise JobFailedError(job_id, st.get("error") or "")
        data = self.redis.get(self.names.result(job_id))
        if data is None:
            raise JobNotFoundError(
                f"job {job_id} is done but {self.names.result(job_id)} is gone (expired after "
                f"job_ttl_s={self.settings.job_ttl_s}?)"
            )
        x = unpackb(data, max_bytes=self.settings.max_message_bytes)
        n = st.get("n")
        want = (n, *IMAGE_SHAPE)
        if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.shape != want:
            got = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
            raise SchemaError(f"job {job_id} result: " + expected(f"float32 array {list(want)}", got))
        return x


__all__ = [
    "DEFAULT_DEPLOYMENT",
    "Client",
    "JobFailedError",
    "JobNotFoundError",
    "JobTimeoutError",
    "check_against_deployment",
    "decode_job_hash",
]
