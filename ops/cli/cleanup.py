"""`ddm cleanup --prefix P` (or --empty-prefix): delete one prefix's queues and Redis keys, and no other
prefix's, after a confirmation (or --yes); --dry-run lists the same plan (ops/cleanup.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Delete everything one prefix holds on the broker and in Redis (DDM_AMQP_URL, DDM_REDIS_URL): its "
        "queues ddm.jobs, ddm.dead, ddm.decoder and ddm.expert.<k> with their messages, the dead-letter "
        "exchange, and its Redis keys (jobs, frames, results, heartbeats, the descriptor). Only the prefix's "
        "own names go: those of a longer prefix that starts with it ('a.ddm:' beside 'a.') stay. Shows "
        "what it found and asks first. Queued jobs, dead letters and results are lost."
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--prefix", help="the prefix to delete (DDM_PREFIX of that deployment)")
    which.add_argument(
        "--empty-prefix",
        action="store_true",
        help="delete the unprefixed deployment (DDM_PREFIX empty); --prefix '' is refused",
    )
    parser.add_argument("--yes", action="store_true", help="delete without asking")
    parser.add_argument(
        "--dry-run", action="store_true", help="list everything that would be deleted, delete nothing"
    )
    parser.add_argument(
        "--force", action="store_true", help="delete even while workers consume the prefix's queues"
    )
    parser.add_argument(
        "--max-experts",
        type=int,
        default=64,
        metavar="K",
        help="look for expert queues 0..K-1, besides those the published descriptor, --deployment and "
        "the broker's queue list (rabbitmqctl, on the broker's host) name",
    )
    parser.add_argument(
        "--deployment", type=Path, default=None, help="a deployment TOML: look for its experts' queues too"
    )
    parser.add_argument("--json", action="store_true", help="print what was found and deleted as JSON")


def _summary(found, every_key: bool) -> str:
    kinds = ", ".join(f"{n} {kind}" for kind, n in found.key_kinds().items()) or "none"
    lines = [f"prefix {found.prefix!r}:", f"  Redis keys: {len(found.keys)} ({kinds})"]
    lines += [f"    {key}" for key in found.keys] if every_key else []
    for q in found.queues:
        lines.append(f"  queue {q.name}: {q.messages} message(s), {q.consumers} consumer(s)")
    if found.exchange:
        lines.append(f"  exchange {found.exchange}")
    lines.append(f"  the broker's queue list: {found.listing}")
    return "\n".join(lines)


def _prefix(args: argparse.Namespace) -> str:
    """The prefix asked for; the empty one only by --empty-prefix, never by a --prefix that came out
    empty (an unset shell variable would otherwise delete the unprefixed deployment)."""
    from ddm.schema.errors import ConfigError, expected

    if args.empty_prefix:
        return ""
    if args.prefix == "":
        raise ConfigError(expected("a non-empty --prefix (the unprefixed deployment: --empty-prefix)", ""))
    return args.prefix


def _deployment_experts(path: Path | None) -> list[int]:
    from ddm.schema.deployment import Deployment

    return [] if path is None else [e.id for e in Deployment.load(path).experts]


def _confirmed(found) -> bool:
    from ddm.schema.errors import ConfigError

    if not sys.stdin.isatty():
        raise ConfigError("expected --yes (or --dry-run): stdin is not a terminal to confirm on")
    print(f"delete all of this for prefix {found.prefix!r}? [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.cleanup import delete_contents, find_prefix
    from ddm.ops.command_kit import print_json
    from ddm.schema.errors import DDMError
    from ddm.schema.names import Names
    from ddm.schema.settings import Settings

    prefix = Names(_prefix(args)).prefix  # a prefix no deployment could have is refused before looking
    settings = Settings.from_env()
    experts = _deployment_experts(args.deployment)
    found = find_prefix(settings.amqp_url, settings.redis_url, prefix, args.max_experts, experts)
    print(_summary(found, every_key=args.dry_run), file=sys.stderr)
    deleted = False
    if found.empty:
        print(f"nothing under prefix {prefix!r}", file=sys.stderr)
    elif args.dry_run:
        print("dry run: nothing deleted", file=sys.stderr)
    elif found.consumers and not args.force:
        raise DDMError(
            f"{found.consumers} consumer(s) still read the queues of prefix {prefix!r}: stop its "
            "workers (`ddm down`, or `ddm workers` lists them), or pass --force"
        )
    elif args.yes or _confirmed(found):
        delete_contents(settings.amqp_url, settings.redis_url, found)
        deleted = True
        print(f"deleted {len(found.keys)} key(s) and {len(found.queues)} queue(s)", file=sys.stderr)
    else:
        print("nothing deleted", file=sys.stderr)
    if args.json:
        print_json({**found.to_dict(), "deleted": deleted, "dry_run": args.dry_run})
    return 0 if deleted or found.empty or args.dry_run else 1  # 1: declined at the prompt
