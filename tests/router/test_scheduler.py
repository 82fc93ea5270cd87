"""The router's scheduling without a broker: a fake clock, fake experts answering in-process."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.router.jobrun import JobRun
from ddm.router.outbox import Outbox
from ddm.router.sampler import sample_local
from ddm.router.scheduler import Scheduler
from ddm.schema.messages import VelocityReply, VelocityRequest
from tests.support.scheduling import EXPERTS, OVERLAP, answer, begin, job, scheduler, sweep_after


def run_to_end(s: Scheduler, jobs: list[JobRun]) -> Outbox:
    """Start the jobs and answer every request at once until nothing is in flight."""
    total = Outbox()
    out = Outbox()
    for j in jobs:
        s.start(j, out)
    while True:
        s.flush(out)
        total.steps += out.steps
        total.done += out.done
        total.failed += out.failed
        total.sends += out.sends
        if not out.sends:
            return total
        sends, out = out.sends, Outbox()
        for send in sends:
            s.on_reply(answer(send), out)


def test_a_job_through_the_scheduler_equals_the_local_sampler(clock):
    s = scheduler(clock, OVERLAP, "label-prior")
    j = job([0, 4, 9], steps=6, strategy="full")
    total = run_to_end(s, [j])
    want = sample_local(EXPERTS, s.policy, j.arrays.job)
    np.testing.assert_array_equal(j.x, want)
    assert [d.frame.step for d in total.steps] == [1, 2, 3, 4, 5, 6]
    assert total.done == [j] and not s.jobs


def test_jobs_due_together_share_one_request_per_expert(clock):
    s = scheduler(clock)
    a, b = job([1, 7]), job([2, 8, 3])
    out = begin(s, a, b)
    assert sorted(send.expert for send in out.sends) == [0, 1]
    by_expert = {send.expert: VelocityRequest.decode(send.body) for send in out.sends}
    assert list(by_expert[0].y) == [1, 2, 3] and list(by_expert[1].y) == [7, 8]


def test_rows_due_while_the_slot_is_busy_are_held_and_ride_the_next_request(clock):
    s = scheduler(clock)
    a, b = job([1]), job([2])
    out = begin(s, a)
    assert len(out.sends) == 1
    first = out.sends[0]
    out = begin(s, b)
    assert out.sends == [], "one request in flight per slot: b waits"
    s.on_reply(answer(first), out)  # a's step finishes and a is due again, with b held
    s.flush(out)
    (send,) = out.sends
    assert list(VelocityRequest.decode(send.body).y) == [2, 1], "b (held first) and a's next step merge"


def test_rows_spread_over_free_slots_and_chunk_at_the_request_limit(clock):
    s = scheduler(clock, rows_per_request=4)
    s.observe(0, consumers=2, depth=0, heartbeats=None, served=None)
    out = Outbox()
    for i in range(3):
        s.start(job([0, 1, 2], seed=i), out)
    s.flush(out)
    sizes = [VelocityRequest.decode(send.body).batch_size for send in out.sends]
    assert sizes == [3, 3], "9 rows over 2 free slots, whole jobs, at most 4 rows: 3 + 3, the rest held"
    out2 = Outbox()
    s.on_reply(answer(out.sends[0]), out2)
    s.flush(out2)
    # one slot free again, 6 rows waiting (the answered job's next step and the held job): one request
    # of one whole job, since two would pass the 4-row limit
    assert [VelocityRequest.decode(x.body).batch_size for x in out2.sends] == [3]


def test_a_late_request_is_resent_then_its_job_fails_naming_the_expert(clock):
    s = scheduler(clock, max_attempts=3)
    j = job([6])
    out = begin(s, j)
    (send,) = out.sends
    for _ in range(2):  # attempts 2 and 3
        out = sweep_after(s, clock, 9.9)
        assert out.sends == [], "not late yet"
        clock.now += 0.2
        s.sweep(out)
        assert [(x.request_id, x.body, x.resend) for x in out.sends] == [(send.request_id, send.body, True)]
    out = sweep_after(s, clock, 10.1)
    assert out.sends == [] and [job_ for job_, _ in out.failed] == [j]
    assert "expert 1 did not answer" in out.failed[0][1] and "after 3 sends of 10 s" in out.failed[0][1]
    out = Outbox()
    s.on_reply(answer(send), out)  # the answer arrives after all: nothing to do
    assert out == Outbox()


def test_a_reply_with_the_wrong_rows_fails_its_jobs(clock):
    s = scheduler(clock)
    j = job([1, 2])
    out = begin(s, j)
    req = VelocityRequest.decode(out.sends[0].body)
    bad = VelocityReply(req.request_id, np.zeros((1, 1, 32, 32), np.float32), 0, "fake", 1.0, 1)
    out = Outbox()
    s.on_reply(bad, out)
    assert out.failed[0][0] is j and "answered 1 rows" in out.failed[0][1]


def test_duplicate_replies_and_replies_from_an_earlier_connection_change_nothing(clock):
    s = scheduler(clock)
    j = job([1], steps=2)
    out = begin(s, j)
    (send,) = out.sends
    reply = answer(send)
    out = Outbox()
    s.on_reply(reply, out)
    s.on_reply(reply, out)
    assert [d.frame.step for d in out.steps] == [1]
    s.flush(out)
    (send2,) = out.sends
    s.reset("next")  # the connection is gone: the job is redelivered elsewhere
    out = Outbox()
    s.on_reply(answer(send2), out)
    assert out == Outbox() and not s.jobs


def test_latency_is_measured_on_the_given_clock(clock):
    s = scheduler(clock)
    j = job([1], steps=1)
    out = begin(s, j)
    clock.now += 0.25
    out2 = Outbox()
    s.on_reply(answer(out.sends[0]), out2)
    (done,) = out2.steps
    assert done.latency_ms == pytest.approx(250.0) and done.frame.latency_ms == pytest.approx(250.0)
    assert out2.done == [j]


def test_a_resumed_job_at_its_last_step_settles_at_once(clock):
    s = scheduler(clock)
    j = job([1], steps=3)
    j.step = 3
    out = Outbox()
    s.start(j, out)
    assert out.done == [j] and not s.jobs
