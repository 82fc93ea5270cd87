"""Messages: round trips, validation on construction, JobSpec helpers, msgpack-numpy interop."""

import dataclasses
import json
import math

import msgpack_numpy
import numpy as np
import pytest

from ddm.schema import Frame, JobSpec, JobStatus, SchemaError, Strategy, VelocityReply, VelocityRequest
from ddm.schema.messages import MAX_BATCH, PROTOCOL_VERSION

rng = np.random.default_rng(0)


def make_request(B=3, **kw) -> VelocityRequest:
    fields = dict(
        request_id="job1:12:0",
        x=rng.standard_normal((B, 1, 32, 32)).astype(np.float32),
        t=np.linspace(0, 1, B, dtype=np.float32),
        y=np.arange(B, dtype=np.int64) % 11,
        guidance=np.full(B, 2.0, np.float32),
    )
    return VelocityRequest(**{**fields, **kw})


def make_reply(B=3, **kw) -> VelocityReply:
    fields = dict(
        request_id="job1:12:0",
        v=rng.standard_normal((B, 1, 32, 32)).astype(np.float32),
        expert_id=1,
        worker_id="gpu-host.2@eu",
        compute_ms=4.25,
        batch_size=16,
    )
    return VelocityReply(**{**fields, **kw})


def make_frame(n=4, K=2, **kw) -> Frame:
    w = rng.random((n, K)).astype(np.float32)
    fields = dict(
        job_id="job1",
        step=7,
        t=0.14,
        x=rng.standard_normal((n, 1, 32, 32)).astype(np.float32),
        experts=[0, 1],
        weights=w / w.sum(1, keepdims=True),
        latency_ms=12.5,
        compute_ms=9.75,
    )
    fields.update(kw)
    return Frame.from_latent(**fields)


def names(msg) -> list[str]:
    return [f.name for f in dataclasses.fields(msg)]


def assert_same(a, b):
    assert type(a) is type(b)
    for name in names(a):
        va, vb = getattr(a, name), getattr(b, name)
        if isinstance(va, np.ndarray):
            assert va.dtype == vb.dtype and va.shape == vb.shape
            np.testing.assert_array_equal(va, vb)
        else:
            assert va == vb and type(va) is type(vb), name


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("make", [make_request, make_reply, make_frame])
def test_round_trip(make):
    msg = make()
    back = type(msg).decode(msg.encode())
    assert_same(msg, back)
    for name in names(back):
        value = getattr(back, name)
        if isinstance(value, np.ndarray):
            assert value.flags.writeable  # receivers may compute in place


def test_round_trip_job_spec():
    spec = JobSpec.new([3, 1, 4, 1, 5], steps=20, strategy="topk:2", guidance=3.5, seed=9)
    assert JobSpec.decode(spec.encode()) == spec
    assert spec.n == 5 and len(spec.job_id) == 32
    assert JobSpec.new([0]).job_id != JobSpec.new([0]).job_id


def test_a_frame_with_no_missing_expert_is_written_as_before_and_read_either_way():
    frame = make_frame()
    assert "missing" not in msgpack_numpy.unpackb(frame.encode()), "frames of earlier routers look the same"
    degraded = make_frame(experts=(0,), missing=(1,))
    assert Frame.decode(degraded.encode()).missing == (1,) and Frame.decode(frame.encode()).missing == ()


def test_on_expert_loss_is_optional_on_the_wire_and_checked():
    unset = JobSpec.new([1], strategy="full")
    assert "on_expert_loss" not in msgpack_numpy.unpackb(unset.encode()), "left out: old readers decode it"
    assert "on_expert_loss" not in unset.to_dict(), "so a spec's digest does not change either"
    assert JobSpec.decode(unset.encode()).on_expert_loss is None
    waits = JobSpec.new([1], strategy="full", on_expert_loss="wait")
    assert JobSpec.decode(waits.encode()) == waits and JobSpec.from_json(waits.to_json()) == waits
    with pytest.raises(SchemaError, match=r"on_expert_loss in \['degrade', 'wait'\], got 'retry'"):
        JobSpec.new([1], on_expert_loss="retry")


def test_batch_limits():
    assert make_request(B=1).batch_size == 1
    assert VelocityRequest.decode(make_request(B=MAX_BATCH).encode()).batch_size == MAX_BATCH
    with pytest.raises(SchemaError, match="batch size"):
        make_request(B=MAX_BATCH + 1)


def test_encoded_envelope():
    m = msgpack_numpy.unpackb(make_frame().encode())
    assert m["type"] == "frame" and m["version"] == PROTOCOL_VERSION == 1


