"""Precision in the contract (schema/precision.py): one set of names, checked wherever a precision is
written down: the deployment file, replies (left off the wire when unsaid, so earlier readers decode
them), frames (one per expert that served) and heartbeats."""

from __future__ import annotations

import msgpack_numpy
import numpy as np
import pytest

from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError, SchemaError
from ddm.schema.heartbeat import WorkerHeartbeat
from ddm.schema.messages import Frame, VelocityReply
from ddm.schema.precision import DEFAULT_PRECISION, PRECISIONS, check_precision

# the fields of a version-1 reply before precision existed: what an earlier reader accepts, exactly
V1_REPLY_KEYS = {"type", "version", "request_id", "v", "expert_id", "worker_id", "compute_ms", "batch_size"}


def test_the_names():
    assert PRECISIONS == ("fp32", "tf32", "bf16") and DEFAULT_PRECISION == "fp32"
    for p in PRECISIONS:
        assert check_precision(p) == p


@pytest.mark.parametrize("value", ["fp16", "FP32", "", None, 32, "fp8"])
def test_check_precision_names_the_choices(value):
    with pytest.raises(ConfigError, match=r"where: expected one of fp32, tf32, bf16, got"):
        check_precision(value, "where")


# ---------------------------------------------------------------- the deployment file


def deployment(tmp_path, precision_line: str) -> Deployment:
    path = tmp_path / "d.toml"
    path.write_text(
        f'name = "p"\n[[experts]]\nid = 0\ncheckpoint = "e0"\ndevice = "cuda"\n{precision_line}\n'
        '[[experts]]\nid = 1\ncheckpoint = "e1"\n'
    )
    return Deployment.load(path)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_deployment_names_each_experts_precision(tmp_path, precision):
    d = deployment(tmp_path, f'precision = "{precision}"')
    assert d.expert(0).precision == precision
    assert d.expert(1).precision == DEFAULT_PRECISION  # optional: fp32 when left out


@pytest.mark.parametrize(
    ("line", "got"), [('precision = "fp16"', "'fp16'"), ("precision = 16", "16"), ('precision = ""', "''")]
)
def test_a_deployment_refuses_other_precisions_naming_the_choices(tmp_path, line, got):
    with pytest.raises(ConfigError) as info:
        deployment(tmp_path, line)
    message = str(info.value)
    assert "experts[0].precision" in message and "d.toml" in message
    assert "one of fp32, tf32, bf16" in message and message.endswith(f"got {got}")


def test_a_deployment_still_refuses_unknown_expert_keys(tmp_path):
    with pytest.raises(ConfigError, match="with id, checkpoint, device, precision"):
        deployment(tmp_path, 'dtype = "bf16"')


# ---------------------------------------------------------------- replies


def reply(precision: str | None = None) -> VelocityReply:
    v = np.random.default_rng(0).standard_normal((2, 1, 32, 32)).astype(np.float32)
    extra = {} if precision is None else {"precision": precision}
    return VelocityReply("job1:3:0", v, 1, "w-1", 2.5, 4, **extra)


def test_an_fp32_reply_is_written_as_earlier_workers_wrote_it():
    """fp32, the default, stays off the wire: a router older than the field decodes it."""
    plain = reply("fp32")
    wire = msgpack_numpy.unpackb(plain.encode())
    assert set(wire) == V1_REPLY_KEYS, "an earlier reader refuses any key it does not know"
    assert VelocityReply.decode(plain.encode()).precision == "fp32"
    assert reply().encode() == plain.encode()


def test_a_reply_from_an_earlier_worker_reads_as_fp32():
    r = reply("bf16")
    earlier = msgpack_numpy.packb(
        {k: v for k, v in msgpack_numpy.unpackb(r.encode()).items() if k != "precision"}
    )
    assert VelocityReply.decode(earlier).precision == "fp32"


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_a_reply_carries_a_precision_other_than_fp32(precision):
    r = reply(precision)
    wire = msgpack_numpy.unpackb(r.encode())
    assert wire["precision"] == precision and set(wire) == V1_REPLY_KEYS | {"precision"}
    back = VelocityReply.decode(r.encode())
    assert back.precision == precision and np.array_equal(back.v, r.v)


