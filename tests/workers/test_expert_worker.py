"""The expert worker against the real RabbitMQ and Redis: replies, batching, poison, fallback, replicas.

Every test has its own queue/key prefix and deletes what it declared. Workers run in a thread of this
process (ExpertWorker) or as `ddm worker expert` subprocesses where a test kills one with SIGKILL.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import threading
import time
import uuid

import msgpack
import numpy as np
import pika
import pytest
import redis

from ddm.ops.up.supervisor import stop_processes
from ddm.schema.deployment import Deployment
from ddm.schema.messages import PROTOCOL_VERSION, VelocityReply, VelocityRequest
from ddm.schema.settings import Settings
from ddm.schema.topology import CONTENT_TYPE, REASON_HEADER, SOURCE_QUEUE_HEADER, WORKER_HEADER
from ddm.workers import load_expert
from ddm.workers.worker import ExpertWorker
from tests.support.constants import TEST_BUCKETS
from tests.support.harness import service_env, spawn_worker
from tests.support.services import rabbitmqctl

TOL = 1e-5


# ---------------------------------------------------------------- fixtures and helpers


@pytest.fixture
def settings(prefix, amqp_url, redis_url):
    """This test's prefix (its queues and keys deleted afterwards), with fast heartbeats."""
    return Settings(amqp_url=amqp_url, redis_url=redis_url, prefix=prefix, heartbeat_s=0.2, heartbeat_ttl_s=5)


@pytest.fixture(scope="module")
def references(label_split_deployment):
    """The experts loaded in-process, to compute the expected velocities."""
    d = Deployment.load(label_split_deployment)
    cache = {}

    def get(k: int):
        if k not in cache:
            cache[k] = load_expert(d.expert(k).checkpoint, "cpu", buckets=TEST_BUCKETS)
        return cache[k]

    return get


class Client:
    """A requester with its own exclusive reply queue, as a router has."""

    def __init__(self, settings: Settings):
        self.names = settings.names
        self.conn = pika.BlockingConnection(pika.URLParameters(settings.amqp_url))
        self.ch = self.conn.channel()
        self.reply_queue = self.ch.queue_declare("", exclusive=True, auto_delete=True).method.queue
        self.replies: dict[str, list] = {}  # correlation id -> [(properties, VelocityReply)]
        self.ch.basic_consume(self.reply_queue, self._on_reply, auto_ack=True)

    def _on_reply(self, ch, method, props, body):
        self.replies.setdefault(props.correlation_id, []).append((props, VelocityReply.decode(body)))

    def send(self, expert: int, body: bytes, *, reply: bool = True, corr: str | None = None, **props) -> str:
        corr = corr or uuid.uuid4().hex
        properties = pika.BasicProperties(
            reply_to=self.reply_queue if reply else None,
            correlation_id=corr,
            content_type=CONTENT_TYPE,
            type="velocity_request",
            **props,
        )
        self.ch.basic_publish("", self.names.expert_queue(expert), body, properties)
        return corr

    def wait(self, corrs, timeout: float = 30.0) -> dict[str, VelocityReply]:
        deadline = time.monotonic() + timeout
        while not set(corrs) <= set(self.replies):
            assert time.monotonic() < deadline, f"{len(set(corrs) - set(self.replies))} replies missing"
            self.conn.process_data_events(time_limit=0.05)
        return {c: self.replies[c][0][1] for c in corrs}

    def dead_letters(self, n: int, timeout: float = 15.0) -> list:
        out, deadline = [], time.monotonic() + timeout
        while len(out) < n:
            assert time.monotonic() < deadline, f"{len(out)} of {n} dead letters arrived"
            method, props, body = self.ch.basic_get(self.names.dead_letter_queue, auto_ack=True)
            if method is None:
                self.conn.process_data_events(time_limit=0.05)
            else:
                out.append((props, body))
        return out

    def close(self):
        self.conn.close()


@pytest.fixture
def client(settings):
    c = Client(settings)
    yield c
    c.close()


