"""A text deployment's images for the CLDR names of a split's emoji, scored three ways:

- R-precision: the image's prompt against 99 others, by the image tower of `ddm train retrieval`
  (ops/eval/retrieval.py); its ceiling is the same measure on the real images of that split;
- group accuracy: the emoji classifier (`ddm train classifier --dataset emoji`) names the Unicode group
  of the emoji the prompt names, with a bootstrap interval over images;
- FD: the classifier's penultimate features against all real images of the split.

Each prompt is one job of one image (seed + its index), sampled in-process as `ddm sample` does, the
prompts' embeddings read from a `ddm data embed-captions` file (exactly the encoder's: its digest is
the deployment's, or it is refused).

    python -m ddm.ops.eval.text_eval --deployment checkpoints/emoji-text/deployment.toml \\
        --retrieval R --classifier C --prompt-embeddings captions.npz --split train --out train.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm


def sample_prompts(deployment_path: Path, prompts: list[str], strategy, steps, guidance, seed, encoder):
    """One image per prompt (in its sample space, then decoded): (pictures f32 [n,C,H,W], cost dict)."""
    from ddm.ops.eval.evaluate import CountingExpert, to_pictures
    from ddm.router.deployment_loader import load_decoder, load_experts, read_deployment
    from ddm.router.sampler import sample_local
    from ddm.schema.deployment import Deployment
    from ddm.schema.messages import JobSpec
    from ddm.workers.text_rows import job_velocities

    deployment = Deployment.load(deployment_path)
    loaded = read_deployment(deployment)
    policy = loaded.policy()
    descriptor = loaded.describe(policy, "local")
    experts = {k: CountingExpert(e) for k, e in load_experts(deployment).items()}
    t0, xs = time.perf_counter(), []
    for i, prompt in enumerate(tqdm(prompts, desc=f"{strategy} g={guidance}")):
        spec = JobSpec.new(
            [None], steps=steps, strategy=strategy, guidance=guidance, seed=seed + i, prompt=prompt
        )
        descriptor.check(spec)
        job = descriptor.resolve(spec)
        local = job_velocities(experts, job, encoder, deployment.text_encoder)
        xs.append(sample_local(local.velocities, policy, job, prompt=local.prompt))
    forwards = sum(e.forwards for e in experts.values())
    cost = {
        "seconds_per_image": (time.perf_counter() - t0) / len(prompts),
        "forwards_per_image": forwards / len(prompts),
    }
    return to_pictures(load_decoder(deployment), np.concatenate(xs), cost), cost


def evaluate_text(args: argparse.Namespace) -> tuple[dict, np.ndarray]:
    """(the record written to --out, the pictures)."""
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.data.emoji_captions import load_captions
    from ddm.ops.eval.classifier import features, load_classifier, predict
    from ddm.ops.eval.evaluate import accuracy_interval, real_floor, score_features
    from ddm.ops.eval.retrieval import embed_images, load_image_tower, r_precision_hits
    from ddm.workers.stored_prompts import StoredPrompts

    data = load_dataset("emoji", args.split, args.data_dir)
    names = load_captions("emoji", args.split, args.data_dir).captions
    rows = np.random.default_rng(args.seed).permutation([i for i, name in enumerate(names) if name])[
        : args.count
    ]
    prompts = [names[i] for i in rows]
    encoder = StoredPrompts(args.prompt_embeddings)
    tower, tower_meta = load_image_tower(args.retrieval)
    classifier, classifier_meta = load_classifier(args.classifier)
    pictures, cost = sample_prompts(
        args.deployment, prompts, args.strategy, args.steps, args.guidance, args.seed, encoder
    )
    embeddings, _ = encoder.encode(prompts)
    every = [name for name in names if name]  # the candidates: every name of the split, as the ceiling's
    pool = (every, np.asarray(encoder.encode(every)[0], np.float32))
    hits = r_precision_hits(
        embed_images(tower, pictures), prompts, np.asarray(embeddings, np.float32), pool=pool
    )
    real_f = features(classifier, data.as_model_input())
    groups = np.asarray(data.labels)[rows]
    scores = score_features(
        predict(classifier, pictures).argmax(1), groups, features(classifier, pictures), real_f
    )
    ceiling = tower_meta["ceiling_r_precision"].get(data.split)
    return {
        "deployment": str(args.deployment),
        "split": data.split,
        "prompts": len(prompts),
        "strategy": args.strategy,
        "guidance": args.guidance,
        "steps": args.steps,
        "seed": args.seed,
        "r_precision": float(hits.mean()),
        "r_precision_ci95": accuracy_interval(hits),
        "r_precision_ceiling": ceiling,
        "group_accuracy": scores["accuracy"],
        "group_accuracy_ci95": scores["accuracy_ci95"],
        "classifier_test_accuracy": classifier_meta.get("test_accuracy"),
        **{key: value for key, value in scores.items() if key.startswith("fd")},
        **real_floor(real_f, len(prompts)),
        **cost,
        "first_prompts": prompts[:16],
    }, pictures


def main(argv: list[str] | None = None) -> int:
    from ddm.client.images import save_grid

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--deployment", type=Path, required=True)
    p.add_argument("--retrieval", type=Path, required=True, help="`ddm train retrieval` folder")
    p.add_argument("--classifier", type=Path, required=True, help="the emoji classifier folder")
    p.add_argument("--prompt-embeddings", required=True, help="`ddm data embed-captions` file")
    p.add_argument("--split", default="train", help="whose emoji names are the prompts (train or test)")
    p.add_argument("--count", type=int, default=128, help="prompts (one image each; default 128)")
    p.add_argument("--strategy", default="top1")
    p.add_argument("--guidance", type=float, default=3.0)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", type=Path, required=True, help="the JSON to write (a PNG of 16 beside it)")
    args = p.parse_args(argv)
    record, pictures = evaluate_text(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    save_grid(pictures[:16], args.out.with_suffix(".png"), cols=8, scale=4)
    print(
        f"{args.split} prompts, {args.strategy}, g={args.guidance}: R-precision {record['r_precision']:.3f} "
        f"(ceiling {record['r_precision_ceiling']}), group accuracy {record['group_accuracy']:.3f}, "
        f"FD {record['fd']:.1f} (real vs real {record['fd_real_vs_real']:.1f}) -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
