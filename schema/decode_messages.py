"""The decoder stage's messages: a latent deployment's router asks `ddm.decoder` for a finished job's
pixels (docs/PROTOCOL.md, "The decoder queue").

    DecodeRequest  job_id, request_id, z float32 [n, C, h, w]: the job's final latents, each |z| at most
                   MAX_SAMPLE_MAGNITUDE
    DecodeReply    job_id, request_id, images float32 [n, C, H, W], worker_id, compute_ms

Decoding is a pure function, like a velocity: a request served twice (a decoder killed mid-request is
redelivered; the router resends one unanswered past its timeout) is harmless, and the first reply wins.
Decoding checks what holds in any space; the receiver checks the shapes against its own (check_space):
a decoder dead-letters latents of another shape with the reason.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from .message_base import (
    MAX_SAMPLE_MAGNITUDE,
    MAX_SAMPLES,
    _batch,
    _finite,
    _float,
    _samples,
    _StageCall,
    _within,
    check_samples,
)
from .names import check_worker_id
from .sample_space import SampleSpace


@dataclasses.dataclass(frozen=True, eq=False)
class _DecodeMessage(_StageCall):
    def _check_ids_and_rows(self, name: str, rows: np.ndarray) -> None:
        """What both check first: the ids, then `rows` float32 [n, ...], n in 1..MAX_SAMPLES."""
        self._check_ids()
        _samples(name, rows, np.float32, dims="N")
        _batch(name, rows.shape[0], 1, MAX_SAMPLES)


@dataclasses.dataclass(frozen=True, eq=False)
class DecodeRequest(_DecodeMessage):
    TYPE: ClassVar[str] = "decode_request"

    z: np.ndarray

    def __post_init__(self) -> None:
        self._check_ids_and_rows("z", self.z)
        _within("z", self.z, MAX_SAMPLE_MAGNITUDE)

    def check_space(self, latent: SampleSpace) -> None:
        """z checked against the latent space the decoder reads (SchemaError naming both shapes)."""
        check_samples("z", self.z, latent, dims="N")


@dataclasses.dataclass(frozen=True, eq=False)
class DecodeReply(_DecodeMessage):
    TYPE: ClassVar[str] = "decode_reply"

    images: np.ndarray
    worker_id: str
    compute_ms: float

    def __post_init__(self) -> None:
        self._check_ids_and_rows("images", self.images)
        _finite("images", self.images)
        check_worker_id(self.worker_id)
        object.__setattr__(self, "compute_ms", _float("compute_ms", self.compute_ms, 0.0))

    def check_space(self, pixels: SampleSpace, n: int) -> None:
        """images checked against the pixel space and the job's n."""
        check_samples("images", self.images, pixels, dims="N")
        _batch("images (the job's n)", self.images.shape[0], n, n)
