"""Messages between processes: frozen dataclasses with encode() -> bytes and decode(bytes).

Here: JobStatus, JobSpec (a sampling job) and Frame (one denoising step). The velocity messages live in
schema/velocity_messages.py, the decoder stage's in schema/decode_messages.py; the bounds, field
checks and encode/decode every message shares in schema/message_base.py. This module re-exports what
callers import from it (the velocity messages and the bounds), so `ddm.schema.messages` stays the
one door to the messages.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from enum import StrEnum
from typing import Any, ClassVar

import numpy as np

from .conditioning import check_prompt
from .errors import SchemaError, expected
from .flow import NULL_CLASS
from .message_base import (
    MAX_BATCH,
    MAX_EXPERTS,
    MAX_GUIDANCE,
    MAX_SAMPLE_MAGNITUDE,
    MAX_SAMPLES,
    MAX_SEED,
    MAX_STEPS,
    PROTOCOL_VERSION,
    _array,
    _batch,
    _finite,
    _float,
    _ids,
    _int,
    _label,
    _Message,
    _samples,
    check_job_labels,
    check_labels,
    check_samples,
    check_url,
)
from .names import DIGEST_RE, check_job_id
from .precision import PRECISIONS
from .sample_space import SampleSpace
from .solver import Grid, Solver
from .strategy import Strategy
from .velocity_messages import VelocityReply, VelocityRequest

__all__ = [
    "DEFAULT_EXPERT_LOSS_POLICY",
    "EXPERT_LOSS_POLICIES",
    "MAX_BATCH",
    "MAX_GUIDANCE",
    "MAX_SAMPLE_MAGNITUDE",
    "MAX_SAMPLES",
    "MAX_SEED",
    "MAX_STEPS",
    "PROTOCOL_VERSION",
    "Frame",
    "JobSpec",
    "JobStatus",
    "VelocityReply",
    "VelocityRequest",
    "check_labels",
    "check_samples",
]


class JobStatus(StrEnum):
    """Lifecycle of a job; the value is what Redis stores (a str Enum, as rq's JobStatus)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"  # a client asked (Client.cancel); the router stopped it, its frames are kept

    @property
    def terminal(self) -> bool:
        """The job has ended: no router will write to it again."""
        return self in (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)


# ---------------------------------------------------------------- messages


EXPERT_LOSS_POLICIES = ("degrade", "wait")  # JobSpec.on_expert_loss
# What a job that names no policy gets, unless its deployment says otherwise: wait, so a result is
# always the model that was asked for, or an error naming the expert that was missing; degrading (a
# mixture renormalised over the live experts) is a choice a job or a deployment makes knowingly.
DEFAULT_EXPERT_LOSS_POLICY = "wait"


@dataclasses.dataclass(frozen=True)
class JobSpec(_Message):
    """A sampling job: n = len(labels) images, `steps` steps of `solver` on `grid`, routing `strategy`.

    labels: one per image, 0..K-1 a class of the deployment's sample space (K = 10 in the legacy space),
    or None (null on the wire) for an unconditional image: the null class of label dropout, so the
    router reads x_t and t alone for that row and its expert computes v_null (guidance means nothing
    there). A job may mix both. K as a number is refused (check_space: a class past the last); inside,
    once checked, a resolved job carries K for null (in_space), and so do job hashes stored before null
    was the word (readers take both). The 'oracle' strategy routes
    by the label and cannot route a null row (DeploymentDescriptor.check refuses it; a job that leaves
    the strategy unset gets a router strategy instead, DeploymentDescriptor.resolve).
    strategy: 'oracle' (label -> expert), 'top1', 'topk:K' or 'full' (learned router).
    strategy and guidance may be None: the serving router fills in its deployment's defaults
    (DeploymentDescriptor.resolve) and records what it used in the job hash, so a job means the same
    whichever machine submitted it. So may on_expert_loss, what a step does when an expert its routing
    chose has no live worker: 'degrade' (full and topk:K >= 2 route over the live experts and record the
    step as degraded; oracle and top1 wait) or 'wait' (every strategy waits; the router bounds the wait
    by its grace period, then fails the job naming the expert).
    solver and grid (schema/solver.py) may be None too: the deployment's defaults (Euler on the uniform
    grid unless it says otherwise). prompt and negative_prompt: a text deployment's (schema/
    conditioning.py; at most MAX_PROMPT_CHARS characters, no control characters but line breaks and
    tabs). notify: an http(s) URL POSTed once when the job ends (router/notify.py). init_noise: the
    digest (schema/init_noise.py noise_digest) of the initial noise the job starts from instead of its seed's,
    stored beside it in Redis by Client.submit(init_noise=...) (names.init_noise). Left unset, these
    seven are not encoded, so a spec from before them keeps its bytes and its digest.
    """

    TYPE: ClassVar[str] = "job_spec"
    _TUPLES: ClassVar[tuple[str, ...]] = ("labels",)
    _OPTIONAL: ClassVar[tuple[str, ...]] = (
        "on_expert_loss",
        "solver",
        "grid",
        "prompt",
        "negative_prompt",
        "notify",
        "init_noise",
    )

    job_id: str
    labels: tuple[int | None, ...]
    steps: int = 50
    strategy: str | None = None
    guidance: float | None = None
    seed: int = 0
    on_expert_loss: str | None = None
    solver: str | None = None  # schema/solver.py; None: the deployment's default
    grid: str | None = None  # canonical spelling ('shift:3', not 'shift:3.0'); None: the default
    # a text deployment's (schema/conditioning.py): the prompt of every image, and what guidance steers
    # away from (None: the empty prompt). A class deployment refuses both (DeploymentDescriptor.check).
    prompt: str | None = None
    negative_prompt: str | None = None
    # an http(s) URL the router POSTs the job's end to, once (router/notify.py; None: no webhook)
    notify: str | None = None
    # 32 hex digits naming the initial noise stored at names.init_noise(job_id) (None: its seed's noise)
    init_noise: str | None = None

    def __post_init__(self) -> None:
        self.validate()

    @property
    def n(self) -> int:
        return len(self.labels)

    @property
    def unconditional(self) -> int:
        """How many of its images are unconditional in the legacy space (null, or NULL_CLASS inside); in
        another space: nulls(space)."""
        return sum(1 for y in self.labels if y is None or y == NULL_CLASS)

    def nulls(self, space: SampleSpace) -> int:
        """How many of its images are unconditional in `space` (null, or its null class inside)."""
        return sum(1 for y in self.labels if y is None or y == space.null_class)

    def check_space(self, space: SampleSpace) -> None:
        """Its labels as a user gives them, bound by the live sample space: 0..K-1 or null (SchemaError
        naming the range otherwise; K as a number included)."""
        check_job_labels("labels", self.labels, space)

    def in_space(self, space: SampleSpace) -> JobSpec:
        """The internal form, once checked: null labels as `space`'s null class K (what the router's
        arrays and the experts' requests carry), every other label as it is."""
        if None not in self.labels:
            return self
        k = space.null_class
        return dataclasses.replace(self, labels=tuple(k if y is None else y for y in self.labels))

    def as_submitted(self, space: SampleSpace) -> JobSpec:
        """in_space undone: `space`'s null class K as None, how a user submits it (a job hash from
        before null carries K; resubmitting it must not send K, which is refused)."""
        k = space.null_class
        return dataclasses.replace(self, labels=tuple(None if y == k else y for y in self.labels))

    def validate(self) -> None:
        """Check every field; normalises numeric types (numpy ints, list labels) to plain Python."""
        check_job_id(self.job_id)
        labels = _ids("labels", self.labels)
        if not 1 <= len(labels) <= MAX_SAMPLES:
            raise SchemaError(expected(f"1..{MAX_SAMPLES} labels", len(labels)))
        labels = tuple(_label(y) for y in labels)
        object.__setattr__(self, "labels", labels)  # frozen: the one sanctioned write
        object.__setattr__(self, "steps", _int("steps", self.steps, 1, MAX_STEPS))
        if self.strategy is not None:
            Strategy.parse(self.strategy)
        if self.guidance is not None:
            object.__setattr__(self, "guidance", _float("guidance", self.guidance, 0.0, MAX_GUIDANCE))
        object.__setattr__(self, "seed", _int("seed", self.seed, 0, MAX_SEED))
        if self.on_expert_loss is not None and self.on_expert_loss not in EXPERT_LOSS_POLICIES:
            raise SchemaError(
                expected(f"on_expert_loss in {list(EXPERT_LOSS_POLICIES)}", self.on_expert_loss)
            )
        if self.solver is not None:
            Solver.parse(self.solver)
        if self.grid is not None:
            object.__setattr__(self, "grid", str(Grid.parse(self.grid)))
        for name in ("prompt", "negative_prompt"):
            if getattr(self, name) is not None:
                check_prompt(name, getattr(self, name))
        if self.notify is not None:
            check_url("notify", self.notify)
        if self.init_noise is not None and not (
            isinstance(self.init_noise, str) and DIGEST_RE.fullmatch(self.init_noise)
        ):
            raise SchemaError(expected("init_noise, the noise's digest: 32 hex digits", self.init_noise))
        if self.negative_prompt is not None and self.prompt is None:
            raise SchemaError(expected("a prompt with the negative prompt", "a negative prompt alone"))

    @classmethod
    def new(cls, labels, **options: Any) -> JobSpec:
        """A JobSpec with a fresh uuid4-hex job_id. options: any of JOB_OPTIONS (steps, strategy, guidance,
        seed, on_expert_loss, solver, grid); unset: steps 50, seed 0, the others None = the deployment's."""
        return cls(uuid.uuid4().hex, tuple(labels), **options)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (labels as a list)."""
        d = self._fields()
        d["labels"] = list(self.labels)
        return d

    @classmethod
    def from_dict(cls, d: object) -> JobSpec:
        """Inverse of to_dict. job_id and labels are required; the rest default; unknown keys refused."""
        if not isinstance(d, dict):
            raise SchemaError(expected("job spec as a dict", type(d).__name__))
        names = {f.name for f in dataclasses.fields(cls)}
        if not {"job_id", "labels"} <= set(d) <= names:
            raise SchemaError(
                expected(f"keys job_id, labels and optionally {sorted(names)}", sorted(d, key=str))
            )
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> JobSpec:
        try:
            d = json.loads(text)
        except (TypeError, ValueError) as e:
            raise SchemaError(expected("job spec JSON", text)) from e
        return cls.from_dict(d)


# A job's options beside its labels: JobSpec's own fields, declared once there. The client
# (Client.generate), the CLI's job flags, the UI's form, the bench and the eval build jobs from them.
# init_noise is not an option: it names an array that travels beside the spec (Client.submit's init_noise)
JOB_OPTIONS = tuple(
    f.name for f in dataclasses.fields(JobSpec) if f.name not in ("job_id", "labels", "init_noise")
)


def job_options(source: object, **override: Any) -> dict[str, Any]:
    """The JOB_OPTIONS that `source` (parsed flags, a config) has as attributes, then `override`."""
    return {name: getattr(source, name) for name in JOB_OPTIONS if hasattr(source, name)} | override


@dataclasses.dataclass(frozen=True, eq=False)
class Frame(_Message):
    """One denoising step of a job, for the trajectory stream and the browser.

    x float16 [n, C, H, W] finite (compact latent; the sample space, check_space); experts: ids used at
    this step by any sample;
    weights float32 [n, K] finite, >= 0 (routing weights over all K experts); t in [0, 1].
    latency_ms: the step's wall time at the router from sending its requests to the last reply
    (transport both ways, queueing, compute);
    compute_ms: the slowest expert forward pass that served it, so latency_ms - compute_ms is what the
    pipeline itself cost; precisions: what each of `experts` computed at, in the same order, or ()
    when every one computed at fp32 (the default: left off the wire, so older readers decode it).
    """

    TYPE: ClassVar[str] = "frame"
    _TUPLES: ClassVar[tuple[str, ...]] = ("experts", "missing", "precisions")
    _OPTIONAL: ClassVar[tuple[str, ...]] = ("missing", "precisions")

    job_id: str
    step: int
    t: float
    x: np.ndarray
    experts: tuple[int, ...]
    weights: np.ndarray
    latency_ms: float
    compute_ms: float
    missing: tuple[int, ...] = ()  # experts the routing chose but that had no live worker: left out
    precisions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_job_id(self.job_id)
        object.__setattr__(self, "step", _int("step", self.step, 0, MAX_STEPS))
        object.__setattr__(self, "t", _float("t", self.t, 0.0, 1.0))
        _samples("x", self.x, np.float16, dims="n")
        n = self.x.shape[0]
        _batch("x", n, 1, MAX_SAMPLES)
        _finite("x", self.x)
        _array("weights", self.weights, np.float32, (n, None), dims="K")
        K = self.weights.shape[1]
        if not 1 <= K <= MAX_EXPERTS:
            raise SchemaError(expected(f"weights over 1..{MAX_EXPERTS} experts", K))
        _finite("weights", self.weights)
        if (self.weights < 0).any():
            raise SchemaError(expected("weights >= 0", self.weights.min()))
        experts = tuple(_int("expert id", e, 0, K - 1) for e in _ids("experts", self.experts))
        if len(set(experts)) != len(experts):
            raise SchemaError(expected("distinct expert ids", experts))
        object.__setattr__(self, "experts", experts)
        missing = tuple(_int("missing expert id", e, 0, K - 1) for e in _ids("missing", self.missing))
        if set(missing) & set(experts):
            raise SchemaError(expected("missing experts apart from the experts that served", missing))
        object.__setattr__(self, "missing", missing)
        if self.precisions and len(self.precisions) != len(experts):
            what = f"precisions for the {len(experts)} experts that served"
            raise SchemaError(expected(what, self.precisions))
        for p in self.precisions:
            if p not in PRECISIONS:
                raise SchemaError(expected(f"precisions in {PRECISIONS}", p))
        object.__setattr__(self, "latency_ms", _float("latency_ms", self.latency_ms, 0.0))
        object.__setattr__(self, "compute_ms", _float("compute_ms", self.compute_ms, 0.0))

    def check_space(self, space: SampleSpace) -> None:
        """x checked against the deployment's sample space (SchemaError naming both shapes)."""
        check_samples("x", self.x, space, dims="n")

    @classmethod
    def from_latent(
        cls,
        job_id: str,
        step: int,
        t: float,
        x: np.ndarray,
        experts,
        weights: np.ndarray,
        latency_ms: float,
        compute_ms: float = 0.0,
        missing=(),
        precisions=(),
    ) -> Frame:
        """Build a Frame from the float32 latent x [n, C, H, W], stored as float16."""
        _samples("x", x, np.float32, dims="n")
        limit = float(np.finfo(np.float16).max)
        if not (np.abs(x) <= limit).all():  # also false for NaN
            raise SchemaError(
                expected(f"x finite and within float16 range +-{limit:g}", float(np.abs(x).max()))
            )
        return cls(
            job_id,
            step,
            t,
            x.astype(np.float16),
            tuple(experts),
            weights,
            latency_ms,
            compute_ms,
            tuple(missing),
            tuple(precisions),
        )
