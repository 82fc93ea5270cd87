"""Strict msgpack codec with numpy arrays in msgpack-numpy 0.4.8's wire format.

An array travels as the map

    {b'nd': True, b'type': dtype.str, b'kind': b'', b'shape': [d0, ...], b'data': raw C-order bytes}

so msgpack_numpy.packb output decodes here and our output decodes with msgpack_numpy.unpackb.
The decoder is strict where msgpack-numpy is not: msgpack-numpy unpickles any array whose header says
kind 'O' and builds object arrays from raw bytes for dtype '|O' (remote code execution, segfaults).
Here a dtype allow-list, the shape and the exact byte length are checked and the array is built with
np.frombuffer. No path of this module calls pickle; it does not even import it.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np

from .errors import SchemaError, expected

DEFAULT_MAX_BYTES = 16 * 1024 * 1024  # whole message; matches Settings.max_message_bytes' default
MAX_ARRAY_ELEMENTS = 1 << 22  # 4M elements: 16 MiB of float32, far above a [256, 1, 32, 32] batch
MAX_NDIM = 4
MAX_STR_LEN = 1 << 20
MAX_CONTAINER_LEN = 1 << 16  # list and map entries; a message has tens

# dtype.str on a little-endian host -> dtype. A lookup table, so np.dtype() never sees untrusted text.
ALLOWED_DTYPES: dict[str, np.dtype] = {
    "<f4": np.dtype("<f4"),
    "<f2": np.dtype("<f2"),
    "<i8": np.dtype("<i8"),
    "<i4": np.dtype("<i4"),
    "|u1": np.dtype("|u1"),
    "|b1": np.dtype("|b1"),
}
_ARRAY_KEYS = frozenset({b"nd", b"type", b"kind", b"shape", b"data"})
_SCALAR_KEYS = frozenset({b"nd", b"type", b"data"})


# ---------------------------------------------------------------- encoding


def _encode_default(obj: Any) -> Any:
    """msgpack `default` hook: arrays to the msgpack-numpy map, numpy scalars to Python scalars."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.str not in ALLOWED_DTYPES:
            raise SchemaError(expected(f"array dtype in {sorted(ALLOWED_DTYPES)}", obj.dtype.str))
        if obj.ndim > MAX_NDIM:
            raise SchemaError(expected(f"array with at most {MAX_NDIM} dims", obj.shape))
        if obj.size > MAX_ARRAY_ELEMENTS:
            raise SchemaError(expected(f"at most {MAX_ARRAY_ELEMENTS} elements", obj.size))
        return {
            b"nd": True,
            b"type": obj.dtype.str,
            b"kind": b"",
            b"shape": list(obj.shape),
            b"data": obj.tobytes(order="C"),  # one copy; also makes strided views contiguous
        }
    if isinstance(obj, np.bool_ | np.integer | np.floating):
        return obj.item()
    raise SchemaError(expected("msgpack-serialisable value (dict, list, str, bytes, number, ndarray)", obj))


