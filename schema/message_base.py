"""What every message between processes shares: the protocol version, the bounds, the field checks
and the encode/decode of the frozen dataclasses (schema/messages.py, schema/velocity_messages.py,
schema/decode_messages.py).

Every field is validated on construction (so a bad message cannot even be built) and on decode
(which goes through the constructor). Encoded form: a msgpack map of the fields plus "type" and
"version"; arrays use the strict codec in ddm.schema.codec. Errors are SchemaError.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from typing import Any, ClassVar, Self

import numpy as np

from .codec import DEFAULT_MAX_BYTES, packb, unpackb
from .errors import SchemaError, expected
from .names import MAX_EXPERT_ID, check_job_id
from .sample_space import MAX_CLASSES, MAX_SAMPLE_NUMBERS, SampleSpace

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


def check_job_labels(name: str, labels, space: SampleSpace) -> None:
    """A job's labels as a user gives them, against the live sample space: 0..K-1 a class, None (null)
    an unconditional image. K itself, the null class inside, is refused as a number: typed, it is a class
    past the last, not a wish for an unconditional image (issue 40 item 3)."""
    bad = sorted({y for y in labels if y is not None and not 0 <= y < space.num_classes})
    if bad:
        what = (
            f"{name} in 0..{space.num_classes - 1}, or null (an unconditional image)"
            if space.conditional
            else f"{name} null only (an unconditional image: the sample space has no classes)"
        )
        raise SchemaError(expected(what, bad))


MAX_URL_CHARS = 2000
_URL = re.compile(r"https?://[^\s/?#@]+(?:[/?#][^\s]*)?", re.ASCII)


def check_url(name: str, value: object) -> str:
    """An http(s) URL a job names (JobSpec.notify: its completion webhook): at most MAX_URL_CHARS ASCII
    characters, a host, no whitespace. SchemaError naming the field otherwise."""
    if not isinstance(value, str) or len(value) > MAX_URL_CHARS or not _URL.fullmatch(value):
        shown = value[:80] if isinstance(value, str) else type(value).__name__
        raise SchemaError(
            expected(f"{name}: an http:// or https:// URL of at most {MAX_URL_CHARS} chars", shown)
        )
    return value


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


def _label(value: object) -> int | None:
    """A JobSpec label, as far as it can be checked without the sample space: None (null: an unconditional
    image) or an int 0..MAX_CLASSES. JobSpec.check_space (and the deployment descriptor's check) bound it
    by the live space: a class 0..K-1 (K, the null class inside, is refused there as a number)."""
    if value is None:
        return None
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 <= value <= MAX_CLASSES
    if not ok:
        what = f"label int in 0..{MAX_CLASSES} (a class 0..K-1), or null (an unconditional image)"
        raise SchemaError(expected(what, value))
    return int(value)


def _ids(name: str, value: object) -> tuple[int, ...]:
    if not isinstance(value, list | tuple):
        raise SchemaError(expected(f"{name} as a list of ints", value))
    return tuple(value)


# ---------------------------------------------------------------- encode / decode


def _is_default(value: object, default: object) -> bool:
    """Whether an optional field holds its default (an array field's default is None)."""
    return value is None if default is None else value == default


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
        return {k: v for k, v in fields.items() if not (k in self._OPTIONAL and _is_default(v, defaults[k]))}

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


@dataclasses.dataclass(frozen=True, eq=False)
class _StageCall(_Message):
    """A router's call to a stage beside the experts, and its answer (the decoder's, the text encoder's):
    whose job and which request (a reply: the one it answers) come first."""

    job_id: str
    request_id: str

    def _check_ids(self) -> None:
        check_job_id(self.job_id)
        _str("request_id", self.request_id, REQUEST_ID_RE)
