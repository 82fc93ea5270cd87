"""The scheduler's rules for experts on other hosts, with a fake clock: the in-flight window grows with
the measured link, a busy expert is waited for, a lost request is resent, a late one is hedged to a
replica that answers, a gone expert is routed around (mixing) or waited for within the grace (oracle);
an expert is gone only after looking absent for its loss grace, and a busy one never looks absent."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.router.experts import MAX_COHORTS, ExpertHealth
from ddm.router.outbox import Outbox
from ddm.schema.messages import VelocityReply, VelocityRequest
from tests.support.scheduling import EXPERTS, OVERLAP, FakeClock, answer, begin, job, scheduler, sweep_after


def reply_after(s, send, ms: float, compute_ms: float, worker: str = "w1") -> Outbox:
    """Answer `send` `ms` after now, as `worker`, reporting `compute_ms` of forward pass."""
    s.clock.now += ms / 1000.0
    req = VelocityRequest.decode(send.body)
    v = EXPERTS[send.expert](req.x, req.t, req.y, req.guidance)
    out = Outbox()
    s.on_reply(VelocityReply(req.request_id, v, send.expert, worker, compute_ms, req.batch_size), out)
    return out


def test_the_window_is_one_per_replica_near_and_the_cohort_bound_far():
    h = ExpertHealth(1, stall_s=50.0)
    assert h.window() == 1 and not h.far, "one request per replica before anything is measured"
    for i in range(5):
        h.replied(float(i), round_trip_ms=62.0, compute_ms=12.0, worker="w", sent_at=float(i), timed=True)
    assert h.link_ms == 50.0 and h.far and h.window() == MAX_COHORTS
    h.replied(6.0, round_trip_ms=400.0, compute_ms=12.0, worker="w", sent_at=6.0, timed=True)
    assert h.link_ms == 50.0, "queueing lengthens a round trip, never the link: the minimum is kept"
    h.observe(7.0, consumers=2, depth=0, heartbeats=None, served=None)
    assert h.window() == 2 * MAX_COHORTS
    near = ExpertHealth(0, stall_s=50.0)
    near.replied(0.0, round_trip_ms=11.0, compute_ms=2.0, worker="w", sent_at=0.0, timed=True)
    assert near.window() == 1 and not near.far, "a local broker's round trip: one request, so due rows batch"


def measure_link(s, a, round_trip_ms: float = 60.0, compute_ms: float = 10.0) -> Outbox:
    """Run job a's first steps on expert 1 over the given round trip: the scheduler measures the link."""
    out = begin(s, a)
    for _ in range(3):
        (send,) = out.sends
        out = reply_after(s, send, round_trip_ms, compute_ms)
        s.flush(out)
    return out


def test_a_measured_link_lets_rows_that_fall_due_go_one_forward_pass_later(clock):
    s = scheduler(clock)
    a, b = job([6], steps=8), job([7], steps=8, seed=1)
    out = measure_link(s, a)  # a 50 ms link around 10 ms of compute
    assert s.experts[1].far and not s.experts[0].far, "nothing was measured for expert 0"
    s.start(b, out)
    s.flush(out)
    assert len(out.sends) == 1 and s.next_release_s() == pytest.approx(0.010), "held one pass (a's, 10 ms)"
    clock.now += 0.010
    s.flush(out)
    assert len(out.sends) == 2 and len(s.pending) == 2, "b does not wait for a's request to come back"
    assert s.next_release_s() is None


def test_a_far_experts_rows_due_together_leave_in_staggered_cohorts(clock):
    """Ten jobs due together on an expert 50 ms away whose forward pass costs 10 ms a row, with job a's
    row in flight: 110 ms of compute against a 60 ms round trip (link + LOCAL_LINK_MS). (m - 1) / m x
    110 >= 60 gives m = 3 cohorts of at most 4 rows, each released one estimated pass of the previous
    one later (a's pass first)."""
    s = scheduler(clock)
    a = job([6], steps=8)
    measure_link(s, a, round_trip_ms=60.0, compute_ms=10.0)  # one row a request: 10 ms a row
    assert s.experts[1].cohorts(11) == 3
    out = Outbox()
    for i in range(10):
        s.start(job([5 + i % 5], steps=8, seed=10 + i), out)
    s.flush(out)
    assert out.sends == [], "held until a's forward pass is over"
    start, released = clock.now, []
    while (wait := s.next_release_s()) is not None:
        clock.now += wait
        out = Outbox()
        s.flush(out)
        released += [
            (round((clock.now - start) * 1e3), VelocityRequest.decode(x.body).batch_size) for x in out.sends
        ]
    assert released == [(10, 4), (50, 4), (90, 2)]


