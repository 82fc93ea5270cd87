"""bench_trace's arithmetic on hand-made marks (the traced run itself is a manual diagnostic)."""

from __future__ import annotations

import pytest

from ddm.ops.bench_trace import hops, idle_gaps


def _request(rid: str, t0: float, forward_ms: float) -> tuple[list, list]:
    """Router and worker marks of one request whose every hop is 1 ms, except the forward pass."""
    ms = 1e-3
    fwd = forward_ms * ms
    router = [
        ["r_plan", t0, None],
        ["r_planned", t0 + 1 * ms, None],
        ["r_publish", t0 + 2 * ms, rid],
        ["r_published", t0 + 3 * ms, rid],
        ["r_reply", t0 + 7 * ms + fwd, rid],
        ["r_replied", t0 + 8 * ms + fwd, rid],
    ]
    worker = [
        ["w_recv", t0 + 4 * ms, rid],
        ["w_batch", t0 + 5 * ms, None],
        ["w_forward", t0 + 5 * ms, rid],
        ["w_forwarded", t0 + 5 * ms + fwd, rid],
        ["w_batched", t0 + 5 * ms + fwd, None],
        ["w_reply", t0 + 6 * ms + fwd, rid],
        ["w_replied", t0 + 6.5 * ms + fwd, rid],
    ]
    return router, worker


def test_hops_follow_each_request_by_its_correlation_id():
    r1, w1 = _request("a.1", 10.0, forward_ms=5)
    r2, w2 = _request("a.2", 10.1, forward_ms=7)
    marks = {"router": r1 + r2, "expert0": w1 + w2}
    got = hops(marks)
    assert got["router: plan (the routing policy, one call per burst)"] == pytest.approx(1.0)
    assert got["broker -> worker callback"] == pytest.approx(1.0)
    assert got["worker: forward pass and reply encoding (serve_batch)"] == pytest.approx(6.0)
    # published -> reply read is 4 ms + the forward pass in both requests
    assert got["published -> reply read, minus serve_batch"] == pytest.approx(4.0)
    gaps = idle_gaps(marks)
    # first forward ends at 10.010, the next starts at 10.105
    assert gaps == {"expert0: idle between forward passes": pytest.approx(95.0)}


def test_a_publish_without_a_plan_of_its_own_gets_none():
    router, worker = _request("a.1", 10.0, forward_ms=5)
    resent, resent_worker = _request("a.1r", 10.5, forward_ms=5)
    resent = [m for m in resent if m[0] not in ("r_plan", "r_planned")]  # a resend: no plan before it
    got = hops({"router": router + resent, "expert0": worker + resent_worker})
    assert got["router: plan (the routing policy, one call per burst)"] == pytest.approx(1.0)


def test_hops_refuse_a_trace_without_a_complete_request():
    router, worker = _request("a.1", 1.0, forward_ms=5)
    with pytest.raises(RuntimeError, match="end to end"):
        hops({"router": router, "expert0": worker[:2]})
