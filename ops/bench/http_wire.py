"""The wire of the HTTP-per-step baseline: POST /velocity with an .npz body (x, t, y, g) answered by an
.npz (v), read without ever unpickling; and the client connection both ends' helpers use."""

from __future__ import annotations

import http.client
import io
import threading
import time
from urllib.parse import urlsplit

import numpy as np
from numpy.lib.npyio import NpzFile

from ddm.schema.flow import IMAGE_SHAPE

# What POST /velocity takes: name -> (dtype, shape description). Rows b are the same for all four.
REQUEST_ARRAYS = {
    "x": (np.float32, "[b,1,32,32]"),
    "t": (np.float32, "[b]"),
    "y": (np.int64, "[b]"),
    "g": (np.float32, "[b]"),
}
EXPECTED_BODY = (
    "an np.savez body with arrays x float32 [b,1,32,32], t float32 [b], y int64 [b], g float32 [b]"
)
# numpy parses .npy headers with ast.literal_eval, which CPython 3.11 before 3.11.8 cannot run on two
# threads at once (SystemError "AST constructor recursion depth mismatch", cpython gh-106905); the
# threaded server and the client's job threads both read npz, so reads take turns.
NPZ_READ_LOCK = threading.Lock()


class BadRequestError(ValueError):
    """The request body is not what POST /velocity expects (answered with 400)."""


def encode_arrays(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def decode_arrays(body: bytes) -> dict[str, np.ndarray]:
    """All arrays of an .npz body. allow_pickle=False: network data is never unpickled."""
    if not body.startswith(b"PK"):  # npz = zip; anything else would reach numpy's pickle/npy paths
        raise BadRequestError(f"expected {EXPECTED_BODY}, got {len(body)} bytes that are not an .npz (zip)")
    with NPZ_READ_LOCK:
        return _read_npz(body)


def _read_npz(body: bytes) -> dict[str, np.ndarray]:
    try:
        loaded = np.load(io.BytesIO(body), allow_pickle=False)
    except Exception as exc:  # whatever np.load raises on bad bytes is the client's fault
        raise BadRequestError(f"expected {EXPECTED_BODY}; could not read the .npz: {exc}") from None
    if not isinstance(loaded, NpzFile):
        raise BadRequestError(f"expected {EXPECTED_BODY}, got {type(loaded).__name__}")
    arrays = {}
    with loaded:
        for name in loaded.files:  # members are read lazily: an object array is refused here, never unpickled
            try:
                arrays[name] = loaded[name]
            except Exception as exc:
                why = "it holds Python objects (pickled data)" if "allow_pickle" in str(exc) else str(exc)
                raise BadRequestError(f"expected {EXPECTED_BODY}; refused array {name!r}: {why}") from None
    return arrays


def parse_velocity_request(body: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode and check a /velocity body: (x, t, y, g), or BadRequestError saying what was wrong."""
    arrays = decode_arrays(body)
    if set(arrays) != set(REQUEST_ARRAYS):
        raise BadRequestError(f"expected {EXPECTED_BODY}, got arrays {sorted(arrays)}")
    x = arrays["x"]
    if x.ndim != 4 or x.shape[1:] != IMAGE_SHAPE:
        raise BadRequestError(
            f"expected x float32 [b,1,32,32], got {x.dtype} {list(x.shape)} (the body: {EXPECTED_BODY})"
        )
    b = x.shape[0]
    if b == 0:
        raise BadRequestError("expected at least one row (b >= 1), got b = 0")
    for name, (dtype, shape) in REQUEST_ARRAYS.items():
        a = arrays[name]
        want_shape = x.shape if name == "x" else (b,)
        if a.dtype != dtype or a.shape != want_shape:
            raise BadRequestError(
                f"expected {name} {np.dtype(dtype).name} {shape} with b={b}, got {a.dtype} {list(a.shape)} "
                f"(the body: {EXPECTED_BODY})"
            )
    return x, arrays["t"], arrays["y"], arrays["g"]


def wait_healthy(url: str, timeout: float = 10.0) -> None:
    """Poll GET url/healthz until it answers 200 (raises TimeoutError after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        conn = connect(url, timeout=1.0)
        try:
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}/healthz did not answer 200 within {timeout} s")
        time.sleep(0.05)


def connect(url: str, timeout: float | None = 60.0) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"expected an http://host:port URL, got {url!r}")
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
