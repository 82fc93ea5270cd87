"""Hostile messages for the pipeline's queues, by category, from one seed.

Every message here must be refused (dead-lettered with a reason) by the worker that receives it; none
may run anything, stop a worker, or change another job. What a category holds:

    bytes         random bytes
    msgpack       well-formed msgpack that is not one of our messages (wrong type tag, a list, nil,
                  an ext type, deep nesting, trailing data)
    pickle        msgpack-numpy arrays of kind 'O' or dtype '|O' carrying a pickle that would create
                  `marker` if anything unpickled it
    bad-values    our messages with values their checks refuse (steps 5000, label 99, strategy 'bogus',
                  NaN guidance, an unknown field, version 2; a request with 257 rows or a wrong shape)
    content-type  a valid message under another content type
    no-reply-to   a valid expert request with nowhere to answer
    properties    a valid message with AMQP properties pika cannot decode (ops/fuzz/properties.py)
    stage-outputs requests to every stage (expert, decoder) whose inputs are finite but huge (1e20,
                  float32's largest): a forward pass or a decode would turn them into non-finite
                  outputs; plus a 0-d t or guidance, and a reply_to in the direct reply-to namespace
                  (a reply there closes the replier's connection). Decoder ones go only to a
                  deployment with a decoder.
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack
import numpy as np
import pika

from ddm.ops.fuzz.properties import hostile_properties
from ddm.schema.decode_messages import DecodeRequest
from ddm.schema.messages import JobSpec, VelocityRequest
from ddm.schema.topology import CONTENT_TYPE

CATEGORIES = (
    "bytes",
    "msgpack",
    "pickle",
    "bad-values",
    "content-type",
    "no-reply-to",
    "properties",
    "stage-outputs",
)
FORGED_REPLY_TO = "amq.rabbitmq.reply-to.g1h2AA5yZXBseUAxODQ3MjQzMQAAAAAAAA==.AAA"  # closed a replier


@dataclass(frozen=True)
class Hostile:
    category: str
    label: str
    target: str  # "jobs", "expert" or "decoder"
    body: bytes
    properties: pika.BasicProperties


class _Pickled:
    """Unpickling this creates `path` (what a decoder that calls pickle would do)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def _request(rows: int = 1, request_id: str = "fuzz") -> VelocityRequest:
    x = np.zeros((rows, 1, 32, 32), np.float32)
    t, y, g = np.full(rows, 0.5, np.float32), np.full(rows, 3), np.ones(rows, np.float32)
    return VelocityRequest(request_id, x, t, y, g)


def _array_map(kind: bytes, dtype: str, data: bytes, shape=(1,)) -> dict:
    return {b"nd": True, b"type": dtype, b"kind": kind, b"shape": list(shape), b"data": data}


def _reshaped_request(rows: int, sample_shape: tuple[int, ...]) -> bytes:
    """A request's wire map with zero arrays of `rows` rows and samples of `sample_shape`."""
    m = msgpack.unpackb(_request().encode())
    for key, shape in (("x", (rows, *sample_shape)), ("t", (rows,)), ("y", (rows,)), ("guidance", (rows,))):
        arr = m[key]
        itemsize = np.dtype(arr[b"type"]).itemsize
        arr[b"shape"], arr[b"data"] = list(shape), bytes(int(np.prod(shape)) * itemsize)
    return msgpack.packb(m)


def filled_message(message, key: str, value: float, shape: tuple[int, ...] | None = None) -> bytes:
    """`message`'s wire form with array `key` filled with `value` (and reshaped): what a stranger can
    send, though our constructors refuse to build it."""
    m = msgpack.unpackb(message.encode())
    arr = m[key]
    shape = tuple(arr[b"shape"]) if shape is None else shape
    arr[b"shape"], arr[b"data"] = list(shape), np.full(shape, value, np.dtype(arr[b"type"])).tobytes()
    return msgpack.packb(m)


def _decode_request(latent_shape: tuple[int, ...]) -> DecodeRequest:
    return DecodeRequest("fuzz-decode", "fuzz-decode.1", np.zeros((2, *latent_shape), np.float32))


def _spec_map(**override) -> dict:
    base = {"type": "job_spec", "version": 1, "job_id": "fuzz-spec", "labels": [1], "steps": 4}
    return base | {"strategy": None, "guidance": None, "seed": 0} | override


