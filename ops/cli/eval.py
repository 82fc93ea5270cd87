"""`ddm eval --deployment D --n 100 --strategy S --out DIR`: every label, scored (ddm.ops.eval);
`ddm eval --compare NAME=METRICS_JSON ...`: earlier runs side by side (ddm.ops.eval.compare);
`ddm eval --sweep OUT.json --nfe 4,8,50`: quality against evaluations per solver and grid
(ddm.ops.eval.sweep)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddm.ops.command_kit import add_deployment_flag


def configure(parser: argparse.ArgumentParser) -> None:
    add_deployment_flag(parser)
    parser.description = (
        "Sample images of every label from a deployment in this process, then score them: class accuracy "
        "and Frechet distance by the evaluation classifier against held-out real images, and the cost. "
        "The classifier and the real images are loaded first, so a missing one fails before sampling. "
        "With --compare, sample nothing: print earlier runs' metrics.json side by side (student, "
        "ensemble, monolith: class accuracy, FD, forward passes and ms per image). With --sweep, score "
        "every solver and grid at each --nfe on the same noise, against 50-step Euler, into a resumable "
        "JSON (run the same command again to continue), and print a Markdown table."
    )
    # --n means images per label, as in `ddm sample` and `ddm submit`; --total counts them all.
    count = parser.add_mutually_exclusive_group()
    count.add_argument(
        "--n",
        type=int,
        default=None,
        help="images per label of the deployment's classes (0-9 for MNIST; default: --total 1000)",
    )
    count.add_argument(
        "--total",
        type=int,
        default=None,
        help="images in all, labels cycling over the deployment's classes (default: 1000)",
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
    classifier = "default: <deployment folder>/classifier (emoji-latent's links to the emoji one)"
    parser.add_argument("--classifier", type=Path, default=None, help=classifier)
    real = "held-out real images for FD (default: the split the classifier was measured on, its meta's "
    parser.add_argument("--real-split", help=real + "eval_split: test[8000:] for MNIST, test for emoji)")
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
    what.add_argument(
        "--sweep",
        type=Path,
        default=None,
        metavar="OUT_JSON",
        help="quality against evaluations: every --solvers x --grids at each --nfe, written to OUT_JSON "
        "after every point (an interrupted sweep continues where it stopped)",
    )
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON (not with --compare)")
    sweep = parser.add_argument_group("--sweep")
    sweep.add_argument(
        "--nfe", default="4,6,8,12,16,25,50", help="evaluations per image (default: %(default)s)"
    )
    sweep.add_argument(
        "--solvers", default=None, help="e.g. euler,heun (default: the deployment's [sampling])"
    )
    sweep.add_argument(
        "--grids", default=None, help="e.g. uniform,edm (default: the deployment's [sampling])"
    )
    sweep.add_argument("--plot", type=Path, default=None, help="a PNG of accuracy and FD against NFE")
    sweep.add_argument("--table", type=Path, default=None, help="also write the Markdown table here")
    sweep.add_argument(
        "--render-only",
        action="store_true",
        help="sample nothing: the table and plot of the points OUT_JSON holds (a sweep cut short)",
    )


def main(args: argparse.Namespace) -> int:
    from ddm.schema.errors import ConfigError

    if args.compare:  # JSON files only: no torch, no deployment
        from ddm.ops.eval.compare import compare_table

        if args.json:
            raise ConfigError("--compare prints a Markdown table; --json prints one run's metrics (--out)")
        print(compare_table(args.compare))
        return 0
    if args.sweep is not None:
        return sweep_main(args)
    from ddm.ops.eval.evaluate import EvalRequest, evaluate, write_report
    from ddm.ops.eval.strategy_choice import eval_strategy
    from ddm.schema.deployment import Deployment, resolve_deployment

    deployment = resolve_deployment(args.deployment)
    loaded = Deployment.load(deployment)
    total = total_images(args, loaded.sample_space.num_classes)
    strategy, why = eval_strategy(loaded, args.strategy)
    print(f"ddm eval: strategy {strategy} ({why})", file=sys.stderr, flush=True)
    request = EvalRequest(
        deployment=deployment,
        n=total,
        strategy=strategy,
        steps=args.steps,
        **_scoring(args),
    )
    x, labels, metrics = evaluate(request)
    write_report(args.out, x, labels, metrics)
    if "warning" in metrics:
        print(metrics["warning"], file=sys.stderr)
    if args.json:
        from ddm.ops.command_kit import print_json

        print_json(metrics)
        return 0
    print(
        f"{strategy}: accuracy {metrics['accuracy']:.4f}, FD {metrics['fd']:.3f} "
        f"(real vs real {metrics['fd_real_vs_real']:.3f}), {metrics['forward_passes_per_image']:.1f} "
        f"forward passes and {metrics['seconds_per_image'] * 1000:.1f} ms per image -> {args.out}"
    )
    return 0


def total_images(args: argparse.Namespace, classes: int = 10) -> int:
    """The images to sample: --n per label of the deployment's `classes` (10 for MNIST; one for an
    unconditional space), else --total, else 1000."""
    from ddm.schema.errors import ConfigError, expected

    classes = max(1, classes)
    total = args.n * classes if args.n is not None else (args.total or 1000)
    if total < classes:
        raise ConfigError(expected(f"at least {classes} images (--n >= 1, --total >= {classes})", total))
    return total


def _scoring(args: argparse.Namespace) -> dict:
    """The flags a plain evaluation and a sweep share: how images are sampled and scored."""
    names = ("guidance", "seed", "classifier", "real_split", "device", "data_dir")
    return {name: getattr(args, name) for name in names}


def sweep_main(args: argparse.Namespace) -> int:
    from ddm.ops.eval.sweep import evaluate_sweep, parse_list, read_sweep
    from ddm.ops.eval.sweep_report import plot_sweep, sweep_table
    from ddm.schema.deployment import Deployment, resolve_deployment

    if args.render_only:
        record = read_sweep(args.sweep)
    else:
        deployment = resolve_deployment(args.deployment)
        record = evaluate_sweep(
            deployment,
            args.sweep,
            nfes=parse_list(args.nfe, "--nfe", int),
            solvers=parse_list(args.solvers, "--solvers") if args.solvers else None,
            grids=parse_list(args.grids, "--grids") if args.grids else None,
            n=total_images(args, Deployment.load(deployment).sample_space.num_classes),
            strategy=args.strategy,
            **_scoring(args),
        )
    table = sweep_table(record)
    if args.table is not None:
        args.table.write_text(table + "\n")
    if args.plot is not None:
        plot_sweep(record, args.plot)
    if args.json:
        from ddm.ops.command_kit import print_json

        print_json(record)
    else:
        print(table)
    return 0
