"""Messages between processes: frozen dataclasses with encode() -> bytes and decode(bytes).

Every field is validated on construction (so a bad message cannot even be built) and on decode
(which goes through the constructor). Encoded form: a msgpack map of the fields plus "type" and
"version"; arrays use the strict codec in ddm.schema.codec. Errors are SchemaError.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
import uuid
from enum import StrEnum
from typing import Any, ClassVar, Self

import numpy as np

from .codec import DEFAULT_MAX_BYTES, packb, unpackb
from .errors import SchemaError, expected
from .flow import NULL_CLASS
from .names import MAX_EXPERT_ID, check_job_id, check_worker_id
from .precision import DEFAULT_PRECISION, PRECISIONS
from .sample_space import MAX_CLASSES, MAX_SAMPLE_NUMBERS, SampleSpace
from .solver import Grid, Solver
from .strategy import Strategy

PROTOCOL_VERSION = 1
MAX_BATCH = 256  # rows in one VelocityRequest
MAX_SAMPLES = 64  # samples in one job
MAX_STEPS = 1000
MAX_GUIDANCE = 20.0
# The largest |value| a stage accepts in a sample it is asked to compute on (x_t, latents). Flow states
# stay within a few units (data in its value range plus unit Gaussian noise); the bound sits far above
# any of them and far below where float32 overflows inside a forward pass (1e20 latents decoded to
# non-finite pixels and crash-looped the decoder: issue 36). Outputs are checked finite separately.
MAX_SAMPLE_MAGNITUDE = 1e4
MAX_EXPERTS = MAX_EXPERT_ID + 1  # K, columns of Frame.weights
MAX_SEED = 2**32 - 1
REQUEST_ID_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


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


# ---------------------------------------------------------------- field checks


def _int(name: str, value: object, lo: int, hi: int) -> int:
    # numbers.Integral admits numpy ints built in Python (normalised to int); decode never hands one
    # over: unpackb(numpy_scalars=False) refuses msgpack-numpy's scalar maps (PROTOCOL.md 4.1).
    # bool is an int subclass and is refused on purpose.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= value <= hi:
        raise SchemaError(expected(f"{name} int in {lo}..{hi}", value))
    return int(value)


def _float(name: str, value: object, lo: float = -math.inf, hi: float = math.inf) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not lo <= value <= hi:
        raise SchemaError(expected(f"{name} finite float in [{lo}, {hi}]", value))
    return float(value)


def _str(name: str, value: object, pattern: re.Pattern) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise SchemaError(expected(f"{name} matching {pattern.pattern}", value))
    return value


def _array(name: str, value: object, dtype: type, shape: tuple, dims: str = "B") -> np.ndarray:
    """Check dtype and shape; None in `shape` matches any size (named by `dims` in errors)."""
    if not isinstance(value, np.ndarray):
        raise SchemaError(expected(f"{name} as numpy array", type(value).__name__))
    if value.dtype != np.dtype(dtype):
        raise SchemaError(expected(f"{name} dtype {np.dtype(dtype).name}", value.dtype.name))
    if value.ndim != len(shape) or any(
        s is not None and s != d for s, d in zip(shape, value.shape, strict=True)
    ):
        free = iter(dims)
        pretty = "[" + ", ".join(next(free) if s is None else str(s) for s in shape) + "]"
        raise SchemaError(expected(f"{name} shape {pretty}", value.shape))
    return value


def _samples(name: str, value: object, dtype: type, dims: str = "B") -> np.ndarray:
    """A batch of samples [B, C, H, W] of any sample space (a decoder has none at hand: the receiver
    checks the shape against its own with check_samples): dtype, four positive dims, at most
    MAX_SAMPLE_NUMBERS numbers per sample."""
    _array(name, value, dtype, (None, None, None, None), dims=dims + "CHW")
    if 0 in value.shape[1:] or math.prod(value.shape[1:]) > MAX_SAMPLE_NUMBERS:
        want = f"{name} samples [C, H, W] of 1..{MAX_SAMPLE_NUMBERS} numbers"
        raise SchemaError(expected(want, value.shape))
    return value


def check_samples(name: str, value: np.ndarray, space: SampleSpace, dims: str = "B") -> None:
    """A batch of samples checked against the live sample space: SchemaError naming the expected and
    the received shape, e.g. 'expected x shape [B, 1, 32, 32] (the sample space 1x32x32 in [-1, 1],
    10 classes (...)), got [4, 3, 32, 32]'."""
    if tuple(value.shape[1:]) != space.shape:
        got = [int(n) for n in value.shape]  # shown as [4, 3, 32, 32]
        raise SchemaError(
            expected(f"{name} shape {space.batch_shape(dims)} (the sample space {space.describe()})", got)
        )


def check_labels(name: str, labels, space: SampleSpace) -> None:
    """Labels checked against the live sample space: 0..K-1 a class, K the null label (unconditional);
    an unconditional space has only its null label, 0."""
    labels = np.asarray(labels)
    if labels.size and (labels.min() < 0 or labels.max() > space.null_class):
        what = (
            f"{name} in 0..{space.num_classes - 1}, or {space.null_class} (the null class: unconditional)"
            if space.conditional
            else f"{name} {space.null_class} only (the null label: the sample space is unconditional)"
        )
        bad = sorted({int(y) for y in labels.reshape(-1) if not 0 <= y <= space.null_class})
        raise SchemaError(expected(what, bad))


