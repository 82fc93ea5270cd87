"""`ddm cleanup --prefix P`: delete one prefix's queues and Redis keys, after a confirmation (or --yes)."""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Delete everything one prefix holds on the broker and in Redis (DDM_AMQP_URL, DDM_REDIS_URL): the "
        "queues ddm.jobs, ddm.dead and ddm.expert.<k> with their messages, the dead-letter exchange, and "
        "every key {prefix}ddm:* (jobs, frames, results, heartbeats, the descriptor). Shows what it found "
        "and asks first. Queued jobs, dead letters and results are lost."
    )
    parser.add_argument(
        "--prefix",
        required=True,
        help="the prefix to delete (DDM_PREFIX of that deployment; '' is the unprefixed one)",
    )
    parser.add_argument("--yes", action="store_true", help="delete without asking")
    parser.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")
    parser.add_argument(
        "--force", action="store_true", help="delete even while workers consume the prefix's queues"
    )
    parser.add_argument(
        "--max-experts", type=int, default=64, metavar="K", help="look for expert queues 0..K-1"
    )
    parser.add_argument("--json", action="store_true", help="print what was found and deleted as JSON")


def _summary(found) -> str:
    kinds = ", ".join(f"{n} {kind}" for kind, n in found.key_kinds().items()) or "none"
    lines = [f"prefix {found.prefix!r}:", f"  Redis keys: {len(found.keys)} ({kinds})"]
    for q in found.queues:
        lines.append(f"  queue {q.name}: {q.messages} message(s), {q.consumers} consumer(s)")
    if found.exchange:
        lines.append(f"  exchange {found.exchange}")
    return "\n".join(lines)


def _confirmed(found) -> bool:
    from ddm.schema.errors import ConfigError

    if not sys.stdin.isatty():
        raise ConfigError("expected --yes (or --dry-run): stdin is not a terminal to confirm on")
    print(f"delete all of this for prefix {found.prefix!r}? [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.cleanup import delete_contents, find_prefix
    from ddm.ops.cli.output import print_json
    from ddm.schema.errors import DDMError
    from ddm.schema.names import Names
    from ddm.schema.settings import Settings

    Names(args.prefix)  # a prefix no deployment could have is refused before anything is looked at
    settings = Settings.from_env()
    found = find_prefix(settings.amqp_url, settings.redis_url, args.prefix, args.max_experts)
    print(_summary(found), file=sys.stderr)
    deleted = False
    if found.empty:
        print(f"nothing under prefix {args.prefix!r}", file=sys.stderr)
    elif found.consumers and not args.force:
        raise DDMError(
            f"{found.consumers} consumer(s) still read the queues of prefix {args.prefix!r}: stop its "
            "workers (`ddm down`, or `ddm workers` lists them), or pass --force"
        )
    elif not args.dry_run and (args.yes or _confirmed(found)):
        delete_contents(settings.amqp_url, settings.redis_url, found)
        deleted = True
        print(f"deleted {len(found.keys)} key(s) and {len(found.queues)} queue(s)", file=sys.stderr)
    elif not args.dry_run:
        print("nothing deleted", file=sys.stderr)
    if args.json:
        print_json({**found.to_dict(), "deleted": deleted, "dry_run": args.dry_run})
    return 0 if deleted or found.empty or args.dry_run else 1  # 1: declined at the prompt
