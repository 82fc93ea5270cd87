"""The device self-test (workers/selftest.py): a device that computes what the CPU computes passes, a bucket
or a whole expert that computes something else fails by name, the tolerance fits the precision; and an
expert worker whose start-up check fails refuses to serve.

Tiny random-weight checkpoints, buckets (1, 2, 4); `cpu-traced` stands in for a compiling device.
"""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import redis

from ddm.schema.errors import DeviceError
from ddm.schema.heartbeat import WorkerHeartbeat
from ddm.schema.settings import Settings
from ddm.workers import load_expert
from ddm.workers.selftest import (
    START_BUCKET,
    TOLERANCE,
    BucketCheck,
    SelftestReport,
    check_bucket,
    fixed_inputs,
    load_reference,
    selftest,
    startup_check,
)
from ddm.workers.worker import ExpertWorker
from tests.support.checkpoints import good_and_perturbed
from tests.support.fakes import write_deployment

BUCKETS = (1, 2, 4)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> tuple[Path, Path]:
    """(a tiny random torch expert, the same with one tensor perturbed)."""
    return good_and_perturbed(tmp_path_factory.mktemp("selftest"))


@pytest.fixture(scope="module")
def traced_cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("traced"))


@pytest.fixture(autouse=True)
def trace_cache_dir(monkeypatch, traced_cache):
    """cpu-traced loads keep their traced buckets in this module's folder, never under ~."""
    monkeypatch.setenv("DDM_TRACE_CACHE_DIR", traced_cache)


@pytest.fixture(scope="module")
def reference(checkpoints):
    return load_reference(checkpoints[0], BUCKETS)


def traced(path: Path, buckets=BUCKETS):
    return load_expert(path, "cpu-traced", buckets=buckets, precision="fp32")


def report_of(device, reference, buckets=BUCKETS) -> SelftestReport:
    """What selftest() builds, for an expert a test has tampered with."""
    meta = device.meta
    report = SelftestReport(meta.framework, meta.device, meta.precision, meta.path)
    report.checks = [check_bucket(device, reference, b, repeats=1) for b in buckets]
    return report


def row_of(lines: list[str], bucket: int) -> str:
    (row,) = [line for line in lines if line.split()[:1] == [str(bucket)]]
    return row


# ---------------------------------------------------------------- selftest passes where the device agrees


def test_passes_on_the_cpu_in_fp32(checkpoints):
    good, _ = checkpoints
    report = selftest(good, "cpu", "fp32", BUCKETS)
    assert report.ok and not report.failed
    assert [c.bucket for c in report.checks] == list(BUCKETS)
    assert all(c.error == 0.0 and c.tolerance == TOLERANCE["fp32"] and c.ms > 0 for c in report.checks)
    assert (report.framework, report.device, report.precision) == ("torch", "cpu", "fp32")
    assert report.compile_report is None  # eager: nothing compiled
    lines = report.lines()
    assert lines[-1].startswith("PASS") and "1e-04" in lines[-1]
    for b in BUCKETS:
        assert row_of(lines, b).endswith("ok")


def test_passes_on_cpu_traced_and_reports_the_compile(checkpoints, traced_cache):
    good, _ = checkpoints
    shutil.rmtree(traced_cache)  # an empty cache: every bucket compiled
    report = selftest(good, "cpu-traced", "fp32", BUCKETS)
    assert report.ok, "\n".join(report.lines())
    assert [c.bucket for c in report.checks] == list(BUCKETS)
    assert all(c.error <= 1e-5 for c in report.checks)
    assert report.compile_report["compiled"] == len(BUCKETS) and report.compile_report["loaded"] == 0
    assert report.load_s > 0 and report.warmup_s > 0
    lines = report.lines()
    assert "on cpu-traced, precision fp32" in lines[0]
    assert re.search(rf"\b{len(BUCKETS)} buckets compiled\b", lines[1]) and re.search(
        r"\b0 loaded\b", lines[1]
    )
    assert all(row_of(lines, b).endswith("ok") for b in BUCKETS)
    assert lines[-1].startswith("PASS")
    again = selftest(good, "cpu-traced", "fp32", BUCKETS)  # a second run loads every bucket
    assert again.ok and again.compile_report["compiled"] == 0
    assert again.compile_report["loaded"] == len(BUCKETS)
    data = again.to_json()
    assert data["ok"] is True and [c["bucket"] for c in data["checks"]] == list(BUCKETS)
    assert all(c["ok"] is True for c in data["checks"])