def _finite(name: str, a: np.ndarray) -> None:
    if not np.isfinite(a).all():
        raise SchemaError(expected(f"{name} all finite", f"{int((~np.isfinite(a)).sum())} NaN/inf values"))


def _within(name: str, a: np.ndarray, limit: float) -> None:
    """Finite and |a| <= limit everywhere: the declared magnitude of a stage's numeric input."""
    _finite(name, a)
    if a.size and float(np.abs(a).max()) > limit:
        raise SchemaError(
            expected(f"{name} within [-{limit:g}, {limit:g}]", f"|{name}| up to {np.abs(a).max():g}")
        )


def _batch(name: str, n: int, lo: int, hi: int) -> None:
    if not lo <= n <= hi:
        raise SchemaError(expected(f"{name} batch size in {lo}..{hi}", n))


def _label(value: object) -> int:
    """A JobSpec label, as far as it can be checked without the sample space: an int 0..MAX_CLASSES.
    JobSpec.check_space (and the deployment descriptor's check) bound it by the live space."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 <= value <= MAX_CLASSES
    if not ok:
        what = f"label int in 0..{MAX_CLASSES} (a class 0..K-1, or K, the null class: unconditional)"
        raise SchemaError(expected(what, value))
    return int(value)


def _ids(name: str, value: object) -> tuple[int, ...]:
    if not isinstance(value, list | tuple):
        raise SchemaError(expected(f"{name} as a list of ints", value))
    return tuple(value)


# ---------------------------------------------------------------- encode / decode


class _Message:
    """encode()/decode() shared by the message dataclasses."""

    TYPE: ClassVar[str]
    _TUPLES: ClassVar[tuple[str, ...]] = ()  # fields that msgpack turns into lists
    # fields added after version 1: left out while they hold their default, so earlier readers decode
    # what leaves them unset (and a spec's digest does not change), and read as the default when absent
    _OPTIONAL: ClassVar[tuple[str, ...]] = ()

    def _fields(self) -> dict[str, Any]:
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {k: v for k, v in fields.items() if not (k in self._OPTIONAL and v == defaults[k])}

    def encode(self, *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
        """Serialise to msgpack bytes: {"type", "version", **fields}."""
        return packb({"type": self.TYPE, "version": PROTOCOL_VERSION, **self._fields()}, max_bytes=max_bytes)

    @classmethod
    def decode(cls, data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Self:
        """Parse and validate bytes from encode(); anything else raises SchemaError."""
        obj = unpackb(data, max_bytes=max_bytes, numpy_scalars=False)  # section 4.1: plain numbers
        if not isinstance(obj, dict):
            raise SchemaError(expected(f"{cls.TYPE} message as a map", type(obj).__name__))
        names = {f.name for f in dataclasses.fields(cls)}
        want = names | {"type", "version"}
        if not want - set(cls._OPTIONAL) <= set(obj) <= want:
            missing = sorted(want - set(cls._OPTIONAL) - set(obj), key=str)
            extra = sorted(set(obj) - want, key=str)
            raise SchemaError(
                expected(f"{cls.TYPE} fields {sorted(want)}", f"missing {missing}, extra {extra}")
            )
        if obj["type"] != cls.TYPE:
            raise SchemaError(expected(f"type {cls.TYPE!r}", obj["type"]))
        if type(obj["version"]) is not int or obj["version"] != PROTOCOL_VERSION:
            raise SchemaError(expected(f"version {PROTOCOL_VERSION}", obj["version"]))
        kwargs = {k: obj[k] for k in names if k in obj}
        for k in cls._TUPLES:
            if k in kwargs:
                kwargs[k] = _ids(k, kwargs[k])
        return cls(**kwargs)


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
    or K, its null class (NULL_CLASS, 10, in the legacy space) for an unconditional image:
    the null class of label dropout, so the router reads x_t and t alone for that row and its expert
    computes v_null (guidance means nothing there). A job may mix both. The 'oracle' strategy routes
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
    grid unless it says otherwise). Left unset they are not encoded, so a spec from before them keeps
    its bytes and its digest.
    """

    TYPE: ClassVar[str] = "job_spec"
    _TUPLES: ClassVar[tuple[str, ...]] = ("labels",)
    _OPTIONAL: ClassVar[tuple[str, ...]] = ("on_expert_loss", "solver", "grid")

    job_id: str
    labels: tuple[int, ...]
    steps: int = 50
    strategy: str | None = None
    guidance: float | None = None
    seed: int = 0
    on_expert_loss: str | None = None
    solver: str | None = None  # schema/solver.py; None: the deployment's default
    grid: str | None = None  # canonical spelling ('shift:3', not 'shift:3.0'); None: the default

    def __post_init__(self) -> None:
        self.validate()

    @property
    def n(self) -> int:
        return len(self.labels)

    @property
    def unconditional(self) -> int:
        """How many of its images are unconditional in the legacy space (label NULL_CLASS); in another
        space: nulls(space)."""
        return sum(1 for y in self.labels if y == NULL_CLASS)

    def nulls(self, space: SampleSpace) -> int:
        """How many of its images are unconditional in `space` (its null label)."""
        return sum(1 for y in self.labels if y == space.null_class)

    def check_space(self, space: SampleSpace) -> None:
        """Its labels bound by the live sample space (SchemaError otherwise)."""
        check_labels("labels", self.labels, space)

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

    @classmethod
    def new(
        cls,
        labels,
        *,
        steps: int = 50,
        strategy: str | None = None,
        guidance: float | None = None,
        seed: int = 0,
        on_expert_loss: str | None = None,
        solver: str | None = None,
        grid: str | None = None,
    ) -> JobSpec:
        """A JobSpec with a fresh uuid4-hex job_id; strategy, guidance, on_expert_loss, solver, grid
        None = the deployment's."""
        return cls(
            uuid.uuid4().hex, tuple(labels), steps, strategy, guidance, seed, on_expert_loss, solver, grid
        )

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


