"""`ddm data fetch|info`: download the official dataset files, or describe a split."""

from __future__ import annotations

import argparse

from ddm.ops.data.catalog import DATASETS, SPLITS


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="ACTION")
    sub.required = True
    names = sorted(DATASETS)

    fetch = sub.add_parser("fetch", help="download the official files (md5-checked) into DATA_DIR/<dataset>/")
    fetch.add_argument("dataset", choices=names)
    fetch.add_argument("--data-dir", help="data directory (default: $DDM_DATA_DIR, else ./data)")
    fetch.add_argument("--split", nargs="+", choices=SPLITS, default=list(SPLITS), help="splits to fetch")
    fetch.add_argument("--timeout", type=float, default=30.0, help="network timeout in seconds")

    info = sub.add_parser("info", help="show where a split is read from, its size, hash and class counts")
    info.add_argument("dataset", choices=names)
    info.add_argument("--split", default="test", help="e.g. test, train, 'test[:8000]' (default: test)")
    info.add_argument("--data-dir", help="data directory (default: $DDM_DATA_DIR, else ./data)")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.data.download import fetch
    from ddm.ops.data.files import find_split_files, resolve_data_dir
    from ddm.ops.data.splits import parse_split

    if args.data_command == "fetch":
        paths = fetch(args.dataset, args.data_dir, tuple(args.split), timeout=args.timeout)
        print(f"{args.dataset}: {len(paths)} file(s) ready")
        return 0

    ds = load_dataset(args.dataset, args.split, args.data_dir)
    split_name = parse_split(args.split)[0]
    images_path, labels_path = find_split_files(args.dataset, split_name, resolve_data_dir(args.data_dir))
    counts = ds.label_counts()
    print(f"{ds.name} {ds.split}: {len(ds)} images 28x28 uint8")
    print(f"  images  {images_path}")
    print(f"  labels  {labels_path}")
    print(f"  sha256  {ds.sha256}")
    width = max(len(c) for c in ds.classes)
    for label, (name, n) in enumerate(zip(ds.classes, counts, strict=True)):
        print(f"  {label:>2} {name:<{width}} {n:>6} {100 * n / max(len(ds), 1):5.1f}%")
    return 0
