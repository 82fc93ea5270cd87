"""The queue order and the ETA arithmetic of schema/queue.py, against an independent model of how a
classic RabbitMQ priority queue delivers (one first-in-first-out line per priority, highest first)."""

from __future__ import annotations

import collections
import random

import pytest

from ddm.schema.errors import SchemaError
from ddm.schema.queue import (
    MAX_SEQ,
    JobEnd,
    QueuePosition,
    Throughput,
    about,
    concurrency,
    evaluations_per_step,
    measure,
    positions,
    queue_score,
    score_parts,
)


def broker_order(jobs: list[tuple[str, int | None]]) -> list[str]:
    """What a classic priority queue delivers, published in this order: a FIFO line per priority (unset:
    0), and each delivery takes the head of the highest non-empty line."""
    lines = collections.defaultdict(collections.deque)
    for job_id, priority in jobs:
        lines[priority or 0].append(job_id)
    out = []
    while any(lines.values()):
        out.append(lines[max(p for p, line in lines.items() if line)].popleft())
    return out


@pytest.mark.parametrize("seed", range(20))
def test_scores_sort_as_the_broker_delivers(seed):
    rng = random.Random(seed)
    jobs = [(f"j{i}", rng.choice([None, 0, 1, 4, 5, 8, 9])) for i in range(rng.randint(1, 60))]
    seqs = sorted(rng.sample(range(1, 10**9), len(jobs)))  # INCR: increasing, with gaps (retries)
    scores = {job_id: queue_score(p, seq) for (job_id, p), seq in zip(jobs, seqs, strict=True)}
    assert sorted(scores, key=scores.get) == broker_order(jobs)


def test_priority_outranks_any_seq_and_parts_round_trip():
    assert queue_score(9, MAX_SEQ) < queue_score(8, 1)
    assert queue_score(0, 1) < queue_score(0, 2)
    assert queue_score(None, 5) == queue_score(0, 5)
    assert queue_score(0, MAX_SEQ) < 2**53  # exact as a Redis double
    for p, seq in [(0, 1), (9, MAX_SEQ), (4, 123456789)]:
        assert score_parts(queue_score(p, seq)) == (p, seq)


@pytest.mark.parametrize(
    ("priority", "seq"), [(10, 1), (-1, 1), (True, 1), (1.0, 1), (0, 0), (0, MAX_SEQ + 1)]
)
def test_out_of_range_is_refused(priority, seq):
    with pytest.raises(SchemaError):
        queue_score(priority, seq)


def test_job_end_round_trip_and_refusals():
    end = JobEnd(1000.5, 2.25, 50, "done", 100)
    assert JobEnd.decode(end.encode()) == end and end.work == 100
    # a record from before nfe: its steps are its work (Euler)
    old = JobEnd.decode(b'{"at":1,"ran_s":2,"steps":30,"status":"done"}')
    assert old.nfe is None and old.work == 30
    for bad in [
        b"nope",
        b"{}",
        b'{"at":1,"ran_s":-1,"steps":0,"status":"done"}',
        b'{"at":1,"ran_s":1,"steps":0,"status":"queued"}',
        b'{"at":NaN,"ran_s":1,"steps":0,"status":"done"}',
        b'{"at":1,"ran_s":1,"steps":0,"status":"done","x":1}',
        b'{"at":1,"ran_s":1,"steps":3,"status":"done","nfe":-1}',
        b'{"at":1,"ran_s":1,"steps":3,"status":"done","nfe":2.5}',
    ]:
        with pytest.raises(SchemaError):
            JobEnd.decode(bad)


