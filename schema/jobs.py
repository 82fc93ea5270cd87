"""Every job record that crosses the Redis boundary, each with one encoder and one decoder.

    names.job(id)     hash   JobHash: status, spec, strategy, guidance, step, steps, n, router,
                             resumed_from, attempts, created_at, started_at, updated_at, finished_at,
                             error, mean_step_ms, cancel_requested_at, deadline_at, owner (all values strings)
    names.traj(id)    stream one entry per step: {FRAME_FIELD: Frame.encode()}
    names.state(id)   hash   ResumeState: {"step": str, "x": float32 [n,1,32,32] raw bytes}
    names.result(id)  string encode_result(x) = codec.packb(float32 [n,1,32,32])

Writers: the client's submit writes the queued hash (queued_fields), and Client.cancel the cancel
request (cancel_fields; a job no router has taken yet it also ends at once: cancelled_fields); the
router, through its store (router/store.py), writes everything else. `strategy` and `guidance` in the
hash are the values the router RESOLVED (the spec's own, or the serving deployment's defaults): unset
while queued.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .codec import DEFAULT_MAX_BYTES, packb, unpackb
from .errors import SchemaError, expected
from .messages import MAX_GUIDANCE, Frame, JobSpec, JobStatus
from .names import check_job_id
from .resolved import ResolvedJob
from .sample_space import LEGACY, MAX_SAMPLE_NUMBERS, SampleSpace
from .strategy import Strategy

FRAME_FIELD = b"frame"  # the one field of a trajectory entry
MAX_ERROR_CHARS = 2000
LATENT_BYTES = LEGACY.size * 4  # one float32 latent of the legacy space [1, 32, 32]; latent_bytes(space)


def latent_bytes(space: SampleSpace) -> int:
    """Bytes of one float32 latent of `space` (C * H * W * 4)."""
    return space.size * 4


CANCEL_FIELD = "cancel_requested_at"  # set by Client.cancel; the router stops the job when it sees it
# Set by Client.submit(deadline_s=...), on Redis's clock (TIME): a router cancels a job it sees unfinished
# past it, at its next stored step or when it takes the job from the queue, with deadline_error's text.
DEADLINE_FIELD = "deadline_at"

ATTEMPTS = "attempts"  # HINCRBY by the router at every start
_INT_RE = re.compile(r"-?[0-9]{1,18}")


def stamp(t: float) -> str:
    """A unix time as the hashes store it."""
    return f"{t:.6f}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


# ---------------------------------------------------------------- the job hash


@dataclass(frozen=True)
class JobHash:
    """The job hash ddm:job:<id>, typed. spec is the JobSpec as submitted (None when the job came
    straight from the queue and no client wrote it); strategy and guidance are what the router resolved
    (None until a router started the job)."""

    job_id: str
    status: JobStatus
    steps: int
    n: int
    spec: JobSpec | None = None
    strategy: str | None = None
    guidance: float | None = None
    step: int = 0
    router: str | None = None
    resumed_from: int | None = None
    attempts: int = 0
    created_at: float | None = None
    started_at: float | None = None
    updated_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    mean_step_ms: float | None = None
    digest: str | None = None  # spec_digest of the spec this id was created with: it names that spec forever
    cancel_requested_at: float | None = None  # when a client asked to cancel (Client.cancel)
    deadline_at: float | None = None  # cancelled once seen unfinished past it (Redis's clock; DEADLINE_FIELD)
    priority: int | None = None  # the AMQP priority it was submitted with, 0..9 (None: 0, the lowest)
    # expert -> the steps run without it (it had no live worker; a mixing strategy routed around it)
    degraded: dict[int, tuple[int, ...]] | None = None
    on_expert_loss: str | None = None  # what the router resolved (JobSpec.on_expert_loss)
    solver: str | None = None  # what the router resolved (JobSpec.solver, schema/solver.py)
    grid: str | None = None  # what the router resolved (JobSpec.grid)
    nfe: int | None = None  # velocity evaluations the job costs: steps x its solver's per step
    # What the job means, as its router recorded it at start (None: a job from before the fields, or not
    # started): the deployment's name, its sample space (frames, latents, class names) and the space of
    # its pictures (a latent deployment's decoded pixels; else the sample space). Readers render a job
    # from these, whatever deployment serves now.
    deployment: str | None = None
    space: SampleSpace | None = None
    image_space: SampleSpace | None = None
    owner: str | None = None  # the user whose API key submitted it (owner_fields; None: no key, or older)

    @property
    def labels(self) -> tuple[int, ...]:
        return self.spec.labels if self.spec is not None else ()

    @property
    def seed(self) -> int | None:
        return self.spec.seed if self.spec is not None else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: status as its value, spec as JobSpec.to_dict() (or None)."""
        out = {k: getattr(self, k) for k in ("job_id", *FIELDS)}
        out["status"] = self.status.value
        out["spec"] = None if self.spec is None else self.spec.to_dict()
        for key in SPACE_FIELDS:
            out[key] = None if out[key] is None else out[key].to_dict()
        return out

    def picture_space(self, *, latent: bool = False) -> SampleSpace | None:
        """The space its stored images are in: the pictures' (or, with latent, the samples'); None for
        a job that recorded neither (read the live deployment's then)."""
        return self.space if latent or self.image_space is None else self.image_space

    @classmethod
    def decode(cls, job_id: str, raw: dict) -> JobHash:
        """The hash as Redis returns it (bytes or str keys and values) -> JobHash; SchemaError naming
        the job and the field for anything else (an unknown field, a missing status, steps or n)."""
        check_job_id(job_id)
        fields = {_text(k): _text(v) for k, v in raw.items()}
        unknown = sorted(set(fields) - set(FIELDS))
        if unknown:
            raise SchemaError(f"job {job_id}: " + expected(f"hash fields among {list(FIELDS)}", unknown))
        missing = [k for k in ("status", "steps", "n") if fields.get(k, "") == ""]
        if missing:
            raise SchemaError(f"job {job_id}: hash without {missing} (fields {sorted(fields)})")
        kwargs: dict[str, Any] = {}
        for key, text in fields.items():
            try:
                kwargs[key] = _decode_field(key, text)
            except (SchemaError, ValueError) as exc:
                raise SchemaError(f"job {job_id} hash field {key}: {exc}") from None
        if kwargs.get("step") is None:
            kwargs.pop("step", None)
        if kwargs.get("attempts") is None:
            kwargs.pop("attempts", None)
        return cls(job_id=job_id, **kwargs)


