"""`ddm partition`: split a dataset split into expert clusters and write the manifest."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="mnist or fashion-mnist")
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
    parser.add_argument("--out", required=True, help="manifest path (JSON)")
    parser.add_argument("--preview", help="optional PNG: 8 samples per cluster, one row per cluster")
    parser.add_argument("--data-dir", help="data directory (default: $DDM_DATA_DIR, else ./data)")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.data import load_dataset
    from ddm.ops.partition import make_partition, parse_by, preview_grid

    spec = parse_by(args.by)  # fail on a bad spec before reading any data
    ds = load_dataset(args.dataset, args.split, args.data_dir)
    manifest = make_partition(ds, spec, seed=args.seed, fine=args.fine, dims=args.dims)
    path = manifest.save(args.out)
    print(manifest.summary(ds.classes))
    print(f"wrote {path}")
    if args.preview:
        from pathlib import Path

        from PIL import Image

        grid = preview_grid(manifest, ds)
        preview = Path(args.preview)
        preview.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(grid).resize((grid.shape[1] * 2, grid.shape[0] * 2), Image.NEAREST).save(preview)
        print(f"wrote {preview} (one row per cluster)")
    return 0