def test_a_far_expert_with_a_full_window_waits_for_a_reply_not_a_timer(clock):
    """Every slot in flight: a cohort due by its time waits for a reply, and the glue is not asked to
    wake for it (it would spin: the release time has passed)."""
    s = scheduler(clock)
    measure_link(s, job([6], steps=40), round_trip_ms=51.0, compute_ms=1.0)  # 1 ms a row: 8 cohorts
    out = Outbox()
    for i in range(64):  # with a's row, 65 rows: cohorts of 9, so the eighth leaves one row held
        s.start(job([5 + i % 5], steps=40, seed=10 + i), out)
    s.flush(out)
    for _ in range(MAX_COHORTS):  # every release the glue is woken for
        clock.now += s.next_release_s() or 0.0
        s.flush(out)
    assert len(s.pending) == MAX_COHORTS, "a's request and a cohort a release until the window is full"
    assert s._held[1] and s.next_release_s() is None
    clock.now += 1.0
    assert s.next_release_s() is None, "still nothing to wake for: a reply frees the slot"


def test_a_local_expert_keeps_one_batch():
    near = ExpertHealth(0, stall_s=50.0)
    near.replied(0.0, round_trip_ms=12.0, compute_ms=4.0, worker="w", sent_at=0.0, timed=True, rows=4)
    assert not near.far and near.cohorts(64) == 1, "8 ms of link: every due row rides one request"
    far = ExpertHealth(1, stall_s=50.0)
    far.replied(0.0, round_trip_ms=104.0, compute_ms=4.0, worker="w", sent_at=0.0, timed=True, rows=4)
    assert far.far and far.row_ms == 1.0
    assert far.cohorts(64) == 8, "64 ms of compute cannot cover 100 + 10 ms: as many cohorts as allowed"
    assert far.cohorts(1000) == 2, "1000 ms: two cohorts of 500 cover it, (2 - 1) / 2 x 1000 >= 110"


def test_a_busy_expert_is_waited_for(clock):
    s = scheduler(clock)
    j = job([6])
    out = begin(s, j)
    (send,) = out.sends
    for _ in range(12):  # 48 s while its workers keep computing (a backlog in their prefetch buffers)
        clock.now += 4.0
        s.observe(1, consumers=1, depth=0, heartbeats=1, served=int(clock.now))
        out = Outbox()
        s.sweep(out)
        assert out.sends == [] and out.failed == []
    clock.now += 4.0
    s.observe(1, consumers=1, depth=0, heartbeats=1, served=int(clock.now))
    s.sweep(out)
    assert [(x.request_id, x.resend) for x in out.sends] == [(send.request_id, True)], (
        "after a whole stall period, once more in case it was lost behind the backlog"
    )
    assert out.failed == []


def test_a_request_overtaken_by_a_later_one_is_resent(clock):
    s = scheduler(clock)
    s.observe(1, consumers=2, depth=0, heartbeats=2, served=0)
    out = begin(s, job([6]))
    (lost,) = out.sends
    clock.now += 1.0
    out = begin(s, job([7], seed=1))
    (later,) = out.sends
    reply_after(s, later, 5.0, 1.0)  # sent later, answered first: the queue is first in, first out
    clock.now += 10.0
    out = Outbox()
    s.observe(1, consumers=2, depth=0, heartbeats=2, served=int(clock.now))  # busy with others' work
    s.sweep(out)
    assert [(x.request_id, x.resend) for x in out.sends] == [(lost.request_id, True)]


