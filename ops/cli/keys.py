"""`ddm keys create | list | revoke`: the web UI's per-user API keys, in Redis (webui/keys.py KeyStore)."""

from __future__ import annotations

import argparse
import re
import time

from ddm.schema.api_keys import SCOPES

RATE_RE = re.compile(r"([0-9]{1,7})(?:/min)?")


def _rate(text: str) -> int:
    """'N/min' (or 'N') -> N."""
    match = RATE_RE.fullmatch(text)
    if not match or int(match.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"expected requests per minute like 60/min, got {text!r}")
    return int(match.group(1))


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Manage the web UI's API keys (DDM_REDIS_URL, DDM_PREFIX). Once any key exists under the prefix, "
        "the UI answers nothing without a key or DDM_UI_TOKEN (an admin key), and a key's user sees only "
        "their own jobs. A key is shown once, at create; Redis keeps only its salted hash."
    )
    sub = parser.add_subparsers(dest="keys_command", required=True, metavar="{create,list,revoke}")
    create = sub.add_parser("create", help="make a key for a user and print it (once)")
    create.add_argument("--user", required=True, help="the user's name (1..64 chars [A-Za-z0-9_.@-])")
    create.add_argument(
        "--scope",
        choices=SCOPES,
        default="submit",
        help="read: own jobs; submit: also submit, cancel; admin: all jobs",
    )
    create.add_argument(
        "--rate",
        type=_rate,
        default=None,
        metavar="N/min",
        help="jobs the key may submit a minute (a token bucket shared by every UI process; 429 past it)",
    )
    create.add_argument(
        "--max-jobs",
        type=int,
        default=None,
        metavar="N",
        help="jobs the key may have queued or running at once (429 past it)",
    )
    create.add_argument("--json", action="store_true", help="print the record and the key as JSON")
    listing = sub.add_parser("list", help="list the keys (never the key itself)")
    listing.add_argument("--json", action="store_true", help="print the records as JSON")
    revoke = sub.add_parser("revoke", help="revoke a key at once, by its id (`ddm keys list`)")
    revoke.add_argument("key_id", help="the key's id: the part of the key before the dot")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.command_kit import print_json
    from ddm.runtime.redis_conn import connect_redis
    from ddm.schema.settings import Settings
    from ddm.webui.keys import KeyStore

    settings = Settings.from_env()
    redis = connect_redis(settings.redis_url)
    try:
        store = KeyStore(redis, settings.names)
        if args.keys_command == "create":
            record, key = store.create(args.user, args.scope, args.rate, args.max_jobs)
            if args.json:
                print_json({**record.public(), "key": key})
            else:
                print(key)
                print(f"# key {record.key_id} for {record.user} (scope {record.scope}): shown once, keep it")
        elif args.keys_command == "list":
            records = store.list()
            if args.json:
                print_json([r.public() for r in records])
            for r in records if not args.json else []:
                print(_line(r))
        else:
            record = store.revoke(args.key_id)
            print(f"key {record.key_id} of {record.user} revoked")
    finally:
        redis.close()
    return 0


def _line(r) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.created_at or 0))
    state = "revoked" if r.revoked else "active"
    limits = f"rate {r.rate_per_min or '-'}/min, max jobs {r.max_jobs or '-'}"
    return f"{r.key_id}  {r.user:<16} {r.scope:<6} {state:<7} created {when} UTC  {limits}"
