"""The text-encoder stage's messages: a text deployment's router asks `ddm.text` for a job's prompt
embeddings once, when the job starts (docs/PROTOCOL.md, "The text-encoder queue").

    EncodeRequest  job_id, request_id, prompts: 1..MAX_PROMPTS texts (the prompt, then the negative
                   prompt or "" for classifier-free guidance), each within check_prompt's rules
    EncodeReply    job_id, request_id, embeddings float32 [N, *spec.embedding_shape] (one per prompt, in
                   order), truncated: one bool per prompt (cut to the encoder's token limit), the
                   encoder's weights digest, worker_id, compute_ms

Encoding is a pure function, like decoding: a request served twice (an encoder killed mid-request is
redelivered; the router resends one unanswered past its timeout) is harmless, and the first reply wins.
The router checks the reply's digest and shape against its deployment's conditioning record before it
stores the embeddings where the experts read them (ddm/runtime/embeddings.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import ClassVar

import numpy as np

from .conditioning import TextEncoderSpec, check_prompt
from .errors import SchemaError, expected
from .message_base import _finite, _float, _StageCall
from .names import check_worker_id

MAX_PROMPTS = 4  # a job's prompt and its negative prompt, with room to spare
_DIGEST_CHARS = "0123456789abcdef"


@dataclasses.dataclass(frozen=True, eq=False)
class EncodeRequest(_StageCall):
    TYPE: ClassVar[str] = "encode_request"
    _TUPLES: ClassVar[tuple[str, ...]] = ("prompts",)

    prompts: tuple[str, ...]

    def __post_init__(self) -> None:
        self._check_ids()
        if not isinstance(self.prompts, tuple) or not 1 <= len(self.prompts) <= MAX_PROMPTS:
            raise SchemaError(expected(f"prompts, 1..{MAX_PROMPTS} texts", self.prompts))
        for i, prompt in enumerate(self.prompts):
            check_prompt(f"prompts[{i}]", prompt)


@dataclasses.dataclass(frozen=True, eq=False)
class EncodeReply(_StageCall):
    TYPE: ClassVar[str] = "encode_reply"
    _TUPLES: ClassVar[tuple[str, ...]] = ("truncated",)

    embeddings: np.ndarray
    truncated: tuple[bool, ...]
    digest: str
    worker_id: str
    compute_ms: float

    def __post_init__(self) -> None:
        self._check_ids()
        e = self.embeddings
        if not isinstance(e, np.ndarray) or e.dtype != np.float32 or e.ndim not in (2, 3):
            raise SchemaError(expected("embeddings float32 [N, width] or [N, tokens, width]", _shape(e)))
        if not 1 <= len(e) <= MAX_PROMPTS:
            raise SchemaError(expected(f"1..{MAX_PROMPTS} embeddings", len(e)))
        _finite("embeddings", e)
        if not (
            isinstance(self.truncated, tuple)
            and len(self.truncated) == len(e)
            and all(type(b) is bool for b in self.truncated)
        ):
            raise SchemaError(expected(f"truncated, {len(e)} bools", self.truncated))
        if not (
            isinstance(self.digest, str) and len(self.digest) == 64 and set(self.digest) <= set(_DIGEST_CHARS)
        ):
            raise SchemaError(expected("digest, 64 lower-case hex digits", self.digest))
        check_worker_id(self.worker_id)
        object.__setattr__(self, "compute_ms", _float("compute_ms", self.compute_ms, 0.0))

    def check_encoder(self, spec: TextEncoderSpec, prompts: int) -> None:
        """The reply is of the deployment's encoder (its digest) and shape, one embedding per prompt."""
        if self.digest != spec.digest:
            raise SchemaError(
                f"the text encoder's weights digest {self.digest[:12]}... is not the deployment's "
                f"{spec.digest[:12]}... ({spec.encoder_id}): a `ddm worker text-encoder` of another model "
                "answers on this queue"
            )
        want = (prompts, *spec.embedding_shape)
        if self.embeddings.shape != want:
            raise SchemaError(expected(f"embeddings {list(want)}", list(self.embeddings.shape)))


def _shape(value: object) -> str:
    return f"{value.dtype} {list(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__


KEY_BYTES = 16  # an embedding's key: 128 bits of sha256, on the wire as bytes and in Redis as 32 hex digits


def embedding_key(spec: TextEncoderSpec, prompt: str) -> bytes:
    """The key of one prompt's embedding under one encoder: the same prompt, encoder weights, form and
    token limit give the same embedding, so jobs share it (and a resumed job finds it)."""
    what = f"{spec.digest}\0{spec.form}\0{spec.max_tokens}\0{prompt}".encode()
    return hashlib.sha256(what).digest()[:KEY_BYTES]
