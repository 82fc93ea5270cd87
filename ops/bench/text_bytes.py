"""Bytes on the wire per VelocityRequest row, a text job's against a class job's (issue 37: at most
1.2x). A text row carries two 16-byte embedding keys (docs/PROTOCOL.md 4.6b), never an embedding, so
the ratio falls as the sample grows. Sizes only: nothing is timed.

    python -m ddm.ops.bench.text_bytes
"""

from __future__ import annotations

import numpy as np

from ddm.schema.messages import VelocityRequest
from ddm.schema.text_messages import KEY_BYTES

SHAPES = ((4, 8, 8), (1, 32, 32), (3, 16, 16), (3, 32, 32))  # emoji-latent, MNIST, text tests, emoji
ROWS = 32
REQUEST_ID = "0123456789ab.1234"  # the length of a router's request ids


def bytes_per_row(shape: tuple[int, int, int], text: bool, rows: int = ROWS) -> float:
    x = np.zeros((rows, *shape), np.float32)
    t, y, g = np.zeros(rows, np.float32), np.zeros(rows, np.int64), np.ones(rows, np.float32)
    keys = np.zeros((rows, 2, KEY_BYTES), np.uint8) if text else None
    return len(VelocityRequest(REQUEST_ID, x, t, y, g, keys).encode()) / rows


def main() -> None:
    print(f"| sample | class job, bytes/row | text job, bytes/row | text / class |  ({ROWS} rows a request)")
    print("|---|---|---|---|")
    for shape in SHAPES:
        plain, text = bytes_per_row(shape, False), bytes_per_row(shape, True)
        print(f"| {'x'.join(map(str, shape))} | {plain:.1f} | {text:.1f} | {text / plain:.3f}x |")


if __name__ == "__main__":
    main()