def test_messages_written_by_msgpack_numpy_decode():
    """A sender that only has msgpack-numpy (another framework's worker) interoperates."""
    reply = make_reply()
    fields = {name: getattr(reply, name) for name in names(reply)}
    data = msgpack_numpy.packb({"type": "velocity_reply", "version": 1, **fields})
    assert_same(VelocityReply.decode(data), reply)
    # ... and reads ours
    theirs = msgpack_numpy.unpackb(reply.encode())
    np.testing.assert_array_equal(theirs["v"], reply.v)


# ---------------------------------------------------------------- construction checks


def test_frame_from_latent_stores_float16():
    f = make_frame(n=2)
    assert f.x.dtype == np.float16 and f.x.shape == (2, 1, 32, 32)
    assert f.experts == (0, 1) and f.weights.shape == (2, 2)
    with pytest.raises(SchemaError, match="x dtype float32"):
        make_frame(n=2, x=np.zeros((2, 1, 32, 32)))
    with pytest.raises(SchemaError, match="float16 range"):  # would become inf
        make_frame(n=2, x=np.full((2, 1, 32, 32), 1e6, np.float32))


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(x=np.zeros((3, 1, 32, 32))), "x dtype float32"),
        (dict(y=np.zeros(3, np.int32)), "y dtype int64"),
        (dict(t=np.zeros(2, np.float32)), r"t shape \[3\]"),
        (dict(t=np.full(3, np.nan, np.float32)), "t all finite"),
        (dict(y=np.full(3, 100_001)), "y in 0..100000"),
        (dict(request_id="a b"), "request_id"),
    ],
)
def test_request_refuses(kw, match):
    with pytest.raises(SchemaError, match=match):
        make_request(**kw)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(v=np.full((3, 1, 32, 32), np.inf, np.float32)), "v all finite"),
        (dict(expert_id=-1), "expert_id"),
        (dict(worker_id=""), "worker_id"),
        (dict(compute_ms=math.nan), "compute_ms"),
        (dict(batch_size=0), "batch_size"),
    ],
)
def test_reply_refuses(kw, match):
    with pytest.raises(SchemaError, match=match):
        make_reply(**kw)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(experts=[2]), "expert id"),
        (dict(experts=[0, 0]), "distinct"),
        (dict(weights=np.full((4, 2), -1, np.float32)), "weights >= 0"),
        (dict(weights=np.ones((3, 2), np.float32)), r"weights shape \[4, K\]"),
        (dict(t=1.5), "t finite float"),
        (dict(step=-1), "step"),
    ],
)
def test_frame_refuses(kw, match):
    with pytest.raises(SchemaError, match=match):
        make_frame(**kw)


def test_frozen():
    spec = JobSpec("j", (1,))
    with pytest.raises(AttributeError):
        spec.steps = 3  # type: ignore[misc]


# ---------------------------------------------------------------- JobSpec helpers


@pytest.mark.parametrize(
    "s, parsed",
    [("oracle", ("oracle", None)), ("top1", ("topk", 1)), ("topk:2", ("topk", 2)), ("topk:16", ("topk", 16))]
    + [("full", ("full", None))],
)
def test_parse_strategy(s, parsed):
    assert Strategy.parse(s) == Strategy(*parsed)


@pytest.mark.parametrize(
    "s", ["", "top", "top0", "topk", "topk:0", "topk:1.5", "topk: 2", "Full", "oracle\n", 1]
)
def test_parse_strategy_refuses(s):
    with pytest.raises(SchemaError, match="strategy"):
        Strategy.parse(s)


def test_job_spec_defaults_and_normalisation():
    spec = JobSpec("job-1", [np.int64(3), 4])  # numpy ints and lists become plain ints in a tuple
    assert spec.labels == (3, 4) and all(type(y) is int for y in spec.labels)
    # strategy and guidance unset: the serving deployment fills them in (DeploymentDescriptor.resolve)
    assert (spec.steps, spec.strategy, spec.guidance, spec.seed) == (50, None, None, 0)
    assert type(JobSpec("j", (1,), guidance=2).guidance) is float
    assert hash(spec) == hash(JobSpec("job-1", (3, 4)))


@pytest.mark.parametrize(
    "kw",
    [
        dict(labels=()),
        dict(labels=(100_001,)),
        dict(labels=(1,) * 65),
        dict(steps=0),
        dict(steps=1001),
        dict(steps=True),
        dict(strategy="topk:0"),
        dict(guidance=20.5),
        dict(guidance=math.inf),
        dict(seed=2**32),
        dict(job_id="a" * 65),
        dict(job_id="x/y"),
    ],
)
def test_job_spec_refuses(kw):
    with pytest.raises(SchemaError, match="expected"):
        JobSpec(**{"job_id": "j", "labels": (1,), **kw})


