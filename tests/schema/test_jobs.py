"""The job records (schema/jobs.py): each writer's fields decode back, and anything else is refused."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.schema import jobs
from ddm.schema.codec import packb
from ddm.schema.errors import SchemaError
from ddm.schema.jobs import JobHash, ResumeState
from ddm.schema.messages import Frame, JobSpec, JobStatus
from ddm.schema.resolved import ResolvedJob
from ddm.schema.sample_space import LEGACY, SampleSpace


def as_redis(fields: dict) -> dict[bytes, bytes]:
    """What HGETALL returns for a hash written with `fields`."""
    return {k.encode(): v if isinstance(v, bytes) else str(v).encode() for k, v in fields.items()}


def test_the_writers_fields_decode_to_the_job_hash():
    spec = JobSpec("j1", (3, 8), steps=20, seed=4)  # strategy and guidance left to the deployment
    h = JobHash.decode("j1", as_redis(jobs.queued_fields(spec, 100.0)))
    assert (h.status, h.spec, h.step, h.steps, h.n, h.created_at) == (JobStatus.QUEUED, spec, 0, 20, 2, 100.0)
    assert h.strategy is None and h.guidance is None and h.attempts == 0 and h.router is None

    resolved = ResolvedJob.of(JobSpec("j1", (3, 8), steps=20, strategy="topk:1", guidance=1.5, seed=4))
    pictures = SampleSpace((3, 32, 32), (-1.0, 1.0), 10, LEGACY.class_names)
    stored = jobs.queued_fields(spec, 100.0) | jobs.running_fields(
        resolved, "r-1", 5, 101.0, "mnist", pictures
    )
    stored |= jobs.step_fields(7, 12.3456, 102.0) | {"attempts": "2", "started_at": jobs.stamp(101.0)}
    h = JobHash.decode("j1", as_redis(stored))
    assert h.spec == spec, "the submitted spec is kept; the resolved values have their own fields"
    assert (h.status, h.strategy, h.guidance, h.router, h.resumed_from) == (
        JobStatus.RUNNING,
        "top1",
        1.5,
        "r-1",
        5,
    )
    assert (h.step, h.mean_step_ms, h.attempts, h.updated_at) == (7, 12.346, 2, 102.0)
    # what the job means, recorded: its deployment, its sample space, its pictures' space
    assert (h.deployment, h.space, h.image_space) == ("mnist", LEGACY, pictures)
    assert h.picture_space() == pictures and h.picture_space(latent=True) == LEGACY
    assert h.to_dict()["space"] == LEGACY.to_dict()

    h = JobHash.decode("j1", as_redis(stored | jobs.failed_fields("x" * 3000, 103.0)))
    assert h.status is JobStatus.FAILED and h.error == "x" * 2000 and h.finished_at == 103.0
    assert h.to_dict()["status"] == "failed" and h.to_dict()["spec"]["labels"] == [3, 8]
    assert JobHash.decode("j1", as_redis(stored | jobs.done_fields(104.0))).status is JobStatus.DONE


def test_only_a_spec_that_names_its_strategy_and_guidance_is_resolved():
    with pytest.raises(SchemaError, match="resolved spec"):
        ResolvedJob.of(JobSpec("j1", (3,)))


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"status": "paused"}, "status in"),
        ({"step": "x"}, "hash field step: expected an integer"),
        ({"guidance": "nan"}, "hash field guidance: expected a finite number"),
        ({"guidance": "25"}, "guidance in"),
        ({"strategy": "top-2"}, "hash field strategy"),
        ({"spec": "{"}, "hash field spec"),
        ({"colour": "blue"}, "hash fields among"),
    ],
)
def test_a_malformed_hash_is_refused_naming_the_field(extra, words):
    fields = jobs.queued_fields(JobSpec("j1", (3,)), 1.0) | extra
    with pytest.raises(SchemaError, match=words):
        JobHash.decode("j1", as_redis(fields))


def test_a_hash_without_status_steps_or_n_is_refused():
    with pytest.raises(SchemaError, match="hash without"):
        JobHash.decode("j1", {b"spec": JobSpec("j1", (3,)).to_json().encode()})
    empty_finish = jobs.queued_fields(JobSpec("j1", (3,)), 1.0) | {"finished_at": ""}
    assert JobHash.decode("j1", as_redis(empty_finish)).finished_at is None  # empty: not set yet


def test_trajectory_entry_round_trip_and_checks():
    x = np.zeros((2, 1, 32, 32), np.float32)
    frame = Frame.from_latent("j1", 1, 0.5, x, (0,), np.ones((2, 1), np.float32), 3.0)
    entry = jobs.traj_entry(frame)
    assert list(entry) == [b"frame"]
    assert jobs.decode_traj_entry("j1", entry).step == 1
    with pytest.raises(SchemaError, match="frame.job_id j2"):
        jobs.decode_traj_entry("j2", entry)
    with pytest.raises(SchemaError, match="one field 'frame'"):
        jobs.decode_traj_entry("j1", {b"other": b""})


def test_resume_state_round_trip_and_length_check():
    x = np.random.default_rng(0).standard_normal((3, 1, 32, 32)).astype(np.float32)
    raw = as_redis(ResumeState(9, x).encode())
    assert set(raw) == {b"step", b"x"}, "no history field: a state from before solvers reads the same"
    step, back, history = ResumeState.decode(raw, 3)
    assert step == 9 and np.array_equal(back, x) and back.flags.writeable and history == ()
    with pytest.raises(SchemaError, match="a stored state of 2 latents"):
        ResumeState.decode(raw, 2)
    with pytest.raises(SchemaError, match="step"):
        ResumeState.decode({**raw, b"step": b"-1"}, 3)


def test_resume_state_keeps_a_multistep_history():
    x, v1, v2 = np.random.default_rng(1).standard_normal((3, 2, 1, 32, 32)).astype(np.float32)
    raw = as_redis(ResumeState(4, x, (v1, v2)).encode())
    step, back, history = ResumeState.decode(raw, 2)
    assert step == 4 and np.array_equal(back, x)
    assert len(history) == 2 and np.array_equal(history[0], v1) and np.array_equal(history[1], v2)
    with pytest.raises(SchemaError, match="a stored history of whole sets of 2 latents"):
        ResumeState.decode({**raw, b"history": raw[b"history"][:-4]}, 2)
    with pytest.raises(SchemaError, match="fields step, x"):
        ResumeState.decode({**raw, b"other": b""}, 2)


def test_result_round_trip_and_shape_check():
    x = np.ones((2, 1, 32, 32), np.float32)
    assert np.array_equal(jobs.decode_result("j1", jobs.encode_result(x), 2), x)
    assert jobs.decode_result("j1", jobs.encode_result(x)).shape == (2, 1, 32, 32)
    with pytest.raises(SchemaError, match=r"job j1 result: expected float32 array \[3, C, H, W\]"):
        jobs.decode_result("j1", jobs.encode_result(x), 3)
    with pytest.raises(SchemaError, match=r"job j1 result: expected float32 array \[3, 1, 32, 32\]"):
        jobs.decode_result("j1", jobs.encode_result(x), 3, space=LEGACY)
    with pytest.raises(SchemaError, match="float32 array"):
        jobs.decode_result("j1", packb(x.astype(np.float16)))


def test_results_and_states_in_another_sample_space():
    """A result carries its shape (checked against a space where one is given); a state's raw bytes
    are read in the job's space."""
    rgb = SampleSpace((3, 16, 16), num_classes=9, class_names=tuple("abcdefghi"))
    x = np.arange(2 * 3 * 16 * 16, dtype=np.float32).reshape(2, 3, 16, 16)
    assert np.array_equal(jobs.decode_result("j1", jobs.encode_result(x), 2, space=rgb), x)
    assert jobs.decode_result("j1", jobs.encode_result(x)).shape == (2, 3, 16, 16)
    with pytest.raises(
        SchemaError, match=r"expected float32 array \[2, 1, 32, 32\], got 'float32 \[2, 3, 16, 16\]'"
    ):
        jobs.decode_result("j1", jobs.encode_result(x), 2, space=LEGACY)
    raw = {k.encode(): v for k, v in ResumeState(4, x, (x + 1,)).encode().items()}
    step, back, history = ResumeState.decode(raw, 2, rgb)
    assert step == 4 and np.array_equal(back, x) and np.array_equal(history[0], x + 1)
    with pytest.raises(SchemaError, match="a stored state of 2 latents 1x32x32"):
        ResumeState.decode(raw, 2)
