"""What one Paris model call costs on this machine (issue 38 part 6), on random weights at Paris's full
size (workers/paris: the expert 606.0M parameters, the router 129.1M), PyTorch, float32 on CPU:

    python -m ddm.ops.bench.paris_cost [--repeats 3] [--threads N]

Prints, per batch size, the median seconds of one expert call (batch 2 is a conditional and an
unconditional row, as classifier-free guidance sends them) and of one router call, and the weights'
size in float32. The pipeline's own overhead per step, as a fraction of these, needs the experts served
(not built yet). Results: docs/BENCHMARKS.md, "Paris at full size".
"""

from __future__ import annotations

import argparse
import statistics
import time

TEXT_TOKENS = 77  # CLIP's


def _median_s(call, repeats: int) -> float:
    call()  # the first call allocates: not counted
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(
    batches: list[int], repeats: int, expert_config=None, router_config=None
) -> list[tuple[str, int, float]]:
    """[(model, batch, median seconds)] on random weights (configs: Paris's full size unless given)."""
    import torch

    from ddm.workers.paris.config import ParisExpertConfig, ParisRouterConfig
    from ddm.workers.paris.torch_model import ParisExpert, ParisRouter

    ec, rc = expert_config or ParisExpertConfig(), router_config or ParisRouterConfig()
    torch.manual_seed(0)
    expert, router = ParisExpert(ec).eval(), ParisRouter(rc).eval()
    rows = []
    with torch.inference_mode():
        for b in batches:
            x, t = torch.randn(b, ec.channels, ec.image_size, ec.image_size), torch.full((b,), 500.0)
            text = torch.randn(b, TEXT_TOKENS, ec.text_width)
            x_r = torch.randn(b, rc.channels, rc.image_size, rc.image_size)
            rows.append(("expert", b, _median_s(lambda: expert(x, t, text), repeats)))  # noqa: B023 - called at once
            rows.append(("router", b, _median_s(lambda: router(x_r, t), repeats)))  # noqa: B023
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per row (after one untimed)")
    parser.add_argument("--batches", default="1,2", help="batch sizes, comma-separated")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from ddm.workers.paris.config import (
        ParisExpertConfig,
        ParisRouterConfig,
        expert_shapes,
        parameter_count,
        router_shapes,
    )

    sizes = [
        parameter_count(expert_shapes(ParisExpertConfig())),
        parameter_count(router_shapes(ParisRouterConfig())),
    ]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32 on CPU; weights: expert "
        f"{sizes[0] * 4 / 1e9:.2f} GB, router {sizes[1] * 4 / 1e9:.2f} GB"
    )
    print("| model | batch | median s a call |")
    print("|---|---|---|")
    for model, batch, seconds in measure([int(b) for b in args.batches.split(",")], args.repeats):
        print(f"| {model} | {batch} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
