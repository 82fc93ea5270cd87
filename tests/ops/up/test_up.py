"""`ddm up`: its pieces, its refusal when the services are down, and one real bring-up (slow)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest
import redis

from ddm.ops.cli import main
from ddm.ops.up.bringup import UpOptions, build_children, expert_thread_env, parse_replicas, read_heartbeat
from ddm.ops.up.supervisor import stop_processes
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError
from ddm.schema.heartbeat import WorkerHeartbeat
from ddm.schema.settings import Settings
from tests.support.fakes import write_fake_deployment
from tests.support.harness import OutputWatcher
from tests.support.services import AMQP_URL, REDIS_URL, cleanup_prefix

fake_deployment = write_fake_deployment  # metas only: e0 torch (0-4), e1 jax (5-9)


def test_parse_replicas():
    assert parse_replicas([], 2) == {0: 1, 1: 1}
    assert parse_replicas(["0=2"], 2) == {0: 2, 1: 1}
    assert parse_replicas(["0=3,1=2"], 2) == {0: 3, 1: 2}
    for bad in (["2=1"], ["0=0"], ["x=1"], ["0"], ["0=65"]):
        with pytest.raises(ConfigError, match="--replicas K=N"):
            parse_replicas(bad, 2)


def test_build_children(tmp_path):
    dep = Deployment.load(fake_deployment(tmp_path))
    options = UpOptions(max_batch=16, max_wait_ms=2.0, buckets="1,2", max_jobs=8, routers=1)
    children = build_children(dep, {0: 2, 1: 1}, options)
    assert [(s.name, role, k) for s, role, k in children] == [
        ("up-e0-0", "expert", 0),
        ("up-e0-1", "expert", 0),
        ("up-e1-0", "expert", 1),
        ("up-router", "router", None),
    ]
    e01 = children[1][0].argv
    assert e01[:6] == (sys.executable, "-P", "-m", "ddm.ops.cli", "worker", "expert")
    tail = f"--deployment {dep.path} --expert 0 --worker-id up-e0-1"
    assert " ".join(e01).endswith(f"{tail} --max-batch 16 --max-wait-ms 2.0 --buckets 1,2")
    assert children[3][0].argv[5:] == (
        "router", "--deployment", str(dep.path), "--worker-id", "up-router", "--max-jobs", "8"
    )  # fmt: skip


def test_expert_workers_share_the_cores_unless_the_user_set_threads():
    assert expert_thread_env(2, environ={}, cpus=2) == {"OMP_NUM_THREADS": "1"}
    assert expert_thread_env(2, environ={}, cpus=16) == {"OMP_NUM_THREADS": "8"}
    assert expert_thread_env(5, environ={}, cpus=2) == {"OMP_NUM_THREADS": "1"}
    assert expert_thread_env(2, environ={"OMP_NUM_THREADS": "4"}, cpus=2) == {}


def test_read_heartbeat_decodes_the_record_and_ignores_anything_else():
    r = redis.Redis.from_url(REDIS_URL)
    key = f"t{uuid.uuid4().hex[:10]}.hb"
    beat = WorkerHeartbeat.build(
        {"worker_id": "up-e0-0", "role": "expert", "expert_id": 0, "device": "cpu", "pid": 12,
         "host": "h", "updated_at": 1.0, "requests": 3}
    )  # fmt: skip
    try:
        assert read_heartbeat(r, key) is None
        r.hset(key, mapping=beat.encode())
        got = read_heartbeat(r, key)
        assert (got.device, got.pid, got.host, got.counters["requests"]) == ("cpu", 12, "h", 3)
        r.delete(key)
        r.hset(key, mapping={"device": "cpu"})  # not a heartbeat: no worker_id, role, updated_at
        assert read_heartbeat(r, key) is None
        r.delete(key)
        r.set(key, "a string")
        assert read_heartbeat(r, key) is None
    finally:
        r.delete(key)


def test_up_refuses_when_services_are_down(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DDM_AMQP_URL", "amqp://guest:guest@127.0.0.1:1/%2F")
    monkeypatch.setenv("DDM_REDIS_URL", "redis://127.0.0.1:2/0")
    assert main(["up", "--deployment", str(fake_deployment(tmp_path)), "--no-ui"]) == 1  # services down
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing started, no table
    err = captured.err
    assert "RabbitMQ: no RabbitMQ answered at amqp://guest:***@127.0.0.1:1/%2F" in err
    assert "Redis: no Redis answered at redis://127.0.0.1:2/0" in err
    for hint in (
        "rabbitmq-server -detached",
        "redis-server --daemonize yes",
        "docker compose up -d rabbitmq redis",
    ):
        assert hint in err


def test_up_refuses_a_missing_checkpoint(tmp_path, capsys):
    path = fake_deployment(tmp_path)
    (tmp_path / "e1" / "meta.json").unlink()
    assert main(["up", "--deployment", str(path), "--no-ui"]) == 2
    assert "meta.json" in capsys.readouterr().err


# ---------------------------------------------------------------- the real thing


@pytest.mark.slow
def test_up_serves_restarts_and_stops(label_split_deployment):
    from ddm.client import Client
    from ddm.schema.messages import JobSpec

    prefix = f"t{uuid.uuid4().hex[:10]}."
    env = {**os.environ, "DDM_PREFIX": prefix, "DDM_AMQP_URL": AMQP_URL, "DDM_REDIS_URL": REDIS_URL}
    env |= {
        "DDM_HEARTBEAT_S": "0.5",
        "DDM_HEARTBEAT_TTL_S": "3",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
    }
    argv = [sys.executable, "-m", "ddm.ops.cli", "up", "--deployment", str(label_split_deployment)]
    argv += ["--buckets", "1,2,4", "--grace", "10", "--no-ui"]  # tests/webui/test_browser.py runs the UI
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = OutputWatcher(proc)
    lines, wait_line, reader = out.lines, out.wait_line, out.reader

    names = Settings(prefix=prefix).names
    r = redis.Redis.from_url(REDIS_URL)
    try:
        wait_line("ddm up: ready.")
        assert "web UI at" not in "".join(lines)
        table = "".join(lines)
        assert f"{names.expert_queue(0)}" in table and "jax" in table and "torch" in table

        with Client(AMQP_URL, REDIS_URL, prefix) as client:
            spec = JobSpec.new([1, 8], steps=4, strategy="oracle")
            client.submit(spec)
            x = client.result(spec.job_id, timeout=120)
        assert x.shape == (2, 1, 32, 32) and np.isfinite(x).all()

        old = int(r.hget(names.worker("up-e0-0"), "pid"))
        os.kill(old, signal.SIGKILL)
        wait_line("up-e0-0 killed by SIGKILL", timeout=30)
        deadline = time.monotonic() + 120
        while int(r.hget(names.worker("up-e0-0"), "pid") or old) == old:
            assert time.monotonic() < deadline, "up-e0-0 was not restarted"
            time.sleep(0.3)
        pids = [int(r.hget(names.worker(w), "pid")) for w in ("up-e0-0", "up-e1-0", "up-router")]

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        reader.join(timeout=5)
        assert "ddm up: stopped" in "".join(lines)
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        stop_processes([proc], grace_s=30)  # SIGTERM first: ddm up then stops its children
        cleanup_prefix(prefix, experts=2)


def test_up_refuses_to_run_twice_under_one_prefix(tmp_path, monkeypatch, capsys):
    import socket

    prefix = f"t{uuid.uuid4().hex[:10]}."
    monkeypatch.setenv("DDM_PREFIX", prefix)
    monkeypatch.setenv("DDM_AMQP_URL", AMQP_URL)
    monkeypatch.setenv("DDM_REDIS_URL", REDIS_URL)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    r = redis.Redis.from_url(REDIS_URL)
    key = Settings(prefix=prefix).names.worker("up-e0-0")
    try:
        beat = {"worker_id": "up-e0-0", "role": "expert", "expert_id": 0, "host": socket.gethostname()}
        r.hset(key, mapping=WorkerHeartbeat.build({**beat, "pid": other.pid, "updated_at": 1.0}).encode())
        assert main(["up", "--deployment", str(fake_deployment(tmp_path)), "--no-ui"]) == 1
        assert f"up-e0-0 (pid {other.pid}) is already running here" in capsys.readouterr().err
    finally:
        other.kill()
        other.wait()
        r.delete(key)


def test_up_refuses_a_busy_ui_port(tmp_path, monkeypatch, capsys):
    import socket

    monkeypatch.setenv("DDM_PREFIX", f"t{uuid.uuid4().hex[:10]}.")
    monkeypatch.setenv("DDM_AMQP_URL", AMQP_URL)
    monkeypatch.setenv("DDM_REDIS_URL", REDIS_URL)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        argv = ["up", "--deployment", str(fake_deployment(tmp_path)), "--ui-port", str(port)]
        assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"web UI: cannot listen on 127.0.0.1:{port}" in err and "--ui-port PORT or --no-ui" in err


def test_a_port_left_in_time_wait_by_a_stopped_ui_is_free():
    """Stopping `ddm up` and starting it again within a minute: the old UI's connections linger in
    TIME-WAIT, nothing listens. Before, the pre-check bound without SO_REUSEADDR and refused the port."""
    import socket

    from ddm.ops.up.ui import port_problem

    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the UI's server does
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server side closes first: it is the side left in TIME-WAIT
        client.recv(1)
        client.close()
    states = subprocess.run(["ss", "-tan", f"sport = :{port}"], capture_output=True, text=True).stdout
    assert "TIME-WAIT" in states, states
    assert port_problem("127.0.0.1", port) is None


@pytest.mark.parametrize("service", ["rabbitmq", "redis"])
def test_a_service_that_is_down_gets_one_message_and_no_traceback(tmp_path, service):
    """Before, pika logged its connection workflow's failure at ERROR with a traceback before `ddm up`'s
    own message; and `ddm result` put Redis's message inside itself."""
    from tests.support.services import free_port

    env = {**os.environ, "DDM_PREFIX": f"t{uuid.uuid4().hex[:10]}.", "DDM_AMQP_URL": AMQP_URL}
    env["DDM_REDIS_URL"] = REDIS_URL
    if service == "rabbitmq":
        env["DDM_AMQP_URL"] = f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F"
        argv = ["up", "--no-ui", "--deployment", str(write_fake_deployment(tmp_path / "dep"))]
    else:
        env["DDM_REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"
        argv = ["result", "0123456789abcdef0123456789abcdef"]
    done = subprocess.run(
        [sys.executable, "-m", "ddm.ops.cli", *argv], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and " ERROR " not in done.stderr, done.stderr
    name = "RabbitMQ" if service == "rabbitmq" else "Redis"
    assert done.stderr.count(f"no {name} answered") == 1, done.stderr
