"""Forward-pass cost by batch size, in this process: each expert of a deployment and its learned router.

    python -m ddm.ops.bench.models [--deployment checkpoints/mnist/deployment.toml]

Experts: median ms of `Expert.velocity` (guidance 1) and ms per row, for 1 to 64 rows; run it with
`OMP_NUM_THREADS=1` to see what one expert worker gets under `ddm up` on a 2-core machine. Router: the
learned router compiled with every bucket up to 64 (one call per batch) against ROUTER_BUCKETS (batches
above its largest bucket run in chunks of it): the numbers behind ROUTER_BUCKETS.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from ddm.ops.command_kit import add_deployment_flag
from ddm.schema.deployment import Deployment
from ddm.workers.expert import DEFAULT_BUCKETS

BATCHES = (1, 2, 4, 8, 16, 32, 64)


def median_ms(fn, batch: int, repeats: int = 20) -> float:
    """Median ms of fn(x, t, y) on `batch` random rows, after 3 warm-up calls."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 1, 32, 32), dtype=np.float32)
    t, y = np.full(batch, 0.5, np.float32), np.zeros(batch, np.int64)
    for _ in range(3):
        fn(x, t, y)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x, t, y)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def expert_table(deployment: Deployment) -> list[str]:
    from ddm.workers import load_expert

    lines = ["| expert | rows | ms | ms per row |", "|---|---:|---:|---:|"]
    for entry in deployment.experts:
        expert = load_expert(entry.checkpoint, entry.device)
        expert.warmup()
        name = f"{entry.id} ({expert.meta.framework}, {expert.meta.preset})"

        def velocity(x, t, y, expert=expert):
            return expert.velocity(x, t, y, np.ones(len(x), np.float32))

        for batch in BATCHES:
            ms = median_ms(velocity, batch)
            lines.append(f"| {name} | {batch} | {ms:.2f} | {ms / batch:.2f} |")
    return lines


def router_table(checkpoint) -> list[str]:
    from ddm.router.learned import ROUTER_BUCKETS, load_router

    one_call = load_router(checkpoint, buckets=DEFAULT_BUCKETS)
    chunked = load_router(checkpoint, buckets=ROUTER_BUCKETS)
    lines = [f"| router rows | buckets {DEFAULT_BUCKETS} ms | buckets {ROUTER_BUCKETS} ms |"]
    lines.append("|---:|---:|---:|")
    for batch in BATCHES:
        one, chunks = median_ms(one_call.probs, batch), median_ms(chunked.probs, batch)
        lines.append(f"| {batch} | {one:.2f} | {chunks:.2f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    from ddm.schema.deployment import resolve_deployment

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_deployment_flag(parser)
    args = parser.parse_args(argv)
    deployment = Deployment.load(resolve_deployment(args.deployment))
    print("\n".join(expert_table(deployment)))
    if deployment.router.checkpoint is not None:
        print()
        print("\n".join(router_table(deployment.router.checkpoint)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
