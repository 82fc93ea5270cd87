"""`ddm doctor`: check this machine's set-up; exit 0 when every check passes, 1 otherwise."""

from __future__ import annotations

import argparse

from ddm.ops.command_kit import add_deployment_flag
from ddm.ops.doctor.checks import ROLES


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Check the set-up for a role: the DDM_* settings, RabbitMQ and Redis (DDM_AMQP_URL, DDM_REDIS_URL) "
        "and this user's permissions on them under DDM_PREFIX, the deployment file and its checkpoints "
        "(meta.json, weights, sha256 digests), the installed packages the role needs, and the data "
        "folder. Every failure says how to fix it. Exit 0 when all pass, 1 otherwise."
    )
    parser.add_argument(
        "--role",
        choices=ROLES,
        default=None,
        help="what this machine does: all (what `ddm up` runs: experts, router, web UI), client "
        "(submit and follow jobs), router, expert (default: guessed, and said: all where a deployment "
        "file and a serving extra are here, else client)",
    )
    add_deployment_flag(parser, what=", checked for the role (a client needs none)")
    parser.add_argument("--expert", type=int, default=None, help="with --role expert: only this expert")
    parser.add_argument("--data-dir", default=None, help="data folder (default: $DDM_DATA_DIR, else ./data)")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")


def main(args: argparse.Namespace) -> int:
    from ddm.ops.cli.exit_codes import FAILURE, OK
    from ddm.ops.command_kit import print_json
    from ddm.ops.doctor import DoctorOptions, run_doctor
    from ddm.ops.doctor.role_guess import guess_role

    role, why = (args.role, "--role") if args.role else guess_role(args.deployment)
    options = DoctorOptions(role=role, deployment=args.deployment, expert=args.expert, data_dir=args.data_dir)
    checks = run_doctor(options)
    failed = [c for c in checks if c.failed]
    if args.json:
        print_json(
            {"ok": not failed, "role": role, "role_from": why, "checks": [c.to_dict() for c in checks]}
        )
    else:
        print(f"role {role} ({why})")
        width = max(len(c.name) for c in checks)
        for c in checks:
            print(f"{c.status:<4}  {c.name:<{width}}  {c.detail}")
            if c.failed and c.fix and c.fix not in c.detail:  # service errors already say the fix
                print(f"{'':<4}  {'':<{width}}  fix: {c.fix}")
        print(f"{len(failed)} check(s) failed" if failed else "all checks passed")
    return FAILURE if failed else OK
