"""Where a step's time goes in the real pipeline: timestamps at the seams of the router and the workers.

    python -m ddm.ops.bench_trace [--jobs 1] [--runs 5] [--strategy top1] [--deployment D]

Starts one expert worker per expert and a router as `ddm up` does, each wrapped so that a few methods
record time.perf_counter() marks (CLOCK_MONOTONIC, shared by processes on one host), runs `runs` rounds
of `jobs` concurrent one-image jobs, and prints the median of each hop of a request, following it by
its correlation id: the router's planning, its publish, the broker to the worker's callback, the worker
until the forward pass, the forward pass, the reply to the router's callback, the router's step. Also
each expert's idle gap between forward passes. A diagnostic for docs/BENCHMARKS.md; the wrapping adds
a few microseconds per mark.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from ddm.ops.bench_pipeline import PipelineProcesses

MARKS: list[list] = []  # [event, time, correlation id or expert id] in a traced child
CPU_KEY = "cpu"  # run_traced's extra entry: process name -> % of one core used during the runs


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux /proc; None elsewhere or once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _mark(event: str, key=None) -> None:
    MARKS.append([event, time.perf_counter(), key])


def _wrap(owner, name: str, before, after=None) -> None:
    """Replace owner.name by a function that calls before(args) and after(args) around the original."""
    original = getattr(owner, name)

    def traced(*args, **kwargs):
        before(*args)
        result = original(*args, **kwargs)
        if after:
            after(*args)
        return result

    setattr(owner, name, traced)


def _instrument() -> None:
    import ddm.router.worker as R
    import ddm.workers.worker as W

    def each_item(event, batch_event):
        def marks(_expert, items, *rest):
            _mark(batch_event)  # once per forward pass, for idle_gaps
            for it in items:
                _mark(event, it.correlation_id)

        return marks

    def each_outcome(event):
        return lambda self, ch, result: [_mark(event, o.item.correlation_id) for o in result.outcomes]

    _wrap(
        W.ExpertWorker,
        "_on_message",
        lambda self, ch, method, props, body: _mark("w_recv", props.correlation_id),
    )
    _wrap(W, "serve_batch", each_item("w_forward", "w_batch"), each_item("w_forwarded", "w_batched"))
    _wrap(W.ExpertWorker, "_reply", each_outcome("w_reply"), each_outcome("w_replied"))
    _wrap(R, "plan_steps", lambda *a: _mark("r_plan"), lambda *a: _mark("r_planned"))
    _wrap(
        R.RouterWorker,
        "_publish_request",
        lambda self, expert, request_id, body: _mark("r_publish", request_id),
        lambda self, expert, request_id, body: _mark("r_published", request_id),
    )
    _wrap(
        R.RouterWorker,
        "_on_reply",
        lambda self, ch, method, props, body: _mark("r_reply", props.correlation_id),
        lambda self, ch, method, props, body: _mark("r_replied", props.correlation_id),
    )


def child(out: str, argv: list[str]) -> None:
    """Run `ddm <argv>` instrumented; write the marks to `out` on SIGTERM."""
    _instrument()

    def dump(*_):
        Path(out).write_text(json.dumps(MARKS))
        os._exit(0)

    install = signal.signal
    # the worker installs its own SIGTERM handler; ours must win so that the marks are written
    signal.signal = lambda signum, handler: install(signum, dump if signum == signal.SIGTERM else handler)
    install(signal.SIGTERM, dump)
    from ddm.ops.cli import main

    main(argv)


# ---------------------------------------------------------------- driver


class TracedProcesses(PipelineProcesses):
    """PipelineProcesses whose children run instrumented; each writes its marks to out_dir on SIGTERM."""

    def __init__(self, deployment: Path, out_dir: Path):
        super().__init__(deployment, out_dir)
        self.out_dir = out_dir

    def command(self, name: str, argv: list[str]) -> list[str]:
        marks = self.out_dir / f"{name}.json"
        return [sys.executable, "-m", "ddm.ops.bench_trace", "--child", str(marks), "--", *argv]


def run_traced(deployment: Path, jobs: int, runs: int, strategy: str, tmp: Path) -> dict[str, list]:
    """Start the traced processes, run the jobs, stop them; every child's marks by name ("router",
    "expert0", ...), and CPU_KEY: each child's share of one core during the runs."""
    from ddm.router.client import Client
    from ddm.schema.messages import JobSpec

    with TracedProcesses(deployment, tmp) as procs:
        cpu_before = {name: cpu_seconds(p.pid) for name, p in procs.procs.items()}
        started = time.monotonic()
        with Client(settings=procs.settings) as client:
            for _ in range(runs):
                specs = [JobSpec.new([i % 10], strategy=strategy, seed=i) for i in range(jobs)]
                ids = [client.submit(spec, deployment) for spec in specs]
                for job_id in ids:
                    client.wait(job_id, timeout=600)
        wall = time.monotonic() - started
        cpu = {}
        for name, p in procs.procs.items():
            now = cpu_seconds(p.pid)
            if now is not None and cpu_before[name] is not None:
                cpu[name.removeprefix("bench-")] = 100.0 * (now - cpu_before[name]) / wall
        names = list(procs.procs)
    missing = [name for name in names if not (tmp / f"{name}.json").is_file()]
    if missing:  # killed before its SIGTERM handler ran
        raise RuntimeError(f"{', '.join(missing)} wrote no marks; see their logs in {tmp}")
    marks = {name.removeprefix("bench-"): json.loads((tmp / f"{name}.json").read_text()) for name in names}
    return marks | {CPU_KEY: cpu}


