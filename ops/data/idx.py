"""The IDX file format of MNIST and Fashion-MNIST: header, big-endian payload, gzip or plain."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from ddm.schema.errors import ConfigError, expected

GZIP_MAGIC = b"\x1f\x8b"

# IDX type code -> big-endian numpy dtype (the format stores every multi-byte number big-endian).
IDX_DTYPES: dict[int, str] = {
    0x08: "u1",
    0x09: "i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}


def read_raw(path: str | Path) -> bytes:
    """The bytes of a file, gunzipped when it starts with the gzip magic (the name does not matter)."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if blob[:2] != GZIP_MAGIC:
        return blob
    try:
        return gzip.decompress(blob)
    except (OSError, EOFError, zlib.error) as exc:
        raise ConfigError(
            f"{path}: {expected('a complete gzip stream', f'a corrupt or truncated one ({exc})')}"
        ) from exc


def parse_idx(raw: bytes, source: str = "<bytes>") -> np.ndarray:
    """Decode an IDX payload (already gunzipped) into an array with native byte order.

    Layout: 2 zero bytes, 1 type-code byte, 1 byte ndim, ndim big-endian uint32 sizes, then the data.
    """
    if len(raw) < 4:
        raise ConfigError(f"{source}: {expected('an IDX header of at least 4 bytes', f'{len(raw)} bytes')}")
    if raw[0] != 0 or raw[1] != 0:
        raise ConfigError(f"{source}: {expected('IDX magic starting with 0x00 0x00', raw[:4].hex(' '))}")
    code, ndim = raw[2], raw[3]
    if code not in IDX_DTYPES:
        codes = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise ConfigError(f"{source}: {expected(f'an IDX type code in ({codes})', f'0x{code:02X}')}")
    if ndim < 1:
        raise ConfigError(f"{source}: {expected('at least 1 dimension', ndim)}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ConfigError(f"{source}: {expected(f'{header} header bytes for {ndim} dims', len(raw))}")
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(IDX_DTYPES[code])
    want = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    got = len(raw) - header
    if got != want:
        raise ConfigError(
            f"{source}: {expected(f'{want} payload bytes for shape {dims} of {dtype.name}', got)}"
            + (" (truncated file?)" if got < want else " (trailing bytes)")
        )
    arr = np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file, gzip or plain (detected by magic bytes, not by the extension)."""
    return parse_idx(read_raw(path), str(path))
