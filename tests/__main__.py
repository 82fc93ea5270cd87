"""The whole suite, the way CI runs it (README's test command): `python -m tests [pytest args]`.

Two phases, each a pytest run over the same paths and options:

1. every test not marked `serial`, spread over worker processes (pytest-xdist, one file per worker
   at a time, so a module's fixtures are built once). Most tests wait on other processes (workers,
   the broker, Redis), so more workers than cores pays: DDM_TEST_WORKERS sets how many (default 3).
2. the `serial` tests, alone: they restart the broker, start a cluster, load the CPU with hundreds of
   clients, or measure a clock, and would break or be broken by tests beside them (tests/conftest.py
   says which markers make a test serial).

Both phases always run; the exit status is the first failure's, so CI fails when either does. A plain
`python -m pytest` still runs everything in one process, in order.
"""

from __future__ import annotations

import os
import subprocess
import sys

NO_TESTS_COLLECTED = 5  # pytest's exit status when a phase selects nothing (e.g. a path with no serial tests)


def _phase(title: str, args: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", *args]
    print(f"== {title}: {' '.join(command[1:])}", flush=True)
    status = subprocess.call(command)
    return 0 if status == NO_TESTS_COLLECTED else status


def main(argv: list[str]) -> int:
    workers = os.environ.get("DDM_TEST_WORKERS", "3")
    parallel = _phase("parallel", ["-n", workers, "--dist", "loadfile", "-m", "not serial", *argv])
    serial = _phase("serial", ["-p", "no:xdist", "-m", "serial", *argv])
    return parallel or serial


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
