"""`ddm status | head -1` printed a BrokenPipeError traceback (issue 40 part 7): a reader that stops
reading early is a normal end, exit 0 and nothing on stderr."""

from __future__ import annotations

import subprocess

from ddm.client import Client
from ddm.schema.messages import JobSpec
from tests.support.harness import DDM_CLI, service_env


def test_a_reader_that_closes_early_is_no_error(env):
    with Client(settings=env) as client:
        for _ in range(20):
            client.submit(JobSpec.new([3], steps=2), check=False)
    child = subprocess.Popen(
        [*DDM_CLI, "status", "--recent", "20"],
        env=service_env(env.prefix),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    child.stdout.close()  # as `head -1` does once it has its line: every write now meets a closed pipe
    _, err = child.communicate(timeout=60)
    assert child.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
