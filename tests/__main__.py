"""The whole suite, the way CI runs it (README's test command): `python -m tests [pytest args]`.

Three pytest runs over the same paths and options, the first two at once:

- parallel: every test marked neither `serial` nor `alone`, spread over worker processes (pytest-xdist,
  a file's tests in one process, so its module fixtures are built once). Most tests wait on other
  processes (workers, the broker, Redis), so more processes than cores pays: DDM_TEST_WORKERS sets how
  many (default 3).
- serial, beside it: the `serial` tests, one after another in one process: their verdict rides on a
  clock (a grace period, a hedge, a latency ratio), so no two of them ever run at once. Its output is
  printed when it ends.
- alone, afterwards: the `alone` tests with nothing beside them: they restart the shared broker, start a
  cluster of brokers, or load the CPU with hundreds of clients.

Every run always runs; the exit status is the first failure's, so CI fails when any does. A plain
`python -m pytest` still runs everything in one process, in order.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

NO_TESTS_COLLECTED = 5  # pytest's exit status when a run selects nothing (e.g. a path without such tests)


def _command(title: str, args: list[str]) -> list[str]:
    command = [sys.executable, "-m", "pytest", *args]
    print(f"== {title}: {' '.join(command[1:])}", flush=True)
    return command


def _status(code: int) -> int:
    return 0 if code == NO_TESTS_COLLECTED else code


def main(argv: list[str]) -> int:
    workers = os.environ.get("DDM_TEST_WORKERS", "3")
    with (
        tempfile.TemporaryDirectory(prefix="ddm-tests-jax-cache-") as cache,  # this run's (tests/conftest.py)
        tempfile.TemporaryFile() as serial_log,
    ):
        os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", cache)
        serial_run = subprocess.Popen(
            _command(
                "serial (beside the parallel run)", ["-p", "no:xdist", "-m", "serial and not alone", *argv]
            ),
            stdout=serial_log,
            stderr=subprocess.STDOUT,
        )
        parallel = _status(
            subprocess.call(
                _command(
                    "parallel", ["-n", workers, "--dist", "loadfile", "-m", "not serial and not alone", *argv]
                )
            )
        )
        serial = _status(serial_run.wait())
        print("== serial: its output", flush=True)
        serial_log.seek(0)
        shutil.copyfileobj(serial_log, sys.stdout.buffer)
        sys.stdout.flush()
        alone = _status(subprocess.call(_command("alone", ["-p", "no:xdist", "-m", "alone", *argv])))
    return parallel or serial or alone


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
