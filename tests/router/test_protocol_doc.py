"""docs/PROTOCOL.md's worked examples are the bytes the encoder writes today (the doc cannot rot)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