def test_an_expert_that_makes_no_progress_fails_its_jobs_naming_it(clock):
    s = scheduler(clock, describe=lambda k: f"expert {k} (queue q.{k})")
    j = job([6])
    begin(s, j)
    out = Outbox()
    for _ in range(12):  # a backlog that never drains: depth 3, no forward passes
        clock.now += 5.0
        s.observe(1, consumers=1, depth=3, heartbeats=1, served=7)
        s.sweep(out)
    assert [x for x, _ in out.failed] == [j] and out.sends == []
    assert "expert 1 (queue q.1) made no progress for 50 s" in out.failed[0][1]


def test_a_late_request_is_hedged_once_to_a_replica_that_answers(clock):
    s = scheduler(clock, hedge_floor_ms=100.0, hedge_max_fraction=1.0)
    s.observe(1, consumers=2, depth=0, heartbeats=2, served=0)
    j = job([6], steps=40)
    out = begin(s, j)
    for i in range(25):  # a p99 to compare with: 20 ms round trips from two replicas
        (send,) = out.sends
        out = reply_after(s, send, 20.0, 5.0, worker=f"w{i % 2}")
        s.flush(out)
    (slow,) = out.sends
    out = sweep_after(s, clock, 0.099)
    assert out.sends == [], "not past the floor yet"
    clock.now += 0.002
    s.sweep(out)
    assert [(x.request_id, x.replica) for x in out.sends] == [(slow.request_id, "w0")]
    s.sweep(out)
    assert len(out.sends) == 1, "one hedge per late period"
    clock.now += 0.1
    s.sweep(out)
    assert [x.replica for x in out.sends] == ["w0", "w1"], "then to a replica not tried yet"
    clock.now += 1.0
    s.sweep(out)
    assert len(out.sends) == 2, "every replica tried"
    out = reply_after(s, slow, 1.0, 5.0, worker="w0")
    assert [d.frame.step for d in out.steps] == [26]
    dup = reply_after(s, slow, 1.0, 5.0, worker="w1")
    assert dup == Outbox(), "the slow replica's answer comes second and is dropped"


def test_a_lost_expert_under_full_is_routed_around_and_recorded(clock):
    s = scheduler(clock, OVERLAP, "label-prior", loss_grace_s=0.0)
    j = job([4, 5], steps=3, strategy="full")
    out = begin(s, j)
    first = {x.expert: x for x in out.sends}
    assert sorted(first) == [0, 1]
    s.observe(1, consumers=0, depth=1, heartbeats=None, served=None)  # its only worker died
    out = Outbox()
    s.on_reply(answer(first[0]), out)
    assert out.steps == [], "expert 0's answer belongs to the old plan"
    s.flush(out)
    assert [x.expert for x in out.sends] == [0], "the step is planned again without expert 1"
    out2 = Outbox()
    s.on_reply(answer(out.sends[0]), out2)
    (done,) = out2.steps
    assert done.frame.missing == (1,) and done.frame.experts == (0,) and done.degraded == {1: [1]}
    np.testing.assert_allclose(done.frame.weights.sum(axis=1), 1.0, rtol=1e-6)
    s.observe(1, consumers=1, depth=0, heartbeats=None, served=None)  # a replica is back
    s.flush(out2)
    assert sorted(x.expert for x in out2.sends) == [0, 1], "the next step uses it again"


def test_a_lost_expert_under_oracle_is_waited_for_then_fails_naming_it(clock):
    s = scheduler(clock, grace_s=30.0, loss_grace_s=0.0, describe=lambda k: f"expert {k} (queue q.{k})")
    j, k = job([6], steps=3), job([7], steps=3, seed=1)
    begin(s, j, k)
    s.observe(1, consumers=0, depth=1, heartbeats=None, served=None)
    out = Outbox()
    clock.now += 29.0
    s.sweep(out)
    assert out.failed == [] and out.sends == [], "within the grace: no resend into an empty queue"
    clock.now += 1.0
    s.sweep(out)
    assert sorted(x.job_id for x, _ in out.failed) == sorted([j.job_id, k.job_id])
    assert "needs expert 1 (queue q.1), which has had no live worker for 30 s" in out.failed[0][1]


