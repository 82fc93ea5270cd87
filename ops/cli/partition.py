"""`ddm partition`: split a dataset split into expert clusters and write the manifest."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        required=True,
        help="mnist, fashion-mnist, emoji or emoji-64, or a latent dataset of `ddm data encode` "
        "(emoji~ae-<id>: kmeans then clusters the autoencoder's learned features)",
    )
    parser.add_argument("--split", default="train", help="e.g. train, test, 'test[:8000]' (default: train)")
    parser.add_argument(
        "--by",
        required=True,
        help="labels:0-4,5-9 (groups by ',', '+' joins items in a group: labels:0+2+4-6,1+3+7-9) "
        "| kmeans:K | random:K | all (one cluster: the monolith)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for kmeans and random (default 0)")
    parser.add_argument(
        "--fine", type=int, default=64, help="kmeans: fine centroids before merging (default 64)"
    )
    parser.add_argument("--dims", type=int, default=50, help="kmeans: PCA feature dimensions (default 50)")
    parser.add_argument(
        "--features",
        default=None,
        help="kmeans: cluster by another dataset of the same rows: the latent dataset of --dataset "
        "(emoji~ae-<id>: the autoencoder's learned features), a latent dataset's pixels (emoji), or "
        "captions: each emoji's CLDR name, pooled by all-MiniLM-L6-v2 (clusters a prompt can name)",
    )
    parser.add_argument(
        "--prompt-embeddings",
        default=None,
        help="with --features captions: read the names' embeddings from this file (`ddm data "
        "embed-captions`) instead of loading the encoder",
    )
    parser.add_argument("--out", required=True, help="manifest path (JSON)")
    parser.add_argument("--preview", help="optional PNG: 8 samples per cluster, one row per cluster")
    parser.add_argument("--data-dir", help="data directory (default: $DDM_DATA_DIR, else ./data)")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.data.caption_features import CAPTIONS, caption_features
    from ddm.ops.data.catalog import DATASETS
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.data.partition_spec import parse_by
    from ddm.ops.data.partitions import make_partition
    from ddm.ops.data.previews import save_preview, summary
    from ddm.schema.autoencoder_card import split_latent_name
    from ddm.schema.errors import ConfigError, expected
    from ddm.schema.partition import write_manifest

    latent = split_latent_name(args.dataset)  # "<dataset>~<encoder_id>": k-means on learned features
    known = DATASETS.get(latent[0] if latent else args.dataset)
    classes = len(known.classes) if known else 10
    spec = parse_by(args.by, classes)  # fail on a bad spec before reading any data
    ds = load_dataset(args.dataset, args.split, args.data_dir)
    if args.features and spec.method != "kmeans":
        raise ConfigError(expected("--features with --by kmeans:K only", args.by))
    features = None
    if args.features == CAPTIONS:
        features = caption_features(args.dataset, ds.split, args.data_dir, args.prompt_embeddings)
    elif args.features:
        features = load_dataset(args.features, ds.split, args.data_dir)
    manifest = make_partition(ds, spec, seed=args.seed, fine=args.fine, dims=args.dims, features=features)
    path = write_manifest(args.out, manifest)
    print(summary(manifest, ds.classes))
    print(f"wrote {path}")
    if args.preview and latent:
        print("no --preview for a latent dataset: its samples are latents, not pictures")
    elif args.preview:
        print(f"wrote {save_preview(manifest, ds, args.preview)} (one row per cluster)")
    return 0