def test_job_spec_dict_and_json():
    spec = JobSpec("j1", (0, 9), 10, "full", 0.0, 2**32 - 1)
    d = spec.to_dict()
    assert d == {
        "job_id": "j1",
        "labels": [0, 9],
        "steps": 10,
        "strategy": "full",
        "guidance": 0.0,
        "seed": 2**32 - 1,
    }
    assert json.loads(json.dumps(d)) == d
    assert JobSpec.from_dict(d) == spec
    assert JobSpec.from_json(spec.to_json()) == spec
    assert JobSpec.from_json(spec.to_json().encode()) == spec  # Redis hands back bytes
    assert JobSpec.from_dict({"job_id": "j2", "labels": [1]}) == JobSpec("j2", (1,))
    for bad in ({"labels": [1]}, {**d, "extra": 1}, [1], None):
        with pytest.raises(SchemaError):
            JobSpec.from_dict(bad)
    for text in ("{", "[]", '{"job_id": "j"}', b"\xff"):
        with pytest.raises(SchemaError):
            JobSpec.from_json(text)


def test_job_status():
    assert JobStatus("done") is JobStatus.DONE
    assert [s.value for s in JobStatus] == ["queued", "running", "done", "failed", "cancelled"]
    assert (
        JobStatus.RUNNING == "running"
        and f"{JobStatus.FAILED}" == "failed"
        and str(JobStatus.QUEUED) == "queued"
    )
    assert JobStatus.DONE.terminal and JobStatus.FAILED.terminal and JobStatus.CANCELLED.terminal
    assert not JobStatus.RUNNING.terminal and not JobStatus.QUEUED.terminal


def test_the_receiver_checks_the_sample_space():
    """A decoder has no space at hand: it takes any [B, C, H, W]; the receiver checks it against its own
    space, naming the expected and the received shape, and the labels against its classes."""
    from ddm.schema.sample_space import LEGACY, SampleSpace

    rgb = SampleSpace((3, 16, 16), num_classes=9, class_names=tuple("abcdefghi"))
    x = np.zeros((2, 3, 16, 16), np.float32)
    one = np.ones(2, np.float32)
    req = VelocityRequest.decode(VelocityRequest("r.0.1", x, one / 2, np.array([0, 9]), one).encode())
    req.check_space(rgb)
    with pytest.raises(SchemaError, match=r"expected x shape \[B, 1, 32, 32\] .*got \[2, 3, 16, 16\]"):
        req.check_space(LEGACY)
    with pytest.raises(SchemaError, match=r"y in 0..8, or 9 .*got \[10\]"):
        VelocityRequest("r.0.1", x, one / 2, np.array([0, 10]), one).check_space(rgb)
    reply = VelocityReply("r.0.1", x, 0, "w-1", 1.0, 2)
    reply.check_space(rgb)
    with pytest.raises(SchemaError, match=r"v shape \[B, 1, 32, 32\]"):
        reply.check_space(LEGACY)
    frame = Frame.from_latent("j", 1, 0.5, x, (0,), np.ones((2, 1), np.float32), 1.0)
    frame.check_space(rgb)
    with pytest.raises(SchemaError, match=r"x shape \[n, 1, 32, 32\].*got \[2, 3, 16, 16\]"):
        Frame.decode(frame.encode()).check_space(LEGACY)
    JobSpec("j", (0, 8, None)).check_space(rgb)
    with pytest.raises(SchemaError, match=r"labels in 0..8, or null .*got \[9\]"):
        JobSpec("j", (9,)).check_space(rgb)  # K: a class past the last (issue 40 item 3)
    with pytest.raises(SchemaError, match=r"labels null only \(an unconditional image"):
        JobSpec("j", (0, 1)).check_space(SampleSpace((3, 16, 16)))
    assert JobSpec("j", (0, None, 9)).nulls(rgb) == 2  # 9: K inside, once resolved


def test_a_jobs_options_are_declared_once_by_jobspec_and_picked_from_flags_or_configs():
    from types import SimpleNamespace

    from ddm.schema.messages import JOB_OPTIONS, job_options

    assert JOB_OPTIONS[:7] == ("steps", "strategy", "guidance", "seed", "on_expert_loss", "solver", "grid")
    assert JOB_OPTIONS[7:] == ("prompt", "negative_prompt", "notify")
    flags = SimpleNamespace(steps=8, strategy="top1", seed=3, labels="1,2", out="x.png")  # and other flags
    assert job_options(flags, seed=4) == {"steps": 8, "strategy": "top1", "seed": 4}
    spec = JobSpec.new([1, 2], **job_options(flags))
    assert (spec.steps, spec.strategy, spec.seed, spec.solver) == (8, "top1", 3, None)
    with pytest.raises(TypeError, match="bogus"):
        JobSpec.new([1], bogus=1)
