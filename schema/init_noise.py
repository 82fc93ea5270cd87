"""A job's given initial noise (issue 38: `--init-noise FILE.npy`, to reproduce a run exactly or compare
against another implementation from the same start): the array's rules, its digest and its stored form.

Client.submit(spec, init_noise=x) checks x against the job and the serving sample space, records
noise_digest(x) as JobSpec.init_noise (so the spec's own digest covers it) and stores x at
names.init_noise(job_id) in encode_result's format, with the job hash; the router reads it back when the
job starts and refuses a job whose noise is missing or differs from its digest. `ddm sample` starts from
the array itself.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .errors import SchemaError, expected
from .jobs import decode_result, encode_result
from .sample_space import SampleSpace


def check_init_noise(x: object, n: int, space: SampleSpace) -> np.ndarray:
    """`x` as float32 [n, C, H, W] of `space`, finite; SchemaError naming the shape it should have."""
    want = (n, *space.shape)
    if not isinstance(x, np.ndarray) or x.shape != want or not np.issubdtype(x.dtype, np.floating):
        got = f"{x.dtype} {list(x.shape)}" if isinstance(x, np.ndarray) else type(x).__name__
        raise SchemaError(expected(f"the initial noise as floats of shape {list(want)} (n, C, H, W)", got))
    x = np.ascontiguousarray(x, dtype=np.float32)
    if not np.isfinite(x).all():
        raise SchemaError(expected("a finite initial noise", "NaN or infinity"))
    return x


def noise_digest(x: np.ndarray) -> str:
    """JobSpec.init_noise: the first 32 hex digits of the sha256 of the noise's stored bytes."""
    return hashlib.sha256(encode_result(x)).hexdigest()[:32]


def stored_noise(job_id: str, data: bytes | None, digest: str, n: int, space: SampleSpace) -> np.ndarray:
    """The noise stored for a job (names.init_noise), checked against the digest its spec records;
    SchemaError when it is missing (expired, or never stored), malformed or another noise."""
    if data is None:
        raise SchemaError(
            f"job {job_id} starts from a given noise ({digest[:12]}), and none is stored for it"
        )
    x = decode_result(job_id, data, n, space=space)
    if noise_digest(x) != digest:
        raise SchemaError(
            f"job {job_id}: the stored initial noise is not the one its spec names ({digest[:12]})"
        )
    return x
