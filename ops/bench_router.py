"""How long the learned router takes per call, by batch size: the numbers behind ROUTER_BUCKETS.

    python -m ddm.ops.bench_router [--deployment checkpoints/mnist/deployment.toml]

For each batch size, the median ms of `LearnedRouter.probs` compiled with every bucket up to 64 (one
call per batch) and with ROUTER_BUCKETS (batches above its largest bucket run in chunks of it).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from ddm.router.learned import ROUTER_BUCKETS, load_router
from ddm.schema.deployment import Deployment
from ddm.workers.expert import DEFAULT_BUCKETS

BATCHES = (1, 4, 8, 16, 32, 64)


def median_ms(router, batch: int, repeats: int = 30) -> float:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 1, 32, 32), dtype=np.float32)
    t, y = np.full(batch, 0.5, np.float32), np.zeros(batch, np.int64)
    for _ in range(3):
        router.probs(x, t, y)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        router.probs(x, t, y)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    from ddm.ops.cmd_sample import resolve_deployment

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--deployment", default=None, help="default: the shipped checkpoints")
    args = parser.parse_args(argv)
    checkpoint = Deployment.load(resolve_deployment(args.deployment)).router.checkpoint
    if checkpoint is None:
        parser.error("this deployment has no learned router")
    one_call = load_router(checkpoint, buckets=DEFAULT_BUCKETS)
    chunked = load_router(checkpoint, buckets=ROUTER_BUCKETS)
    print(f"| batch | buckets {DEFAULT_BUCKETS} ms | buckets {ROUTER_BUCKETS} ms |")
    print("|---:|---:|---:|")
    for batch in BATCHES:
        print(f"| {batch} | {median_ms(one_call, batch):.2f} | {median_ms(chunked, batch):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
