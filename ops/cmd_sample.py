"""`ddm sample --local`: the in-process reference sampler every other path is checked against."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ddm.schema.deployment import DEFAULT_DEPLOYMENT
from ddm.schema.errors import ConfigError


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags describing a job; shared with `ddm submit`."""
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--label", type=int, help="one label, repeated --n times")
    who.add_argument("--labels", help="comma-separated labels, e.g. 0,3,7 (each repeated --n times)")
    who.add_argument(
        "--all-labels", action="store_true", help="labels 0-9, --n of each (one column per label)"
    )
    parser.add_argument(
        "--n", type=int, default=None, help="images per label (default: 8 for one label, else 4)"
    )
    parser.add_argument("--steps", type=int, default=50, help="Euler steps (default: 50)")
    parser.add_argument(
        "--strategy", default="oracle", help="oracle | top1 | topk:K | full (default: oracle)"
    )
    parser.add_argument(
        "--guidance",
        type=float,
        default=None,
        help="classifier-free guidance scale (1 = none; default: the deployment's `guidance`, else 1)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial noise")


def job_labels(args: argparse.Namespace) -> tuple[list[int], int]:
    """(labels per image, grid columns). Images are ordered row by row with one column per label."""
    if args.labels:
        try:
            base = [int(s) for s in args.labels.split(",") if s.strip()]
        except ValueError:
            raise ConfigError(f"expected --labels like 0,3,7, got {args.labels!r}") from None
    elif args.all_labels:
        base = list(range(10))
    else:
        base = [3 if args.label is None else args.label]
    n = args.n if args.n is not None else (8 if len(base) == 1 else 4)
    if n < 1:
        raise ConfigError(f"expected --n >= 1, got {n}")
    if len(base) == 1:
        return base * n, min(n, 8)
    return base * n, len(base)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--local", action="store_true", required=True, help="sample in this process")
    parser.add_argument(
        "--deployment",
        type=Path,
        default=None,
        help=f"deployment TOML (default: $DDM_DEPLOYMENT, else {DEFAULT_DEPLOYMENT})",
    )
    add_job_arguments(parser)
    parser.add_argument("--device", default=None, help="override every expert's device from the deployment")
    parser.add_argument(
        "--out", type=Path, default=Path("samples.png"), help="PNG grid (default: samples.png)"
    )
    parser.add_argument(
        "--npy", type=Path, default=None, help="also save the final latents float32 [n,1,32,32]"
    )


def resolve_deployment(path: Path | None) -> Path:
    """--deployment if given, else $DDM_DEPLOYMENT if set (containers), else the shipped one."""
    if path is not None:
        return path
    from ddm.schema.settings import Settings

    from_env = Settings.from_env().deployment
    if from_env:
        return Path(from_env)
    if DEFAULT_DEPLOYMENT.is_file():
        return DEFAULT_DEPLOYMENT
    raise ConfigError(
        f"no --deployment given, DDM_DEPLOYMENT unset and no {DEFAULT_DEPLOYMENT} here; train experts and "
        "write a deployment file (see README), or run from the repository root"
    )


def main(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ddm.ops.images import save_grid
    from ddm.router.deployment_loader import load_experts, load_policy
    from ddm.router.sampler import sample_local
    from ddm.schema.deployment import Deployment
    from ddm.schema.messages import JobSpec

    labels, cols = job_labels(args)
    deployment = Deployment.load(resolve_deployment(args.deployment))
    guidance = deployment.guidance if args.guidance is None else args.guidance
    spec = JobSpec.new(labels, steps=args.steps, strategy=args.strategy, guidance=guidance, seed=args.seed)
    policy = load_policy(deployment)
    t0 = time.perf_counter()
    experts = load_experts(deployment, device=args.device)
    load_s = time.perf_counter() - t0
    fns = {k: e.velocity for k, e in experts.items()}
    used = np.zeros(deployment.num_experts, np.int64)
    bar = tqdm(total=spec.steps, desc="sample")

    def on_step(step, t, x, plan):
        for k, rows in plan.rows.items():
            used[k] += len(rows)
        bar.update(1)

    t0 = time.perf_counter()
    x = sample_local(fns, policy, spec, on_step=on_step)
    bar.close()
    sample_s = time.perf_counter() - t0
    save_grid(x, args.out, cols=cols)
    if args.npy:
        np.save(args.npy, x)
    served = ", ".join(f"expert {k} ({experts[k].meta.framework}): {used[k]} img-steps" for k in experts)
    print(f"{spec.n} images, {spec.steps} steps, strategy {spec.strategy}: {served}")
    print(
        f"load {load_s:.1f} s, sampling {sample_s:.1f} s -> {args.out}"
        + (f", {args.npy}" if args.npy else "")
    )
    return 0
