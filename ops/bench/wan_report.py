"""The Markdown table and the where-the-time-goes lines `ddm bench --rtt-ms` prints (ddm.ops.bench.wan
makes the numbers), and the latency-as-users-feel-it table of several such runs side by side:

    python -m ddm.ops.bench.wan_report docs/bench/wan-euler50.json docs/bench/wan-ab2-6.json ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ddm.ops.bench.report import fmt, latency, rate


def wan_table(result: dict) -> str:
    k = result["links"]["experts"][0]
    lines = [
        f"| RTT to expert {k} (ms) | jobs | img/s | throughput / 0 ms | p50 / p95 latency (s) | mean batch "
        f"| expert {k} in flight (est.) | expert {k} busy | 1 job: latency / NFE x (RTT + compute) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["wan"]:
        lines.append(
            f"| {row['rtt_ms']:g} | {row['jobs']} | {rate(row)} | "
            f"{fmt(row['throughput_vs_0ms'], suffix='x')} | "
            f"{latency(row)} | {row['mean_batch_size']:.1f} | "
            f"{row[f'expert{k}_in_flight']:.1f} | {row[f'expert{k}_busy']:.0%} | "
            f"{fmt(row['latency_over_model'], suffix='x')} |"
        )
    return "\n".join(lines)


def where_time_goes(result: dict) -> str:
    """Per RTT: one job's step split into link, the linked expert's forward pass and the rest (router,
    broker, proxies, Redis); at the most jobs, how busy each expert was and how much it had in flight."""
    k = result["links"]["experts"][0]
    rows = result["wan"]
    experts = sorted({int(key[len("expert") : -len("_busy")]) for key in rows[0] if key.endswith("_busy")})
    most = max(row["jobs"] for row in rows)
    lines = ["where the time goes:"]
    for row in rows:
        if row["jobs"] == 1:
            compute = row[f"expert{k}_compute_ms"]
            rtt, step = row["rtt_ms"], row["step_ms_p50"]
            lines.append(
                f"  RTT {rtt:g} ms, 1 job: step p50 {step:.1f} ms = {rtt:g} link + {compute:.1f} expert {k} "
                f"forward pass + {step - rtt - compute:.1f} rest (router, broker, proxy, Redis)"
            )
    for row in rows:
        if row["jobs"] == most:
            busy = ", ".join(
                f"expert {e} busy {row[f'expert{e}_busy']:.0%} with {row[f'expert{e}_in_flight']:.1f} "
                f"in flight ({row[f'expert{e}_compute_ms']:.1f} ms per pass)"
                for e in experts
            )
            lines.append(f"  RTT {row['rtt_ms']:g} ms, {most} jobs: {busy}")
    return "\n".join(lines)


def sampler_name(result: dict) -> str:
    """'euler-50', 'ab2-6', or with a grid other than uniform 'ab2-6 shift:3'."""
    name = f"{result['solver']}-{result['steps']}"
    return name if result.get("grid", "uniform") == "uniform" else f"{name} {result['grid']}"


def latency_table(results: list[dict]) -> str:
    """Per (RTT, jobs) of the first run: each run's p50 / p95 time to the final image and its images/s
    with its ratio to the 0 ms row of the same level. Runs are labelled by their sampler."""
    names = [sampler_name(r) for r in results]
    head = " | ".join(f"{n} p50 / p95 (s) | {n} img/s (/ 0 ms)" for n in names)
    lines = [f"| RTT (ms) | jobs | {head} |", "|---:|---:|" + "---:|---:|" * len(results)]
    by_run = [{(row["rtt_ms"], row["jobs"]): row for row in r["wan"]} for r in results]
    for row in sorted(results[0]["wan"], key=lambda row: (row["jobs"], row["rtt_ms"])):
        key = (row["rtt_ms"], row["jobs"])
        cells = []
        for rows in by_run:
            got = rows.get(key)
            if got is None:
                cells += ["-", "-"]
                continue
            ratio = fmt(got["throughput_vs_0ms"], suffix="x")
            cells += [latency(got), f"{rate(got)} ({ratio})"]
        lines.append(f"| {key[0]:g} | {key[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ddm.ops.bench.wan_report",
        description="Several `ddm bench --rtt-ms` JSONs side by side: time to the final image, throughput.",
    )
    parser.add_argument(
        "results", nargs="+", type=Path, help="JSONs written by `ddm bench --rtt-ms ... --out`"
    )
    args = parser.parse_args(argv)
    results = []
    for path in args.results:
        result = json.loads(path.read_text())
        if result.get("kind") != "wan":
            parser.error(
                f"{path}: expected the JSON of a `ddm bench --rtt-ms` run, got kind {result.get('kind')!r}"
            )
        results.append(result)
    print(latency_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