@pytest.mark.parametrize("precision", ["fp8", "FP32", "fp16", 16, None, ""])
def test_a_reply_refuses_other_precisions(precision):
    v = np.zeros((1, 1, 32, 32), np.float32)
    with pytest.raises(SchemaError, match="precision in"):
        VelocityReply("job1:3:0", v, 1, "w-1", 2.5, 4, precision)
    good = msgpack_numpy.unpackb(reply("fp32").encode())
    with pytest.raises(SchemaError, match="precision in"):
        VelocityReply.decode(msgpack_numpy.packb({**good, "precision": precision}))


# ---------------------------------------------------------------- frames


def frame(experts=(0, 1), **kw) -> Frame:
    n, K = 2, 3
    x = np.linspace(-1, 1, n * 32 * 32, dtype=np.float32).reshape(n, 1, 32, 32)
    weights = np.zeros((n, K), np.float32)
    weights[:, list(experts)] = 1.0 / len(experts)
    return Frame.from_latent("job1", 3, 0.25, x, experts, weights, 12.0, 8.0, **kw)


def test_a_frame_without_precisions_is_written_as_before():
    plain = frame()
    assert plain.precisions == ()
    assert "precisions" not in msgpack_numpy.unpackb(plain.encode())
    assert Frame.decode(plain.encode()).precisions == ()


@pytest.mark.parametrize("precisions", [("fp32", "bf16"), ("tf32", "tf32"), ("bf16", "fp32")])
def test_a_frames_precisions_round_trip_in_the_experts_order(precisions):
    f = frame(precisions=precisions)
    wire = msgpack_numpy.unpackb(f.encode())
    assert list(wire["precisions"]) == list(precisions)
    back = Frame.decode(f.encode())
    assert back.precisions == precisions and isinstance(back.precisions, tuple)
    assert back.experts == (0, 1)


def test_a_frame_with_one_expert_and_a_missing_one():
    f = frame(experts=(2,), missing=(0,), precisions=("bf16",))
    back = Frame.decode(f.encode())
    assert (back.experts, back.missing, back.precisions) == ((2,), (0,), ("bf16",))


@pytest.mark.parametrize("precisions", [("fp32",), ("fp32", "fp32", "fp32")])
def test_a_frame_refuses_precisions_that_do_not_match_its_experts(precisions):
    with pytest.raises(SchemaError, match=r"precisions for the 2 experts that served"):
        frame(precisions=precisions)


def test_a_frame_refuses_a_precision_that_does_not_exist():
    with pytest.raises(SchemaError, match="precisions in"):
        frame(precisions=("fp32", "fp8"))
    good = msgpack_numpy.unpackb(frame(precisions=("fp32", "bf16")).encode())
    with pytest.raises(SchemaError, match="precisions"):
        Frame.decode(msgpack_numpy.packb({**good, "precisions": ["fp32", "fp8"]}))
    with pytest.raises(SchemaError, match="precisions as a list"):
        Frame.decode(msgpack_numpy.packb({**good, "precisions": "fp32"}))


# ---------------------------------------------------------------- heartbeats


EXPERT_BEAT = {
    "worker_id": "e0@host",
    "role": "expert",
    "updated_at": 101.5,
    "expert_id": 0,
    "framework": "torch",
    "device": "neuron",
    "buckets": "1,2,4",
}


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_heartbeat_carries_the_precision(precision):
    beat = WorkerHeartbeat.build({**EXPERT_BEAT, "precision": precision})
    assert beat.precision == precision and beat.counters == {}  # a field, not a counter
    encoded = beat.encode()
    assert encoded["precision"] == precision
    back = WorkerHeartbeat.decode({k.encode(): v.encode() for k, v in encoded.items()})
    assert back == beat and back.to_dict()["precision"] == precision


def test_a_heartbeat_of_an_earlier_worker_has_no_precision():
    beat = WorkerHeartbeat.build(EXPERT_BEAT)
    assert "precision" not in beat.encode()
    assert WorkerHeartbeat.decode(beat.encode()).precision is None


def test_a_heartbeat_refuses_a_precision_that_is_not_text():
    with pytest.raises(SchemaError, match="precision as a str"):
        WorkerHeartbeat.build({**EXPERT_BEAT, "precision": 16})
