"""The pipeline of another git revision against this checkout's, measured interleaved on one machine.

    python -m ddm.ops.bench.ab REV [--jobs 1,16] [--repeat 4] [--deployment D]

A speed change is worth keeping only if it shows against the code before it at the same moment: this
VM drifts by 10-20% over minutes, so two `ddm bench` runs taken apart cannot tell 5% from noise. This
checks REV out into a temporary git worktree, starts both pipelines (each its own workers and prefix),
and alternates them level by level (the order flips every repeat). Prints each side's median images/s
and 1-job overhead. Both sides use this checkout's Python environment and the same deployment.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from ddm.ops.bench.jobs import BenchConfig, job_specs, parse_levels
from ddm.ops.bench.pipeline import PipelineProcesses, run_level
from ddm.ops.command_kit import add_deployment_flag

PACKAGES = ("schema", "workers", "router", "ops", "webui")


class RevisionProcesses(PipelineProcesses):
    """PipelineProcesses whose workers import `ddm` from another checkout (`package_root`)."""

    def __init__(self, deployment: Path, log_dir: Path, package_root: Path):
        super().__init__(deployment, log_dir)
        # PYTHONPATH comes before the editable install's finder; the working directory must not hold a
        # ddm/ of its own
        self.env["PYTHONPATH"] = str(package_root)
        self.cwd = package_root


def package_of(checkout: Path, root: Path) -> Path:
    """A `ddm` package at root/ddm whose subpackages are the checkout's top-level folders."""
    pkg = root / "ddm"
    pkg.mkdir(parents=True)
    for module in (checkout / "ddm").glob("*.py"):  # ddm/__init__.py, ddm/client/__init__.py
        shutil.copy(module, pkg / module.name)
    for name in PACKAGES:
        (pkg / name).symlink_to(checkout / name, target_is_directory=True)
    return root


def main(argv: list[str] | None = None) -> int:
    from ddm.schema.deployment import resolve_deployment

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("revision", help="the git revision to compare with, e.g. HEAD or main~1")
    parser.add_argument(
        "--jobs", type=parse_levels, default=(1, 16), help="concurrency levels (default 1,16)"
    )
    parser.add_argument("--repeat", type=int, default=4)
    add_deployment_flag(parser)
    args = parser.parse_args(argv)
    deployment = resolve_deployment(args.deployment).resolve()
    cfg = BenchConfig(deployment=deployment)
    here = Path(__file__).resolve().parent  # ops/bench/ of this checkout, wherever the command runs from
    repo = Path(
        subprocess.check_output(["git", "-C", str(here), "rev-parse", "--show-toplevel"], text=True).strip()
    )
    results: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="ddm-ab-") as tmp:
        tree = Path(tmp) / "tree"
        git = ["git", "-C", str(repo), "worktree"]
        subprocess.run([*git, "add", "--detach", str(tree), args.revision], check=True)
        try:
            root = package_of(tree, Path(tmp) / "pkg")
            sides = {
                args.revision: RevisionProcesses(deployment, Path(tmp) / "logs-rev", root),
                "this checkout": PipelineProcesses(deployment, Path(tmp) / "logs-this"),
            }
            with sides[args.revision], sides["this checkout"]:
                for procs in sides.values():
                    run_level(procs, job_specs(max(args.jobs), cfg, steps=2))  # warm-up
                for repeat in range(args.repeat):
                    order = list(sides.items()) if repeat % 2 == 0 else list(sides.items())[::-1]
                    for jobs in args.jobs:
                        for name, procs in order:
                            row = run_level(procs, job_specs(jobs, cfg))
                            results.setdefault((name, jobs), []).append(row)
                            rate, overhead = row["images_per_s"], row["overhead_ms_p50"]
                            print(
                                f"[{repeat + 1}/{args.repeat}] {name:>14} {jobs:>2} jobs: "
                                f"{rate:.2f} images/s, overhead {overhead:.2f} ms",
                                flush=True,
                            )
        finally:
            subprocess.run([*git, "remove", "--force", str(tree)], check=False)
            subprocess.run([*git, "prune"], check=False)  # in case the remove failed
    print("\n| side | jobs | images/s (median) | overhead ms/step (median) |\n|---|---:|---:|---:|")
    for (name, jobs), rows in results.items():
        rate = statistics.median(r["images_per_s"] for r in rows)
        overhead = statistics.median(r["overhead_ms_p50"] for r in rows)
        print(f"| {name} | {jobs} | {rate:.2f} | {overhead:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
