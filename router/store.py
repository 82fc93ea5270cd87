"""The router's records in Redis (the records themselves: schema/jobs.py), and the deployment descriptor.

    names.job(id)     hash   JobHash (schema/jobs.py): status, spec, strategy and guidance as resolved,
                             step, steps, n, router, resumed_from, attempts, *_at, error, mean_step_ms,
                             cancel_requested_at (written by Client.cancel)
    names.traj(id)    stream one entry per step: {"frame": Frame.encode()}
    names.state(id)   hash   ResumeState {"step": str, "x": float32 [n,C,H,W] raw bytes, and for a
                             multistep solver "history": its velocities, raw bytes} - what a
                             redelivered job resumes from (x at full precision, unlike the float16 frame;
                             C, H, W: the deployment's sample space)
    names.result(id)  string codec.packb(float32 [n,C,H,W]) - the final latents
    names.result_image(id) string codec.packb(float32 [n,C',H',W']) - a latent deployment's: the final
                             latents decoded into pixels (by the decoder stage)
    names.jobs_index  zset   job id -> created_at (recent jobs; expired ones trimmed by trim_index)
    names.deployment  string DeploymentDescriptor JSON, EX heartbeat_ttl_s (publish_descriptor)
    names.queue       zset   the jobs not started yet (schema/queue.py): a job leaves it when it starts
                             (start) or ends unrun (finish, fail, cancel)
    names.job_ends    list   JobEnd of every job this router ran, at its end (newest first, ENDS_KEPT)

    names.lease(id)   string the running router's token, PX lease_ttl (one owner per job)

JobStore is the one writer of these after submit (the client writes the queued job hash). A router's
store carries its lease token: it runs a job only while it holds the job's lease (set if absent with
an expiry, renewed while it runs), and every write of a running job checks the lease atomically (a Lua
script for steps, WATCH/MULTI for the end), so a job delivered twice is never written by two routers.
A burst's steps are ONE script (frame + state + hash per job), so the stored state never runs ahead of
or behind the trajectory. The router stores a burst's finished steps right after sending their next
steps, so a crash loses at most the steps in flight and the ones finished just before (recomputed on resume;
velocity is a pure function). A cancel is a client's request in the job hash: the step script reports
the job when it stores its next step, and the router ends it there (cancel), keeping its frames.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import redis

from ddm.router.sampler import initial_noise
from ddm.schema import jobs
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import SchemaError
from ddm.schema.init_noise import stored_noise
from ddm.schema.jobs import JobHash, ResumeState
from ddm.schema.messages import Frame, JobSpec, JobStatus
from ddm.schema.names import Names
from ddm.schema.queue import ENDS_KEPT, JobEnd
from ddm.schema.resolved import ResolvedJob
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.schema.solver import SolverHistory

# Lua, so that checking a lease and writing under it is one atomic step on the server.
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
_RENEW = """
local lost = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
  else
    lost[#lost + 1] = i - 1
  end
end
return lost
"""
_RELEASE = """
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end
return 0
"""
# KEYS: per job lease, traj, state, job. ARGV: token ('' = unchecked), the frame field name, the cancel
# field name, the deadline field name, then per job the frame, then the state and the job fields as
# counted field/value pairs. Returns {the jobs skipped (lease not ours), the jobs written whose cancel a
# client requested or whose deadline (on Redis's clock) has passed}.
_WRITE_STEPS = """
local token, field, cancel, deadline, lost, cancelled, a = ARGV[1], ARGV[2], ARGV[3], ARGV[4], {}, {}, 5
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
for i = 0, #KEYS / 4 - 1 do
  local k, frame, ns = 4 * i, ARGV[a], tonumber(ARGV[a + 1])
  local state = {unpack(ARGV, a + 2, a + 1 + 2 * ns)}
  local at = a + 2 + 2 * ns
  local nj = tonumber(ARGV[at])
  local job = {unpack(ARGV, at + 1, at + 2 * nj)}
  a = at + 1 + 2 * nj
  if token == '' or redis.call('GET', KEYS[k + 1]) == token then
    redis.call('XADD', KEYS[k + 2], '*', field, frame)
    redis.call('HSET', KEYS[k + 3], unpack(state))
    redis.call('HSET', KEYS[k + 4], unpack(job))
    local due = tonumber(redis.call('HGET', KEYS[k + 4], deadline) or '')
    if redis.call('HEXISTS', KEYS[k + 4], cancel) == 1 or (due and due <= now) then
      cancelled[#cancelled + 1] = i
    end
  else
    lost[#lost + 1] = i
  end
end
return {lost, cancelled}
"""


@dataclass(frozen=True)
class StepWrites:
    """What JobStore.write_steps found: jobs whose lease another router holds now (nothing written),
    and jobs whose step was stored but whose cancel a client requested or whose deadline passed (the
    router stops them)."""

    lost: list[str]
    cancelled: list[str]


QUEUED = JobStatus.QUEUED.value.encode()
BEGAN_KEPT = 4096  # start times kept for jobs that may end here


def _stored_digest(digest: bytes | None, spec: bytes | None) -> str | None:
    """The digest a job hash was created with (hashes from before the field: its stored spec's)."""
    if digest is not None:
        return digest.decode()
    try:
        return jobs.spec_digest(JobSpec.from_json(spec)) if spec is not None else None
    except SchemaError:
        return None


def _pairs(mapping: dict) -> list:
    return [len(mapping), *(item for pair in mapping.items() for item in pair)]


def _nothing(job_id: str) -> None:
    """JobStore.ended with no webhooks to send (tests and tools)."""


class JobStore:
    def __init__(
        self, client: redis.Redis, names: Names, job_ttl_s: int, *, owner: str = "", lease_ttl_s: float = 10.0
    ):
        """owner: this router's lease token ('' = writes unchecked: tests and tools that own nothing)."""
        self.r = client
        self.names = names
        self.job_ttl_s = job_ttl_s
        self.owner = owner
        self.lease_ms = max(1, int(lease_ttl_s * 1000))
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._write_steps = client.register_script(_WRITE_STEPS)
        self._trim_from = 0  # trim_index goes on from this position among the old index entries
        # job id -> (Redis's clock at its start here, the step it started from, the steps it had to run,
        # evaluations per step): its JobEnd at the end
        self._began: dict[str, tuple[float, int, int, int]] = {}
        self._prune_from = "-inf"  # prune_queue goes on after this score
        self.ended: Callable[[str], None] = _nothing  # told each job this store ends (router/notify.py)

    # -- leases ---------------------------------------------------------------------------------

    def acquire(self, job_id: str) -> bool:
        """Take the job's lease (or keep it, if ours); False while another router holds it."""
        return bool(self._acquire(keys=[self.names.lease(job_id)], args=[self.owner, self.lease_ms]))

    def renew(self, job_ids: list[str]) -> list[str]:
        """Extend our leases; returns the jobs whose lease we no longer hold (expired and taken)."""
        if not job_ids:
            return []
        lost = self._renew(keys=[self.names.lease(j) for j in job_ids], args=[self.owner, self.lease_ms])
        return [job_ids[int(i)] for i in lost]

    def release(self, job_ids: list[str]) -> None:
        """Give up our leases (a clean stop or a lost broker: the redelivered jobs are free at once)."""
        if job_ids:
            self._release(keys=[self.names.lease(j) for j in job_ids], args=[self.owner])

    # -- reading ------------------------------------------------------------------------------

    def job(self, job_id: str) -> JobHash | None:
        """The job hash, typed (None if unknown or expired); SchemaError if it is malformed."""
        raw = self.r.hgetall(self.names.job(job_id))
        return JobHash.decode(job_id, raw) if raw else None

    def load_state(self, job_id: str, n: int, space: SampleSpace = LEGACY) -> ResumeState | None:
        """(steps done, x float32 [n,C,H,W] of `space`) stored after the last completed step, or None."""
        raw = self.r.hgetall(self.names.state(job_id))
        return ResumeState.decode(raw, n, space) if raw else None

    def load_init_noise(self, spec: JobSpec, space: SampleSpace) -> np.ndarray:
        """The initial noise a job starts from: its seed's, or the one stored for it (schema/init_noise.py;
        SchemaError when that is missing or not the one its spec names)."""
        if spec.init_noise is None:
            return initial_noise(spec, space)
        data = self.r.get(self.names.init_noise(spec.job_id))
        return stored_noise(spec.job_id, data, spec.init_noise, spec.n, space)

    # -- writing (router worker) ----------------------------------------------------------------

    def publish_descriptor(self, descriptor: DeploymentDescriptor, ttl_s: int) -> None:
        """SET the serving deployment's descriptor, expiring after ttl_s (call at start and with every
        heartbeat: when no router refreshes it, clients learn that no router serves)."""
        self.r.set(self.names.deployment, descriptor.encode(), ex=max(1, int(ttl_s)))

    def start(
        self,
        job_id: str,
        router_id: str,
        resumed_from: int,
        job: ResolvedJob,
        submitted: JobSpec | None = None,
        *,
        deployment: str = "",
        image_space: SampleSpace | None = None,
    ) -> None:
        """Mark the job running on `router_id` from step `resumed_from`, recording what it resolved to. The
        submitted spec and its digest, as the client wrote them, are kept (written here from
        `submitted` only when missing). deployment and image_space: what the job means (its
        deployment's name; its pictures' space, the sample space when None) are recorded too. The
        queued hash's expiry (queued_ttl_s, from the submit) is lifted: a started job's keys
        expire only after its end."""
        now = time.time()
        key = self.names.job(job_id)
        pipe = self.r.pipeline()
        for field, value in jobs.first_start_fields(submitted or job.spec, now).items():
            pipe.hsetnx(key, field, value)
        fields = jobs.running_fields(job, router_id, resumed_from, now, deployment, image_space or job.space)
        pipe.hset(key, mapping=fields)
        pipe.hincrby(key, jobs.ATTEMPTS, 1)
        pipe.persist(key)
        pipe.zadd(self.names.jobs_index, {job_id: now}, nx=True)
        pipe.zrem(self.names.queue, job_id)  # started: no longer waiting
        pipe.time()
        sec, usec = pipe.execute()[-1]
        self._began.pop(job_id, None)
        self._began[job_id] = (sec + usec / 1e6, resumed_from, job.spec.steps, job.solver.stages)
        while len(self._began) > BEGAN_KEPT:  # jobs dropped without an end here (lease lost): forget
            del self._began[next(iter(self._began))]

    def trim_index(self, batch: int = 200) -> int:
        """Look at the next `batch` index entries older than the job TTL and drop those whose job hash
        has expired (the router calls this every heartbeat, so the index does not grow forever). A job
        older than that which still exists (queued for long, or finished less than a TTL ago) keeps its
        entry. Each call goes on from where the last one stopped (by position among the old entries,
        so equal scores are not skipped) and starts over at the oldest after the last page: live entries
        at the front never hide expired ones behind them. Returns the number dropped."""
        cutoff = time.time() - self.job_ttl_s
        old = self.r.zrangebyscore(self.names.jobs_index, "-inf", cutoff, self._trim_from, batch)
        if not old:
            self._trim_from = 0
            return 0
        pipe = self.r.pipeline(transaction=False)
        for job_id in old:
            pipe.exists(self.names.job(job_id.decode()))
        gone = [job_id for job_id, alive in zip(old, pipe.execute(), strict=True) if not alive]
        if gone:
            self.r.zrem(self.names.jobs_index, *gone)
        # the live ones of this page stay in front: the next page starts after them
        self._trim_from = self._trim_from + len(old) - len(gone) if len(old) == batch else 0
        return len(gone)

    def prune_queue(self, batch: int = 200) -> int:
        """Look at the next `batch` entries of the queue and drop those whose job hash is gone or no longer
        queued (a client that died between its submit and its publish, a job that expired): readers skip
        such entries too, this keeps the set from growing when nobody reads it. Called every heartbeat,
        each call going on after the last one's page (by score: each entry has its own). Returns the
        number dropped."""
        page = self.r.zrangebyscore(
            self.names.queue, self._prune_from, "+inf", start=0, num=batch, withscores=True
        )
        self._prune_from = f"({page[-1][1]!r}" if len(page) == batch else "-inf"
        if not page:
            return 0
        pipe = self.r.pipeline(transaction=False)
        for job_id, _ in page:
            pipe.hget(self.names.job(job_id.decode()), "status")
        stale = [job_id for (job_id, _), status in zip(page, pipe.execute(), strict=True) if status != QUEUED]
        if stale:
            self.r.zrem(self.names.queue, *stale)
        return len(stale)

    def fail_refused(self, job_id: str, digest: str, error: str) -> bool:
        """A job message this router dead-letters (undecodable here, refused): fail the job it names when
        its hash is still queued, was created for that very message (its stored digest is `digest`: a
        message whose id names another spec leaves that job alone) and no router holds it. The hash then
        expires like any ended job's, and the job leaves the queue. False when nothing was changed."""
        key, lease = self.names.job(job_id), self.names.lease(job_id)
        with self.r.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(key, lease)
                status, stored, spec = pipe.hmget(key, "status", "digest", "spec")
                if status != QUEUED or pipe.exists(lease) or _stored_digest(stored, spec) != digest:
                    return False
                pipe.multi()
                pipe.hset(key, mapping=jobs.failed_fields(error, time.time()))
                pipe.expire(key, self.job_ttl_s)
                pipe.zrem(self.names.queue, job_id)
                pipe.execute()
            except redis.WatchError:
                return False
        self.ended(job_id)
        return True

    def write_step(self, frame: Frame, x: np.ndarray, mean_step_ms: float) -> StepWrites:
        """Frame to the stream, full-precision state and progress to Redis, in one transaction."""
        return self.write_steps([(frame, x, mean_step_ms, None, SolverHistory())])

    def write_steps(
        self, steps: list[tuple[Frame, np.ndarray, float, dict | None, SolverHistory]]
    ) -> StepWrites:
        """write_step for several jobs in ONE atomic script and one round trip (the router writes every
        step that finished in one burst of replies together; per-step round trips dominated its time).
        Only the jobs whose lease this store holds are written (the others come back as lost); a written
        job whose cancel a client requested comes back as cancelled: its step is kept, and the router
        ends it there (cancel)."""
        if not steps:
            return StepWrites([], [])
        keys, args = [], [self.owner, jobs.FRAME_FIELD, jobs.CANCEL_FIELD, jobs.DEADLINE_FIELD]
        now = time.time()
        for frame, x, mean_step_ms, degraded, history in steps:
            job_id = frame.job_id
            keys += [self.names.lease(job_id), self.names.traj(job_id)]
            keys += [self.names.state(job_id), self.names.job(job_id)]
            args.append(jobs.traj_entry(frame)[jobs.FRAME_FIELD])
            args += _pairs(ResumeState(frame.step, x, history.velocities).encode())
            args += _pairs(jobs.step_fields(frame.step, mean_step_ms, now, degraded))
        lost, cancelled = self._write_steps(keys=keys, args=args)
        return StepWrites(
            lost=[steps[int(i)][0].job_id for i in lost],
            cancelled=[steps[int(i)][0].job_id for i in cancelled],
        )

    def finish(self, job_id: str, x: np.ndarray, image: np.ndarray | None = None) -> bool:
        """Store the result (and a latent deployment's decoded image), mark done, and let every key of
        the job expire after job_ttl_s; the lease goes with it. False (nothing written) if another
        router holds the lease."""

        def write(pipe) -> None:
            pipe.set(self.names.result(job_id), jobs.encode_result(x))
            if image is not None:
                pipe.set(self.names.result_image(job_id), jobs.encode_result(image))
            pipe.hset(self.names.job(job_id), mapping=jobs.done_fields(time.time()))
            pipe.delete(self.names.state(job_id))  # the result supersedes it

        return self._end(job_id, write, "done")

    def fail(self, job_id: str, error: str) -> bool:
        """Mark failed with `error` (2000 chars kept); every key of the job expires after job_ttl_s.
        False (nothing written) if another router holds the lease."""

        def write(pipe) -> None:
            pipe.hset(self.names.job(job_id), mapping=jobs.failed_fields(error, time.time()))

        return self._end(job_id, write, "failed")

    def now(self) -> float:
        """Redis's clock (TIME), the one job deadlines are set and compared on."""
        sec, usec = self.r.time()
        return sec + usec / 1e6

    def cancel(self, job_id: str) -> bool:
        """Mark cancelled (a client asked: Client.cancel, or its deadline passed: said in its error); its
        frames are kept, its resume state goes, and every key of the job expires after job_ttl_s. False
        (nothing written) if another router holds the lease."""
        asked, due = self.r.hmget(self.names.job(job_id), jobs.CANCEL_FIELD, jobs.DEADLINE_FIELD)
        now = self.now()
        reason = jobs.deadline_error(float(due), now) if asked is None and due and float(due) <= now else None

        def write(pipe) -> None:
            pipe.hset(self.names.job(job_id), mapping=jobs.cancelled_fields(now, reason))
            pipe.delete(self.names.state(job_id))  # nothing will resume it

        return self._end(job_id, write, "cancelled")

    def _end(self, job_id: str, write, status: str) -> bool:
        """Run `write` and the expiries in one transaction, only while the lease is ours (WATCH). The job
        leaves the queue (ended unrun), and one this store started records its JobEnd (the throughput
        behind queue ETAs): the steps and evaluations this run did (all of them for a done job; for
        another, those stored since it started here)."""
        lease = self.names.lease(job_id)
        began = self._began.get(job_id)
        end = None
        if began is not None:
            started, resumed_from, steps, stages = began
            if status != "done":
                stored = self.r.hget(self.names.job(job_id), "step")
                steps = int(stored) if stored and stored.isdigit() else resumed_from
            now = self.now()
            ran = max(0, steps - resumed_from)
            end = JobEnd(now, max(0.0, now - started), ran, status, ran * stages).encode()
        with self.r.pipeline(transaction=True) as pipe:
            try:
                if self.owner:
                    pipe.watch(lease)
                    holder = pipe.get(lease)
                    if holder is None or holder.decode() != self.owner:  # as strict as write_steps
                        return False
                    pipe.multi()
                write(pipe)
                self._expire(pipe, job_id)
                pipe.delete(lease)
                pipe.zrem(self.names.queue, job_id)
                if end is not None:
                    pipe.lpush(self.names.job_ends, end)
                    pipe.ltrim(self.names.job_ends, 0, ENDS_KEPT - 1)
                pipe.execute()
            except redis.WatchError:
                return False
        self._began.pop(job_id, None)
        self.ended(job_id)
        return True

    def _expire(self, pipe, job_id: str) -> None:
        for key in (
            self.names.job(job_id),
            self.names.traj(job_id),
            self.names.state(job_id),
            self.names.result(job_id),
            self.names.result_image(job_id),
        ):
            pipe.expire(key, self.job_ttl_s)
