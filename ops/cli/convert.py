"""`ddm convert SRC --to FRAMEWORK --out DST` (the frameworks: ddm.workers.frameworks)."""

from __future__ import annotations

import argparse

from ddm.workers.frameworks import framework_names


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", help="checkpoint folder (meta.json + weights)")
    parser.add_argument("--to", required=True, choices=framework_names(), help="target framework")
    parser.add_argument("--out", required=True, help="folder for the converted checkpoint")


def main(args: argparse.Namespace) -> int:
    from ddm.workers.convert import convert

    meta = convert(args.src, args.to, args.out)
    print(f"converted {args.src} ({meta['converted_from']['framework']}) -> {args.out} ({args.to})")
    return 0