@dataclasses.dataclass(frozen=True, eq=False)  # eq=False: arrays have no single truth value
class VelocityRequest(_Message):
    """Ask an expert for v(x, t, y) with guidance, for B rows at once.

    x float32 [B, C, H, W] finite, |x| <= MAX_SAMPLE_MAGNITUDE (the sample space: [B, 1, 32, 32] in the
    legacy space); t float32 [B] in [0, 1]; y int64 [B] in 0..K (K = the null class, 10 in the legacy
    space); guidance float32 [B] in [0, MAX_GUIDANCE]. 1 <= B <= 256. Decoding checks what holds in any
    space; the receiver checks x and y against the space it serves (check_space): an expert worker
    dead-letters a request in another space.
    """

    TYPE: ClassVar[str] = "velocity_request"

    request_id: str
    x: np.ndarray
    t: np.ndarray
    y: np.ndarray
    guidance: np.ndarray

    def __post_init__(self) -> None:
        _str("request_id", self.request_id, REQUEST_ID_RE)
        _samples("x", self.x, np.float32)
        B = self.x.shape[0]
        _batch("x", B, 1, MAX_BATCH)
        for name in ("t", "guidance"):
            _array(name, getattr(self, name), np.float32, (B,))
            _finite(name, getattr(self, name))
        _array("y", self.y, np.int64, (B,))
        _within("x", self.x, MAX_SAMPLE_MAGNITUDE)
        if not ((self.t >= 0) & (self.t <= 1)).all():
            raise SchemaError(expected("t in [0, 1]", self.t))
        if not ((self.guidance >= 0) & (self.guidance <= MAX_GUIDANCE)).all():
            raise SchemaError(expected(f"guidance in [0, {MAX_GUIDANCE:g}]", self.guidance))
        if not ((self.y >= 0) & (self.y <= MAX_CLASSES)).all():
            raise SchemaError(expected(f"y in 0..{MAX_CLASSES}", self.y))

    def check_space(self, space: SampleSpace) -> None:
        """x and y checked against the sample space the receiver serves (SchemaError naming both shapes)."""
        check_samples("x", self.x, space)
        check_labels("y", self.y, space)

    @property
    def batch_size(self) -> int:
        return int(self.x.shape[0])


@dataclasses.dataclass(frozen=True, eq=False)
class VelocityReply(_Message):
    """An expert's answer: v float32 [B, C, H, W] finite (the sample space; check_space checks it), plus
    who computed it and how fast.

    batch_size is the size of the forward pass that served the request (>= 1), for metrics;
    precision: what the expert computed at (fp32 | tf32 | bf16). fp32, the default, stays off the wire,
    so routers older than the field decode replies of fp32 workers (and absent reads as fp32).
    """

    TYPE: ClassVar[str] = "velocity_reply"
    _OPTIONAL: ClassVar[tuple[str, ...]] = ("precision",)

    request_id: str
    v: np.ndarray
    expert_id: int
    worker_id: str
    compute_ms: float
    batch_size: int
    precision: str = DEFAULT_PRECISION

    def __post_init__(self) -> None:
        _str("request_id", self.request_id, REQUEST_ID_RE)
        _samples("v", self.v, np.float32)
        _batch("v", self.v.shape[0], 1, MAX_BATCH)
        _finite("v", self.v)
        object.__setattr__(self, "expert_id", _int("expert_id", self.expert_id, 0, MAX_EXPERT_ID))
        check_worker_id(self.worker_id)
        object.__setattr__(self, "compute_ms", _float("compute_ms", self.compute_ms, 0.0))
        object.__setattr__(self, "batch_size", _int("batch_size", self.batch_size, 1, 1 << 16))
        if self.precision not in PRECISIONS:
            raise SchemaError(expected(f"precision in {PRECISIONS}", self.precision))

    def check_space(self, space: SampleSpace) -> None:
        """v checked against the sample space the receiver serves (SchemaError naming both shapes)."""
        check_samples("v", self.v, space)


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