# The hash's fields, by how they decode (from JobHash's annotations; an empty string means "not set yet").
FIELDS = tuple(f.name for f in dataclasses.fields(JobHash) if f.name != "job_id")
INT_FIELDS = tuple(f.name for f in dataclasses.fields(JobHash) if f.type in ("int", "int | None"))
SPACE_FIELDS = ("space", "image_space")
FLOAT_FIELDS = tuple(f.name for f in dataclasses.fields(JobHash) if f.type == "float | None")


def _decode_field(key: str, text: str) -> Any:
    if key == "status":
        if text not in {s.value for s in JobStatus}:
            raise SchemaError(expected(f"status in {[s.value for s in JobStatus]}", text))
        return JobStatus(text)
    if text == "":
        return None
    if key == "spec":
        return JobSpec.from_json(text)
    if key in INT_FIELDS:
        if not _INT_RE.fullmatch(text) or int(text) < 0:
            raise SchemaError(expected("an integer >= 0", text))
        return int(text)
    if key in FLOAT_FIELDS:
        try:
            value = float(text)
        except ValueError:
            raise SchemaError(expected("a number", text)) from None
        if not math.isfinite(value):
            raise SchemaError(expected("a finite number", text))
        if key == "guidance" and not 0.0 <= value <= MAX_GUIDANCE:
            raise SchemaError(expected(f"guidance in [0, {MAX_GUIDANCE:g}]", text))
        return value
    if key == "strategy":
        return str(Strategy.parse(text))
    if key in SPACE_FIELDS:
        try:
            return SampleSpace.from_dict(json.loads(text), key)
        except json.JSONDecodeError:
            raise SchemaError(expected("a sample space as JSON", text[:80])) from None
    if key == "degraded":
        return decode_degraded(text)
    return text  # the str | None fields