def start_worker(settings, deployment, expert_id: int, **kwargs) -> ExpertWorker:
    worker = ExpertWorker(settings, deployment, expert_id, buckets=TEST_BUCKETS, **kwargs)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    assert worker.ready.wait(120), "worker did not start consuming"
    worker._test_thread = thread
    return worker


@pytest.fixture
def workers():
    started = []
    yield started
    for w in started:
        w.stop()
    for w in started:
        w._test_thread.join(30)
        assert not w._test_thread.is_alive(), "worker did not stop"


def make_request(rng, B: int, label: int, guidance: float = 1.0) -> VelocityRequest:
    return VelocityRequest(
        uuid.uuid4().hex,
        rng.standard_normal((B, 1, 32, 32)).astype(np.float32),
        rng.uniform(0, 1, B).astype(np.float32),
        np.full(B, label, np.int64),
        np.full(B, guidance, np.float32),
    )


def expected_v(expert, req: VelocityRequest) -> np.ndarray:
    return expert.velocity(req.x, req.t, req.y, req.guidance)


def heartbeat(settings, worker_id: str) -> dict[str, str]:
    r = redis.Redis.from_url(settings.redis_url, decode_responses=True)
    try:
        return r.hgetall(settings.names.worker(worker_id))
    finally:
        r.close()