def packb(obj: Any, *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Serialise `obj` (dicts, lists, tuples, str, bytes, numbers, None, allowed-dtype ndarrays).

    Raises SchemaError for unsupported values or when the result exceeds `max_bytes`, so a sender
    fails before a receiver would refuse the message.
    """
    try:
        data = msgpack.packb(obj, default=_encode_default, use_bin_type=True)
    except SchemaError:
        raise
    except (TypeError, ValueError, OverflowError) as e:
        raise SchemaError(expected("msgpack-serialisable value", f"{type(e).__name__}: {e}")) from e
    if len(data) > max_bytes:
        raise SchemaError(expected(f"encoded message of at most {max_bytes} bytes", len(data)))
    return data


# ---------------------------------------------------------------- decoding


def _decode_dtype(header: dict) -> np.dtype:
    descr = header[b"type"]
    if not isinstance(descr, str) or descr not in ALLOWED_DTYPES:
        raise SchemaError(expected(f"array dtype in {sorted(ALLOWED_DTYPES)}", descr))
    return ALLOWED_DTYPES[descr]


def _decode_data(header: dict, dtype: np.dtype, count: int) -> bytes:
    data = header[b"data"]
    if not isinstance(data, bytes):
        raise SchemaError(expected("array data as bytes", type(data).__name__))
    if len(data) != count * dtype.itemsize:
        raise SchemaError(
            expected(f"{count} x {dtype.itemsize} = {count * dtype.itemsize} data bytes", len(data))
        )
    if dtype.kind == "b" and count and (top := int(np.frombuffer(data, np.uint8).max())) > 1:
        # numpy would wrap other bytes into bool arrays whose values are neither True nor False.
        raise SchemaError(expected("bool bytes 0 or 1", top))
    return data


def _decode_array(header: dict) -> np.ndarray:
    """Build an ndarray from a checked msgpack-numpy header. Never unpickles."""
    if set(header) != _ARRAY_KEYS:
        raise SchemaError(expected(f"array keys {sorted(_ARRAY_KEYS)}", sorted(header)))
    if header[b"kind"] != b"":
        # kind 'O' means "pickle.loads(data)" to msgpack-numpy; 'V' structured dtypes. Both refused.
        raise SchemaError(expected("array kind b''", header[b"kind"]))
    dtype = _decode_dtype(header)
    shape = header[b"shape"]
    if not isinstance(shape, list) or len(shape) > MAX_NDIM:
        raise SchemaError(expected(f"shape as a list of at most {MAX_NDIM} ints", shape))
    if not all(type(d) is int and d >= 0 for d in shape):
        raise SchemaError(expected("shape of non-negative ints", shape))
    count = math.prod(shape)  # Python ints: no overflow for huge declared shapes
    if count > MAX_ARRAY_ELEMENTS:
        raise SchemaError(expected(f"at most {MAX_ARRAY_ELEMENTS} elements", count))
    data = _decode_data(header, dtype, count)
    # frombuffer views the immutable bytes; copy so receivers get an ordinary writable array.
    return np.frombuffer(data, dtype=dtype, count=count).reshape(shape).copy()


def _decode_scalar(header: dict) -> np.generic:
    """msgpack-numpy's numpy scalar form {b'nd': False, b'type', b'data'}."""
    if set(header) != _SCALAR_KEYS:
        raise SchemaError(expected(f"scalar keys {sorted(_SCALAR_KEYS)}", sorted(header)))
    dtype = _decode_dtype(header)
    data = _decode_data(header, dtype, 1)
    return np.frombuffer(data, dtype=dtype, count=1)[0].copy()


def _pairs_hook(pairs: list, *, numpy_scalars: bool = True) -> Any:
    """Every msgpack map passes here: refuse duplicate keys, decode array headers."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise SchemaError(expected("map without duplicate keys", [k for k, _ in pairs]))
    if b"nd" not in obj:
        return obj
    nd = obj[b"nd"]
    if nd is True:
        return _decode_array(obj)
    if nd is False and numpy_scalars:
        return _decode_scalar(obj)
    if nd is False:
        # msgpack-numpy writes np.int64(3) as this map; a message's ints and floats are msgpack ints
        # and floats (PROTOCOL.md 4.1), so `numbers.Integral` field checks never see a numpy scalar.
        raise SchemaError(expected("a msgpack int or float, not a numpy scalar map", obj))
    raise SchemaError(expected("b'nd' flag True or False", nd))


def _pairs_hook_no_scalars(pairs: list) -> Any:
    return _pairs_hook(pairs, numpy_scalars=False)


def _ext_hook(code: int, data: bytes) -> Any:
    raise SchemaError(expected("no msgpack ext types", f"ext type {code}"))


def unpackb(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES, numpy_scalars: bool = True) -> Any:
    """Strictly decode one msgpack message; arrays come back as writable ndarrays.

    Raises SchemaError for anything malformed: bad msgpack, trailing bytes, oversize input,
    duplicate map keys, ext types, or array headers outside the allow-list. numpy_scalars=False also
    refuses msgpack-numpy's numpy-scalar maps ({b'nd': False, ...}): messages decode that way.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise SchemaError(expected("bytes", type(data).__name__))
    if len(data) > max_bytes:
        raise SchemaError(expected(f"message of at most {max_bytes} bytes", len(data)))
    # msgpack.unpackb takes no max_buffer_size (Unpacker does): its buffer is `data`, already bounded.
    try:
        return msgpack.unpackb(
            data,
            raw=False,
            use_list=True,
            strict_map_key=True,
            object_pairs_hook=_pairs_hook if numpy_scalars else _pairs_hook_no_scalars,
            ext_hook=_ext_hook,
            max_str_len=min(max_bytes, MAX_STR_LEN),
            max_bin_len=max_bytes,
            max_array_len=MAX_CONTAINER_LEN,
            max_map_len=MAX_CONTAINER_LEN,
            max_ext_len=0,
        )
    except SchemaError:
        raise
    except Exception as e:  # msgpack raises ValueError, StackError, ExtraData, UnicodeDecodeError, ...
        raise SchemaError(expected("valid msgpack", f"{type(e).__name__}: {e}")) from e