_DEGRADED_RE = re.compile(r"[0-9]{1,4}:[0-9]{1,6}(-[0-9]{1,6})?(,[0-9]{1,6}(-[0-9]{1,6})?)*")


def encode_degraded(degraded: dict[int, list[int]]) -> str:
    """{1: [4, 5, 6, 9]} -> '1:4-6,9': per expert, the steps run without it, as ranges."""
    return ";".join(f"{k}:{_ranges(sorted(set(degraded[k])))}" for k in sorted(degraded) if degraded[k])


def degraded_text(degraded: dict[int, tuple[int, ...]]) -> str:
    """'expert 1 left out at steps 7-150 (no live worker)': which steps ran without which expert."""
    parts = [p.replace(":", " left out at steps ", 1) for p in encode_degraded(degraded).split(";")]
    return "; ".join(f"expert {p}" for p in parts) + " (no live worker)"


def _ranges(steps: list[int]) -> str:
    spans = [[steps[0], steps[0]]]
    for step in steps[1:]:
        if step == spans[-1][1] + 1:
            spans[-1][1] = step
        else:
            spans.append([step, step])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def decode_degraded(text: str) -> dict[int, tuple[int, ...]]:
    """encode_degraded's text -> {expert: steps}; SchemaError for anything else."""
    out: dict[int, tuple[int, ...]] = {}
    for part in text.split(";"):
        if not _DEGRADED_RE.fullmatch(part):
            raise SchemaError(expected("degraded steps like '1:4-6,9;2:3'", part))
        expert, ranges = part.split(":")
        steps: list[int] = []
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if int(hi or lo) < int(lo) or (steps and int(lo) <= steps[-1]):
                raise SchemaError(expected("ascending step ranges like 4-6,9", part))
            steps += range(int(lo), int(hi or lo) + 1)
        if int(expert) in out:
            raise SchemaError(expected("each expert once", part))
        out[int(expert)] = tuple(steps)
    return out


# Encoders: the fields each writer sets, as str -> str for HSET.


def spec_digest(spec: JobSpec) -> str:
    """sha256 of the canonical JSON of a spec as submitted (keys sorted, no spaces): a job id names the
    spec it was created with, and a JobSpec reusing the id with any other field is refused."""
    canonical = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def queued_fields(spec: JobSpec, now: float) -> dict[str, str]:
    """What the client writes at submit (status queued); strategy and guidance are left to the router."""
    t = stamp(now)
    return {
        "status": JobStatus.QUEUED.value,
        "spec": spec.to_json(),
        "digest": spec_digest(spec),
        "step": "0",
        "steps": str(spec.steps),
        "n": str(spec.n),
        "created_at": t,
        "updated_at": t,
    }


def owner_fields(owner: str) -> dict[str, str]:
    """What the web UI writes after a submit made with an API key (schema/api_keys.py check_user)."""
    return {"owner": owner}


