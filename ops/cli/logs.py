"""`ddm logs [-f]`: the output of the `ddm up --detach` of this prefix (DDM_PREFIX) on this machine."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print the log of the background `ddm up` started with --detach under DDM_PREFIX on this machine "
        "(its workers' lines included; kept after `ddm down`). -f follows it as it grows, until Ctrl-C."
    )
    parser.add_argument("-n", "--lines", type=int, default=40, help="print the last N lines first (0: all)")
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing lines as they are written")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.up.detach import follow_log
    from ddm.schema.settings import Settings

    return follow_log(Settings.from_env().prefix, lines=args.lines, follow=args.follow)
