"""`ddm eval --deployment D --n 1000 --strategy S --out DIR`."""

from __future__ import annotations

import argparse
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--deployment", type=Path, default=None, help="deployment TOML (default: the shipped one)"
    )
    parser.add_argument("--n", type=int, default=1000, help="images to generate, labels cycling 0-9")
    parser.add_argument("--strategy", default="oracle", help="oracle | top1 | topk:K | full")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument(
        "--guidance", type=float, default=None, help="default: the deployment's `guidance`, else 1"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--classifier", type=Path, default=None, help="default: <deployment folder>/classifier"
    )
    parser.add_argument("--real-split", default="test[8000:]", help="held-out real images for FD")
    parser.add_argument("--device", default=None, help="override every expert's device")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", type=Path, required=True, help="folder for metrics.json, samples.png, plots")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.eval.evaluate import EvalRequest, evaluate, write_report
    from ddm.schema.deployment import resolve_deployment

    request = EvalRequest(
        deployment=resolve_deployment(args.deployment),
        n=args.n,
        strategy=args.strategy,
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
    print(
        f"{args.strategy}: accuracy {metrics['accuracy']:.4f}, FD {metrics['fd']:.3f} "
        f"(real vs real {metrics['fd_real_vs_real']:.3f}), {metrics['forward_passes_per_image']:.1f} "
        f"forward passes and {metrics['seconds_per_image'] * 1000:.1f} ms per image -> {args.out}"
    )
    return 0
