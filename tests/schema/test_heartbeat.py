"""The worker heartbeat record (schema/heartbeat.py): what the writer encodes decodes back, typed."""

from __future__ import annotations

import pytest

from ddm.schema.errors import SchemaError
from ddm.schema.heartbeat import WorkerHeartbeat

EXPERT = {
    "worker_id": "e0@host",
    "role": "expert",
    "host": "host",
    "region": "eu",
    "pid": 12,
    "started_at": 100.0,
    "updated_at": 101.5,
    "expert_id": 0,
    "framework": "torch",
    "device": "cpu",
    "queue": "ddm.expert.0",
    "max_batch": 64,
    "max_wait_ms": 5,
    "buckets": "1,2,4",
    "requests": 7,
    "mean_batch_size": 2.5,
}


def redis_hash(record: WorkerHeartbeat) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in record.encode().items()}


def test_expert_record_round_trip():
    beat = WorkerHeartbeat.build(EXPERT)
    assert beat.buckets == (1, 2, 4) and beat.max_wait_ms == 5.0
    assert beat.counters == {"requests": 7, "mean_batch_size": 2.5}
    assert all(isinstance(v, str) for v in beat.encode().values())
    assert beat.encode()["buckets"] == "1,2,4"
    back = WorkerHeartbeat.decode(redis_hash(beat))
    assert back == beat
    assert back.to_dict()["requests"] == 7 and back.to_dict()["buckets"] == [1, 2, 4]
    eager = WorkerHeartbeat.build({**EXPERT, "buckets": ()})
    assert eager.encode()["buckets"] == "any" and WorkerHeartbeat.decode(redis_hash(eager)).buckets == ()


def test_router_record_round_trip():
    beat = WorkerHeartbeat.build(
        {
            "worker_id": "router-1",
            "role": "router",
            "updated_at": 5.0,
            "deployment": "mnist",
            "jobs_running": 2,
        }
        | {"jobs_done": 3, "resends": 0}
    )
    back = WorkerHeartbeat.decode(redis_hash(beat))
    assert back == beat and back.expert_id is None and back.jobs_running == 2
    assert "expert_id" not in beat.encode()  # unset fields are left out


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"role": "boss"}, "role in"),
        ({"expert_id": None}, "expert_id"),
        ({"pid": "12"}, "pid as an int"),
        ({"updated_at": float("nan")}, "updated_at"),
        ({"requests": "many"}, "counter requests"),
        ({"buckets": "1,,2"}, "buckets"),
        ({"worker_id": "bad id"}, "worker_id"),
    ],
)
def test_bad_values_are_refused(change, words):
    with pytest.raises(SchemaError, match=words):
        WorkerHeartbeat.build({**EXPERT, **change})


def test_decode_refuses_a_record_without_its_core_or_with_text_counters():
    with pytest.raises(SchemaError, match="updated_at"):
        WorkerHeartbeat.decode({b"worker_id": b"w", b"role": b"router"})
    with pytest.raises(SchemaError, match="as a number"):
        WorkerHeartbeat.decode({b"worker_id": b"w", b"role": b"router", b"updated_at": b"1", b"steps": b"y"})


def test_decode_skips_a_text_field_it_does_not_know():
    """A newer worker's text field (as `precision` was to older readers) is skipped, not refused: readers
    need not be upgraded before workers. Numbers it does not know stay counters."""
    beat = WorkerHeartbeat.decode(
        {b"worker_id": b"w", b"role": b"router", b"updated_at": b"1", b"colour": b"blue", b"hops": b"3"}
    )
    assert "colour" not in beat.to_dict() and beat.counters == {"hops": 3}


def test_precision_is_kept_as_text_even_one_this_reader_does_not_know():
    """The worker checks its precision (schema/precision.py) before it beats; a reader keeps whatever a
    newer worker says instead of losing sight of the worker."""
    assert WorkerHeartbeat.build({**EXPERT, "precision": "tf32"}).precision == "tf32"
    raw = {
        k.encode(): v.encode()
        for k, v in WorkerHeartbeat.build({**EXPERT, "precision": "fp8"}).encode().items()
    }
    assert WorkerHeartbeat.decode(raw).precision == "fp8"
    with pytest.raises(SchemaError, match="pid as an integer"):
        WorkerHeartbeat.decode({b"worker_id": b"w", b"role": b"router", b"updated_at": b"1", b"pid": b"1.5"})
