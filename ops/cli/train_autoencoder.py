"""`ddm train autoencoder`: the latent deployment's autoencoder on a dataset split (workers/autoencoder)."""

from __future__ import annotations

import argparse
from pathlib import Path


def configure(sub) -> None:
    a = sub.add_parser(
        "autoencoder",
        help="train the autoencoder of a latent deployment (its latents: `ddm data encode`)",
        description="Train a small KL-regularised convolutional autoencoder, fit its latent normalisation "
        "and its linear latent -> RGB preview, and score its reconstructions on held-out data (PSNR, and "
        "FD with --classifier). The card in meta.json names the latent space (encoder_id).",
    )
    a.add_argument("--dataset", required=True, help="mnist, fashion-mnist, emoji or emoji-64")
    a.add_argument("--split", default="train", help="training split (default: train)")
    a.add_argument(
        "--eval-split", default=None, help="held-out split (default: test, or the rest of --split)"
    )
    a.add_argument("--preset", default="small", choices=("small", "tiny"), help="size (default: small)")
    a.add_argument(
        "--latent-channels", type=int, default=None, help="latent channels (default: the preset's 4)"
    )
    a.add_argument("--steps", type=int, default=3000, help="optimizer steps (default 3000)")
    a.add_argument("--batch", type=int, default=64, help="images per step (default 64)")
    a.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (default 2e-3)")
    a.add_argument("--seed", type=int, default=0, help="seed of the init and the data order (default 0)")
    a.add_argument("--classifier", type=Path, default=None, help="classifier folder: FD of reconstructions")
    a.add_argument("--data-dir", default=None, help="data directory (default: $DDM_DATA_DIR, else ./data)")
    a.add_argument("--out", required=True, type=Path)
    a.add_argument("--no-progress", action="store_true")


def main(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.data.splits import heldout_split
    from ddm.workers.autoencoder.config import preset
    from ddm.workers.autoencoder.train import train_autoencoder
    from ddm.workers.training import FitOptions

    train = load_dataset(args.dataset, args.split, args.data_dir)
    held = load_dataset(args.dataset, args.eval_split or heldout_split(train.split) or "test", args.data_dir)
    space = train.sample_space
    cfg = preset(args.preset, space.shape[0], space.shape[1])
    if args.latent_channels:
        cfg = replace(cfg, latent_channels=args.latent_channels)
    print(
        f"training the {args.preset} autoencoder ({space.describe()} -> latents "
        f"{'x'.join(map(str, cfg.latent_shape))}) on {len(train)} images of {train.name} {train.split}, "
        f"scoring on {held.split} -> {args.out}"
    )
    meta = train_autoencoder(
        train.as_model_input(),
        held.as_model_input(),
        cfg,
        args.out,
        pixel_space=space,
        trained_on={"dataset": train.name, "split": train.split, "sha256": train.sha256, "count": len(train)},
        fit=FitOptions(
            steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed, progress=not args.no_progress
        ),
        score_fd=_fd_scorer(args.classifier) if args.classifier else None,
    )
    card, rec = meta["card"], meta["card"]["reconstruction"]
    fd = f", FD {rec['fd']:.1f} (real-vs-real floor {rec['fd_floor']:.1f})" if "fd" in rec else ""
    print(
        f"done in {meta['wall_time_s']} s: {card['encoder_id']}, latents {card['latent_shape']} in "
        f"{card['value_range']}; held-out PSNR {rec['psnr_db']} dB (preview {rec['preview_psnr_db']} dB){fd}"
    )
    return 0


def _fd_scorer(classifier: Path):
    """FD under the evaluation classifier's features, at equal size: the held-out images split in two
    halves A and B, FD(reconstructions of A, B) beside FD(A, B), the floor a perfect autoencoder scores."""
    import numpy as np

    from ddm.ops.eval.classifier import features, load_classifier
    from ddm.ops.eval.frechet import frechet_distance

    model, _ = load_classifier(classifier)

    def score(real, recon) -> dict:
        perm = np.random.default_rng(0).permutation(len(real))
        a, b = perm[: len(real) // 2], perm[len(real) // 2 : 2 * (len(real) // 2)]
        real_b = features(model, real[b])
        return {
            "fd": round(frechet_distance(features(model, recon[a]), real_b), 2),
            "fd_floor": round(frechet_distance(features(model, real[a]), real_b), 2),
            "fd_n": int(len(a)),
            "fd_classifier": str(classifier),
        }

    return score
