"""`ddm workers`: the live workers, from their Redis heartbeats, with the depth of the queue each one
consumes (RabbitMQ, passive declares)."""

from __future__ import annotations

import argparse
import sys
import time


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "List the workers whose heartbeat is alive in Redis (DDM_REDIS_URL, DDM_PREFIX): role, expert, "
        "framework, device, host, the depth of the queue it consumes (ready messages, from DDM_AMQP_URL), "
        "batches (experts) or jobs running (routers), and when it last beat."
    )
    parser.add_argument("--json", action="store_true", help="print the workers as JSON")


def main(args: argparse.Namespace) -> int:
    from ddm.client.client import Client
    from ddm.ops.cli.exit_codes import FAILURE, OK
    from ddm.ops.command_kit import print_json
    from ddm.runtime.heartbeat import read_live_workers
    from ddm.runtime.queue_probe import QueueProbe
    from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS, unavailable

    with Client() as client:
        try:
            beats = read_live_workers(client.redis, client.names)
        except REDIS_CONNECTION_ERRORS as exc:
            raise unavailable(client.settings.redis_url, exc) from None
        names = client.names
        rows = [beat.to_dict() | {"queue": beat.queue or names.jobs} for beat in beats.values()]
        probe = QueueProbe(client.settings.amqp_url)
        error = None
        try:
            depths = probe.depths(sorted({row["queue"] for row in rows}))
        except Exception as exc:  # noqa: BLE001 - any broker trouble: shown, the list still printed
            depths, error = {}, f"RabbitMQ did not answer at DDM_AMQP_URL ({type(exc).__name__}: {exc})"
        finally:
            probe.close()
    for row in rows:
        depth = depths.get(row["queue"])
        row["queue_depth"] = None if depth is None else depth["messages"]
        row["queue_consumers"] = None if depth is None else depth["consumers"]
    rows.sort(key=lambda w: (w["role"] != "router", w.get("expert_id", -1), w["worker_id"]))
    if args.json:
        print_json({"workers": rows, "errors": [error] if error else []})
    elif rows:
        print(format_workers(rows, time.time()))
    else:
        print(f"no live workers under prefix {names.prefix!r} (start them: `ddm up`, `ddm worker ...`)")
    if error:
        print(f"ddm workers: {error}", file=sys.stderr)
    return FAILURE if error else OK


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _memory(w: dict) -> str:
    """An expert's weights as held and its process's resident set: "2.42 GB weights, 3.10 GB rss"."""
    parts = [
        f"{w[key] / 1e9:.2f} GB {label}"
        for key, label in (("weights_bytes", "weights"), ("rss_bytes", "rss"))
        if w.get(key) is not None
    ]
    return ", ".join(parts) or "-"


def format_workers(rows: list[dict], now: float) -> str:
    """Heartbeat dicts (WorkerHeartbeat.to_dict plus queue_depth) as an aligned table."""
    header = ("WORKER", "ROLE", "EXPERT", "FRAMEWORK", "DEVICE", "MEMORY", "HOST", "QUEUE", "DEPTH", "WORK")
    header += ("SEEN",)
    table = [header]
    for w in rows:
        expert = w["role"] == "expert"
        work = f"{w.get('batches', 0)} batches" if expert else f"{w.get('jobs_running', 0)} jobs"
        table.append(
            (
                w["worker_id"],
                w["role"],
                _cell(w.get("expert_id")),
                _cell(w.get("framework")),
                _cell(w.get("device")) + (f" ({w['precision']})" if w.get("precision") else ""),
                _memory(w),
                _cell(w.get("host")),
                w["queue"],
                _cell(w.get("queue_depth")),
                work,
                f"{max(0.0, now - w['updated_at']):.1f} s ago",
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(wd) for c, wd in zip(r, widths, strict=True)).rstrip() for r in table)
