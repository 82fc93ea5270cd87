"""`ddm up --detach` and `ddm down` as commands: their argv, output and --json (ops/up/detach.py does it)."""

from __future__ import annotations

import argparse
import sys

from ddm.schema.errors import ConfigError


def _up_args(argv: list[str]) -> list[str]:
    """This command line's `ddm up` flags without --detach and --json (abbreviations included), for the
    foreground `ddm up` that runs in the background."""
    if argv[:1] != ["up"]:
        raise ConfigError(f"expected `ddm up ... --detach` on the command line, got {argv[:1]}")
    return [a for a in argv[1:] if not (len(a) > 3 and ("--detach".startswith(a) or "--json".startswith(a)))]


def main_detached(args: argparse.Namespace) -> int:
    from ddm.ops.command_kit import print_json
    from ddm.ops.up.detach import start_detached
    from ddm.schema.settings import Settings

    prefix = Settings.from_env().prefix
    state = start_detached(_up_args(sys.argv[1:]), prefix, args.ready_timeout)
    if args.json:
        print_json(state)
    else:
        print(f"ddm up: running in the background under prefix {prefix!r}, pid {state['pid']}")
        print(f"ddm up: log {state['log']}; stop it with `ddm down`")
    return 0


def main_down(args: argparse.Namespace) -> int:
    from ddm.ops.command_kit import print_json
    from ddm.ops.up.detach import stop_detached
    from ddm.schema.settings import Settings

    prefix = Settings.from_env().prefix
    out = stop_detached(prefix, args.timeout)
    if args.json:
        print_json(out)
    elif out["stopped"]:
        how = "killed (it did not stop in time)" if out["killed"] else "stopped"
        print(f"ddm down: {how} `ddm up` pid {out['pid']} under prefix {prefix!r} in {out['seconds']} s")
    else:
        print(f"ddm down: no `ddm up --detach` runs under prefix {prefix!r} here", file=sys.stderr)
    return 0
