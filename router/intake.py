"""Which job deliveries a router may run, decided against Redis: one owner per job, one spec per id.

    decide(delivery) ->
      Refuse   the id names another spec (the digest stored at creation differs): dead-letter it; the
               job that id names is untouched
      Settle   the job already ended (a crash lost the ack), or a client cancelled it (or its deadline
               passed) before it ran on: end it as cancelled under our lease, then ack; it does not run
      Hold     another router holds the job's lease (a second delivery of a running job): keep the
               delivery unacked and ask again later; never run it in parallel
      Fail     this router took the lease but cannot serve the job (strategy, labels, a stored state of
               the wrong shape): fail that job alone
      Run      this router holds the lease: a JobRun from the stored state (or fresh noise)

A redelivered job keeps the strategy and guidance its first router recorded, so its steps mean one
thing throughout.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

from ddm.router.jobrun import JobRun
from ddm.router.policies import RoutingPolicy
from ddm.router.sampler import JobArrays
from ddm.router.store import JobStore
from ddm.schema.codec import unpackb
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import DDMError, SchemaError
from ddm.schema.jobs import JobHash, past_deadline, spec_digest
from ddm.schema.messages import JobSpec, JobStatus
from ddm.schema.names import check_job_id
from ddm.schema.resolved import ResolvedJob
from ddm.schema.solver import SolverHistory


@dataclass(frozen=True, eq=False)
class Delivery:
    """A job message this router holds unacked: the glue's handle on it."""

    tag: int
    spec: JobSpec
    props: object
    body: bytes


@dataclass(frozen=True)
class Refuse:
    reason: str


@dataclass(frozen=True)
class Settle:
    pass


@dataclass(frozen=True)
class Hold:
    pass


@dataclass(frozen=True)
class Fail:
    error: str


@dataclass(frozen=True)
class Run:
    job: JobRun


class Intake:
    def __init__(
        self, store: JobStore, descriptor: DeploymentDescriptor, policy: RoutingPolicy, router_id: str
    ):
        self.store = store
        self.descriptor = descriptor
        self.policy = policy
        self.router_id = router_id

    def decide(self, delivery: Delivery) -> Refuse | Settle | Hold | Fail | Run:
        """Redis errors propagate: the glue pauses and asks again once Redis answers."""
        spec = delivery.spec
        try:
            stored = self.store.job(spec.job_id)
        except SchemaError as exc:
            return Refuse(f"job {spec.job_id}: its stored job hash is malformed ({exc})")
        named = _digest_of(stored)
        if named is not None and named != spec_digest(spec):
            return Refuse(
                f"job id {spec.job_id} names another spec (digest {named[:12]}, this message "
                f"{spec_digest(spec)[:12]}): a job id names one spec forever; submit under a new id"
            )
        if stored is not None and stored.status.terminal:
            if stored.status is JobStatus.CANCELLED and stored.router is None:
                self.store.ended(spec.job_id)  # a client cancelled it queued: its webhook is ours to send
            return Settle()
        if not self.store.acquire(spec.job_id):
            return Hold()
        if stored is not None and (
            stored.cancel_requested_at is not None
            or (stored.deadline_at is not None and past_deadline(stored, self.store.now()))
        ):
            return Settle() if self.store.cancel(spec.job_id) else Hold()
        try:
            resolved = self._resolve(spec, stored)
        except DDMError as exc:
            try:
                recorded = self.descriptor.resolve(spec)
            except DDMError:  # not even resolvable (labels outside the sample space): refused, with why
                return Refuse(f"job {spec.job_id}: {exc}")
            self._start(spec, 0, recorded)
            return Fail(str(exc))
        space = self.descriptor.sample_space
        try:
            state = self.store.load_state(spec.job_id, spec.n, space)
            step, x, stored_history = state if state is not None else (0, None, ())
            history = SolverHistory.from_list(stored_history, resolved.solver, (spec.n, *space.shape), step)
        except SchemaError as exc:
            self._start(spec, 0, resolved)
            return Fail(f"its stored state cannot be resumed: {exc}")
        if x is None:
            try:  # its seed's noise, or the one stored beside it (Client.submit's init_noise)
                x = self.store.load_init_noise(spec, space)
            except SchemaError as exc:
                self._start(spec, 0, resolved)
                return Fail(str(exc))
        self._start(spec, step, resolved)
        job = JobRun(JobArrays.of(resolved), delivery, x, step, history)
        if stored is not None and stored.degraded and step:  # a resumed job keeps its record
            job.degraded = {k: list(steps) for k, steps in stored.degraded.items()}
        return Run(job)

    def _start(self, spec: JobSpec, step: int, job: ResolvedJob) -> None:
        """Record the job running here from `step`, with what it means on this deployment."""
        d = self.descriptor
        self.store.start(
            spec.job_id, self.router_id, step, job, spec, deployment=d.name, image_space=d.image_space
        )

    def _resolve(self, spec: JobSpec, stored: JobHash | None) -> ResolvedJob:
        """The spec with this deployment's defaults, checked against it; a resumed job keeps the values
        its first router recorded."""
        if stored is not None and stored.strategy is not None and stored.guidance is not None:
            spec = dataclasses.replace(
                spec,
                strategy=stored.strategy,
                guidance=stored.guidance,
                on_expert_loss=stored.on_expert_loss,
                solver=stored.solver or spec.solver,
                grid=stored.grid or spec.grid,
            )
        self.descriptor.check(spec)  # the labels as submitted: 0..K-1 or null (K inside, once resolved)
        resolved = self.descriptor.resolve(spec)
        self.policy.check_strategy(resolved.strategy)
        return resolved


def _digest_of(stored: JobHash | None) -> str | None:
    """The digest the id was created with (hashes from before the field: the stored spec's)."""
    if stored is None:
        return None
    if stored.digest is not None:
        return stored.digest
    return spec_digest(stored.spec) if stored.spec is not None else None


def refused_job(body: bytes, max_bytes: int) -> tuple[str, str] | None:
    """(job id, spec digest) a job message's body names, read without JobSpec's checks: a message this
    router refuses (a field from another version, a value out of range, the wrong content type) can
    still be matched with the queued hash created for it. The digest is spec_digest's (the canonical
    JSON of the spec's fields, "type" and "version" left out), so it equals the stored digest only for
    the message the job was created with. None when the body is not a map naming a valid job id."""
    try:
        obj = unpackb(body, max_bytes=max_bytes, numpy_scalars=False)
        if not isinstance(obj, dict):
            return None
        job_id = obj.get("job_id")
        check_job_id(job_id)
        fields = {k: v for k, v in obj.items() if k not in ("type", "version")}
        canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    except (SchemaError, TypeError, ValueError):
        return None
    return job_id, hashlib.sha256(canonical.encode()).hexdigest()
