"""The Markdown table and the where-the-time-goes lines `ddm bench --rtt-ms` prints (ddm.ops.bench.wan
makes the numbers)."""

from __future__ import annotations

from ddm.ops.bench.report import fmt, rate


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
            f"{row['latency_p50_s']:.2f} / {row['latency_p95_s']:.2f} | {row['mean_batch_size']:.1f} | "
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