def test_an_oracle_job_resumes_when_a_replica_comes_back_within_the_grace(clock):
    s = scheduler(clock, loss_grace_s=0.0)
    j = job([6], steps=2)
    out = begin(s, j)
    (send,) = out.sends
    s.observe(1, consumers=0, depth=1, heartbeats=None, served=None)
    clock.now += 20.0
    s.observe(1, consumers=1, depth=1, heartbeats=None, served=None)
    out = Outbox()
    s.sweep(out)
    s.on_reply(answer(send), out)  # the new replica serves what waited in the queue
    assert out.failed == [] and [d.frame.step for d in out.steps] == [1] and out.steps[0].frame.missing == ()


def test_a_full_job_that_says_wait_is_not_routed_around_a_lost_expert(clock):
    s = scheduler(clock, OVERLAP, "label-prior", grace_s=5.0, loss_grace_s=0.0)
    j = job([4, 5], steps=3, strategy="full", on_expert_loss="wait")
    out = begin(s, j)
    first = {x.expert: x for x in out.sends}
    s.observe(1, consumers=0, depth=1, heartbeats=None, served=None)
    out = Outbox()
    s.on_reply(answer(first[0]), out)
    s.flush(out)
    assert out.sends == [] and out.steps == [], "expert 0's rows are in; the step waits for expert 1"
    clock.now += 5.0
    s.sweep(out)
    assert [x for x, _ in out.failed] == [j] and "needs expert 1" in out.failed[0][1]


def test_only_clean_round_trips_feed_the_estimates_and_silence_without_heartbeats_is_gone():
    h = ExpertHealth(1, stall_s=50.0, loss_grace_s=0.0)
    for i in range(30):
        h.replied(float(i), round_trip_ms=20.0, compute_ms=5.0, worker="w", sent_at=float(i), timed=True)
    h.replied(31.0, round_trip_ms=30_000.0, compute_ms=5.0, worker="w", sent_at=1.0, timed=False)
    assert h.p99_ms() == 20.0 and h.link_ms == 15.0, "a request that waited out an outage is no sample"
    assert h.observe(32.0, consumers=1, depth=0, heartbeats=1, served=None) is False
    assert h.observe(33.0, consumers=1, depth=0, heartbeats=None, served=None) is False, (
        "expired heartbeats while it still answered recently: live"
    )
    assert h.observe(37.0, consumers=1, depth=0, heartbeats=None, served=None) is True and not h.live, (
        "expired and silent for 5 s: gone (a host cut off before the broker notices)"
    )
    h.replied(38.0, round_trip_ms=20.0, compute_ms=5.0, worker="w", sent_at=37.9, timed=True)
    assert h.observe(38.5, consumers=1, depth=0, heartbeats=None, served=None) is True and h.live, (
        "a worker that writes no heartbeat but answers is live"
    )


def test_an_absence_shorter_than_the_loss_grace_changes_no_plan(clock):
    """A broker failover: the consumers vanish for a moment and come back. The full job keeps both
    experts (no re-plan, no degraded step)."""
    s = scheduler(clock, OVERLAP, "label-prior", loss_grace_s=10.0)
    j = job([4, 5], steps=2, strategy="full")
    out = begin(s, j)
    first = {x.expert: x for x in out.sends}
    s.observe(1, consumers=0, depth=1, heartbeats=None, served=None)
    clock.now += 9.5
    s.observe(1, consumers=0, depth=1, heartbeats=None, served=None)
    assert s.experts[1].live and s.experts[1].absent, "absent, not gone: within the loss grace"
    clock.now += 0.4
    s.observe(1, consumers=1, depth=1, heartbeats=None, served=None)
    out = Outbox()
    s.sweep(out)
    s.on_reply(answer(first[0]), out)
    s.on_reply(answer(first[1]), out)
    (done,) = out.steps
    assert done.frame.experts == (0, 1) and done.frame.missing == () and done.degraded == {}


def test_an_absence_past_the_loss_grace_is_gone_from_when_it_began(clock):
    s = scheduler(clock, OVERLAP, "label-prior", loss_grace_s=10.0)
    begin(s, job([4, 5], steps=2, strategy="full"))
    s.observe(1, consumers=0, depth=1, heartbeats=None, served=None)
    began = clock.now
    clock.now += 10.0
    s.observe(1, consumers=0, depth=1, heartbeats=None, served=None)
    assert not s.experts[1].live and s.experts[1].gone_since == began


