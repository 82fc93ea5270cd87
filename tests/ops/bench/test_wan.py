"""`ddm bench --rtt-ms`: expert 1's worker behind a link (a network namespace and proxies), at test size."""

from __future__ import annotations

import argparse
import json

import pytest

from ddm.ops.bench.jobs import parse_ids, parse_rtts
from ddm.ops.bench.wan_report import latency_table, main, wan_table, where_time_goes
from ddm.ops.netsim.netns import list_namespaces

from .test_suite import run_bench

pytestmark = pytest.mark.serial  # latency ratios, and it counts the host's namespaces


def test_wan_bench_adds_the_rtt_column_and_the_ratios(tmp_path):
    before = set(list_namespaces())
    result, stdout = run_bench(
        tmp_path, "--rtt-ms", "0,20", "--concurrency", "1", "--steps", "4", "--repeat", "1"
    )
    assert result["kind"] == "wan" and result["links"]["experts"] == [1]
    assert result["first_label"] == 5  # expert 1's first digit: the 1-job run crosses the link every step
    near, far = result["wan"]
    assert (near["rtt_ms"], near["jobs"], far["rtt_ms"], far["jobs"]) == (0, 1, 20, 1)
    assert near["throughput_vs_0ms"] == 1.0 and 0 < far["throughput_vs_0ms"] < 0.9
    assert far["step_ms_p50"] >= 20 > near["step_ms_p50"]  # every step waited for the link's round trip
    for row in (near, far):
        assert row["expert1_requests"] >= 4 and row["expert0_requests"] == 0
        assert row["expert1_compute_ms"] > 0 and 0 < row["expert1_busy"] < 1
        assert 0 < row["expert1_in_flight"] <= 1.05  # one job: one request at a time
        model_s = 4 * (row["rtt_ms"] + row["expert1_compute_ms"]) / 1e3
        assert row["latency_over_model"] == pytest.approx(row["latency_p50_s"] / model_s)
    assert "| RTT to expert 1 (ms) |" in stdout and "throughput / 0 ms" in stdout
    assert "RTT 20 ms, 1 job: step p50" in stdout
    assert set(list_namespaces()) <= before  # the link's namespace is gone (a dead run's may be cleaned up)


def test_wan_table_and_time_lines_from_a_result():
    row = {
        "jobs": 1, "images_per_s": 2.0, "images_per_s_runs": [1.9, 2.1], "latency_p50_s": 3.1,
        "latency_p95_s": 3.3, "mean_batch_size": 1.0, "step_ms_p50": 62.0, "throughput_vs_0ms": 0.5,
        "latency_over_model": 1.03, "expert0_busy": 0.0, "expert0_in_flight": 0.0, "expert0_compute_ms": 0.0,
        "expert1_busy": 0.2, "expert1_in_flight": 0.9, "expert1_compute_ms": 11.5,
    }  # fmt: skip
    result = {"links": {"experts": [1]}, "wan": [{**row, "rtt_ms": 50.0}]}
    table = wan_table(result)
    assert "| 50 | 1 | 2.00 (1.90-2.10) | 0.50x | 3.10 / 3.30 | 1.0 | 0.9 | 20% | 1.03x |" in table
    lines = where_time_goes(result)
    assert "step p50 62.0 ms = 50 link + 11.5 expert 1 forward pass + 0.5 rest" in lines
    assert "expert 1 busy 20% with 0.9 in flight (11.5 ms per pass)" in lines


def test_runs_side_by_side_pair_each_level_and_name_their_sampler(tmp_path, capsys):
    def run(solver, steps, grid, rows):
        wan = [
            {"rtt_ms": rtt, "jobs": jobs, "latency_p50_s": p50, "latency_p95_s": p50 + 0.1,
             "images_per_s": ips, "throughput_vs_0ms": ratio}
            for rtt, jobs, p50, ips, ratio in rows
        ]  # fmt: skip
        return {"kind": "wan", "solver": solver, "steps": steps, "grid": grid, "wan": wan}

    euler = run("euler", 50, "uniform", [(50.0, 1, 3.4, 0.3, 0.25), (0.0, 1, 0.8, 1.2, 1.0)])
    ab2 = run("ab2", 6, "shift:3", [(0.0, 1, 0.13, 7.8, 1.0)])
    table = latency_table([euler, ab2]).splitlines()
    assert (
        table[0].startswith("| RTT (ms) | jobs | euler-50 p50 / p95 (s) |")
        and "ab2-6 shift:3 img/s" in table[0]
    )
    assert table[2] == "| 0 | 1 | 0.80 / 0.90 | 1.20 (1.00x) | 0.13 / 0.23 | 7.80 (1.00x) |"
    assert table[3] == "| 50 | 1 | 3.40 / 3.50 | 0.30 (0.25x) | - | - |", "a level one run lacks"
    path = tmp_path / "euler.json"
    path.write_text(json.dumps(euler))
    assert main([str(path)]) == 0 and "| 50 | 1 | 3.40 / 3.50 |" in capsys.readouterr().out
    path.write_text(json.dumps({"kind": "suite"}))
    with pytest.raises(SystemExit):
        main([str(path)])
    assert "expected the JSON of a `ddm bench --rtt-ms` run" in capsys.readouterr().err


def test_rtt_and_expert_lists_are_checked():
    assert parse_rtts("0,20,50") == (0.0, 20.0, 50.0) and parse_ids("0,1") == (0, 1)
    for bad in ("", "a", "-1", "0,0", "5000"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_rtts(bad)
    for bad in ("x", "-1", "1,1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_ids(bad)


def test_the_jobs_carry_the_solver_and_the_model_counts_its_evaluations(tmp_path):
    from ddm.ops.bench.jobs import BenchConfig, batch_spec, job_specs

    cfg = BenchConfig(tmp_path / "d.toml", steps=4, solver="heun", grid="shift:3")
    assert cfg.nfe == 8 and BenchConfig(tmp_path / "d.toml").nfe == 50  # Euler-50: 50 round trips
    specs = [*job_specs(3, cfg), batch_spec(2, cfg)]
    assert {(s.solver, s.grid, s.steps) for s in specs} == {("heun", "shift:3", 4)}
