"""The `ddm` command line.

Each subcommand lives in its own module under ddm.ops.cli (ddm.ops.cli.<command>), exposing
`configure(parser)` and `main(args) -> int`. Modules are imported only when their command runs,
so `ddm --help` does not pay for importing torch or jax.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from ddm.ops.cli.exit_codes import USAGE, exit_code
from ddm.ops.cli.parser import EpilogFormatter, Parser
from ddm.ops.command_kit import print_json
from ddm.schema.errors import DDMError

# (command, module, one-line help). Order is the order shown by `ddm --help`.
COMMANDS: list[tuple[str, str, str]] = [
    ("data", "ddm.ops.cli.data", "download or inspect datasets (MNIST, Fashion-MNIST)"),
    ("partition", "ddm.ops.cli.partition", "split a dataset into expert clusters (labels, k-means, random)"),
    ("train", "ddm.ops.cli.train", "train one expert alone (PyTorch or JAX/Flax)"),
    ("distill", "ddm.ops.cli.distill", "distil a deployment's routed ensemble into one dense student"),
    ("convert", "ddm.ops.cli.convert", "convert an expert checkpoint between PyTorch and JAX"),
    ("deployment", "ddm.ops.cli.deployment", "write a deployment file (experts, router, defaults)"),
    ("import", "ddm.ops.cli.import_checkpoints", "serve other people's checkpoints in place (Paris, DiT)"),
    ("sample", "ddm.ops.cli.sample", "sample images in-process from a deployment (the reference sampler)"),
    ("eval", "ddm.ops.cli.eval", "sample every label from a deployment and score the images (accuracy, FD)"),
    ("expert", "ddm.ops.cli.expert", "check an expert on a device against the CPU, bucket by bucket"),
    ("worker", "ddm.ops.cli.worker", "run an expert worker or a router worker against RabbitMQ and Redis"),
    ("up", "ddm.ops.cli.up", "bring up a deployment here: expert workers and router, supervised"),
    ("down", "ddm.ops.cli.down", "stop the `ddm up --detach` of this prefix"),
    ("logs", "ddm.ops.cli.logs", "print the log of this prefix's `ddm up --detach` (-f: follow it)"),
    ("ui", "ddm.ops.cli.ui", "serve the web UI: submit jobs and watch them denoise live"),
    (
        "submit",
        "ddm.ops.cli.submit",
        "queue a sampling job on the pipeline (optionally wait and save images)",
    ),
    ("status", "ddm.ops.cli.status", "show a job's status from Redis, or the most recent jobs"),
    ("jobs", "ddm.ops.cli.jobs", "list the newest jobs with one status (running, queued, failed, ...)"),
    ("result", "ddm.ops.cli.result", "fetch an earlier job's images (PNG grid, .npy)"),
    ("cancel", "ddm.ops.cli.cancel", "stop a queued or running job at its next step (its frames are kept)"),
    (
        "resubmit",
        "ddm.ops.cli.resubmit",
        "queue an earlier job's spec again under a new id (--seed: another)",
    ),
    ("keys", "ddm.ops.cli.keys", "create, list and revoke the web UI's per-user API keys"),
    ("workers", "ddm.ops.cli.workers", "list the live workers from their heartbeats, with queue depths"),
    ("cleanup", "ddm.ops.cli.cleanup", "delete a prefix's queues and Redis keys (asks first, or --yes)"),
    ("doctor", "ddm.ops.cli.doctor", "check broker, Redis, permissions, deployment, packages, data"),
    ("bench", "ddm.ops.cli.bench", "benchmark the pipeline against the in-process limit and HTTP per step"),
]

EPILOG = """\
typical first run (MNIST offline, two experts on two frameworks):
  ddm partition --dataset mnist --split 'test[:8000]' --by labels:0-4,5-9 --out runs/p.json
  ddm train expert --framework torch --partition runs/p.json --expert 0 --preset small --out runs/e0
  ddm train expert --framework jax   --partition runs/p.json --expert 1 --preset small --out runs/e1
  ddm sample --deployment runs/deployment.toml --all-labels --out grid.png
Run `ddm COMMAND --help` for the flags of each command. `ddm doctor` checks a set-up.
exit codes: 0 success; 1 a runtime failure (a job failed, was cancelled or not found, a service is
down, a doctor check failed); 2 a usage error (bad flags, or input that does not fit); 3 `submit --wait`
gave a degraded result the job did not ask for (steps without an expert that had no live worker).
"""


def package_version() -> str:
    """The installed ddm-pipeline's version (package metadata), or 'unknown' when run from a tree
    that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    from ddm.ops.extras import DISTRIBUTION

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = Parser(
        prog="ddm",
        description="Decentralized Diffusion Models: train isolated experts, route between them per step.",
        epilog=EPILOG,
        formatter_class=EpilogFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = argv[0] if argv else None
    for name, module, help_text in COMMANDS:
        child = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:  # import only the module of the command being run
            mod = importlib.import_module(module)
            mod.configure(child)
            child.set_defaults(_main=mod.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    if not argv:  # bare `ddm`: the command list, not just "COMMAND is required"
        parser.print_help()
        return USAGE
    args = parser.parse_args(argv)
    try:
        return int(args._main(args) or 0)
    except DDMError as exc:
        code = exit_code(exc)
        print(f"ddm {args.command}: error: {exc}", file=sys.stderr)
        if getattr(args, "json", None) is True:  # --json: a script reads the error on stdout too
            print_json({"ok": False, "error": str(exc), "kind": type(exc).__name__, "exit_code": code})
        return code
    except ModuleNotFoundError as exc:  # a module of an install extra this environment lacks
        from ddm.ops.extras import extra_for, missing_extra_message

        if (extra := extra_for(exc.name)) is None:
            raise
        print(missing_extra_message(args.command, extra), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `ddm status | head -1`: the reader has what it wanted
        # Python flushes stdout again at exit, into the same closed pipe: point it at /dev/null first
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
