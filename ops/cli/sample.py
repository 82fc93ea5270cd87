"""`ddm sample`: the in-process reference sampler every other path is checked against."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from ddm.ops.cli.job_flags import add_job_arguments, job_labels, job_spec, read_init_noise
from ddm.ops.command_kit import add_deployment_flag
from ddm.schema.deployment import resolve_deployment
from ddm.schema.init_noise import check_init_noise, noise_digest


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Sample in this process from a deployment file, with the routing and mixing code the router runs: "
        "the reference every pipeline result is checked against. No RabbitMQ or Redis needed."
    )
    # Sampling here was always local; the flag once had to be given and is still accepted.
    parser.add_argument(
        "--local", action="store_true", help="no effect (deprecated): sampling is always local"
    )
    add_deployment_flag(parser)
    add_job_arguments(parser)
    parser.add_argument("--device", default=None, help="override every expert's device from the deployment")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("samples.png"),
        help="PNG grid (default: samples.png in the working folder; the absolute path is printed)",
    )
    parser.add_argument(
        "--npy",
        type=Path,
        default=None,
        help="also save the images float32 [n, C, H, W] (a latent deployment's: decoded)",
    )
    parser.add_argument("--json", action="store_true", help="print what was sampled and saved as JSON")


def main(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ddm.client.images import save_grid
    from ddm.router.deployment_loader import load_decoder, load_experts, read_deployment
    from ddm.router.sampler import sample_local
    from ddm.schema.deployment import Deployment
    from ddm.workers.text_rows import job_velocities

    deployment = Deployment.load(resolve_deployment(args.deployment))
    labels, cols = job_labels(args, deployment.sample_space)
    loaded = read_deployment(deployment)
    policy = loaded.policy()
    spec = job_spec(args, labels)
    noise = read_init_noise(args)
    if noise is not None:  # named by its digest in the spec, as Client.submit names it for the pipeline
        noise = check_init_noise(noise, spec.n, deployment.sample_space)
        spec = dataclasses.replace(spec, init_noise=noise_digest(noise))
    # Exactly as the router does: check against the deployment's descriptor, fill in its defaults.
    descriptor = loaded.describe(policy, "local")
    descriptor.check(spec)
    job = descriptor.resolve(spec)
    spec = job.spec
    t0 = time.perf_counter()
    experts = load_experts(deployment, device=args.device)
    decoder = load_decoder(deployment, device=args.device)  # a latent deployment's: as the pipeline's stage
    load_s = time.perf_counter() - t0
    # a text job's prompts are encoded here, once, as the text-encoder stage does for the pipeline
    velocities = {k: e.velocity for k, e in experts.items()}
    fns, truncated, prompt = job_velocities(velocities, job, source=deployment.text_encoder)
    if any(truncated):
        print(f"warning: the prompt was cut to the encoder's {job.text.max_tokens} tokens", file=sys.stderr)
    used = np.zeros(deployment.num_experts, np.int64)
    bar = tqdm(total=spec.steps, desc="sample")

    def on_step(step, t, x, plan):
        for k, rows in plan.rows.items():
            used[k] += len(rows)
        bar.update(1)

    t0 = time.perf_counter()
    x = sample_local(fns, policy, job, on_step=on_step, prompt=prompt, init_noise=noise)
    bar.close()
    value_range = deployment.sample_space.value_range
    if decoder is not None:  # the final latents to pixels, as the decoder worker does for the pipeline
        x, value_range = decoder.decode(x), decoder.card.pixel_space.value_range
    sample_s = time.perf_counter() - t0
    # absolute: a relative --out (samples.png by default) lands in the working folder, which says nothing
    saved = [save_grid(x, args.out, cols=cols, value_range=value_range).resolve()]
    if args.npy:
        args.npy.parent.mkdir(parents=True, exist_ok=True)
        np.save(args.npy, x)
        saved.append(args.npy.resolve())
    if args.json:
        from ddm.ops.command_kit import print_json

        print_json(
            {
                "spec": spec.to_dict(),
                "img_steps": {str(k): int(used[k]) for k in experts},
                "load_s": load_s,
                "sample_s": sample_s,
                "saved": [str(p) for p in saved],
            }
        )
        return 0
    served = ", ".join(f"expert {k} ({experts[k].meta.framework}): {used[k]} img-steps" for k in experts)
    print(
        f"{spec.n} images, {spec.steps} steps of {spec.solver} on the {spec.grid} grid "
        f"({job.nfe} evaluations), strategy {spec.strategy}, guidance {spec.guidance:g}: {served}"
    )
    print(f"load {load_s:.1f} s, sampling {sample_s:.1f} s; wrote {', '.join(map(str, saved))}")
    return 0
