"""`ddm eval --deployment D --n 1000 --strategy S --out DIR`."""

from __future__ import annotations

import argparse
import json
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
    from ddm.ops.cmd_sample import resolve_deployment
    from ddm.ops.data import load_dataset
    from ddm.ops.evaluate import generate, score, write_report
    from ddm.schema.deployment import Deployment

    deployment_path = resolve_deployment(args.deployment)
    deployment = Deployment.load(deployment_path)
    guidance = deployment.guidance if args.guidance is None else args.guidance
    classifier = args.classifier or deployment.path.parent / "classifier"
    x, labels, cost = generate(
        deployment_path, args.n, args.strategy, args.steps, guidance, args.seed, args.device
    )
    dataset = (
        json.loads((classifier / "meta.json").read_text()).get("dataset", "mnist")
        if classifier.exists()
        else "mnist"
    )
    real = load_dataset(dataset, args.real_split, args.data_dir)
    metrics = {
        "deployment": display_path(deployment.path),
        "strategy": args.strategy,
        "steps": args.steps,
        "guidance": guidance,
        "n": args.n,
        "seed": args.seed,
        "real_split": real.split,
        **score(x, labels, classifier, real.as_model_input()),
        **cost,
    }
    write_report(args.out, x, labels, metrics)
    print(
        f"{args.strategy}: accuracy {metrics['accuracy']:.4f}, FD {metrics['fd']:.3f} "
        f"(real vs real {metrics['fd_real_vs_real']:.3f}), {metrics['forward_passes_per_image']:.1f} "
        f"forward passes and {metrics['seconds_per_image'] * 1000:.1f} ms per image -> {args.out}"
    )
    return 0


def display_path(path: Path) -> str:
    """The deployment as the user would type it here: relative to the working folder where possible."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