def test_measure_sequential_batch_and_window():
    assert measure([], 100.0) is None
    # one after another, 2 s each: one slot, 0.02 s per evaluation of 100
    seq = [JobEnd(10.0 + 2 * i, 2.0, 100, "done", 100) for i in range(5)]
    t = measure(seq, 20.0)
    assert (t.slots, t.measured) == (1, 5) and t.s_per_nfe == pytest.approx(0.02)
    assert t.jobs_per_s == pytest.approx(0.5)
    # side by side: 8 jobs started together, all 4 s long: 8 slots, 2 jobs/s
    batch = [JobEnd(104.0 + i * 1e-3, 4.0 + i * 1e-3, 10, "done") for i in range(8)]
    assert measure(batch, 110.0).slots == 8
    assert measure(batch, 110.0).jobs_per_s == pytest.approx(2.0, rel=1e-2)
    # old ends are no measurement of now; an end that ran no evaluation is no measurement at all
    assert measure(seq, 20.0 + 2000) is None
    assert measure([JobEnd(10.0, 0.01, 0, "failed", 0)], 12.0) is None
    # a failed or cancelled job measures the evaluations it ran
    mixed = measure([JobEnd(10.0, 1.0, 10, "cancelled", 20), JobEnd(12.0, 2.0, 40, "done", 40)], 12.0)
    assert mixed.measured == 2 and mixed.s_per_nfe == pytest.approx(3.0 / 60) and mixed.slots == 1


def test_concurrency_is_the_largest_overlap():
    assert concurrency([]) == 0
    # back to back (one ends as the next starts) is one at a time
    assert concurrency([JobEnd(10.0, 5.0, 1, "done"), JobEnd(15.0, 5.0, 1, "done")]) == 1
    # [0, 10], [2, 4], [3, 12], [11, 13]: three at once in [3, 4]
    runs = [JobEnd(10.0, 10.0, 1, "done"), JobEnd(4.0, 2.0, 1, "done")]
    runs += [JobEnd(12.0, 9.0, 1, "done"), JobEnd(13.0, 2.0, 1, "done")]
    assert concurrency(runs) == 3


def test_idle_gaps_between_jobs_are_not_service():
    # light load: a 10-s job (10 steps) every 100 s on one router. A job queued now waits for at most
    # the one running: about 10 s, not the 100 s between arrivals
    ends = [JobEnd(100.0 * i + 10.0, 10.0, 10, "done", 10) for i in range(6)]
    thr = measure(ends, 600.0)
    assert thr.slots == 1 and thr.s_per_nfe == pytest.approx(1.0)
    got = positions([("a", queue_score(0, 1), 10), ("b", queue_score(0, 2), 10)], thr, serving=True)
    assert got["a"].start_in_s == pytest.approx(10.0) and got["b"].start_in_s == pytest.approx(20.0)
    assert got["a"].done_in_s == pytest.approx(20.0)
    assert got["a"].text().startswith("position 1 of 2, starts in about 10 s")


def test_instant_failures_do_not_move_the_estimate():
    # 4 jobs of 2 s one after another, then 40 jobs that failed before their first step (ran_s ~ 0):
    # the failures say nothing about how fast a job runs, so the estimate is the 4 jobs' alone
    done = [JobEnd(10.0 + 2 * i, 2.0, 100, "done", 100) for i in range(4)]
    failed = [JobEnd(18.0 + 0.01 * i, 0.001, 0, "failed", 0) for i in range(40)]
    waiting = [("a", queue_score(0, 1), 100), ("b", queue_score(0, 2), 100)]
    alone = positions(waiting, measure(done, 20.0), serving=True)
    both = positions(waiting, measure(done + failed, 20.0), serving=True)
    assert both["b"].start_in_s == pytest.approx(alone["b"].start_in_s) == pytest.approx(4.0)
    assert both["b"].measured == 4


