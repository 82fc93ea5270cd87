"""Run a command and say how busy the machine's CPUs were meanwhile, every process counted (/proc/stat):
whether a run is bound by CPU (then more parallel workers cannot make it faster) or by waiting.
docs/BENCHMARKS.md, "The test suite on two cores", has what it found for `python -m tests`' phases.

    python -m ddm.ops.bench.cpu_busy -- python -m pytest -n 3 --dist loadfile -m "not serial" -q
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

PROC_STAT = Path("/proc/stat")
USAGE = "usage: python -m ddm.ops.bench.cpu_busy -- COMMAND [ARGS...]"


def cpu_jiffies(stat: Path = PROC_STAT) -> tuple[int, int]:
    """(all, idle) CPU time since boot over every CPU, in clock ticks; idle counts iowait too."""
    first = stat.read_text().split("\n", 1)[0].split()
    if first[:1] != ["cpu"]:
        raise ValueError(f"{stat}: expected a first line starting 'cpu', got {first[:1]}")
    ticks = [int(v) for v in first[1:]]
    return sum(ticks), ticks[3] + ticks[4]


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of CPU time between two cpu_jiffies readings that was not idle."""
    total, idle = after[0] - before[0], after[1] - before[1]
    return 1.0 - idle / total if total > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print(USAGE, file=sys.stderr)
        return 2
    before, started = cpu_jiffies(), time.monotonic()
    status = subprocess.call(command)
    wall, busy = time.monotonic() - started, busy_share(before, cpu_jiffies())
    print(f"cpu_busy: {wall:.1f} s wall, CPUs busy {busy:.1%} of it, exit status {status}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
