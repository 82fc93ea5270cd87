"""`ddm status`: one job's state from Redis (a table or --json), or the most recent jobs."""

from __future__ import annotations

import argparse
import json
import time


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Show a job's status from Redis (DDM_REDIS_URL, DDM_PREFIX): progress, timings, errors. "
        "Without a JOB, --recent lists the newest jobs."
    )
    parser.add_argument("job", nargs="?", help="job id (as printed by `ddm submit`)")
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    parser.add_argument("--recent", type=int, metavar="N", default=None, help="list the N newest jobs")


def _when(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    return f"{stamp} ({now - ts:.1f} s ago)"


def _jsonable(st: dict) -> dict:
    return {k: (v.value if hasattr(v, "value") else v) for k, v in st.items()}


def format_status(st: dict, now: float | None = None) -> str:
    """A job status dict (Client.status) as aligned `key  value` lines."""
    now = time.time() if now is None else now
    spec = st.get("spec") or {}
    step, steps = st.get("step"), st.get("steps")
    progress = f"{step}/{steps} steps"
    if step is not None and steps:
        progress += f" ({100 * step / steps:.0f}%)"
    rows = [
        ("job", st["job_id"]),
        ("status", st["status"].value),
        ("progress", progress),
        ("images", f"{st.get('n')} (labels {','.join(map(str, spec.get('labels', [])))})"),
        ("strategy", f"{st.get('strategy', spec.get('strategy'))}, guidance {spec.get('guidance')}"),
        ("seed", str(spec.get("seed"))),
        ("router", st.get("router") or "-"),
        ("created", _when(st.get("created_at"), now)),
        ("started", _when(st.get("started_at"), now)),
        ("updated", _when(st.get("updated_at"), now)),
        ("finished", _when(st.get("finished_at"), now)),
    ]
    if st.get("mean_step_ms") is not None:
        rows.append(("mean step", f"{st['mean_step_ms']:.1f} ms"))
    if st.get("resumed_from"):
        rows.append(("resumed", f"from step {st['resumed_from']}"))
    if st.get("error"):
        rows.append(("error", st["error"]))
    known = {"job_id", "status", "step", "steps", "n", "spec", "strategy", "router", "error"}
    known |= {"created_at", "started_at", "updated_at", "finished_at", "mean_step_ms", "resumed_from"}
    rows += [(k, str(v)) for k, v in sorted(st.items()) if k not in known]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def format_recent(jobs: list[dict], now: float | None = None) -> str:
    now = time.time() if now is None else now
    header = ("JOB", "STATUS", "STEP", "N", "STRATEGY", "AGE", "ERROR")
    rows = [header]
    for st in jobs:
        status = st.get("status")
        created = st.get("created_at")
        rows.append(
            (
                st["job_id"],
                status.value if status is not None else "(expired)",
                f"{st.get('step', '-')}/{st.get('steps', '-')}" if status is not None else "-",
                str(st.get("n", "-")),
                str(st.get("strategy", "-")),
                f"{now - created:.0f} s" if created is not None else "-",
                (st.get("error") or "")[:60],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def main(args: argparse.Namespace) -> int:
    from ddm.router.client import Client
    from ddm.schema.errors import ConfigError

    if args.job is None and args.recent is None:
        raise ConfigError("expected a JOB id or --recent N (see `ddm status --help`)")
    with Client() as client:
        if args.job is not None:
            st = client.status(args.job)
            print(json.dumps(_jsonable(st), indent=2) if args.json else format_status(st))
        if args.recent is not None:
            jobs = client.recent(args.recent)
            if args.json:
                print(json.dumps([_jsonable(j) for j in jobs], indent=2))
            else:
                print(format_recent(jobs) if jobs else f"no jobs under prefix {client.names.prefix!r}")
    return 0
