"""Does this device compute what the CPU computes? The device self-test of an expert.

Each bucket's compiled forward pass on the device is compared with the same checkpoint run by the
same framework on the CPU in float32 (the reference), on fixed inputs: seeded noise, t spread over
[0, 1], every label and the null class. The error is max |v_device - v_cpu| / rms(v_cpu), checked
against a tolerance that fits the precision. `ddm expert selftest` runs every bucket; an expert
worker runs one bucket at start and refuses to serve on a mismatch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ddm.schema.errors import DeviceError
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.workers.expert import Expert

# Relative error allowed per precision. fp32: devices differ from the CPU only in summation order and
# convolution algorithm (about 1e-6). tf32 keeps 10 mantissa bits (about 1e-3 per product); bf16 keeps 7
# (2e-2 measured on the CPU with autocast). Each tolerance leaves about a 5x margin over that, and is far
# below what wrong weights or a broken bucket produce (order 1).
TOLERANCE = {"fp32": 1e-4, "tf32": 1e-2, "bf16": 1e-1}
LATENCY_REPEATS = 5
START_BUCKET = 8  # the worker's start-up check: the largest bucket up to this size


@dataclass(frozen=True)
class BucketCheck:
    bucket: int
    error: float  # max |v_device - v_cpu| / rms(v_cpu)
    tolerance: float
    ms: float  # median forward pass on the device

    @property
    def ok(self) -> bool:
        return bool(self.error <= self.tolerance)  # NaN fails


@dataclass
class SelftestReport:
    framework: str
    device: str
    precision: str
    checkpoint: str
    load_s: float = 0.0  # load and compile (or load from the cache) every bucket
    warmup_s: float = 0.0
    compile_report: dict | None = None
    checks: list[BucketCheck] = field(default_factory=list)

    @property
    def failed(self) -> list[BucketCheck]:
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and not self.failed

    def lines(self) -> list[str]:
        compiled = ""
        if self.compile_report:
            r = self.compile_report
            compiled = f" ({r['compiled']} buckets compiled in {r['compile_s']:.2f} s, "
            compiled += f"{r['loaded']} loaded from the cache)"
        out = [
            f"{self.framework} expert {self.checkpoint} on {self.device}, precision {self.precision}; "
            f"reference: the same checkpoint on the CPU in fp32",
            f"load and compile: {self.load_s:.2f} s{compiled}; warm-up, every bucket: {self.warmup_s:.2f} s",
            f"{'bucket':>6}  {'error':>9}  {'tolerance':>9}  {'ms':>8}  result",
        ]
        for c in self.checks:
            result = "ok" if c.ok else "MISMATCH"
            out.append(f"{c.bucket:>6}  {c.error:>9.2e}  {c.tolerance:>9.0e}  {c.ms:>8.2f}  {result}")
        if self.ok:
            out.append(f"PASS: every bucket within {TOLERANCE[self.precision]:.0e} of the CPU")
        else:
            out.append(f"FAIL: bucket {', '.join(str(c.bucket) for c in self.failed)} differ from the CPU")
        return out

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            **{k: getattr(self, k) for k in ("framework", "device", "precision", "checkpoint")},
            **{k: getattr(self, k) for k in ("load_s", "warmup_s", "compile_report")},
            "checks": [{**c.__dict__, "ok": c.ok} for c in self.checks],
        }


def fixed_inputs(
    bucket: int, seed: int = 0, space: SampleSpace = LEGACY
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x f32 [b,C,H,W] seeded noise (the expert's sample space), t f32 [b] spread over [0, 1], y i64 [b]
    cycling over its classes and the null label."""
    rng = np.random.default_rng(seed + bucket)
    x = rng.standard_normal((bucket, *space.shape), dtype=np.float32)
    t = np.linspace(0.0, 1.0, bucket, dtype=np.float32) if bucket > 1 else np.array([0.5], np.float32)
    y = np.arange(bucket, dtype=np.int64) % (space.null_class + 1)
    return x, t, y


def check_bucket(
    device: Expert, reference: Expert, bucket: int, repeats: int = LATENCY_REPEATS
) -> BucketCheck:
    x, t, y = fixed_inputs(bucket, space=reference.card.sample_space)
    if reference.text_width:  # a text expert reads prompt embeddings: seeded unit vectors
        shape = (bucket, *reference.card.text_shape)
        y = np.random.default_rng(bucket).standard_normal(shape, dtype=np.float32)
        y /= np.linalg.norm(y, axis=-1, keepdims=True)
    want = reference._forward(x, t, y)
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        got = device._forward(x, t, y)
        times.append((time.perf_counter() - start) * 1000.0)
    rms = float(np.sqrt(np.mean(want.astype(np.float64) ** 2))) or 1.0
    error = float(np.max(np.abs(got.astype(np.float64) - want))) / rms
    return BucketCheck(bucket, error, TOLERANCE[device.meta.precision], float(np.median(times)))


def load_reference(path: str | Path, buckets: tuple[int, ...]) -> Expert:
    from ddm.workers import load_expert

    return load_expert(path, "cpu", buckets=buckets, precision="fp32")


def selftest(path: str | Path, device: str, precision: str, buckets: tuple[int, ...]) -> SelftestReport:
    """Load the expert on `device` (timed), warm it up (timed), and check every bucket against the CPU."""
    from ddm.workers import load_expert

    start = time.perf_counter()
    expert = load_expert(path, device, buckets=buckets, precision=precision)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    expert.warmup()
    meta = expert.meta
    report = SelftestReport(meta.framework, meta.device, meta.precision, str(path), load_s)
    report.warmup_s, report.compile_report = time.perf_counter() - start, expert.compile_report
    reference = load_reference(path, expert.buckets or buckets)
    report.checks = [check_bucket(expert, reference, b) for b in expert.buckets or buckets]
    return report


def is_reference(expert: Expert) -> bool:
    """An expert that runs as the reference does (eager or XLA on the CPU, fp32): nothing to compare."""
    return expert.meta.device == "cpu" and expert.meta.precision == "fp32"


def startup_check(expert: Expert, path: str | Path) -> BucketCheck | None:
    """One bucket against the CPU before serving; DeviceError on a mismatch. None: nothing to compare."""
    if is_reference(expert):
        return None
    buckets = expert.buckets or (START_BUCKET,)
    bucket = max([b for b in buckets if b <= START_BUCKET] or [buckets[0]])
    check = check_bucket(expert, load_reference(path, (bucket,)), bucket, repeats=1)
    if not check.ok:
        raise DeviceError(
            f"start-up self-test: bucket {bucket} on {expert.meta.device} ({expert.meta.precision}) differs "
            f"from the CPU by {check.error:.2e} (tolerance {check.tolerance:.0e}); refusing to serve. "
            f"`ddm expert selftest` checks every bucket"
        )
    return check
