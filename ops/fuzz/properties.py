"""Hostile AMQP properties and headers: encodings a broker accepts and forwards but pika cannot decode
(the category of issue 23's single-message outage), plus legal but unusual ones that must pass.

RawProperties publishes an exact byte string as a message's content-header properties, so a test or
the fuzz run can send what no well-behaved client library would encode.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator

import pika.spec

FLAG_HEADERS = pika.spec.BasicProperties.FLAG_HEADERS
FLAG_REPLY_TO = pika.spec.BasicProperties.FLAG_REPLY_TO


class RawProperties(pika.spec.BasicProperties):
    """Properties that encode to `raw` verbatim (the flags word first, as AMQP 0-9-1 lays them out)."""

    def __init__(self, raw: bytes):
        super().__init__()
        self._raw = raw

    def encode(self):
        return [self._raw]


def _shortstr(text: bytes) -> bytes:
    return struct.pack("B", len(text)) + text


def _table(fields: bytes) -> bytes:
    return struct.pack(">I", len(fields)) + fields


def headers_only(table_fields: bytes, *, reply_to: bytes | None = None) -> RawProperties:
    """Properties with a headers table made of `table_fields` (and a reply_to, for expert requests)."""
    flags = FLAG_HEADERS | (FLAG_REPLY_TO if reply_to is not None else 0)
    raw = struct.pack(">H", flags) + _table(table_fields)
    if reply_to is not None:
        raw += _shortstr(reply_to)
    return RawProperties(raw)


def timestamp_header(seconds: int, *, reply_to: bytes | None = None) -> RawProperties:
    """A header 'ts' of AMQP type timestamp ('T', unsigned 64 bits): 2**63 overflows pika's datetime."""
    return headers_only(_shortstr(b"ts") + b"T" + struct.pack(">Q", seconds), reply_to=reply_to)


def hostile_properties(
    rng: random.Random, reply_to: bytes | None = None
) -> Iterator[tuple[str, RawProperties]]:
    """(label, properties) for every way the fuzz run breaks pika's decoder, with seeded values. Each
    must be dead-lettered once, with the worker still serving. (A field type outside AMQP's table
    types never reaches a consumer: RabbitMQ 3.x closes the publisher's connection, INTERNAL_ERROR.)"""
    yield "timestamp 2**63", timestamp_header(2**63, reply_to=reply_to)
    yield "timestamp 2**64-1", timestamp_header(2**64 - 1, reply_to=reply_to)
    yield "timestamp random huge", timestamp_header(rng.randrange(2**40, 2**64), reply_to=reply_to)
    nested = b"T" + struct.pack(">Q", 2**63)
    for _ in range(rng.randrange(1, 5)):  # the bad timestamp inside tables inside tables
        nested = b"F" + _table(_shortstr(b"n") + nested)
    yield "timestamp in a nested table", headers_only(_shortstr(b"n") + nested, reply_to=reply_to)
    array = b"A" + struct.pack(">I", 9) + b"T" + struct.pack(">Q", 2**63)
    yield "timestamp in an array", headers_only(_shortstr(b"a") + array, reply_to=reply_to)


def unusual_properties(reply_to: bytes | None = None) -> Iterator[tuple[str, RawProperties]]:
    """Legal encodings pika decodes (invalid UTF-8 in a long string stays bytes, an empty table, a
    void): a message carrying them is judged by its body like any other."""
    yield (
        "invalid utf-8 long string",
        headers_only(_shortstr(b"s") + b"S" + struct.pack(">I", 2) + b"\xff\xfe", reply_to=reply_to),
    )
    yield "empty table", headers_only(b"", reply_to=reply_to)
    yield (
        "decimal with 255 places",
        headers_only(  # decodes; re-encoding it for a dead letter fails
            _shortstr(b"d") + b"D" + struct.pack(">Bi", 255, 12345), reply_to=reply_to
        ),
    )
    yield "void", headers_only(_shortstr(b"v") + b"V", reply_to=reply_to)
