"""The whole suite, the way CI runs it (README's test command): `python -m tests [pytest args]`.

Two phases, each a pytest run over the same paths and options:

1. every test not marked `alone`, spread over worker processes (pytest-xdist, `--dist loadgroup`:
   tests/conftest.py keeps a file's tests together, so its module fixtures are built once, and puts
   every `serial` test in one group, run one after another in one process: the tests whose verdict
   rides on a clock, a grace period, a hedge or a latency ratio never run two at a time). Most tests
   wait on other processes (workers, the broker, Redis), so more processes than cores pays:
   DDM_TEST_WORKERS sets how many (default 3).
2. the `alone` tests, with nothing beside them: they restart the shared broker, start a cluster of
   brokers, or load the CPU with hundreds of clients.

Both phases always run; the exit status is the first failure's, so CI fails when either does. A plain
`python -m pytest` still runs everything in one process, in order.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

NO_TESTS_COLLECTED = 5  # pytest's exit status when a phase selects nothing (e.g. a path with no alone tests)


def _phase(title: str, args: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", *args]
    print(f"== {title}: {' '.join(command[1:])}", flush=True)
    status = subprocess.call(command)
    return 0 if status == NO_TESTS_COLLECTED else status


def main(argv: list[str]) -> int:
    workers = os.environ.get("DDM_TEST_WORKERS", "3")
    with tempfile.TemporaryDirectory(
        prefix="ddm-tests-jax-cache-"
    ) as cache:  # this run's (tests/conftest.py)
        os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", cache)
        parallel = _phase("parallel", ["-n", workers, "--dist", "loadgroup", "-m", "not alone", *argv])
        alone = _phase("alone", ["-p", "no:xdist", "-m", "alone", *argv])
    return parallel or alone


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
