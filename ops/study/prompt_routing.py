"""Routing accuracy by t with and without the prompt (docs/RESULTS.md, "A router that reads the prompt"):
a prompt-aware router (`ddm train router --text pooled`) against the x_t-only one trained on the same
footing (`--label-dropout 1`: it only ever sees the empty prompt), on the training images with their
captions and on held-out images with theirs, each read with its caption and with the empty prompt.

    python -m ddm.ops.study.prompt_routing --partition P --prompt-embeddings F prompt=DIR x_t-only=DIR
"""

from __future__ import annotations

import argparse

import numpy as np

PROMPT = "with the prompt"  # TextTraining.heldout_conditions' name of the captioned reading


def main(argv: list[str] | None = None) -> int:
    from ddm.ops.cli.train_text import prepare_text
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.eval.router_data import router_eval_set
    from ddm.router.learned import load_router
    from ddm.router.train_router import T_BINS, accuracy_by_t
    from ddm.schema.partition import read_manifest

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partition", required=True)
    p.add_argument("--prompt-embeddings", required=True, help="`ddm data embed-captions` file")
    p.add_argument("--eval-split", default="test")
    p.add_argument("--data-dir", default=None)
    p.add_argument("routers", nargs="+", help="NAME=FOLDER of each router to compare")
    args = p.parse_args(argv)
    manifest = read_manifest(args.partition)
    train = load_dataset(manifest.dataset, manifest.split, args.data_dir)
    text = prepare_text(
        "pooled",
        manifest.dataset,
        manifest.split,
        args.data_dir,
        np.arange(len(train)),
        train.sample_space,
        args.prompt_embeddings,
    )
    held = router_eval_set(manifest, train, args.eval_split, args.data_dir, args.prompt_embeddings)
    sets = {
        f"training {manifest.split} ({len(train)})": (
            train.as_model_input(),
            np.asarray(manifest.assignments),
            text.heldout_conditions(manifest.dataset, manifest.split, args.data_dir),
        ),
        f"held-out {held.split} ({len(held.clusters)})": (
            held.images,
            held.clusters,
            text.heldout_conditions(manifest.dataset, held.split, args.data_dir),
        ),
    }
    prior = np.bincount(manifest.assignments) / len(manifest.assignments)
    mids = [(b + 0.5) / T_BINS for b in range(T_BINS)]
    print(f"largest cluster's share (a router that always names it): {prior.max():.3f}\n")
    print("| images | router | reads | " + " | ".join(f"t~{m:.2f}" for m in mids) + " |")
    print("|---|---|---|" + "---|" * T_BINS)
    for where, (images, clusters, conditions) in sets.items():
        for spec in args.routers:
            name, _, folder = spec.partition("=")
            router = load_router(folder)
            for reads, y in conditions.items():
                if router.meta.get("label_dropout") == 1.0 and reads == PROMPT:
                    continue  # it never saw a prompt: x_t alone is all it reads
                acc = accuracy_by_t(router, images, y, clusters)["accuracy"]
                print(f"| {where} | {name} | {reads} | " + " | ".join(f"{a:.3f}" for a in acc) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
