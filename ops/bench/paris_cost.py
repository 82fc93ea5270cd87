"""What Paris costs on this machine (issue 38 part 6), on random weights at Paris's full size
(workers/paris: the expert 606.0M parameters, the router 129.1M), PyTorch, float32 on CPU:

    python -m ddm.ops.bench.paris_cost [--repeats 3] [--threads N]
    python -m ddm.ops.bench.paris_cost --pipeline [--experts 2] [--steps 3] [--work DIR]

The first prints, per batch size, the median seconds of one expert call (batch 2 is a conditional and
an unconditional row, as classifier-free guidance sends them) and of one router call, and the weights'
size in float32. --pipeline writes a full-size random Paris folder of --experts experts (ops/random_paris.py:
2.4 GB a expert; a small CLIP and a tiny VAE), imports it (`ddm import paris`), samples one guided top-2 job
in-process and then through the real pipeline (RabbitMQ, Redis, one worker per expert, the CLIP and VAE
stages, Paris's router in the router worker), and prints each one's seconds per step and the pipeline's
own overhead per step: the router's step time less the expert compute that served it (from the frames).
Results: docs/BENCHMARKS.md, "Paris at full size". Take them on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

TEXT_TOKENS = 77  # CLIP's
PROMPT = "a lighthouse at dusk"


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


def pipeline_costs(work: Path, experts: int, steps: int, expert_config=None, router_config=None) -> dict:
    """Seconds per step of one guided top-2 text job, in-process and through the pipeline, and the
    pipeline's overhead per step (its frames: step latency less the expert compute). Configs: Paris's
    full size unless given."""
    from ddm.ops.bench.pipeline import PipelineProcesses, run_level
    from ddm.ops.importers.paris import import_paris
    from ddm.ops.random_paris import write_random_paris
    from ddm.router.deployment_loader import describe, load_experts, load_policy
    from ddm.router.sampler import sample_local
    from ddm.schema.deployment import Deployment
    from ddm.schema.messages import JobSpec
    from ddm.workers.paris.config import ParisExpertConfig, ParisRouterConfig
    from ddm.workers.text_rows import job_velocities

    expert_config = expert_config or ParisExpertConfig()
    router_config = replace(router_config or ParisRouterConfig(), num_experts=experts)
    paris = write_random_paris(work / "paris", expert_config, router_config)
    deployment = Deployment.load(import_paris(paris, work / "deployment"))

    def spec() -> JobSpec:  # a fresh job id each time
        return JobSpec.new([None], steps=steps, seed=0, prompt=PROMPT, strategy="topk:2", guidance=7.5)

    policy = load_policy(deployment)
    velocities = {k: e.velocity for k, e in load_experts(deployment).items()}
    job = describe(deployment, policy, "local").resolve(spec())
    local = job_velocities(velocities, job, source=deployment.text_encoder)
    started = time.perf_counter()
    sample_local(local.velocities, policy, job, prompt=local.prompt)
    in_process_s = (time.perf_counter() - started) / steps
    del velocities, local  # the workers load their own
    with PipelineProcesses(deployment.path, work / "logs") as procs:
        level = run_level(procs, [spec()])
    return {
        "in_process_step_s": in_process_s,
        "pipeline_step_s": level["step_ms_p50"] / 1000,
        "compute_step_s": level["compute_ms_p50"] / 1000,
        "overhead_step_ms": level["overhead_ms_p50"],
    }


def print_pipeline_costs(costs: dict, experts: int, steps: int) -> None:
    share = costs["overhead_step_ms"] / 1000 / costs["pipeline_step_s"]
    print(f"Paris at full size, {experts} experts, one guided top-2 job of {steps} steps (s a step):")
    print("| in-process | pipeline | expert compute in it | pipeline overhead (share) |")
    print("|---|---|---|---|")
    print(
        f"| {costs['in_process_step_s']:.2f} | {costs['pipeline_step_s']:.2f} | "
        f"{costs['compute_step_s']:.2f} | {costs['overhead_step_ms'] / 1000:.3f} ({share:.1%}) |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pipeline", action="store_true", help="time one job in-process and through the pipeline"
    )
    parser.add_argument("--experts", type=int, default=2, help="--pipeline: Paris experts (2.4 GB each)")
    parser.add_argument("--steps", type=int, default=3, help="--pipeline: steps of the job")
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="--pipeline: folder for the weights (default: a temporary one)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per row (after one untimed)")
    parser.add_argument("--batches", default="1,2", help="batch sizes, comma-separated")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.pipeline:
        with tempfile.TemporaryDirectory(dir=args.work) as work:
            print_pipeline_costs(
                pipeline_costs(Path(work), args.experts, args.steps), args.experts, args.steps
            )
        return
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
