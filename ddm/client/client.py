"""The client side of the pipeline: submit jobs, read their status, follow their frames, fetch results.

    from ddm.client import Client, JobSpec

    with Client() as c:                                   # DDM_AMQP_URL / DDM_REDIS_URL / DDM_PREFIX
        print(c.deployment().strategies)                  # what the serving router accepts
        x = c.generate([3, 8], n=2, timeout=120)          # one call: float32 [4, C, H, W] (1x32x32: MNIST)
        job = c.submit(JobSpec.new([7] * 4, steps=50))    # strategy, guidance: the deployment's defaults
        for frame in c.frames(job):                       # replays stored steps, then follows live
            print(frame.step, frame.experts)
        x = c.result(job, timeout=60)                     # float32 [4, C, H, W]
        c.cancel(job)                                     # a job still running stops at its next step

The client needs no deployment file: it validates against the descriptor the serving router publishes
(Client.deployment). It writes only at submit time (the job hash, status queued, and the JobSpec on
ddm.jobs, with its place in the queue: schema/queue.py) and to cancel (the request; a job no router has
taken yet it ends at once). Everything else is
written by the router worker, which records the strategy and guidance it resolved; the records are
schema/jobs.py, the layout docs/PROTOCOL.md. Following a job (frames, wait) is ddm/client/following.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import warnings
from collections.abc import Sequence

import numpy as np

from ddm.client.broker import BrokerLink, consumer_count, open_confirm_channel
from ddm.client.errors import (
    DecoderUnavailableError,
    DegradedResultWarning,
    ExpertUnavailableError,
    JobCancelledError,
    JobDegradedError,
    JobFailedError,
    JobNotFoundError,
    NoDeploymentError,
    TextEncoderUnavailableError,
)
from ddm.client.following import JobFollowing, read_stream
from ddm.client.generation import generation_spec
from ddm.client.listing import JobListing, redis_errors
from ddm.client.queue import QueueReading
from ddm.runtime.redis_conn import connect_redis
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import DDMError, SchemaError, expected
from ddm.schema.init_noise import check_init_noise, noise_digest
from ddm.schema.jobs import (
    DEADLINE_FIELD,
    JobHash,
    cancel_fields,
    cancelled_fields,
    decode_result,
    degraded_text,
    encode_result,
    queued_fields,
    stamp,
)
from ddm.schema.messages import JobSpec, JobStatus
from ddm.schema.names import check_job_id
from ddm.schema.queue import queue_score
from ddm.schema.settings import Settings
from ddm.schema.topology import CONTENT_TYPE, check_job_priority

ON_DEGRADED = ("warn", "raise", "ignore")  # Client.result(on_degraded=...)


class Client(JobFollowing, JobListing, QueueReading):
    """Submit jobs to RabbitMQ and read them back from Redis.

    Arguments default to Settings.from_env() (DDM_AMQP_URL, DDM_REDIS_URL, DDM_PREFIX). Connections
    open lazily: status/frames/result need only Redis, submit needs both. Not thread-safe for submit
    (one pika connection, reopened after the broker drops it: ddm/client/broker.py); use one Client per
    thread.
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
        self._broker = BrokerLink(lambda: open_confirm_channel(self.settings))

    # ------------------------------------------------------------ connections

    @property
    def redis(self):
        """The redis.Redis connection (bytes in and out), opened on first use."""
        if self._redis is None:
            self._redis = connect_redis(self.settings.redis_url)
        return self._redis

    def close(self) -> None:
        self._broker.close()
        if self._redis is not None:
            with contextlib.suppress(Exception):
                self._redis.close()
            self._redis = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ submit

    @redis_errors
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

    def _refuse_unserved(self, spec: JobSpec, descriptor: DeploymentDescriptor) -> None:
        """Refuse a job that a worker nobody runs would have to serve: an expert it needs
        (DeploymentDescriptor.unserved says which), or a latent deployment's decoder, which turns every
        job's last latents into its pixels, or a text deployment's text encoder. A worker is live when
        its queue has a consumer: the router's own test."""
        experts, _ = descriptor.experts_needed(spec)
        live = {k for k in experts if self._consumers(self.names.expert_queue(k))}
        unserved = descriptor.unserved(spec, live)
        decoder_down = descriptor.decoder is not None and not self._consumers(self.names.decoder_queue)
        encoder_down = descriptor.conditioning.kind == "text" and not self._consumers(self.names.text_queue)
        needs = []
        if unserved:
            queues = ", ".join(self.names.expert_queue(k) for k in unserved)
            needs.append(
                f"expert(s) {unserved} and no worker serves {queues}: start one "
                f"(`ddm worker expert --deployment D --expert {unserved[0]}`, D the deployment file of "
                f"{descriptor.name!r})"
            )
        if decoder_down:
            needs.append(
                f"the deployment's decoder (its latents become pixels there) and no worker serves "
                f"{self.names.decoder_queue}: start one (`ddm worker decoder --deployment D`)"
            )
        if encoder_down:
            needs.append(
                f"the deployment's text encoder (its prompt becomes embeddings there) and no worker serves "
                f"{self.names.text_queue}: start one (`ddm worker text-encoder --deployment D`)"
            )
        if needs:
            error = (
                ExpertUnavailableError
                if unserved
                else DecoderUnavailableError
                if decoder_down
                else TextEncoderUnavailableError
            )
            raise error(
                f"job {spec.job_id} needs "
                + "; it also needs ".join(needs)
                + ". Or queue it anyway (--queue-anyway) and it runs once a worker is up"
            )

    def _consumers(self, queue: str) -> int:
        """Consumers on `queue` now (0 when nobody declared it yet): the broker's own count."""
        return self._broker.run(f"count the consumers of {queue}", lambda ch: consumer_count(ch, queue))

    @redis_errors
    def submit(
        self,
        spec: JobSpec,
        *,
        check: bool = True,
        queue_anyway: bool = False,
        priority: int | None = None,
        deadline_s: float | None = None,
        init_noise: np.ndarray | None = None,
    ) -> str:
        """Validate `spec`, create its job hash (status queued) and queue it on ddm.jobs. Returns the job id.

        Validation happens before anything is written: the JobSpec rules (steps 1..1000, 1..64 labels,
        strategy syntax, guidance 0..20) and, with check (the default), the live deployment's
        (DeploymentDescriptor.check: labels in its sample space, 0..K-1 or None for an unconditional
        image, K itself refused (K = 10 for MNIST); a strategy it routes, labels some expert was trained on,
        no unconditional image under 'oracle'); no router serving raises
        NoDeploymentError. Unless queue_anyway, a job that a worker nobody runs would serve is refused
        too: ExpertUnavailableError (an expert it needs), DecoderUnavailableError (a latent deployment's
        decoder). A strategy or guidance left None gets the deployment's default, resolved by
        the router. A job id that already exists is refused.

        A broker connection dropped while the client sat idle is reopened and the call run again
        (a job published twice runs once); one that fails again raises ServiceUnavailableError.

        priority: 0..9 (schema/topology.py JOB_MAX_PRIORITY), the job message's AMQP priority: routers
        take queued jobs of a higher priority first (None: 0, the lowest). A quorum ddm.jobs on
        RabbitMQ 3.x ignores it (docs/PROTOCOL.md section 2).

        deadline_s: seconds from now (Redis's clock) for the job to be done; a router that sees it
        unfinished past then cancels it, with "deadline passed" in its error: when it takes the job from
        the queue, or at its next stored step (a job waiting for an expert is failed by the expert-loss
        grace instead). None: no deadline.

        init_noise: float [n, C, H, W] of the serving sample space, the noise the job starts from instead
        of its seed's (schema/init_noise.py): stored beside the job, its digest recorded as the submitted
        spec's init_noise (`status(job).spec` shows it).
        """
        _check_submission(spec, priority, deadline_s)
        spec, noise = self._checked(spec, check, queue_anyway, init_noise)
        body = spec.encode(max_bytes=self.settings.max_message_bytes)
        key = self.names.job(spec.job_id)
        now = time.time()

        def create(pipe) -> None:  # atomic: refuse an existing id, else write the hash and index it
            if pipe.exists(key):
                raise SchemaError(f"job {spec.job_id} already exists in Redis ({key}); submit a new job id")
            fields = queued_fields(spec, now)
            if priority is not None:
                fields["priority"] = str(priority)
            # its place in the queue: Redis's counter, so clients on other hosts agree on first-in order
            score = queue_score(priority, pipe.incr(self.names.queue_seq))
            if deadline_s is not None:
                sec, usec = pipe.time()  # the clock every router compares it with
                fields[DEADLINE_FIELD] = stamp(sec + usec / 1e6 + deadline_s)
            pipe.multi()
            pipe.hset(key, mapping=fields)
            # a job no router starts (this client dies before the publish, its message is lost) leaves no
            # hash, and so no queue entry, forever: the router lifts this expiry when it starts the job
            pipe.expire(key, self.settings.queued_ttl_s)
            pipe.zadd(self.names.jobs_index, {spec.job_id: now})
            pipe.zadd(self.names.queue, {spec.job_id: score})  # before the publish: a router removes it
            if noise is not None:  # kept as long as the job may still start or restart from it
                ttl = self.settings.queued_ttl_s + self.settings.job_ttl_s
                pipe.set(self.names.init_noise(spec.job_id), encode_result(noise), ex=ttl)

        self.redis.transaction(create, key)
        try:
            self._publish(spec.job_id, body, priority)
        except BaseException:
            # nothing was queued: leave no queued-forever hash behind
            self.redis.delete(key, self.names.init_noise(spec.job_id))
            self.redis.zrem(self.names.jobs_index, spec.job_id)
            self.redis.zrem(self.names.queue, spec.job_id)
            raise
        return spec.job_id

    def _checked(
        self, spec: JobSpec, check: bool, queue_anyway: bool, init_noise: np.ndarray | None
    ) -> tuple[JobSpec, np.ndarray | None]:
        """submit's checks against the serving deployment; the spec naming its initial noise, and the
        noise as stored (None: the seed's)."""
        descriptor = self.deployment() if check or init_noise is not None else None
        if check:
            descriptor.check(spec)
            if not queue_anyway:
                self._refuse_unserved(spec, descriptor)
        if init_noise is None:
            if spec.init_noise is not None:  # it could only fail at the router
                raise SchemaError(f"job {spec.job_id} names an initial noise: pass it (init_noise=...)")
            return spec, None
        noise = check_init_noise(init_noise, spec.n, descriptor.sample_space)
        digest = noise_digest(noise)
        if spec.init_noise not in (None, digest):
            raise SchemaError(f"job {spec.job_id} names another initial noise than the one passed")
        return dataclasses.replace(spec, init_noise=digest), noise

    def _publish(self, job_id: str, body: bytes, priority: int | None = None) -> None:
        import pika

        props = pika.BasicProperties(
            content_type=CONTENT_TYPE,
            delivery_mode=2,  # persistent: survives a broker restart in the durable queue
            correlation_id=job_id,
            message_id=job_id,
            type=JobSpec.TYPE,
            timestamp=int(time.time()),
            priority=priority,
        )

        def publish(channel) -> None:  # confirmed: returns once the broker has the message
            try:
                channel.basic_publish("", self.names.jobs, body, properties=props, mandatory=True)
            except (pika.exceptions.UnroutableError, pika.exceptions.NackError) as exc:
                raise DDMError(f"broker refused job {job_id} on {self.names.jobs}: {exc!r}") from None

        self._broker.run(f"publish job {job_id} on {self.names.jobs}", publish)

    # ------------------------------------------------------------ read

    @redis_errors
    def status(self, job_id: str) -> JobHash:
        """The job hash, typed (schema/jobs.py JobHash). Raises JobNotFoundError for an unknown job."""
        check_job_id(job_id)
        raw = self.redis.hgetall(self.names.job(job_id))
        if not raw:
            raise self._not_found(job_id)
        return JobHash.decode(job_id, raw)

    def _not_found(self, job_id: str) -> JobNotFoundError:
        return JobNotFoundError(
            f"no job {job_id} in Redis at {self.names.job(job_id)} (prefix {self.names.prefix!r}): "
            f"never submitted there, or expired after job_ttl_s={self.settings.job_ttl_s}"
        )

    @redis_errors
    def cancel(self, job_id: str) -> JobHash:
        """Ask the router to stop the job at its next step; returns the job hash after the request.

        A running job keeps status running with `cancel_requested_at` set until its router stores its
        next step and marks it cancelled (its frames are kept; `wait` returns then). A queued job that
        no router holds is cancelled at once (a router that takes its message later acks it unrun). A job
        that has already ended is left as it is. Raises JobNotFoundError for an unknown job.
        """
        check_job_id(job_id)
        key, lease = self.names.job(job_id), self.names.lease(job_id)

        def request(pipe) -> None:  # atomic against a router starting the job (WATCH key and lease)
            raw = pipe.hgetall(key)
            if not raw:
                raise self._not_found(job_id)
            status = JobHash.decode(job_id, raw).status
            if status.terminal:
                return
            untaken = status is JobStatus.QUEUED and not pipe.exists(lease)
            now = time.time()
            pipe.multi()
            pipe.hset(key, mapping=cancel_fields(now) | (cancelled_fields(now) if untaken else {}))
            if untaken:  # the end of the job: its hash expires like any ended job's, it leaves the queue
                pipe.expire(key, self.settings.job_ttl_s)
                pipe.zrem(self.names.queue, job_id)

        self.redis.transaction(request, key, lease)
        return self.status(job_id)

    @redis_errors
    def result(
        self, job_id: str, timeout: float | None = None, *, on_degraded: str = "warn", latent: bool = False
    ) -> np.ndarray:
        """Wait for the job and return its images float32 [n, C, H, W]: the final samples of the
        deployment's sample space (about its value range, [-1, 1] for MNIST's 1x32x32), or for a latent
        deployment (one with a decoder) the decoded pixels; latent=True: the final latents themselves.

        on_degraded: what a degraded result does (some steps ran without an expert that had no live
        worker, a job with on_expert_loss="degrade"): "warn" (a DegradedResultWarning naming the experts
        and steps), "raise" (JobDegradedError, the images in its `images`) or "ignore".
        Raises JobFailedError (with the router's error text), JobCancelledError, JobTimeoutError or
        JobNotFoundError.
        """
        if on_degraded not in ON_DEGRADED:
            raise SchemaError(expected(f"on_degraded in {list(ON_DEGRADED)}", on_degraded))
        st = self.wait(job_id, timeout)
        if st.status is JobStatus.FAILED:
            raise JobFailedError(job_id, st.error or "")
        if st.status is JobStatus.CANCELLED:
            raise JobCancelledError(job_id, st.step, st.steps, st.error)
        images = self.stored_result(st, latent=latent)
        if images is None:
            raise JobNotFoundError(
                f"job {job_id} is done but {self.names.result(job_id)} is gone (expired after "
                f"job_ttl_s={self.settings.job_ttl_s}?)"
            )
        if st.degraded and on_degraded == "raise":
            raise JobDegradedError(job_id, st.degraded, images)
        if st.degraded and on_degraded == "warn":
            warnings.warn(
                f"job {job_id} was degraded: {degraded_text(st.degraded)}",
                DegradedResultWarning,
                stacklevel=3,  # the caller of result(), past the redis_errors wrapper
            )
        return images

    @redis_errors
    def stored_result(self, status: JobHash, *, latent: bool = False) -> np.ndarray | None:
        """The job's images float32 [n, C, H, W] as stored now, without waiting (a latent deployment's:
        decoded, unless `latent`); None when there are none (not done yet, failed, cancelled, or
        expired). The shape is the result's own (a router serving the job may be gone): check it against
        a descriptor's sample space if need be."""
        keys = [self.names.result(status.job_id)]
        if not latent:  # a latent deployment's job also has its pixels; any other's result is its pixels
            keys.insert(0, self.names.result_image(status.job_id))
        data = next((d for d in self.redis.mget(keys) if d is not None), None)
        if data is None:
            return None
        return decode_result(status.job_id, data, status.n, max_bytes=self.settings.max_message_bytes)

    def generate(
        self,
        labels: int | Sequence[int] | None = None,
        n: int = 1,
        *,
        queue_anyway: bool = False,
        timeout: float | None = None,
        on_degraded: str = "warn",
        init_noise: np.ndarray | None = None,
        **options,
    ) -> np.ndarray:
        """Submit, wait and return the images in one call: float32 [len(labels) * n, C, H, W].

        labels: one label or a list, 0..K-1 or None (an unconditional image; K itself is refused); the
        list is repeated n times (n images per label, as `ddm submit --labels 3,8 --n 2` gives 3,8,3,8).
        None alone: n unconditional images, what a text deployment's job carries
        (`generate(prompt="red heart", n=4)`). options: the job's options,
        JobSpec's fields (schema/messages.py JOB_OPTIONS): steps (50), seed (0), and strategy, guidance,
        on_expert_loss, solver, grid, prompt and negative_prompt, which unset take the serving
        deployment's defaults (a solver or grid it does not serve is refused, naming the ones it does).
        on_degraded as in result(); init_noise as in submit(). Raises what submit and result raise
        (JobFailedError, JobTimeoutError, ExpertUnavailableError and DecoderUnavailableError unless
        queue_anyway, JobDegradedError with on_degraded="raise", ...).
        """
        spec = generation_spec(labels, n, **options)
        job_id = self.submit(spec, queue_anyway=queue_anyway, init_noise=init_noise)
        return self.result(job_id, timeout=timeout, on_degraded=on_degraded)


__all__ = ["Client", "read_stream"]


def _check_submission(spec: JobSpec, priority: int | None, deadline_s: float | None) -> None:
    """What Client.submit checks before asking anyone: a valid JobSpec, a priority 0..9, a deadline > 0."""
    if not isinstance(spec, JobSpec):
        raise SchemaError(expected("a JobSpec", type(spec).__name__))
    spec.validate()
    if priority is not None:
        check_job_priority(priority)
    number = isinstance(deadline_s, int | float) and not isinstance(deadline_s, bool)
    if deadline_s is not None and not (number and 0 < deadline_s < math.inf):
        raise SchemaError(expected("deadline_s, a number of seconds > 0", deadline_s))