def hops(marks: dict[str, list]) -> dict[str, float]:
    """Median ms of each hop over every request that was answered (first occurrence of each event)."""
    at: dict[str, dict[str, float]] = defaultdict(dict)  # correlation id -> event -> time
    for events in marks.values():
        for event, t, key in events:
            if key is not None:
                at[key].setdefault(event, t)
    plans: list[tuple[float, float]] = []  # (start, end); a call that raised has no end and is skipped
    opened = None
    for event, t, _ in sorted(
        (m for m in marks["router"] if m[0] in ("r_plan", "r_planned")), key=lambda m: m[1]
    ):
        if event == "r_plan":
            opened = t
        elif opened is not None:
            plans.append((opened, t))
            opened = None
    seams = ("r_publish", "r_published", "w_recv", "w_forward", "w_forwarded", "w_reply", "r_reply")
    done = [ev for ev in at.values() if all(s in ev for s in (*seams, "r_replied"))]
    if not done:
        raise RuntimeError("no request was traced end to end")

    def median_ms(f) -> float:
        values = [v for v in map(f, done) if v is not None]
        return statistics.median(values) * 1e3 if values else float("nan")

    def gap(a: str, b: str) -> float:
        return median_ms(lambda ev: ev[b] - ev[a])

    def plan_before(ev) -> float | None:
        """The plan that this publish followed within 5 ms; None for a resend or a held request sent
        when a slot freed up (no plan of its own)."""
        done = [(end, end - start) for start, end in plans if end <= ev["r_publish"]]
        if not done or ev["r_publish"] - done[-1][0] > 0.005:
            return None
        return done[-1][1]

    def transport(ev) -> float:
        return (ev["r_reply"] - ev["r_published"]) - (ev["w_forwarded"] - ev["w_forward"])

    return {
        "router: plan (the routing policy, one call per burst)": median_ms(plan_before),
        "router: publish the request (pika)": gap("r_publish", "r_published"),
        "broker -> worker callback": gap("r_published", "w_recv"),
        "worker: callback -> forward pass (decode, batcher, loop)": gap("w_recv", "w_forward"),
        "worker: forward pass and reply encoding (serve_batch)": gap("w_forward", "w_forwarded"),
        "worker reply -> router callback (publish, broker)": gap("w_reply", "r_reply"),
        "router: reply -> step done (decode, combine, Euler)": gap("r_reply", "r_replied"),
        "published -> reply read, minus serve_batch": median_ms(transport),
    }


def idle_gaps(marks: dict[str, list]) -> dict[str, float]:
    """Per expert: median ms between the end of one forward pass and the start of the next."""
    out = {}
    for name, events in marks.items():
        if not name.startswith("expert"):
            continue
        starts = [t for e, t, _ in events if e == "w_batch"]
        ends = [t for e, t, _ in events if e == "w_batched"]
        gaps = [s - e for e, s in zip(ends, starts[1:], strict=False) if s - e < 0.2]  # not between runs
        if gaps:
            out[f"{name}: idle between forward passes"] = statistics.median(gaps) * 1e3
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(argv[1], argv[3:])
        return 0
    from ddm.ops.cmd_sample import resolve_deployment

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--deployment", default=None, help="default: the shipped checkpoints")
    parser.add_argument("--jobs", type=int, default=1, help="concurrent one-image jobs per run")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--strategy", default="top1")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ddm-trace-") as tmp:
        marks = run_traced(
            resolve_deployment(args.deployment), args.jobs, args.runs, args.strategy, Path(tmp)
        )
    print(f"| {args.jobs} job(s), {args.runs} runs: median per request | ms |\n|---|---:|")
    cpu = marks.pop(CPU_KEY)
    for name, ms in {**hops(marks), **idle_gaps(marks)}.items():
        print(f"| {name} | {ms:.2f} |")
    if cpu:
        print("\nCPU during the runs, % of one core: " + ", ".join(f"{k} {v:.0f}%" for k, v in cpu.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
