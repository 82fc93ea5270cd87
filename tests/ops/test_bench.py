"""`ddm bench` end to end at test size: real worker processes, RabbitMQ, Redis and HTTP servers."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_measures_all_three_designs_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ddm.ops.cli", "bench", "--preset", "tiny", "--steps", "20"]
        + ["--concurrency", "1,3", "--limit-batches", "1,3", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [row["batch"] for row in result["limit"]] == [1, 3]
    assert [row["jobs"] for row in result["pipeline"]] == [1, 3]
    assert [row["jobs"] for row in result["http"]] == [1, 3]
    for row in result["pipeline"]:
        assert row["images_per_s"] > 0 and row["latency_p95_s"] >= row["latency_p50_s"] > 0
        assert row["overhead_ms_p50"] > 0 and row["step_ms_p50"] > row["overhead_ms_p50"]
        assert row["mean_batch_size"] >= 1 and row["forward_passes"] >= 20
    three = result["pipeline"][1]
    # 3 jobs (labels 0, 1, 2: all expert 0) submitted together share requests: far fewer forward
    # passes than the 60 job-steps (a job may run a step or two alone before the others arrive)
    assert three["forward_passes"] < 30 and three["mean_batch_size"] > 2
    for row in result["ratios"]:
        assert row["pipeline_over_limit"] > 0 and row["pipeline_over_http"] > 0
    assert result["deployment"]["path"] == "random weights, preset tiny"
    assert "| jobs | limit img/s" in proc.stdout and "pipeline / HTTP" in proc.stdout