# ---------------------------------------------------------------- ... and fails by name where it does not


def test_one_perturbed_bucket_fails_by_name(checkpoints, reference):
    good, perturbed = checkpoints
    device = traced(good)
    device._bucket_fns[2] = traced(perturbed)._bucket_fns[2]  # bucket 2 compiled from other weights
    report = report_of(device, reference)
    assert [c.ok for c in report.checks] == [True, False, True]
    (bad,) = report.failed
    assert bad.bucket == 2 and bad.error > 10 * bad.tolerance
    assert not report.ok
    lines = report.lines()
    assert row_of(lines, 2).endswith("MISMATCH") and row_of(lines, 4).endswith("ok")
    assert lines[-1].startswith("FAIL: bucket 2 ")
    data = report.to_json()
    assert data["ok"] is False and [c["ok"] for c in data["checks"]] == [True, False, True]


def test_a_perturbed_expert_fails_every_bucket(checkpoints, reference):
    _, perturbed = checkpoints
    report = report_of(traced(perturbed), reference)
    assert not report.ok and len(report.failed) == len(BUCKETS)
    assert all(c.error > 0.5 for c in report.checks)  # order 1, far beyond any tolerance
    assert report.lines()[-1].startswith("FAIL: bucket 1, 2, 4 ")


def test_bf16_on_the_cpu_passes_at_its_tolerance_and_not_at_fp32s(checkpoints):
    good, _ = checkpoints
    report = selftest(good, "cpu", "bf16", BUCKETS)
    assert report.ok, "\n".join(report.lines())
    assert report.precision == "bf16" and all(c.tolerance == TOLERANCE["bf16"] for c in report.checks)
    assert report.lines()[-1].startswith("PASS") and "1e-01" in report.lines()[-1]
    # bf16 really ran (an fp32 forward would be exact) and is far outside what fp32 allows
    for c in report.checks:
        assert c.error > 10 * TOLERANCE["fp32"], c
        assert not BucketCheck(c.bucket, c.error, TOLERANCE["fp32"], c.ms).ok


def test_the_tolerances_are_ordered():
    assert TOLERANCE["fp32"] < TOLERANCE["tf32"] < TOLERANCE["bf16"] < 0.5


def test_nan_fails_and_an_empty_report_is_not_a_pass():
    assert not BucketCheck(1, float("nan"), 1e-4, 1.0).ok
    assert not BucketCheck(1, float("inf"), 1e-4, 1.0).ok
    assert BucketCheck(1, 1e-4, 1e-4, 1.0).ok  # the tolerance itself is within
    assert not SelftestReport("torch", "cpu", "fp32", "x").ok


def test_fixed_inputs_are_fixed_and_cover_the_labels():
    x, t, y = fixed_inputs(16)
    again = fixed_inputs(16)
    assert np.array_equal(x, again[0]) and np.array_equal(t, again[1]) and np.array_equal(y, again[2])
    assert x.dtype == np.float32 and t.dtype == np.float32 and y.dtype == np.int64
    assert t[0] == 0.0 and t[-1] == 1.0 and set(y.tolist()) == set(range(11))  # 0-9 and the null class
    assert fixed_inputs(1)[1].tolist() == [0.5]


# ---------------------------------------------------------------- the worker's start-up check


