"""`ddm bench --rtt-ms 0,20,50,100 [--link-experts 1]`: the pipeline with experts on other hosts.

The linked experts' workers run in network namespaces behind link proxies (ddm.ops.bench.linked); one
set of processes serves every round trip, the links' delay changing between runs, each change followed
by a short job across the link so the router's view of the link is of the new delay. Every repeat
measures every concurrency level at every RTT (the RTT order reversed every other repeat, so drift
hits them alike); a level's ratio pairs each run with the 0 ms run of the same repeat. Jobs are
labelled from the first linked expert's first class on, so one job crosses the link at every step.

Rows: rtt_ms, jobs, images/s, latency p50/p95, mean batch, and per expert its requests, mean forward
pass, busy share and requests in flight (estimated, ddm.ops.bench.pipeline.expert_fields). Ratios:
throughput over the 0 ms row of the level; at 1 job, latency over NFE x (RTT + per-evaluation compute),
the per-step compute being the linked expert's mean forward pass in that run (from its heartbeats).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from ddm.ops.bench.jobs import BenchConfig, job_specs
from ddm.ops.bench.report import header, median_row, paired_ratio
from ddm.schema.deployment import Deployment
from ddm.schema.errors import DDMError

SETTLE_STEPS = 20  # steps of the job that follows a change of delay (the router's recent round trips)


def first_class(deployment: Path, expert: int) -> int:
    """The smallest label expert `expert` was trained on (0 when its checkpoint does not say)."""
    from ddm.workers.checkpoint import read_meta

    entry = next(e for e in Deployment.load(deployment).experts if e.id == expert)
    classes = read_meta(entry.checkpoint).get("classes") or [0]
    return min(classes)


def measure_wan(cfg: BenchConfig, log_dir: Path, progress=print) -> tuple[dict, dict]:
    """({(rtt_ms, jobs): [row per repeat]}, how the links were made)."""
    from ddm.ops.bench.linked import LinkedPipeline
    from ddm.ops.bench.pipeline import run_level

    runs: dict[tuple[float, int], list[dict]] = {(r, j): [] for r in cfg.rtt_ms for j in cfg.concurrency}
    with LinkedPipeline(cfg.deployment, log_dir, cfg.link_experts) as procs:
        links = procs.describe_links()
        where = "network namespaces" if links["isolated"] else f"loopback ({links['fallback']})"
        progress(f"experts {links['experts']} behind links, on {where}")
        run_level(procs, job_specs(max(cfg.concurrency), cfg, steps=2))  # warm-up
        for repeat in range(1, cfg.repeat + 1):
            for rtt in cfg.rtt_ms if repeat % 2 else cfg.rtt_ms[::-1]:
                procs.set_rtt(rtt)
                _settle(procs, cfg)
                for jobs in cfg.concurrency:
                    row = {"rtt_ms": rtt, **run_level(procs, job_specs(jobs, cfg))}
                    row["latency_over_model"] = _latency_over_model(row, cfg) if jobs == 1 else None
                    runs[(rtt, jobs)].append(row)
                    progress(f"[{repeat}/{cfg.repeat}] {_progress_line(row, cfg)}")
    return runs, links


def _settle(procs, cfg: BenchConfig) -> None:
    """One job across the link after its delay changed, unmeasured."""
    from ddm.client.client import Client
    from ddm.schema.messages import JobStatus

    with Client(settings=procs.settings) as client:
        job_id = client.submit(job_specs(1, cfg, steps=min(SETTLE_STEPS, cfg.steps))[0], check=False)
        status = client.wait(job_id, timeout=600)
    if status.status is not JobStatus.DONE:
        raise DDMError(f"the job after a change of link delay failed: {status.error}")
    time.sleep(3 * procs.settings.heartbeat_s)  # the next run's "before" counters include this job


def _latency_over_model(row: dict, cfg: BenchConfig) -> float:
    """1-job latency over NFE x (RTT + the linked expert's mean forward pass in this run)."""
    compute_ms = row[f"expert{cfg.link_experts[0]}_compute_ms"]
    return row["latency_p50_s"] / (cfg.nfe * (row["rtt_ms"] + compute_ms) / 1e3)


def _progress_line(row: dict, cfg: BenchConfig) -> str:
    k = cfg.link_experts[0]
    line = (
        f"rtt {row['rtt_ms']:5.0f} ms, {row['jobs']:>3} jobs: {row['images_per_s']:7.2f} images/s, "
        f"p50 {row['latency_p50_s']:.2f} s, expert {k}: {row[f'expert{k}_in_flight']:.1f} in flight, "
        f"busy {row[f'expert{k}_busy']:.0%}"
    )
    if row["latency_over_model"] is not None:
        line += f", latency / (NFE x (RTT + compute)) {row['latency_over_model']:.2f}"
    return line


def run(cfg: BenchConfig, work_dir: Path, progress=print) -> dict:
    """The WAN run's result (the JSON `ddm bench --rtt-ms` writes)."""
    started = time.time()
    cfg = dataclasses.replace(cfg, first_label=first_class(cfg.deployment, cfg.link_experts[0]))
    runs, links = measure_wan(cfg, work_dir / "logs", progress)
    rows = []
    for (_, jobs), level_runs in sorted(runs.items(), key=lambda item: (item[0][1], item[0][0])):
        row = median_row(level_runs)
        row["throughput_vs_0ms"] = paired_ratio(level_runs, runs.get((0.0, jobs)))  # None without 0 ms
        rows.append(row)
    return {
        "format": 1,
        "kind": "wan",
        **header(cfg),
        "rtt_ms": list(cfg.rtt_ms),
        "links": links,
        "first_label": cfg.first_label,
        "wan": rows,  # one row per (jobs, rtt_ms): medians over the repeats
        "runs": {"wan": [row for level_runs in runs.values() for row in level_runs]},
        "wall_s": time.time() - started,
    }
