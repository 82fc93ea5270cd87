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


def test_the_pipeline_mode_times_a_job_in_process_and_through_the_real_pipeline(tmp_path, capsys):
    """--pipeline on the tiny configs: a random Paris folder imported and served by real workers (the CLIP
    and VAE stages, Paris's router in the router worker); every number positive, the overhead a part of
    the pipeline's step."""
    pytest.importorskip("diffusers")
    from ddm.ops.bench.paris_cost import pipeline_costs, print_pipeline_costs

    costs = pipeline_costs(tmp_path, 2, 2, TINY_EXPERT, TINY_ROUTER)
    assert all(costs[k] > 0 for k in ("in_process_step_s", "pipeline_step_s", "compute_step_s"))
    assert 0 < costs["overhead_step_ms"] / 1000 < costs["pipeline_step_s"]
    print_pipeline_costs(costs, 2, 2)
    assert "| in-process | pipeline |" in capsys.readouterr().out
