"""The expert worker's batching without a broker: Batcher's "is a batch ready?" rule, serve_batch's
one forward pass per batch (sliced, with a keep-alive between slices, for an oversize one) and its
fallback that isolates a bad request, and run_bucketed's padding to compiled bucket sizes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ddm.runtime.stage import Delivery
from ddm.schema.messages import VelocityReply, VelocityRequest
from ddm.workers.batcher import Batcher, serve_batch
from ddm.workers.buckets import bucket_for, pad_rows, run_bucketed


def pending(
    rows: int, arrived: float = 0.0, request_id: str = "r", label: int = 3, redelivered: bool = False
) -> Delivery:
    x = np.random.default_rng(rows).standard_normal((rows, 1, 32, 32)).astype(np.float32)
    t, y, g = np.full(rows, 0.5, np.float32), np.full(rows, label), np.ones(rows, np.float32)
    return Delivery(VelocityRequest(request_id, x, t, y, g), 1, arrived, b"", None, redelivered)


class Doubling:
    """An expert whose velocity is 2x, counting its calls and the rows of each."""

    meta = SimpleNamespace(precision="fp32")

    def __init__(self, fail_on_label: int | None = None):
        self.calls: list[int] = []
        self.fail_on_label = fail_on_label

    def velocity(self, x, t, y, g):
        self.calls.append(len(x))
        if self.fail_on_label is not None and (y == self.fail_on_label).any():
            raise RuntimeError("this label breaks the model")
        return 2.0 * x


def test_a_batch_is_ready_when_its_rows_fill_it_or_its_oldest_request_waited_long_enough():
    b = Batcher(max_batch=8, max_wait_s=0.010)
    assert b.wait_s(0.0) is None, "nothing waiting"
    b.add(pending(3, arrived=1.000))
    assert b.wait_s(1.004) == pytest.approx(0.006)
    assert b.wait_s(1.020) == 0.0, "the oldest waited max_wait"
    b.add(pending(5, arrived=1.001))
    assert b.wait_s(1.002) == 0.0 and b.rows == 8, "the rows fill max_batch"


def test_take_keeps_arrival_order_and_fits_max_batch_and_serves_an_oversize_request_alone():
    b = Batcher(max_batch=8, max_wait_s=0.0)
    for i, rows in enumerate((3, 4, 2, 20)):
        b.add(pending(rows, request_id=f"r{i}"))
    assert [p.request.request_id for p in b.take()] == ["r0", "r1"], "3 + 4 fit; 3 + 4 + 2 do not"
    assert [p.request.request_id for p in b.take()] == ["r2"], "2 + 20 do not fit"
    assert [p.request.request_id for p in b.take()] == ["r3"], "an oversize request alone, not refused"
    assert len(b) == 0 and b.rows == 0


def test_a_redelivered_request_is_served_alone_so_a_crash_while_serving_it_blames_it_alone():
    b = Batcher(max_batch=64, max_wait_s=0.0)
    for i, again in enumerate((False, False, True, False, True, True)):
        b.add(pending(1, request_id=f"r{i}", redelivered=again))
    batches = [[p.request.request_id for p in b.take()] for _ in range(5)]
    assert batches == [["r0", "r1"], ["r2"], ["r3"], ["r4"], ["r5"]]


def test_serve_batch_is_one_forward_pass_split_back_per_request():
    expert = Doubling()
    items = [pending(3, request_id="a"), pending(2, request_id="b")]
    result = serve_batch(expert, items, expert_id=0, worker_id="w")
    assert expert.calls == [5] and result.rows == 5
    for item, outcome in zip(items, result.outcomes, strict=True):
        reply = VelocityReply.decode(outcome.reply)
        assert reply.request_id == item.request.request_id and reply.batch_size == 5
        np.testing.assert_array_equal(reply.v, 2.0 * item.request.x)


def test_an_oversize_batch_runs_in_slices_with_the_keepalive_between_them():
    expert, between = Doubling(), []
    (item,) = items = [pending(70)]
    result = serve_batch(expert, items, 0, "w", chunk_rows=32, between=lambda: between.append(1))
    assert expert.calls == [32, 32, 6] and len(between) == 2, "after every slice but the last"
    np.testing.assert_array_equal(VelocityReply.decode(result.outcomes[0].reply).v, 2.0 * item.request.x)


def test_a_request_that_breaks_the_batch_is_isolated_and_the_others_are_answered():
    expert = Doubling(fail_on_label=9)
    items = [
        pending(2, request_id="ok1"),
        pending(1, request_id="bad", label=9),
        pending(2, request_id="ok2"),
    ]
    result = serve_batch(expert, items, 0, "w")
    served = {o.item.request.request_id: o for o in result.outcomes}
    assert served["ok1"].reply and served["ok2"].reply
    assert served["bad"].reply is None and "this label breaks the model" in served["bad"].error
    assert expert.calls == [5, 2, 1, 2], "the batch, then each request alone"


def test_run_bucketed_pads_each_chunk_to_its_bucket_and_returns_only_the_real_rows():
    seen = []

    def forward(x):
        seen.append(len(x))
        return x + 1.0

    x = np.arange(11, dtype=np.float32)[:, None]
    out = run_bucketed(forward, (x,), buckets=(1, 2, 4, 8), limit=8)
    assert seen == [8, 4], "11 rows: a full 8, then 3 padded to the bucket of 4"
    np.testing.assert_array_equal(out, x + 1.0)
    assert bucket_for(3, (1, 2, 4, 8)) == 4
    np.testing.assert_array_equal(pad_rows(np.array([1, 2]), 4), [1, 2, 2, 2])
    with pytest.raises(ValueError, match="exceeds the largest bucket 8"):
        bucket_for(9, (1, 2, 4, 8))


def test_run_bucketed_without_buckets_runs_any_size():
    seen = []
    out = run_bucketed(lambda x: (seen.append(len(x)), x)[1], (np.zeros((5, 1), np.float32),), None, limit=4)
    assert seen == [4, 1] and out.shape == (5, 1)
