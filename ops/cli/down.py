"""`ddm down`: stop the `ddm up --detach` of this prefix (DDM_PREFIX) on this machine."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Stop the background `ddm up` started with --detach under DDM_PREFIX on this machine: SIGTERM, on "
        "which it stops its workers (their grace, then SIGKILL) and exits. Nothing running is not an error."
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait before killing it (SIGKILL)"
    )
    parser.add_argument("--json", action="store_true", help="print what was stopped as JSON")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.up.detached_cli import main_down

    return main_down(args)
