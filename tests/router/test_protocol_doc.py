"""docs/PROTOCOL.md's worked examples are the bytes the encoder writes today, and its Redis sections name
every field of the records in schema/ (the doc cannot rot)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import msgpack
import msgpack_numpy
import numpy as np

from ddm.schema import SchemaError, jobs, packb
from ddm.schema.descriptor import DeploymentDescriptor, ExpertInfo
from ddm.schema.heartbeat import EXPERT_COUNTERS, ROUTER_COUNTERS, WorkerHeartbeat
from ddm.schema.messages import JobSpec, VelocityRequest

DOC = Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md"


def hexdump(data: bytes, elide: tuple[int, int] | None = None) -> str:
    """16 bytes a line, 'offset: hex  ascii', with bytes [elide[0], elide[1]) replaced by one line."""
    lines, i = [], 0
    while i < len(data):
        if elide and i == elide[0]:
            lines.append(f"{i:04x}: ... {elide[1] - elide[0]} more bytes of x data ...")
            i = elide[1]
            continue
        end = min(len(data), i + 16)
        if elide and i < elide[0] < end:
            end = elide[0]
        chunk = data[i:end]
        text = "".join(chr(c) if 32 <= c < 127 else "." for c in chunk)
        lines.append(f"{i:04x}: " + " ".join(f"{c:02x}" for c in chunk).ljust(48) + "  " + text)
        i = end
    return "\n".join(line.rstrip() for line in lines)


def test_worked_examples_match_the_encoder():
    doc = "\n".join(line.rstrip() for line in DOC.read_text().splitlines())
    x = np.zeros((1, 1, 32, 32), np.float32)
    x[0, 0, 0, 0] = 1.0
    req = VelocityRequest(
        "3f2a.0.1", x, np.array([0.0], np.float32), np.array([7], np.int64), np.array([1.0], np.float32)
    ).encode()
    assert len(req) == 4347
    start = req.index(x.tobytes()) + 16  # the first 16 data bytes are shown
    assert hexdump(req, (start, start + 4096 - 16)) in doc
    job = JobSpec("3f2a", (7, 7), steps=50, strategy="top1", guidance=1.0, seed=0).encode()
    assert len(job) == 91
    assert hexdump(job) in doc


def section(doc: str, title: str) -> str:
    start = doc.index(title)
    end = doc.find("\n### ", start + 1)
    return doc[start : end if end != -1 else len(doc)]


def test_the_redis_records_are_documented_field_by_field():
    doc = DOC.read_text()
    job_hash = section(doc, "### Job hash")
    assert [f for f in jobs.FIELDS if f"`{f}`" not in job_hash] == []
    descriptor = section(doc, "### Deployment descriptor")
    names = [f.name for f in dataclasses.fields(DeploymentDescriptor)]
    names += [f.name for f in dataclasses.fields(ExpertInfo)]
    assert [n for n in names if f'"{n}"' not in descriptor] == []
    beats = section(doc, "### Heartbeats")
    fields = [f.name for f in dataclasses.fields(WorkerHeartbeat) if f.name != "counters"]
    assert [f for f in (*fields, *EXPERT_COUNTERS, *ROUTER_COUNTERS) if f not in beats] == []


def number_table(doc: str) -> list[tuple[bytes, str, str]]:
    """Section 4.1's table: (the encoding's bytes as the doc shows them, int verdict, float verdict);
    a row whose bytes end in '...' is a map, completed by number_encoding."""
    block = doc[doc.index("<!-- numbers:") :].split("\n\n", 1)[0]
    rows = []
    for line in block.splitlines()[3:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        shown = re.match(r"`([0-9a-f .]+)`", cells[0]).group(1)
        rows.append((shown, cells[1], cells[2]))
    return rows


def number_encoding(shown: str) -> bytes:
    """The complete bytes of a row: as shown, or the map (written by msgpack-numpy / our encoder) that
    starts with the shown bytes."""
    if not shown.endswith("..."):
        return bytes.fromhex(shown)
    head = bytes.fromhex(shown.removesuffix("...").strip())
    maps = [msgpack_numpy.packb(np.int64(3)), packb(np.array(3))]
    (full,) = [m for m in maps if m.startswith(head)]
    return full


def spec_with(field: str, encoded: bytes) -> bytes:
    """A JobSpec written by hand, with `field`'s value as the given msgpack bytes."""
    fields = {"type": "job_spec", "version": 1, "job_id": "j1", "labels": [3], "steps": 3}
    fields |= {"strategy": None, "guidance": None, "seed": 0}
    pairs = (msgpack.packb(k) + (encoded if k == field else msgpack.packb(v)) for k, v in fields.items())
    return bytes([0x80 | len(fields)]) + b"".join(pairs)


def verdict(field: str, encoded: bytes) -> str:
    try:
        value = getattr(JobSpec.decode(spec_with(field, encoded)), field)
    except SchemaError:
        return "refused"
    assert value == 3 and type(value) is (int if field == "steps" else float), (field, value)
    return "accepted"


def test_the_accepted_number_encodings_are_pinned():
    rows = number_table(DOC.read_text())
    # every msgpack int width is in the table, accepted where an int is expected ...
    ints = {shown.split()[0] for shown, as_int, _ in rows if as_int == "accepted"}
    assert ints == {"03", "cc", "cd", "ce", "cf", "d0", "d1", "d2", "d3"}
    # ... and each row says what the decoder does (JobSpec.steps is an int field, guidance a float one)
    for shown, as_int, as_float in rows:
        encoded = number_encoding(shown)
        assert (verdict("steps", encoded), verdict("guidance", encoded)) == (as_int, as_float), shown
