"""The whole suite, the way CI runs it (README's test command): `python -m tests [pytest args]`.

Two phases, each a pytest run over the same paths and options:

1. every test not marked `serial`, spread over worker processes (pytest-xdist, one file per worker
   at a time, so a module's fixtures are built once). Most tests wait on other processes (workers,
   the broker, Redis), so more workers than cores pays: DDM_TEST_WORKERS sets how many (default 3).
2. the `serial` tests, alone: they restart the broker, start a cluster, load the CPU with hundreds of
   clients, or measure a clock, and would break or be broken by tests beside them (tests/conftest.py
   says which markers make a test serial).

The serial phase collects only the files that mark a test serial (serial_files: collecting the whole
suite again costs about 20 s of CPU for 27 tests). The parallel phase collects everything anyway, and
tests/conftest.py fails it if a serial test lives in a file this list missed, so none runs in neither
phase.

Both phases always run; the exit status is the first failure's, so CI fails when either does. A plain
`python -m pytest` still runs everything in one process, in order.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

NO_TESTS_COLLECTED = 5  # pytest's exit status when a phase selects nothing (e.g. a path with no serial tests)
TESTS = Path(__file__).resolve().parent
# Tests with these marks disturb what every other test shares (the broker restarts, a cluster takes the
# CPU, hundreds of clients load it): they are serial too (tests/conftest.py marks them so).
SERIAL_MARKS = ("broker_restart", "cluster", "load")
SERIAL_MARK = re.compile(rf"pytest\.mark\.({'|'.join(('serial', *SERIAL_MARKS))})\b")
SERIAL_FILES_ENV = "DDM_SERIAL_FILES"  # the list, for tests/conftest.py's check


def serial_files() -> list[str]:
    """The test files (absolute paths) that mark a test serial, found by reading them."""
    found = (p for p in TESTS.rglob("test_*.py") if SERIAL_MARK.search(p.read_text(encoding="utf-8")))
    return sorted(str(p) for p in found)


def _names_paths(argv: list[str]) -> bool:
    """Whether the arguments choose test paths themselves (then the serial phase keeps them)."""
    return any(not a.startswith("-") and Path(a.split("::")[0]).exists() for a in argv)


def _phase(title: str, args: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", *args]
    print(f"== {title}: {' '.join(command[1:])}", flush=True)
    status = subprocess.call(command)
    return 0 if status == NO_TESTS_COLLECTED else status


def main(argv: list[str]) -> int:
    workers = os.environ.get("DDM_TEST_WORKERS", "3")
    files = [] if _names_paths(argv) else serial_files()
    if files:
        os.environ[SERIAL_FILES_ENV] = os.pathsep.join(files)
    parallel = _phase("parallel", ["-n", workers, "--dist", "loadfile", "-m", "not serial", *argv])
    serial = _phase("serial", ["-p", "no:xdist", "-m", "serial", *argv, *files])
    return parallel or serial


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