def test_startup_check_skips_the_reference_itself(checkpoints):
    good, _ = checkpoints
    assert startup_check(load_expert(good, "cpu", buckets=BUCKETS, precision="fp32"), good) is None


def test_startup_check_passes_on_cpu_traced_at_its_largest_bucket_up_to_8(checkpoints):
    good, _ = checkpoints
    check = startup_check(traced(good), good)
    assert check is not None and check.ok and check.bucket == 4 and check.error <= 1e-5
    check = startup_check(traced(good, buckets=(2, 16)), good)
    assert check.bucket == 2  # the largest bucket <= START_BUCKET
    assert startup_check(traced(good, buckets=(16, 32)), good).bucket == 16  # none <= 8: the smallest


def test_startup_check_of_bf16_on_the_cpu_passes(checkpoints):
    good, _ = checkpoints
    check = startup_check(load_expert(good, "cpu", buckets=BUCKETS, precision="bf16"), good)
    assert check.ok and check.bucket == START_BUCKET and check.tolerance == TOLERANCE["bf16"]


def test_startup_check_refuses_a_perturbed_bucket_by_name(checkpoints):
    good, perturbed = checkpoints
    device = traced(good)
    device._bucket_fns[4] = traced(perturbed)._bucket_fns[4]  # the bucket the start-up check runs
    with pytest.raises(DeviceError, match=r"bucket 4 on cpu-traced \(fp32\) differs from the CPU") as info:
        startup_check(device, good)
    assert "refusing to serve" in str(info.value) and "ddm expert selftest" in str(info.value)


# ---------------------------------------------------------------- an expert worker refuses to serve


@pytest.fixture
def deployment(checkpoints, tmp_path) -> Path:
    """Expert 0 = the good checkpoint (what the worker's start-up check compares with)."""
    good, _ = checkpoints
    return write_deployment(tmp_path, [str(good)])


def run_in_thread(worker: ExpertWorker) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def target():
        try:
            worker.run()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, errors


def test_a_worker_with_a_mismatching_device_never_serves(settings, deployment, checkpoints):
    _, perturbed = checkpoints
    worker = ExpertWorker(settings, deployment, 0, expert=traced(perturbed), worker_id="w-mismatch")
    thread, errors = run_in_thread(worker)
    thread.join(30)  # the start-up check fails within seconds
    if thread.is_alive():  # it went on (serving or retrying) instead of stopping: stop it, then fail
        worker.stop()
        thread.join(30)
        pytest.fail("the worker did not stop on a start-up self-test mismatch")
    assert len(errors) == 1 and isinstance(errors[0], DeviceError), errors
    assert "bucket 4" in str(errors[0]) and "refusing to serve" in str(errors[0])
    assert not worker.ready.is_set()
    r = redis.Redis.from_url(settings.redis_url)
    try:  # no heartbeat: `ddm status` and the routers never saw this worker
        assert not r.exists(settings.names.worker("w-mismatch"))
        assert not r.sismember(settings.names.workers_index, "w-mismatch")
    finally:
        r.close()


def test_a_worker_whose_device_agrees_serves_and_says_its_precision(
    prefix, amqp_url, redis_url, deployment, checkpoints
):
    """The control: the same set-up with the unperturbed expert starts; its heartbeat has the precision."""
    good, _ = checkpoints
    settings = Settings(prefix=prefix, amqp_url=amqp_url, redis_url=redis_url, heartbeat_s=0.2)
    worker = ExpertWorker(settings, deployment, 0, expert=traced(good), worker_id="w-agrees")
    thread, errors = run_in_thread(worker)
    try:
        assert worker.ready.wait(60), f"the worker did not start consuming: {errors}"
        r = redis.Redis.from_url(redis_url)
        try:
            beat = WorkerHeartbeat.decode(r.hgetall(settings.names.worker("w-agrees")))
        finally:
            r.close()
        assert (beat.device, beat.precision, beat.buckets) == ("cpu-traced", "fp32", BUCKETS)
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive() and not errors
