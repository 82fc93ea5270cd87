"""The Paris cost benchmark (ops/bench/paris_cost.py) runs, on the tiny configs of the Paris fixtures
(its full size, 606M parameters, is for `python -m ddm.ops.bench.paris_cost`, not for CI): a row per
model and batch, each time positive. Times are printed, never asserted."""

from __future__ import annotations

import pytest

from tests.support.paris_fixture import TINY_EXPERT, TINY_ROUTER


def test_the_benchmark_times_every_model_and_batch():
    pytest.importorskip("torch")
    from ddm.ops.bench.paris_cost import measure

    rows = measure([1, 2], repeats=2, expert_config=TINY_EXPERT, router_config=TINY_ROUTER)
    assert [(m, b) for m, b, _ in rows] == [("expert", 1), ("router", 1), ("expert", 2), ("router", 2)]
    assert all(s > 0 for _, _, s in rows)