def deadline_error(deadline_at: float, now: float) -> str:
    """The error text of a job cancelled for its deadline: when it was and how late it was seen."""
    late = now - deadline_at
    when = datetime.datetime.fromtimestamp(deadline_at, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"deadline passed: not done by its deadline, {when} (seen {late:.1f} s after)"


def past_deadline(job: JobHash, now: float) -> bool:
    """Whether `job` has a deadline and `now` (Redis's clock) is past it."""
    return job.deadline_at is not None and now >= job.deadline_at


def first_start_fields(spec: JobSpec, now: float) -> dict[str, str]:
    """Set by the router only where missing (HSETNX): the submitted spec and its digest (written by the
    client, unless the job came straight from the queue), created_at and started_at."""
    t = stamp(now)
    return {"spec": spec.to_json(), "digest": spec_digest(spec), "created_at": t, "started_at": t}


def running_fields(
    job: ResolvedJob, router_id: str, resumed_from: int, now: float, deployment: str, image_space: SampleSpace
) -> dict[str, str]:
    """What the router writes when it (re)starts a job: the values it resolved are recorded, and what
    the job means (its deployment, sample space and picture space)."""
    spec = job.spec
    return {
        "deployment": deployment,
        "space": json.dumps(job.space.to_dict(), separators=(",", ":")),
        "image_space": json.dumps(image_space.to_dict(), separators=(",", ":")),
        "status": JobStatus.RUNNING.value,
        "router": router_id,
        "resumed_from": str(int(resumed_from)),
        "updated_at": stamp(now),
        "steps": str(spec.steps),
        "n": str(spec.n),
        "strategy": str(job.strategy),
        "guidance": repr(job.guidance),
        "on_expert_loss": job.on_expert_loss,
        "solver": str(job.solver),
        "grid": str(job.grid),
        "nfe": str(job.nfe),
    }


def step_fields(step: int, mean_step_ms: float, now: float, degraded=None) -> dict[str, str]:
    """Progress after a stored step (and, once a step ran without an expert, which steps did)."""
    fields = {"step": str(int(step)), "updated_at": stamp(now), "mean_step_ms": f"{mean_step_ms:.3f}"}
    if degraded:
        fields["degraded"] = encode_degraded(degraded)
    return fields


def done_fields(now: float) -> dict[str, str]:
    return {"status": JobStatus.DONE.value, "finished_at": stamp(now)}


def failed_fields(error: str, now: float) -> dict[str, str]:
    return {"status": JobStatus.FAILED.value, "error": error[:MAX_ERROR_CHARS], "finished_at": stamp(now)}


def cancel_fields(now: float) -> dict[str, str]:
    """What Client.cancel writes on a queued or running job: the request the router honours."""
    return {CANCEL_FIELD: stamp(now), "updated_at": stamp(now)}


def cancelled_fields(now: float, reason: str | None = None) -> dict[str, str]:
    """The end of a cancelled job (the router's, or the client's for a job no router has taken); reason:
    why, when no client asked (its deadline passed), kept in the error field."""
    fields = {"status": JobStatus.CANCELLED.value, "finished_at": stamp(now), "updated_at": stamp(now)}
    return fields | ({"error": reason[:MAX_ERROR_CHARS]} if reason else {})


# ---------------------------------------------------------------- trajectory entry


def traj_entry(frame: Frame) -> dict[bytes, bytes]:
    """One XADD entry of the trajectory stream."""
    return {FRAME_FIELD: frame.encode()}


def decode_traj_entry(job_id: str, fields: dict, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Frame:
    """A stream entry's fields -> the Frame of `job_id`; SchemaError for anything else."""
    data = fields.get(FRAME_FIELD, fields.get(FRAME_FIELD.decode()))
    if data is None or len(fields) != 1:
        raise SchemaError(
            f"job {job_id}: "
            + expected("trajectory entries with one field 'frame'", sorted(map(_text, fields)))
        )
    frame = Frame.decode(data, max_bytes=max_bytes)
    if frame.job_id != job_id:
        raise SchemaError(f"stream of job {job_id}: " + expected(f"frame.job_id {job_id}", frame.job_id))
    return frame


# ---------------------------------------------------------------- resume state


class ResumeState(NamedTuple):
    """What a redelivered job resumes from: steps done, x float32 [n, C, H, W] at full precision
    (unlike the float16 frame), and a multistep solver's history (the velocities it reuses, oldest
    first; empty for one-step solvers, and then not stored: a state from before solvers reads the same).
    Unpacks as (step, x, history)."""

    step: int
    x: np.ndarray
    history: tuple[np.ndarray, ...] = ()

    def encode(self) -> dict[str, str | bytes]:
        fields = {"step": str(int(self.step)), "x": np.ascontiguousarray(self.x, "<f4").tobytes()}
        if self.history:
            fields["history"] = b"".join(np.ascontiguousarray(v, "<f4").tobytes() for v in self.history)
        return fields

    @classmethod
    def decode(cls, raw: dict, n: int, space: SampleSpace = LEGACY) -> ResumeState:
        """The state hash -> ResumeState of n latents of `space` (raw bytes: the shape is the space's);
        SchemaError for a wrong length or step. How many velocities the history may hold is the job's
        solver's to check (SolverHistory.from_list)."""
        size = n * latent_bytes(space)
        fields = {_text(k): v for k, v in raw.items()}
        step, data = fields.get("step"), fields.get("x")
        if step is None or data is None or not {"step", "x"} <= set(fields) <= {"step", "x", "history"}:
            raise SchemaError(expected("a stored state with fields step, x (and history)", sorted(fields)))
        step = _text(step)
        if not _INT_RE.fullmatch(step) or int(step) < 0:
            raise SchemaError(expected("a stored state step >= 0", step))
        shape = "x".join(map(str, space.shape))
        x = _latents(data, n, space, f"a stored state of {n} latents {shape} ({size} bytes)")
        history = fields.get("history", b"")
        if not isinstance(history, bytes) or len(history) % size:
            got = f"{len(history)} bytes" if isinstance(history, bytes) else type(history).__name__
            raise SchemaError(expected(f"a stored history of whole sets of {n} latents {shape}", got))
        chunks = [history[i : i + size] for i in range(0, len(history), size)]
        return cls(int(step), x, tuple(_latents(c, n, space, "a history entry") for c in chunks))


def _latents(data: object, n: int, space: SampleSpace, what: str) -> np.ndarray:
    """n latents float32 [n, C, H, W] of `space` from their raw little-endian bytes."""
    if not isinstance(data, bytes) or len(data) != n * latent_bytes(space):
        got = f"{len(data)} bytes" if isinstance(data, bytes) else type(data).__name__
        raise SchemaError(expected(what, got))
    return np.frombuffer(data, dtype="<f4").reshape(n, *space.shape).copy()


# ---------------------------------------------------------------- result


def encode_result(x: np.ndarray) -> bytes:
    """The final latents float32 [n, C, H, W] as the result string (its shape travels with it)."""
    return packb(np.ascontiguousarray(x, dtype=np.float32))


def decode_result(
    job_id: str,
    data: bytes,
    n: int | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    space: SampleSpace | None = None,
) -> np.ndarray:
    """The result string -> float32 [n, C, H, W] (any n when n is None; the shape of `space` where given,
    else any sample shape, read from the data, for the caller to check); SchemaError otherwise."""
    x = unpackb(data, max_bytes=max_bytes)
    ok = (
        isinstance(x, np.ndarray)
        and x.dtype == np.float32
        and x.ndim == 4
        and 0 < int(np.prod(x.shape[1:])) <= MAX_SAMPLE_NUMBERS
        and (space is None or x.shape[1:] == space.shape)
    )
    if not ok or (n is not None and x.shape[0] != n) or x.shape[0] < 1:
        sample = ("C", "H", "W") if space is None else space.shape
        want = "[" + ", ".join(str(d) for d in (n if n is not None else "n", *sample)) + "]"
        got = f"{x.dtype} {list(x.shape)}" if isinstance(x, np.ndarray) else type(x).__name__
        raise SchemaError(f"job {job_id} result: " + expected(f"float32 array {want}", got))
    return x