def test_positions_and_estimates():
    waiting = [("a", queue_score(9, 7), 10), ("b", queue_score(0, 3), 20), ("c", queue_score(0, 9), 5)]
    thr = Throughput(slots=2, s_per_nfe=0.1, measured=4, mean_ran_s=2.0)
    got = positions(waiting, thr, serving=True)
    assert [got[j].position for j in "abc"] == [1, 2, 3] and {p.queued for p in got.values()} == {3}
    assert got["a"].priority == 9 and got["b"].priority == 0 and got["b"].ahead == 1
    # (work ahead x s_per_nfe + a mean run) / slots; done its own work later
    assert got["a"].start_in_s == pytest.approx(1.0) and got["c"].start_in_s == pytest.approx(2.5)
    assert got["b"].done_in_s == pytest.approx(1.5 + 20 * 0.1)
    assert got["b"].slots == 2 and got["b"].jobs_per_s == pytest.approx(1.0)
    assert (
        got["c"].text()
        == "position 3 of 3, starts in about 2 s (done in about 3 s; estimate from 4 recent jobs)"
    )
    unknown = positions(waiting, None, serving=True)["b"]
    assert unknown.start_in_s is None and unknown.measured == 0 and "no estimate yet" in unknown.text()
    idle = positions(waiting, thr, serving=False)["b"]
    assert idle.start_in_s is None and "no router is serving" in idle.text()
    d = got["b"].to_dict()
    assert d["position"] == 2 and d["ahead"] == 1 and d["text"] == got["b"].text()
    assert isinstance(got["a"], QueuePosition)


def test_to_dict_is_the_one_json_shape():
    thr = Throughput(slots=1, s_per_nfe=0.01, measured=3, mean_ran_s=0.4)
    place = positions([("a", queue_score(5, 1), 20), ("b", queue_score(0, 2), 7)], thr, serving=True)["b"]
    d = place.to_dict()
    fields = "job_id position queued priority start_in_s done_in_s jobs_per_s measured serving slots"
    assert set(d) == {*fields.split(), "ahead", "text"}
    # an estimate in whole seconds (at least 1), as the page and `ddm status --json` show it
    assert (d["start_in_s"], d["done_in_s"]) == (1, 1) and d["priority"] == 0 and d["ahead"] == 1
    none = positions([("a", queue_score(0, 1), 5)], None, serving=True)["a"].to_dict()
    assert none["start_in_s"] is None and none["done_in_s"] is None and none["slots"] is None


def test_jobs_ahead_count_by_their_evaluations():
    # 2 jobs side by side (each run 2 s, 0.02 s per evaluation of 100): a 1000-step job ahead delays the
    # one behind it by its 20 s of work over 2 slots; a heun job (2 evaluations a step) counts double
    thr = measure([JobEnd(10.0 + 1.0 * i, 2.0, 100, "done", 100) for i in range(8)], 14.0)
    assert thr.slots == 2 and thr.mean_ran_s == pytest.approx(2.0) and thr.s_per_nfe == pytest.approx(0.02)
    alike = positions([(f"j{i}", queue_score(0, i + 1), 100) for i in range(3)], thr, serving=True)
    assert [alike[f"j{i}"].start_in_s for i in range(3)] == pytest.approx([1.0, 2.0, 3.0])
    long = positions([("big", queue_score(0, 1), 1000), ("me", queue_score(0, 2), 100)], thr, serving=True)
    short = positions([("small", queue_score(0, 1), 10), ("me", queue_score(0, 2), 100)], thr, serving=True)
    assert long["me"].start_in_s == pytest.approx((1000 * 0.02 + 2.0) / 2)
    assert short["me"].start_in_s == pytest.approx((10 * 0.02 + 2.0) / 2)
    assert long["me"].start_in_s > 5 * short["me"].start_in_s
    assert long["me"].done_in_s == pytest.approx(long["me"].start_in_s + 100 * 0.02)
    solvers = ("euler", "heun", "midpoint", "ab3", None, "nope")
    assert [evaluations_per_step(s) for s in solvers] == [1, 2, 2, 1, 1, 1]
    heun = positions([("h", queue_score(0, 1), 100 * 2), ("me", queue_score(0, 2), 100)], thr, True)
    euler = positions([("e", queue_score(0, 1), 100), ("me", queue_score(0, 2), 100)], thr, True)
    assert heun["me"].start_in_s - euler["me"].start_in_s == pytest.approx(100 * 0.02 / 2)


def test_about():
    assert [about(0.2), about(12.4), about(150), about(4 * 3600)] == [
        "about 1 s",
        "about 12 s",
        "about 2 min",
        "about 4.0 h",
    ]
