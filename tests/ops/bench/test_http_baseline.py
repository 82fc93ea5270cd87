"""The HTTP-per-step baseline (ddm.ops.bench.http_baseline and http_server), over real HTTP on 127.0.0.1."""

from __future__ import annotations

import http.client
import io

import numpy as np
import pytest

from ddm.ops.bench.http_baseline import run_http_jobs, sample_http
from ddm.ops.bench.http_server import HttpExpertServer
from ddm.ops.bench.http_wire import encode_arrays
from ddm.router.deployment_loader import load_experts, load_policy
from ddm.router.sampler import sample_local
from ddm.schema.deployment import Deployment
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob

STEPS = 4  # tiny: the experts are random, only the plumbing is under test


@pytest.fixture(scope="module")
def deployment(label_split_deployment):
    d = Deployment.load(label_split_deployment)
    return d, load_experts(d), load_policy(d)


@pytest.fixture(scope="module")
def servers(deployment):
    _, experts, _ = deployment
    started = [HttpExpertServer(e, k).start() for k, e in experts.items()]
    yield {s.expert_id: s.url for s in started}
    for s in started:
        s.close()


def post(url: str, body: bytes, path: str = "/velocity") -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def good_arrays(b: int = 1) -> dict[str, np.ndarray]:
    return {
        "x": np.zeros((b, 1, 32, 32), np.float32),
        "t": np.full(b, 0.5, np.float32),
        "y": np.full(b, 3, np.int64),
        "g": np.ones(b, np.float32),
    }


def np_save_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def assert_still_serving(url: str) -> None:
    status, body = post(url, encode_arrays(**good_arrays()))
    assert status == 200
    with np.load(io.BytesIO(body), allow_pickle=False) as npz:
        assert npz["v"].shape == (1, 1, 32, 32) and npz["v"].dtype == np.float32


def test_sample_http_equals_sample_local(deployment, servers):
    _, experts, policy = deployment
    spec = JobSpec.new([3, 7], steps=STEPS, strategy="oracle", guidance=1.0, seed=11)
    expected = sample_local({k: e.velocity for k, e in experts.items()}, policy, ResolvedJob.of(spec))
    x, step_seconds = sample_http(policy, servers, spec)
    assert x.dtype == np.float32 and x.shape == (2, 1, 32, 32)
    assert np.abs(x - expected).max() <= 1e-6
    assert len(step_seconds) == STEPS and all(s > 0 for s in step_seconds)


def test_run_http_jobs_returns_one_latency_per_job(deployment, servers):
    _, _, policy = deployment
    specs = [JobSpec.new([i, 9 - i], steps=2, strategy="oracle", guidance=1.0, seed=i) for i in range(3)]
    latencies = run_http_jobs(policy, servers, specs, concurrency=2)
    assert len(latencies) == 3 and all(s > 0 for s in latencies)


def test_velocity_header_reports_compute_time(servers):
    host, port = servers[0].removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/velocity", body=encode_arrays(**good_arrays(2)))
        response = conn.getresponse()
        response.read()
        assert response.status == 200 and float(response.getheader("X-Compute-Ms")) > 0
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not an npz", "not an .npz"),
        (encode_arrays(**{k: v for k, v in good_arrays().items() if k != "g"}), "got arrays ['t', 'x', 'y']"),
        (encode_arrays(**{**good_arrays(), "y": np.full(1, 3, np.int32)}), "expected y int64 [b]"),
        (encode_arrays(**{**good_arrays(), "x": np.zeros((1, 28, 28), np.float32)}), "expected x float32"),
        (np_save_bytes(np.zeros(3, np.float32)), "not an .npz"),
        (encode_arrays(**good_arrays())[:100], "could not read the .npz"),
    ],
    ids=["not-npz", "missing-g", "wrong-dtype", "wrong-shape", "npy", "broken-zip"],
)
def test_bad_body_is_400_with_what_was_expected(servers, body, message):
    status, text = post(servers[0], body)
    assert status == 400
    text = text.decode()
    assert message in text and "x float32" in text
    assert_still_serving(servers[0])


def test_object_array_is_refused_without_unpickling(servers, tmp_path):
    marker = tmp_path / "unpickled"

    class Boobytrap:  # unpickling this would create the marker file
        def __reduce__(self):
            return (open, (str(marker), "w"))

    arrays = good_arrays()
    arrays["x"] = np.array([Boobytrap()], dtype=object)
    status, text = post(servers[1], encode_arrays(**arrays))
    assert status == 400 and "pickled data" in text.decode()
    assert not marker.exists()
    assert_still_serving(servers[1])


def test_healthz(servers):
    host, port = servers[0].removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        assert response.status == 200 and response.read() == b"ok"
    finally:
        conn.close()


def test_run_http_jobs_raises_when_a_job_fails(deployment):
    _, experts, policy = deployment
    server = HttpExpertServer(experts[0], 0)  # bound, then closed: its port refuses connections
    url = server.url
    server.close()
    with pytest.raises(ConnectionRefusedError):
        run_http_jobs(
            policy,
            {0: url, 1: url},
            [JobSpec.new([3], steps=1, strategy="oracle", guidance=1.0)],
            concurrency=1,
        )
