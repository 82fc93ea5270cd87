"""`ddm train retrieval`: the image tower of R-precision (ops/eval/retrieval.py) on a captioned dataset's
train split, against its captions' frozen pooled embeddings; the ceiling (R-precision of real held-out
images with their own captions) goes to its meta.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from ddm.ops.cli.train_text import add_text_flag


def configure(sub) -> None:
    r = sub.add_parser(
        "retrieval",
        help="train the image tower of R-precision on a captioned dataset (emoji) and measure its ceiling",
        description="Fit a small CNN contrastively against the frozen pooled prompt embeddings of the "
        "training split's captions, then score R-precision (the prompt against 99 others) on real "
        "held-out images: the ceiling a text deployment's images are measured against.",
    )
    r.add_argument("--dataset", default="emoji", choices=("emoji", "emoji-64"), help="captioned dataset")
    r.add_argument("--split", default="train", help="training split (default: train)")
    r.add_argument("--eval-split", default="test", help="held-out split (default: test)")
    r.add_argument("--epochs", type=int, default=40, help="passes over the training split (default 40)")
    r.add_argument("--seed", type=int, default=0, help="seed of the init and the data order")
    add_text_flag(r)
    r.add_argument("--data-dir", default=None)
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--no-progress", action="store_true")


def main(args: argparse.Namespace) -> int:
    from dataclasses import replace

    import numpy as np

    from ddm.ops.cli.train_text import prepare_text
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.eval.retrieval import CANDIDATES, IMAGE_TOWER_FIT, train_image_tower

    train = load_dataset(args.dataset, args.split, args.data_dir)
    text = prepare_text(
        args.text or "pooled",
        args.dataset,
        args.split,
        args.data_dir,
        np.arange(len(train)),
        train.sample_space,
        args.prompt_embeddings,
    )
    real = {split: _real(args, split, text.encoder) for split in (args.split, args.eval_split)}
    print(f"training the image tower on {len(train)} images of {train.split}")
    record = {
        "dataset": args.dataset,
        "split": train.split,
        "eval_split": args.eval_split,
        "prompts": text.record,
    }
    final = train_image_tower(
        train.as_model_input(),
        text.table,
        real,
        args.out,
        record,
        fit=replace(IMAGE_TOWER_FIT, epochs=args.epochs, seed=args.seed, progress=not args.no_progress),
    )
    for split, value in final["ceiling_r_precision"].items():
        count = final["num_images"][split]
        print(
            f"R-precision of real {split} images with their names (R = {CANDIDATES}): {value:.3f} ({count})"
        )
    print(f"({final['wall_time_s']} s) -> {args.out}")
    return 0


def _real(args: argparse.Namespace, split: str, encoder):
    """A split's real images with a caption, their captions (CLDR names) and the captions' embeddings."""
    import numpy as np

    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.data.emoji_captions import load_captions

    images = load_dataset(args.dataset, split, args.data_dir).as_model_input()
    names = list(load_captions(args.dataset, split, args.data_dir).captions)
    keep = [i for i, p in enumerate(names) if p]  # an uncaptioned image has nothing to retrieve
    embeddings, _ = encoder.encode([names[i] for i in keep])
    return images[keep], [names[i] for i in keep], np.asarray(embeddings, np.float32)
