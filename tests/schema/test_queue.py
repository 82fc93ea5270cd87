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
    end = JobEnd(1000.5, 2.25, 50, "done")
    assert JobEnd.decode(end.encode()) == end
    for bad in [
        b"nope",
        b"{}",
        b'{"at":1,"ran_s":-1,"steps":0,"status":"done"}',
        b'{"at":1,"ran_s":1,"steps":0,"status":"queued"}',
        b'{"at":NaN,"ran_s":1,"steps":0,"status":"done"}',
        b'{"at":1,"ran_s":1,"steps":0,"status":"done","x":1}',
    ]:
        with pytest.raises(SchemaError):
            JobEnd.decode(bad)


def test_measure_sequential_batch_and_window():
    assert measure([], 100.0) is None
    # one after another, 2 s each: 0.5 jobs/s, 0.02 s per step of 100
    seq = [JobEnd(10.0 + 2 * i, 2.0, 100, "done") for i in range(5)]
    t = measure(seq, 20.0)
    assert t.jobs_per_s == pytest.approx(0.5) and t.s_per_step == pytest.approx(0.02) and t.measured == 5
    # side by side: 8 jobs started together, all 4 s long: 2 jobs/s (not "infinitely many at once")
    batch = [JobEnd(104.0 + i * 1e-3, 4.0 + i * 1e-3, 10, "done") for i in range(8)]
    assert measure(batch, 110.0).jobs_per_s == pytest.approx(2.0, rel=1e-2)
    # old ends are no measurement of now; failed ones count as leaving the queue, not as a step time
    assert measure(seq, 20.0 + 2000) is None
    mixed = measure([JobEnd(10.0, 1.0, 0, "failed"), JobEnd(12.0, 2.0, 40, "done")], 12.0)
    assert mixed.measured == 2 and mixed.s_per_step == pytest.approx(2.0 / 40)


def test_positions_and_estimates():
    waiting = [("a", queue_score(9, 7), 10), ("b", queue_score(0, 3), 20), ("c", queue_score(0, 9), 5)]
    thr = Throughput(jobs_per_s=0.5, s_per_step=0.1, measured=4)
    got = positions(waiting, thr, serving=True)
    assert [got[j].position for j in "abc"] == [1, 2, 3] and {p.queued for p in got.values()} == {3}
    assert got["a"].priority == 9 and got["b"].priority == 0 and got["b"].ahead == 1
    assert got["a"].start_in_s == pytest.approx(2.0) and got["c"].start_in_s == pytest.approx(6.0)
    assert got["b"].done_in_s == pytest.approx(4.0 + 20 * 0.1)
    assert (
        got["c"].text()
        == "position 3 of 3, starts in about 6 s (done in about 6 s; estimate from 4 recent jobs)"
    )
    unknown = positions(waiting, None, serving=True)["b"]
    assert unknown.start_in_s is None and unknown.measured == 0 and "no estimate yet" in unknown.text()
    idle = positions(waiting, thr, serving=False)["b"]
    assert idle.start_in_s is None and "no router is serving" in idle.text()
    d = got["b"].to_dict()
    assert d["position"] == 2 and d["ahead"] == 1 and d["text"] == got["b"].text()
    assert isinstance(got["a"], QueuePosition)


def test_jobs_ahead_count_by_their_steps():
    # 2 jobs side by side (1 job/s, each run 2 s, 0.02 s per step of 100): a 1000-step job ahead delays
    # the one behind it by its 20 s of work over 2 slots; alike jobs give position / jobs_per_s
    thr = measure([JobEnd(10.0 + 0.5 * i, 2.0, 100, "done") for i in range(8)], 14.0)
    assert thr.jobs_per_s == pytest.approx(8 / 5.5) and thr.mean_ran_s == pytest.approx(2.0)
    alike = positions([(f"j{i}", queue_score(0, i + 1), 100) for i in range(3)], thr, serving=True)
    assert [alike[f"j{i}"].start_in_s for i in range(3)] == pytest.approx(
        [k / thr.jobs_per_s for k in (1, 2, 3)]
    )
    long = positions([("big", queue_score(0, 1), 1000), ("me", queue_score(0, 2), 100)], thr, serving=True)
    short = positions([("small", queue_score(0, 1), 10), ("me", queue_score(0, 2), 100)], thr, serving=True)
    slots = thr.jobs_per_s * 2.0
    assert long["me"].start_in_s == pytest.approx((1000 * 0.02 + 2.0) / slots)
    assert short["me"].start_in_s == pytest.approx((10 * 0.02 + 2.0) / slots)
    assert long["me"].start_in_s > 5 * short["me"].start_in_s
    assert long["me"].done_in_s == pytest.approx(long["me"].start_in_s + 100 * 0.02)


def test_about():
    assert [about(0.2), about(12.4), about(150), about(4 * 3600)] == [
        "about 1 s",
        "about 12 s",
        "about 2 min",
        "about 4.0 h",
    ]