def test_a_busy_expert_whose_heartbeats_expired_is_never_gone():
    """Batches longer than the heartbeat TTL: the heartbeats expire, no reply comes for a long time,
    but a consumer is there and its queue grows or drains: busy, never absent (looked at every 0.5 s)."""
    h = ExpertHealth(0, stall_s=100.0, loss_grace_s=0.0, last_progress=0.0)
    assert h.observe(0.0, consumers=1, depth=3, heartbeats=1, served=5) is False
    for i in range(1, 120):
        depth = 3 + (i // 8) % 3  # moves every 4 s: routers send, the worker takes a batch
        h.observe(0.5 * i, consumers=1, depth=depth, heartbeats=None, served=None)
        assert h.live and not h.absent, f"at {0.5 * i} s, depth {depth}"


def test_expired_heartbeats_prove_nothing_until_redis_is_back_long_enough():
    """After a Redis outage every heartbeat has expired; until the workers could beat again they do
    not count, even with requests waiting and no progress."""
    h = ExpertHealth(0, stall_s=100.0, loss_grace_s=0.0, last_progress=0.0)
    h.observe(0.0, consumers=1, depth=0, heartbeats=1, served=5)
    assert h.observe(60.0, consumers=1, depth=0, heartbeats=None, served=None, beats_trusted=False) is False
    assert h.live and not h.absent
    assert h.observe(61.0, consumers=1, depth=0, heartbeats=None, served=None) is True and not h.live, (
        "trusted again, still expired, silent, requests waiting: a host cut off"
    )


def test_silence_counts_only_while_requests_wait():
    h = ExpertHealth(0, stall_s=100.0, loss_grace_s=0.0, last_progress=0.0)
    h.observe(0.0, consumers=1, depth=0, heartbeats=1, served=5)
    assert h.observe(60.0, consumers=1, depth=0, heartbeats=None, served=None, waiting=False) is False
    assert h.live and not h.absent, "an idle expert whose heartbeats expired is not judged by them"


def test_an_expert_gone_silent_stays_gone_when_nothing_waits_any_more():
    """Once its mixing jobs route around it, nothing of ours waits on it: that is no sign of life."""
    h = ExpertHealth(0, stall_s=100.0, loss_grace_s=0.0, last_progress=0.0)
    h.observe(0.0, consumers=1, depth=0, heartbeats=1, served=5)
    assert h.observe(10.0, consumers=1, depth=0, heartbeats=None, served=None) is True and not h.live
    assert h.observe(10.5, consumers=1, depth=0, heartbeats=None, served=None, waiting=False) is False
    assert not h.live, "still no heartbeat, no progress: still gone"
    assert h.observe(11.0, consumers=1, depth=0, heartbeats=1, served=6) is True and h.live


def test_an_expert_whose_worker_has_not_started_yet_is_not_warned_about(caplog):
    """`ddm up` started the router before the JAX worker had loaded, and every start logged a WARNING
    "expert 3 has had no live worker for 10.2 s" (issue 40 part 7). An expert never seen served since the
    router started is said at INFO; one that was served and then lost is still a WARNING."""
    import logging

    from ddm.router.expert_probe import ExpertLook, report_looks
    from ddm.router.metrics import RouterMetrics
    from ddm.schema.names import Names

    clock = FakeClock()
    s = scheduler(clock, loss_grace_s=1.0)
    metrics, names = RouterMetrics("r"), Names("q.")
    served, nobody = ExpertLook(0, 1, 0, 1, 5), ExpertLook(1, 0, 0, None, None)
    with caplog.at_level(logging.INFO, logger="ddm.router"):
        for _ in range(3):
            report_looks(s, [served, nobody], metrics, names, beats_trusted=True)
            clock.now += 1.0
        report_looks(s, [ExpertLook(0, 0, 0, None, None), nobody], metrics, names, beats_trusted=True)
        clock.now += 1.5
        report_looks(s, [ExpertLook(0, 0, 0, None, None), nobody], metrics, names, beats_trusted=True)
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert ("INFO", "expert 1 has no worker yet (queue q.ddm.expert.1); jobs that need it wait") in said
    assert [m for level, m in said if level == "WARNING"] == [
        "expert 0 has had no live worker for 1.5 s (queue q.ddm.expert.0)"
    ]
