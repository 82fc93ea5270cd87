"""`ddm bench` end to end at test size: real worker processes, RabbitMQ, Redis and HTTP servers."""

from __future__ import annotations

import json
import subprocess
import sys

from ddm.ops.bench.report import median_row, paired_ratio


def run_bench(tmp_path, *args: str) -> tuple[dict, str]:
    """`ddm bench --preset tiny ARGS` in a subprocess: (the JSON it wrote, its stdout)."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ddm.ops.cli", "bench", "--preset", "tiny", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def test_median_row_takes_each_numbers_median_and_keeps_the_runs():
    runs = [
        {"jobs": 4, "images_per_s": 2.0, "overhead_ms_p50": 3.0},
        {"jobs": 4, "images_per_s": 5.0, "overhead_ms_p50": 1.0},
        {"jobs": 4, "images_per_s": 3.0, "overhead_ms_p50": 2.0},
    ]
    row = median_row(runs)
    assert row == {"jobs": 4, "images_per_s": 3.0, "overhead_ms_p50": 2.0, "images_per_s_runs": [2, 5, 3]}
    assert isinstance(row["jobs"], int)
    assert median_row([{"jobs": 1, "images_per_s": 1.0, "note": "a"}])["note"] == "a"


def test_ratios_pair_each_repeat_with_its_own_baseline():
    pipeline = [{"images_per_s": v} for v in (4.0, 6.0, 5.0)]
    http = [{"images_per_s": v} for v in (2.0, 2.0, 5.0)]  # the machine got faster for the third pair
    assert paired_ratio(pipeline, http) == 2.0  # median of 2.0, 3.0, 1.0
    assert paired_ratio(pipeline, None) is None


def test_bench_measures_all_three_designs_and_writes_json(tmp_path):
    result, stdout = run_bench(
        tmp_path, "--steps", "12", "--concurrency", "1,3", "--limit-batches", "1,3", "--repeat", "2"
    )
    assert [row["batch"] for row in result["limit"]] == [1, 3]
    assert [row["jobs"] for row in result["pipeline"]] == [1, 3]
    assert [row["jobs"] for row in result["http"]] == [1, 3]
    for row in result["pipeline"]:
        assert row["images_per_s"] > 0 and row["latency_p95_s"] >= row["latency_p50_s"] > 0
        assert row["overhead_ms_p50"] > 0 and row["step_ms_p50"] > row["overhead_ms_p50"]
        assert row["mean_batch_size"] >= 1 and row["forward_passes"] >= 12
    three = result["pipeline"][1]
    # 3 jobs (labels 0, 1, 2: all expert 0) submitted together share requests: far fewer forward
    # passes than the 36 job-steps (a job may run a step or two alone before the others arrive)
    assert three["forward_passes"] < 18 and three["mean_batch_size"] > 2
    for design in ("limit", "pipeline", "http"):  # two runs per level, the row holds their median
        for row in result[design]:
            runs = row["images_per_s_runs"]
            assert len(runs) == 2 and row["images_per_s"] == sum(runs) / 2
        level = "batch" if design == "limit" else "jobs"
        assert [row[level] for row in result["runs"][design]] == [1, 1, 3, 3]
    for row in result["ratios"]:
        assert row["pipeline_over_limit"] > 0 and row["pipeline_over_http"] > 0
    floors = result["runs"]["transport_floor"]  # after each 1-job run, the echo busy as long as its compute
    kinds = ("bare_ms", "around_busy_wait_ms", "around_forward_ms")
    assert len(floors) == 2 and all(f[kind] > 0 for f in floors for kind in kinds)
    assert [f["hold_ms"] for f in floors] == [r["compute_ms_p50"] for r in result["runs"]["pipeline"][:2]]
    assert result["transport_floor"]["hold_ms"] == sum(f["hold_ms"] for f in floors) / 2
    assert "transport floor under the 1-job overhead" in stdout
    assert result["deployment"]["path"] == "random weights, preset tiny"
    assert "| jobs | limit img/s" in stdout and "pipeline / HTTP" in stdout


def test_bench_without_a_1_job_level_has_no_floor(tmp_path):
    result, stdout = run_bench(
        tmp_path, "--steps", "2", "--no-http", "--concurrency", "2", "--limit-batches", "2", "--repeat", "1"
    )
    assert result["transport_floor"] is None and result["runs"]["transport_floor"] == []
    assert "transport floor: not measured" in stdout
