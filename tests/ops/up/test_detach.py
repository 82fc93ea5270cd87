"""`ddm up --detach` and `ddm down` on the real broker and Redis: up returns once the deployment is
ready (a job runs on it), a second one under the same prefix is refused, down stops the supervisor and
every worker it started; a bring-up that cannot start says why with the end of its log."""

from __future__ import annotations

import json
import subprocess
import time

from ddm.schema.messages import JobSpec
from tests.support.harness import DDM_CLI, service_env
from tests.support.services import cleanup_prefix, new_prefix


def ddm(env, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*DDM_CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_up_detach_then_down(shared_labels_deployment, tmp_path):
    from ddm.client.client import Client
    from ddm.schema.settings import Settings

    prefix = new_prefix()
    env = service_env(prefix, DDM_HEARTBEAT_S="0.5", DDM_HEARTBEAT_TTL_S="3", XDG_CACHE_HOME=str(tmp_path))
    up = [
        *("up", "--deployment", str(shared_labels_deployment), "--no-ui", "--buckets", "1,2", "--grace", "5")
    ]
    try:
        started = ddm(env, *up, "--detach", "--json")
        assert started.returncode == 0, started.stderr + started.stdout
        state = json.loads(started.stdout)
        folder = tmp_path / "ddm" / "up" / f"prefix={prefix}"
        assert state["state_dir"] == str(folder) and (folder / "up.pid").read_text().strip() == str(
            state["pid"]
        )
        assert alive(state["pid"]) and "--detach" not in state["argv"]

        settings = Settings.from_env(env)
        with Client(settings=settings) as client:  # ready means serving: a job runs at once
            job = client.submit(JobSpec.new([4], steps=2, seed=1))
            assert client.wait(job, timeout=60).status.value == "done"
            workers = [
                client.redis.hget(settings.names.worker(w), "pid")
                for w in ("up-e0-0", "up-e1-0", "up-router")
            ]
        pids = [int(p) for p in workers]
        assert all(alive(p) for p in pids)

        again = ddm(env, *up, "--detach")
        assert (
            again.returncode == 2
            and f"found pid {state['pid']}" in again.stderr
            and "`ddm down` first" in again.stderr
        )

        down = ddm(env, "down", "--json")
        assert down.returncode == 0, down.stderr
        shown = json.loads(down.stdout)
        assert (shown["pid"], shown["stopped"], shown["killed"]) == (state["pid"], True, False)
        assert not alive(state["pid"]) and not (folder / "up.pid").exists()
        deadline = time.monotonic() + 10
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in pids), "ddm down left workers running"
        assert "stopped" in (folder / "up.log").read_text()

        nothing = ddm(env, "down", "--json")
        assert nothing.returncode == 0 and json.loads(nothing.stdout)["stopped"] is False
    finally:
        ddm(env, "down", "--timeout", "20")
        cleanup_prefix(prefix)


def test_a_bring_up_that_cannot_start_says_why(tmp_path):
    prefix = new_prefix()
    env = service_env(prefix, XDG_CACHE_HOME=str(tmp_path))
    failed = ddm(
        env, "up", "--deployment", str(tmp_path / "missing.toml"), "--no-ui", "--detach", timeout=120
    )
    assert failed.returncode == 1 and "exited with code 2 before it was ready" in failed.stderr
    assert "missing.toml" in failed.stderr  # the end of its log says which file
    folder = tmp_path / "ddm" / "up" / f"prefix={prefix}"
    assert (folder / "up.log").exists() and not (folder / "up.pid").exists()