def wait_heartbeat(settings, worker_id: str, field: str, want: int, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        hb = heartbeat(settings, worker_id)
        if hb and int(hb[field]) >= want:
            return hb
        assert time.monotonic() < deadline, f"heartbeat {field} never reached {want}: {hb}"
        time.sleep(0.05)


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("expert_id", [0, 1], ids=["torch", "jax"])
def test_replies_equal_in_process_velocity(
    settings, client, workers, references, label_split_deployment, rng, expert_id
):
    w = start_worker(
        settings, label_split_deployment, expert_id, max_batch=8, max_wait_ms=2, worker_id=f"w{expert_id}"
    )
    workers.append(w)
    # The last request alone exceeds max_batch (8 rows) and the largest bucket (32): still served.
    reqs = [make_request(rng, 1, 3), make_request(rng, 3, 7), make_request(rng, 5, 2, guidance=2.5)]
    reqs.append(make_request(rng, 40, 6, guidance=1.5))
    corrs = [client.send(expert_id, r.encode()) for r in reqs]
    replies = client.wait(corrs)
    for corr, req in zip(corrs, reqs, strict=True):
        props, reply = client.replies[corr][0]
        assert props.correlation_id == corr and props.type == "velocity_reply"
        assert props.content_type == CONTENT_TYPE
        assert (
            reply.request_id == req.request_id
            and reply.expert_id == expert_id
            and reply.worker_id == f"w{expert_id}"
        )
        assert replies[corr].v.shape == req.x.shape
        np.testing.assert_allclose(replies[corr].v, expected_v(references(expert_id), req), atol=TOL, rtol=0)
    hb = wait_heartbeat(settings, f"w{expert_id}", "requests", 4)
    assert hb["role"] == "expert" and hb["expert_id"] == str(expert_id)
    assert hb["framework"] == ("torch" if expert_id == 0 else "jax") and hb["device"] == "cpu"
    assert hb["queue"] == settings.names.expert_queue(expert_id) and hb["region"] == "local"
    assert int(hb["pid"]) == os.getpid() and int(hb["rows"]) == 49
    for field in ("host", "batches", "mean_batch_size", "mean_compute_ms", "started_at", "updated_at"):
        assert hb[field], field
    r = redis.Redis.from_url(settings.redis_url)
    assert 0 < r.ttl(settings.names.worker(f"w{expert_id}")) <= settings.heartbeat_ttl_s
    assert r.sismember(settings.names.workers_index, f"w{expert_id}")
    r.close()
    w.stop()
    w._test_thread.join(30)
    assert heartbeat(settings, f"w{expert_id}") == {}, "a clean stop deletes the heartbeat"


def test_batching_16_requests(settings, client, workers, references, label_split_deployment, rng):
    w = start_worker(settings, label_split_deployment, 0, max_batch=32, max_wait_ms=30, worker_id="batcher")
    workers.append(w)
    reqs = [make_request(rng, 1, i % 5) for i in range(16)]
    corrs = [client.send(0, r.encode()) for r in reqs]
    replies = client.wait(corrs)
    ref = references(0)
    for corr, req in zip(corrs, reqs, strict=True):
        np.testing.assert_allclose(replies[corr].v, expected_v(ref, req), atol=TOL, rtol=0)
    hb = wait_heartbeat(settings, "batcher", "requests", 16)
    print(
        f"\nbatching: {hb['batches']} batches, mean batch size {hb['mean_batch_size']} rows, "
        f"mean compute {hb['mean_compute_ms']} ms per batch; reply batch sizes "
        f"{sorted({r.batch_size for r in replies.values()})}"
    )
    assert float(hb["mean_batch_size"]) > 4
    assert max(r.batch_size for r in replies.values()) > 4


def _array_map(dtype: str, shape, data: bytes, kind: bytes = b"") -> dict:
    return {b"nd": True, b"type": dtype, b"kind": kind, b"shape": list(shape), b"data": data}


class _MakesMarker:
    """Pickles to "open(marker, 'w')": unpickling it would create the file. Only ever pickled here."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _wire(value):
    """A field as msgpack-numpy 0.4.8 puts it on the wire (arrays as maps), for msgpack.packb."""
    if isinstance(value, np.ndarray):
        return _array_map(value.dtype.str, value.shape, value.tobytes())
    return value


def _poison_messages(rng, marker) -> dict[str, tuple[bytes, bool]]:
    """name -> (body, has reply_to). Built with msgpack directly; nothing here ever unpickles."""
    good = make_request(rng, 2, 1)
    fields = {
        "type": "velocity_request",
        "version": PROTOCOL_VERSION,
        "request_id": "poison",
        "x": good.x,
        "t": good.t,
        "y": good.y,
        "guidance": good.guidance,
    }

    def with_(**changes) -> bytes:
        return msgpack.packb({k: _wire(v) for k, v in {**fields, **changes}.items()}, use_bin_type=True)

    evil = pickle.dumps(np.array([_MakesMarker(str(marker))], dtype=object), protocol=2)
    nan_x = good.x.copy()
    nan_x[0, 0, 3, 3] = np.nan
    return {
        "random bytes": (rng.bytes(300), True),
        "truncated": (good.encode()[:-17], True),
        # msgpack-numpy 0.4.8 would pickle.loads this "array" and create the marker file
        "pickle object array": (with_(x=_array_map("|O", [1], evil, kind=b"O")), True),
        # and build an object array from these raw bytes (pointers 0x4141...: a segfault)
        "dtype |O raw bytes": (with_(x=_array_map("|O", [2, 1, 32, 32], b"A" * 8 * 2048)), True),
        "wrong image shape": (with_(x=rng.standard_normal((2, 1, 28, 28)).astype(np.float32)), True),
        "t batch mismatch": (with_(t=np.zeros(3, np.float32)), True),
        "nan latents": (with_(x=nan_x), True),
        "x float64": (with_(x=good.x.astype(np.float64)), True),
        "y int32": (with_(y=good.y.astype(np.int32)), True),
        "missing reply_to": (good.encode(), False),
    }


def test_poison_goes_to_dead_letters_and_worker_keeps_serving(
    settings, client, workers, references, label_split_deployment, rng, tmp_path
):
    marker = tmp_path / "pwned"
    w = start_worker(settings, label_split_deployment, 0, max_wait_ms=2, worker_id="poisoned")
    workers.append(w)
    poison = _poison_messages(rng, marker)
    sent = {}
    for name, (body, has_reply_to) in poison.items():
        sent[client.send(0, body, reply=has_reply_to, corr=f"poison-{len(sent)}")] = (name, body)
    dead = client.dead_letters(len(poison))
    seen = set()
    for props, body in dead:
        name, original = sent[props.correlation_id]
        seen.add(name)
        assert body == original, name
        h = props.headers
        assert h[SOURCE_QUEUE_HEADER] == settings.names.expert_queue(0) and h[WORKER_HEADER] == "poisoned"
        assert "expected" in h[REASON_HEADER], (name, h[REASON_HEADER])
        print(f"\n{name}: {h[REASON_HEADER][:150]}", end="")
    assert seen == set(poison)
    assert not marker.exists(), "a pickle in a message was executed"
    assert client.replies == {}, "no poison message got a reply"
    good = make_request(rng, 2, 4)
    corr = client.send(0, good.encode())
    np.testing.assert_allclose(client.wait([corr])[corr].v, expected_v(references(0), good), atol=TOL, rtol=0)
    assert w.stats.dead_lettered == len(poison) and not marker.exists()


class _FailsOnT:
    """Wraps an expert; velocity raises if any row has t == bad_t (a request the model cannot serve)."""

    def __init__(self, inner, bad_t: float):
        self.inner, self.bad_t = inner, bad_t
        self.meta, self.buckets, self.compile_report = inner.meta, inner.buckets, inner.compile_report
        self.calls: list[int] = []

    def warmup(self):
        self.inner.warmup()

    def velocity(self, x, t, y, guidance=1.0):
        self.calls.append(len(x))
        if (t == self.bad_t).any():
            raise RuntimeError("simulated device failure on this input")
        return self.inner.velocity(x, t, y, guidance)


def test_failing_batch_falls_back_to_single_requests(
    settings, client, workers, references, label_split_deployment, rng
):
    flaky = _FailsOnT(references(0), 0.5)
    w = start_worker(settings, label_split_deployment, 0, max_wait_ms=200, worker_id="flaky", expert=flaky)
    workers.append(w)
    flaky.calls.clear()  # forget warm-up
    good = [make_request(rng, 2, 1), make_request(rng, 3, 2)]
    bad = make_request(rng, 1, 3)
    bad.t[0] = 0.5
    corrs = [
        client.send(0, good[0].encode()),
        client.send(0, bad.encode(), corr="bad"),
        client.send(0, good[1].encode()),
    ]
    replies = client.wait([corrs[0], corrs[2]])
    for corr, req in zip([corrs[0], corrs[2]], good, strict=True):
        np.testing.assert_allclose(replies[corr].v, expected_v(references(0), req), atol=TOL, rtol=0)
    [(props, body)] = client.dead_letters(1)
    assert props.correlation_id == "bad" and body == bad.encode()
    assert "simulated device failure" in props.headers[REASON_HEADER]
    assert flaky.calls == [6, 2, 1, 3], "one batch of 6 rows, then each request alone"
    assert "bad" not in client.replies


def _spawn_replica(settings, deployment, name: str, log_dir) -> subprocess.Popen:
    env = service_env(settings.prefix, DDM_HEARTBEAT_S="0.2", DDM_HEARTBEAT_TTL_S="5")
    args = ["--deployment", str(deployment), "--expert", "0", "--max-batch", "4", "--max-wait-ms", "2"]
    return spawn_worker(["expert", *args, "--buckets", "1,2,4,8"], name, env, log_dir)


def test_competing_replicas_survive_kill9(
    settings, client, references, label_split_deployment, rng, tmp_path
):
    procs = {
        name: _spawn_replica(settings, label_split_deployment, name, tmp_path) for name in ("rep-a", "rep-b")
    }
    try:
        deadline = time.monotonic() + 120
        for name, proc in procs.items():
            while not heartbeat(settings, name):
                assert proc.poll() is None, (tmp_path / f"{name}.log").read_text()
                assert time.monotonic() < deadline, f"{name} never became ready"
                time.sleep(0.1)
        reqs = [make_request(rng, 4, i % 5) for i in range(120)]
        corrs = [client.send(0, r.encode()) for r in reqs]
        # Kill replica a once both have served some: it holds up to 2 * max_batch unacked requests.
        by = lambda w: sum(1 for c in corrs if c in client.replies and client.replies[c][0][1].worker_id == w)  # noqa: E731
        t_end = time.monotonic() + 30
        while not (by("rep-a") >= 3 and by("rep-b") >= 3 and len(client.replies) >= 30):
            assert time.monotonic() < t_end, f"both replicas did not serve: a={by('rep-a')} b={by('rep-b')}"
            client.conn.process_data_events(time_limit=0.02)
        served_a_before_kill = by("rep-a")
        procs["rep-a"].send_signal(signal.SIGKILL)
        procs["rep-a"].wait(10)
        pending_after_kill = len(reqs) - len(client.replies)
        replies = client.wait(corrs, timeout=60)
        ref = references(0)
        for corr, req in zip(corrs, reqs, strict=True):
            np.testing.assert_allclose(replies[corr].v, expected_v(ref, req), atol=TOL, rtol=0)
        hb = heartbeat(settings, "rep-b")
        print(
            f"\nreplicas: a served {served_a_before_kill} before kill, {pending_after_kill} pending after; "
            f"b served {by('rep-b')} in all; duplicates {sum(len(v) - 1 for v in client.replies.values())}; "
            f"b: mean batch {hb['mean_batch_size']} rows, {hb['mean_compute_ms']} ms per batch"
        )
        assert pending_after_kill > 0, "the kill came after the stream ended"
    finally:
        stop_processes(procs.values(), grace_s=20)


def _close_broker_connection(name: str) -> None:
    """Force-close (CONNECTION_FORCED) the connection named `name`, as a broker restart would, but
    without disturbing anyone else on this broker."""
    listed = rabbitmqctl("list_connections", "pid", "client_properties")
    if listed.returncode != 0:
        pytest.skip(f"rabbitmqctl cannot list connections: {listed.stderr.strip()[:200]}")
    pids = [line.split("\t")[0] for line in listed.stdout.splitlines() if f'"{name}"' in line]
    assert len(pids) == 1, f"connection {name} not found: {listed.stdout[:500]}"
    assert rabbitmqctl("close_connection", pids[0], "test").returncode == 0


def test_reconnects_when_the_broker_drops_the_connection(
    settings, client, workers, references, label_split_deployment, rng
):
    name = f"recon-{settings.prefix.rstrip('.')}"
    w = start_worker(settings, label_split_deployment, 0, max_wait_ms=2, worker_id=name)
    workers.append(w)
    before = make_request(rng, 2, 1)
    corr = client.send(0, before.encode())
    client.wait([corr])
    _close_broker_connection(name)
    after = [make_request(rng, 1, 2), make_request(rng, 3, 4)]
    corrs = [client.send(0, r.encode()) for r in after]  # queued while the worker reconnects
    replies = client.wait(corrs, timeout=30)
    for c, req in zip(corrs, after, strict=True):
        np.testing.assert_allclose(replies[c].v, expected_v(references(0), req), atol=TOL, rtol=0)
    assert w.ready.is_set() and w.stats.requests == 3


def test_a_request_in_another_sample_space_is_dead_lettered_naming_both_shapes(
    settings, client, workers, references, label_split_deployment, rng
):
    """A well-formed request whose x is not the expert's sample space (its card: 1x32x32 here) decodes,
    and is dead-lettered by the worker with a reason naming the expected and the received shape."""
    w = start_worker(settings, label_split_deployment, 0, max_wait_ms=2, worker_id="one-space")
    workers.append(w)
    rgb = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    ones = np.ones(2, np.float32)
    wrong = VelocityRequest("rgb.0.1", rgb, ones / 2, np.array([1, 2], np.int64), ones)
    corr = client.send(0, wrong.encode(), corr="rgb")
    [(props, body)] = client.dead_letters(1)
    assert props.correlation_id == corr and body == wrong.encode()
    reason = props.headers[REASON_HEADER]
    assert "expected x shape [B, 1, 32, 32]" in reason and "got [2, 3, 16, 16]" in reason, reason
    good = make_request(rng, 2, 4)
    corr = client.send(0, good.encode())
    np.testing.assert_allclose(client.wait([corr])[corr].v, expected_v(references(0), good), atol=TOL, rtol=0)
    assert client.replies.keys() == {corr}
