"""The velocity messages: a router asks an expert for v(x, t, y) (VelocityRequest) and the expert
answers (VelocityReply). The fields and checks they share with every message: schema/message_base.py."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from .errors import SchemaError, expected
from .message_base import (
    MAX_BATCH,
    MAX_GUIDANCE,
    MAX_SAMPLE_MAGNITUDE,
    REQUEST_ID_RE,
    _array,
    _batch,
    _finite,
    _float,
    _int,
    _Message,
    _samples,
    _str,
    _within,
    check_labels,
    check_samples,
)
from .names import MAX_EXPERT_ID, check_worker_id
from .precision import DEFAULT_PRECISION, PRECISIONS
from .sample_space import MAX_CLASSES, SampleSpace
from .text_messages import KEY_BYTES


@dataclasses.dataclass(frozen=True, eq=False)  # eq=False: arrays have no single truth value
class VelocityRequest(_Message):
    """Ask an expert for v(x, t, y) with guidance, for B rows at once.

    x float32 [B, C, H, W] finite, |x| <= MAX_SAMPLE_MAGNITUDE (the sample space: [B, 1, 32, 32] in the
    legacy space); t float32 [B] in [0, 1]; y int64 [B] in 0..K (K = the null class, 10 in the legacy
    space); guidance float32 [B] in [0, MAX_GUIDANCE]. 1 <= B <= 256. Decoding checks what holds in any
    space; the receiver checks x and y against the space it serves (check_space): an expert worker
    dead-letters a request in another space.

    text_keys (a text deployment's rows only): uint8 [B, 2, KEY_BYTES], each row's prompt embedding key
    and the key of what guidance steers away from (schema/text_messages.py embedding_key; the
    embeddings are in Redis: ddm/runtime/embeddings.py). Left off the wire when None: a class
    deployment's requests are byte for byte what they were before the field.
    """

    TYPE: ClassVar[str] = "velocity_request"
    _OPTIONAL: ClassVar[tuple[str, ...]] = ("text_keys",)

    request_id: str
    x: np.ndarray
    t: np.ndarray
    y: np.ndarray
    guidance: np.ndarray
    text_keys: np.ndarray | None = None

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
        if self.text_keys is not None:
            _array("text_keys", self.text_keys, np.uint8, (B, 2, KEY_BYTES))

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
