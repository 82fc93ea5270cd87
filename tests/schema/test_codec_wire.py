"""Strict codec, the friendly side: msgpack-numpy wire compatibility, encoder limits, and what the
decoder imports (the hostile inputs: test_codec.py)."""

import pathlib
import subprocess
import sys

import msgpack_numpy
import numpy as np
import pytest

from ddm.schema import SchemaError, packb, unpackb
from ddm.schema.codec import ALLOWED_DTYPES, MAX_ARRAY_ELEMENTS

SHAPES = [(), (0,), (3,), (2, 3), (2, 1, 4, 4), (0, 5)]


def sample(dtype: str, shape: tuple) -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.asarray(rng.standard_normal(shape) * 5).astype(np.dtype(dtype))


# ---------------------------------------------------------------- wire compatibility


@pytest.mark.parametrize("dtype", sorted(ALLOWED_DTYPES))
@pytest.mark.parametrize("shape", SHAPES)
def test_msgpack_numpy_interop(dtype, shape):
    a = sample(dtype, shape)
    ours = unpackb(msgpack_numpy.packb({"a": a}))["a"]
    theirs = msgpack_numpy.unpackb(packb({"a": a}))["a"]
    for b in (ours, theirs):
        assert b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_array_equal(b, a)
    assert ours.flags.writeable and ours.flags.c_contiguous
    # same bytes on the wire
    assert packb(a) == msgpack_numpy.packb(a)


def test_strided_views_pack_as_c_order():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for view in (a.T, a[:, ::2], a[::-1]):
        np.testing.assert_array_equal(unpackb(packb(view)), view)


def test_numpy_scalars():
    # ours writes numpy scalars as plain numbers; msgpack-numpy's scalar map decodes strictly
    assert unpackb(packb([np.float32(1.5), np.int64(3), np.bool_(True)])) == [1.5, 3, True]
    got = unpackb(msgpack_numpy.packb(np.float32(2.5)))
    assert got == np.float32(2.5) and got.dtype == np.float32


@pytest.mark.parametrize(
    "value",
    [np.zeros(2, np.float64), np.zeros(2, np.int16), np.zeros(2, object), np.zeros(2, ">f4"), {1j}, object()],
)
def test_packb_refuses_unsupported(value):
    with pytest.raises(SchemaError, match="expected"):
        packb(value)


def test_size_limits_both_ways():
    a = np.zeros(1000, np.float32)
    with pytest.raises(SchemaError, match="at most 1024 bytes"):
        packb(a, max_bytes=1024)
    with pytest.raises(SchemaError, match="at most 1024 bytes"):
        unpackb(packb(a), max_bytes=1024)
    with pytest.raises(SchemaError, match="elements"):
        packb(np.zeros(MAX_ARRAY_ELEMENTS + 1, np.uint8), max_bytes=1 << 30)


def test_decoder_does_not_import_msgpack_numpy_or_frameworks():
    code = (
        "import sys, ddm.schema; print(sorted({'msgpack_numpy', 'torch', 'jax', 'flask'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_schema_sources_never_mention_pickle():
    src = pathlib.Path(__file__).parents[2] / "schema"
    for path in src.glob("*.py"):
        code = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        assert "import pickle" not in code and "pickle." not in code, path