def _bodies(
    category: str, rng: random.Random, marker: Path, tag: str, latent_shape: tuple[int, ...]
) -> Iterator[tuple[str, str, bytes]]:
    """(label, target, body) of one category; valid bodies carry `tag` in their ids (a dead letter of
    undecodable properties keeps only its body: the tag says whose it is)."""
    if category == "bytes":
        for target in ("jobs", "expert"):
            yield "random", target, rng.randbytes(rng.randrange(0, 512))
    elif category == "msgpack":
        for label, obj in (
            ("list", [1, 2, 3]),
            ("nil", None),
            ("wrong type tag", _spec_map(type="frame")),
            ("ext type", {"type": "job_spec", "version": msgpack.ExtType(1, b"x")}),
        ):
            yield label, rng.choice(("jobs", "expert")), msgpack.packb(obj)
        yield "deep nesting", "jobs", b"\x91" * rng.randrange(1000, 100_000)
        yield "trailing data", "jobs", msgpack.packb(_spec_map()) + b"\x00"
    elif category == "pickle":
        payload = pickle.dumps(_Pickled(str(marker)))
        for kind, dtype in ((b"O", "|O"), (b"O", "<f4"), (b"", "|O")):
            x = _array_map(kind, dtype, payload)
            body = msgpack.packb({"type": "velocity_request", "version": 1, "request_id": "p", "x": x})
            yield f"kind {kind!r} dtype {dtype}", "expert", body
            yield f"labels kind {kind!r} dtype {dtype}", "jobs", msgpack.packb(_spec_map(labels=x))
    elif category == "bad-values":
        for label, override in (
            ("steps 5000", {"steps": 5000}),
            ("label 99", {"labels": [99]}),
            ("strategy bogus", {"strategy": "bogus"}),
            ("guidance NaN", {"guidance": float("nan")}),
            ("unknown field", {"extra": 1}),
            ("version 2", {"version": 2}),
        ):
            yield label, "jobs", msgpack.packb(_spec_map(job_id=f"fuzz-{rng.getrandbits(48):x}", **override))
        yield "257 rows", "expert", _reshaped_request(257, (1, 32, 32))
        yield "3x32x32 rows", "expert", _reshaped_request(1, (3, 32, 32))
    elif category in ("content-type", "properties"):
        job_id = f"fuzz-{tag}-{rng.getrandbits(32):x}"
        yield "job", "jobs", JobSpec(job_id, (rng.randrange(10),), 2, seed=rng.getrandbits(31)).encode()
        yield "request", "expert", _request(request_id=f"fuzz.{tag}.{rng.getrandbits(32):x}").encode()
    elif category == "no-reply-to":
        yield "request", "expert", _request(request_id=f"fuzz.{tag}.{rng.getrandbits(32):x}").encode()
    elif category == "stage-outputs":
        for value in (1e20, -3.4e38):
            yield f"x {value:g}", "expert", filled_message(_request(), "x", value)
            yield f"z {value:g}", "decoder", filled_message(_decode_request(latent_shape), "z", value)
        yield "guidance 1e30", "expert", filled_message(_request(), "guidance", 1e30)
        yield "0-d t", "expert", filled_message(_request(), "t", 0.5, shape=())
        yield "0-d guidance", "expert", filled_message(_request(), "guidance", 2.0, shape=())
        yield "forged reply-to", "expert", _request(request_id=f"fuzz.{tag}.{rng.getrandbits(32):x}").encode()
        yield "forged reply-to", "decoder", _decode_request(latent_shape).encode()


def hostile_messages(
    category: str,
    rng: random.Random,
    marker: Path,
    reply_to: str,
    tag: str = "run",
    latent_shape: tuple[int, ...] = (4, 8, 8),
) -> Iterator[Hostile]:
    """The hostile messages of `category` (one round of it; call again for more, the rng moves on).
    latent_shape: one latent of the decoder the decoder-bound ones go to."""
    if category not in CATEGORIES:
        raise ValueError(f"expected a category in {list(CATEGORIES)}, got {category!r}")
    for label, target, body in _bodies(category, rng, marker, tag, latent_shape):
        if category == "properties":
            for how, props in hostile_properties(rng, reply_to.encode()):
                yield Hostile(category, f"{label}: {how}", target, body, props)
            continue
        content_type = "text/plain" if category == "content-type" else CONTENT_TYPE
        answer_to = None if category == "no-reply-to" else reply_to
        if label == "forged reply-to":
            answer_to = FORGED_REPLY_TO
        props = pika.BasicProperties(content_type=content_type, reply_to=answer_to, correlation_id=label)
        yield Hostile(category, label, target, body, props)
