"""`ddm eval --deployment D --n 100 --strategy S --out DIR`: every label, scored (ddm.ops.eval);
`ddm eval --compare NAME=METRICS_JSON ...`: earlier runs side by side (ddm.ops.eval.compare)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddm.ops.cli.parser import add_deployment_flag


def configure(parser: argparse.ArgumentParser) -> None:
    add_deployment_flag(parser)
    parser.description = (
        "Sample images of every label from a deployment in this process, then score them: class accuracy "
        "and Frechet distance by the evaluation classifier against held-out real images, and the cost. "
        "The classifier and the real images are loaded first, so a missing one fails before sampling. "
        "With --compare, sample nothing: print earlier runs' metrics.json side by side (student, "
        "ensemble, monolith: class accuracy, FD, forward passes and ms per image)."
    )
    # --n means images per label, as in `ddm sample` and `ddm submit`; --total counts them all.
    count = parser.add_mutually_exclusive_group()
    count.add_argument("--n", type=int, default=None, help="images per label 0-9 (default: --total 1000)")
    count.add_argument(
        "--total", type=int, default=None, help="images in all, labels cycling 0-9 (default: 1000)"
    )
    parser.add_argument(
        "--strategy",
        default=None,
        help="oracle | top1 | topk:K | full (default: the deployment's default strategy, as `ddm submit`)",
    )
    parser.add_argument("--steps", type=int, default=50, help="Euler steps")
    parser.add_argument(
        "--guidance", type=float, default=None, help="default: the deployment's `guidance`, else 1"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the first chunk's noise")
    parser.add_argument(
        "--classifier", type=Path, default=None, help="default: <deployment folder>/classifier"
    )
    parser.add_argument("--real-split", default="test[8000:]", help="held-out real images for FD")
    parser.add_argument("--device", default=None, help="override every expert's device")
    parser.add_argument("--data-dir", default=None, help="data folder (default: $DDM_DATA_DIR, else ./data)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", type=Path, default=None, help="folder for metrics.json, samples.png, plots")
    what.add_argument(
        "--compare",
        nargs="+",
        metavar="NAME=METRICS_JSON",
        default=None,
        help="instead of sampling: one Markdown table of these runs' metrics.json (a bare path is named "
        "by its folder), with a note where they were measured differently",
    )
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON (not with --compare)")


def main(args: argparse.Namespace) -> int:
    from ddm.schema.errors import ConfigError, expected
    from ddm.schema.flow import NUM_CLASSES

    if args.compare:  # JSON files only: no torch, no deployment
        from ddm.ops.eval.compare import compare_table

        if args.json:
            raise ConfigError("--compare prints a Markdown table; --json prints one run's metrics (--out)")
        print(compare_table(args.compare))
        return 0
    from ddm.ops.eval.evaluate import EvalRequest, evaluate, write_report
    from ddm.ops.eval.strategy_choice import eval_strategy
    from ddm.schema.deployment import Deployment, resolve_deployment

    total = args.n * NUM_CLASSES if args.n is not None else (args.total or 1000)
    if total < NUM_CLASSES:
        raise ConfigError(
            expected(f"at least {NUM_CLASSES} images (--n >= 1, --total >= {NUM_CLASSES})", total)
        )
    deployment = resolve_deployment(args.deployment)
    strategy, why = eval_strategy(Deployment.load(deployment), args.strategy)
    print(f"ddm eval: strategy {strategy} ({why})", file=sys.stderr, flush=True)
    request = EvalRequest(
        deployment=deployment,
        n=total,
        strategy=strategy,
        steps=args.steps,
        guidance=args.guidance,
        seed=args.seed,
        classifier=args.classifier,
        real_split=args.real_split,
        device=args.device,
        data_dir=args.data_dir,
    )
    x, labels, metrics = evaluate(request)
    write_report(args.out, x, labels, metrics)
    if args.json:
        from ddm.ops.cli.output import print_json

        print_json(metrics)
        return 0
    print(
        f"{strategy}: accuracy {metrics['accuracy']:.4f}, FD {metrics['fd']:.3f} "
        f"(real vs real {metrics['fd_real_vs_real']:.3f}), {metrics['forward_passes_per_image']:.1f} "
        f"forward passes and {metrics['seconds_per_image'] * 1000:.1f} ms per image -> {args.out}"
    )
    return 0
