"""Job state in Redis: the job hash, the trajectory stream, the resume state, the result.

    names.job(id)     hash   status, spec (JobSpec JSON), step, steps, n, strategy, created_at,
                             started_at, updated_at, finished_at, error, router, resumed_from,
                             mean_step_ms, attempts
    names.traj(id)    stream one entry per step: {"frame": Frame.encode()}
    names.state(id)   hash   {"step": str, "x": float32 [n,1,32,32] raw bytes} - what a redelivered
                             job resumes from (x at full precision, unlike the float16 frame)
    names.result(id)  string codec.packb(float32 [n,1,32,32]) - the final latents
    names.jobs_index  zset   job id -> created_at (recent jobs; expired ones trimmed by trim_index)

Every step is ONE pipelined MULTI/EXEC (frame + state + hash), so the stored state never runs ahead
of or behind the trajectory. The router stores a burst's finished steps right after sending their next
steps, so a crash loses at most the steps in flight and the ones finished just before (recomputed on
resume; velocity is a pure function).
"""

from __future__ import annotations

import time

import numpy as np
import redis

from ddm.schema.codec import packb, unpackb
from ddm.schema.errors import SchemaError, expected
from ddm.schema.flow import IMAGE_SHAPE
from ddm.schema.messages import Frame, JobSpec, JobStatus
from ddm.schema.names import Names

FRAME_FIELD = b"frame"


class JobStore:
    def __init__(self, client: redis.Redis, names: Names, job_ttl_s: int):
        self.r = client
        self.names = names
        self.job_ttl_s = job_ttl_s

    # -- reading ------------------------------------------------------------------------------

    def job(self, job_id: str) -> dict[str, str]:
        """The job hash as str -> str ({} if unknown or expired)."""
        raw = self.r.hgetall(self.names.job(job_id))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def load_state(self, job_id: str, n: int) -> tuple[int, np.ndarray] | None:
        """(steps done, x float32 [n,1,32,32]) stored after the last completed step, or None."""
        raw = self.r.hgetall(self.names.state(job_id))
        if not raw:
            return None
        step, data = int(raw[b"step"]), raw[b"x"]
        if len(data) != n * int(np.prod(IMAGE_SHAPE)) * 4:
            raise SchemaError(expected(f"a stored state of {n} latents", f"{len(data)} bytes"))
        return step, np.frombuffer(data, dtype="<f4").reshape(n, *IMAGE_SHAPE).copy()

    def frames(self, job_id: str, after: str = "-") -> list[tuple[str, Frame]]:
        entries = self.r.xrange(self.names.traj(job_id), min=after)
        return [(eid.decode(), Frame.decode(fields[FRAME_FIELD])) for eid, fields in entries]

    def result(self, job_id: str) -> np.ndarray | None:
        data = self.r.get(self.names.result(job_id))
        return None if data is None else unpackb(data)

    # -- writing (router worker) ----------------------------------------------------------------

    def start(self, job_id: str, router_id: str, resumed_from: int, spec: JobSpec) -> None:
        now = _now()
        fields = {
            "status": JobStatus.RUNNING.value,
            "router": router_id,
            "resumed_from": resumed_from,
            "updated_at": now,
            "spec": spec.to_json(),
            "steps": spec.steps,
            "n": spec.n,
            "strategy": spec.strategy,
        }
        pipe = self.r.pipeline()
        pipe.hsetnx(self.names.job(job_id), "created_at", now)
        pipe.hsetnx(self.names.job(job_id), "started_at", now)
        pipe.hset(self.names.job(job_id), mapping=fields)
        pipe.hincrby(self.names.job(job_id), "attempts", 1)
        pipe.zadd(self.names.jobs_index, {job_id: time.time()}, nx=True)
        pipe.execute()

    def trim_index(self, batch: int = 200) -> int:
        """Drop up to `batch` index entries older than the job TTL whose job hash has expired (the router
        calls this every heartbeat, so the index does not grow forever). A job older than that which
        still exists (queued for long, or finished less than a TTL ago) keeps its entry. Returns the
        number dropped."""
        old = self.r.zrangebyscore(self.names.jobs_index, "-inf", time.time() - self.job_ttl_s, 0, batch)
        if not old:
            return 0
        pipe = self.r.pipeline(transaction=False)
        for job_id in old:
            pipe.exists(self.names.job(job_id.decode()))
        gone = [job_id for job_id, alive in zip(old, pipe.execute(), strict=True) if not alive]
        if gone:
            self.r.zrem(self.names.jobs_index, *gone)
        return len(gone)

    def write_step(self, frame: Frame, x: np.ndarray, mean_step_ms: float) -> None:
        """Frame to the stream, full-precision state and progress to Redis, in one transaction."""
        self.write_steps([(frame, x, mean_step_ms)])

    def write_steps(self, steps: list[tuple[Frame, np.ndarray, float]]) -> None:
        """write_step for several jobs in ONE transaction and one round trip (the router writes every
        step that finished in one burst of replies together; per-step round trips dominated its time)."""
        if not steps:
            return
        pipe = self.r.pipeline(transaction=True)
        now = _now()
        for frame, x, mean_step_ms in steps:
            job_id = frame.job_id
            pipe.xadd(self.names.traj(job_id), {FRAME_FIELD: frame.encode()})
            pipe.hset(
                self.names.state(job_id),
                mapping={"step": frame.step, "x": np.ascontiguousarray(x, "<f4").tobytes()},
            )
            pipe.hset(
                self.names.job(job_id),
                mapping={"step": frame.step, "updated_at": now, "mean_step_ms": f"{mean_step_ms:.3f}"},
            )
        pipe.execute()

    def finish(self, job_id: str, x: np.ndarray) -> None:
        """Store the result, mark done, and let every key of the job expire after job_ttl_s."""
        pipe = self.r.pipeline(transaction=True)
        pipe.set(self.names.result(job_id), packb(np.ascontiguousarray(x, dtype=np.float32)))
        pipe.hset(self.names.job(job_id), mapping={"status": JobStatus.DONE.value, "finished_at": _now()})
        pipe.delete(self.names.state(job_id))  # the result supersedes it
        self._expire(pipe, job_id)
        pipe.execute()

    def fail(self, job_id: str, error: str) -> None:
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(
            self.names.job(job_id),
            mapping={"status": JobStatus.FAILED.value, "error": error[:2000], "finished_at": _now()},
        )
        self._expire(pipe, job_id)
        pipe.execute()

    def _expire(self, pipe, job_id: str) -> None:
        for key in (
            self.names.job(job_id),
            self.names.traj(job_id),
            self.names.state(job_id),
            self.names.result(job_id),
        ):
            pipe.expire(key, self.job_ttl_s)


def _now() -> str:
    return f"{time.time():.3f}"
