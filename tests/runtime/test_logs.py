"""DDM_LOG_LEVEL and DDM_LOG_FORMAT: one handler, text or JSON lines, in every long-running process."""

from __future__ import annotations

import json
import logging
import subprocess

import pytest

from ddm.runtime.logs import configure_logging
from ddm.schema.errors import ConfigError
from ddm.schema.settings import Settings
from tests.support.fakes import write_random_deployment
from tests.support.harness import DDM_CLI, service_env


def test_json_lines_at_the_configured_level(capsys):
    configure_logging("ddm test", Settings(log_level="warning", log_format="json"))
    configure_logging("ddm test", Settings(log_level="warning", log_format="json"))  # again: one handler
    log = logging.getLogger("ddm.test")
    log.info("not shown")
    log.warning("disk %s\nfull", "/data")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    lines = capsys.readouterr().err.splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert [r["message"] for r in records] == ["disk /data\nfull", "failed"]
    first = records[0]
    assert (first["level"], first["logger"], first["process"]) == ("WARNING", "ddm.test", "ddm test")
    assert first["time"].endswith("Z") and isinstance(first["pid"], int)
    assert "ValueError: boom" in records[1]["exception"]
    assert logging.getLogger("pika").level == logging.WARNING


def test_text_lines(capsys):
    configure_logging("ddm test", Settings())
    logging.getLogger("ddm.test").info("hello")
    assert capsys.readouterr().err.rstrip().endswith("ddm test ddm.test INFO hello")


@pytest.mark.parametrize(("var", "value"), [("DDM_LOG_LEVEL", "LOUD"), ("DDM_LOG_FORMAT", "xml")])
def test_bad_values_name_the_variable(var, value):
    with pytest.raises(ConfigError, match=var):
        Settings.from_env({var: value})


def test_a_worker_logs_json_lines(tmp_path, prefix):
    """`ddm worker expert` with DDM_LOG_FORMAT=json and no broker: its lines, retries included, are JSON."""
    deployment = write_random_deployment(tmp_path, [("e0", "torch", range(10), 0)])
    env = service_env(prefix, DDM_LOG_FORMAT="json", DDM_AMQP_URL="amqp://guest:guest@127.0.0.1:1/%2F")
    argv = [*DDM_CLI, "worker", "expert", "--deployment", str(deployment), "--expert", "0", "--buckets", "1"]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stderr.readline() for _ in range(2)]  # the start line, then a connection retry
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stderr.close()
    records = [json.loads(line) for line in lines]
    assert all(r["process"] == "ddm worker" for r in records)
    assert records[0]["logger"] == "ddm.workers.worker" and "expert worker" in records[0]["message"]
