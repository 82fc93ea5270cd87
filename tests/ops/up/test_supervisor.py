"""The supervisor behind `ddm up`, with trivial sleeping Python children instead of workers."""

from __future__ import annotations

import io
import os
import signal
import sys
import time

import pytest

from ddm.ops.up.supervisor import ChildSpec, Supervisor, describe_exit

SLEEPER = "import sys, time; print('hello from', sys.argv[1], flush=True); time.sleep(60)"
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
    "time.sleep(60)"
)
PARENT = (
    "import subprocess, sys, time; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "print('grandchild', p.pid, flush=True); time.sleep(60)"
)


def py(code: str, *args: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code, *args)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); read its state
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(cond, timeout: float = 10.0, sup: Supervisor | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sup is not None:
            sup.poll()
        if value := cond():
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def supervisors():
    made: list[Supervisor] = []
    yield made
    for sup in made:
        sup.stop(grace_s=1.0)


def test_a_killed_child_is_restarted_and_stop_ends_all(supervisors):
    out = io.StringIO()
    sup = Supervisor(
        [ChildSpec("a", py(SLEEPER, "a")), ChildSpec("bb", py(SLEEPER, "bb"))], min_backoff_s=0.1, output=out
    )
    supervisors.append(sup)
    sup.start()
    first = sup.pids()
    wait_for(lambda: "hello from a" in out.getvalue() and "hello from bb" in out.getvalue())
    assert "a  | hello from a\n" in out.getvalue()  # prefixed, names padded to one width

    os.kill(first["a"], signal.SIGKILL)
    exited = wait_for(lambda: sup.poll() or None)
    assert exited == [("a", -signal.SIGKILL)]
    assert describe_exit(exited[0][1]) == "killed by SIGKILL"
    wait_for(lambda: sup.children["a"].running, sup=sup)
    assert sup.pids()["a"] != first["a"] and sup.pids()["bb"] == first["bb"]
    assert sup.children["a"].restarts == 1 and sup.children["bb"].restarts == 0
    wait_for(lambda: out.getvalue().count("hello from a") == 2)

    pids = sup.pids()
    codes = sup.stop(grace_s=5.0)
    assert codes == {"a": -signal.SIGTERM, "bb": -signal.SIGTERM}
    assert not any(alive(p) for p in pids.values())
    time.sleep(0.3)
    assert sup.poll() == [] and sup.pids() == {"a": None, "bb": None}  # no restart after stop


def test_restarts_back_off_and_reset(supervisors):
    sup = Supervisor(
        [ChildSpec("crash", py("import sys; sys.exit(3)"))], min_backoff_s=0.1, max_backoff_s=0.4
    )
    supervisors.append(sup)
    sup.start()
    child = sup.children["crash"]
    delays = []
    while child.starts < 5:
        exited = sup.poll()
        if exited:
            assert exited == [("crash", 3)]
            delays.append(child.restart_at - time.monotonic())
        time.sleep(0.01)
    assert child.failures >= 4
    # 0.1, 0.2, 0.4, 0.4 (capped), each measured just after the exit was seen
    assert [round(d, 1) for d in delays[:4]] == [0.1, 0.2, 0.4, 0.4]
    assert child.last_rc == 3 and describe_exit(3) == "exited with code 3"


def test_stop_escalates_to_sigkill(supervisors):
    out = io.StringIO()
    sup = Supervisor([ChildSpec("stubborn", py(STUBBORN))], output=out)
    supervisors.append(sup)
    sup.start()
    wait_for(lambda: "ready" in out.getvalue())
    t0 = time.monotonic()
    assert sup.stop(grace_s=0.5) == {"stubborn": -signal.SIGKILL}
    assert 0.4 < time.monotonic() - t0 < 5.0


def test_stop_reaches_grandchildren(supervisors):
    sup = Supervisor([ChildSpec("parent", py(PARENT))], output=io.StringIO())
    supervisors.append(sup)
    sup.start()
    line = wait_for(
        lambda: next((x for x in sup.children["parent"].tail if x.startswith("grandchild")), None)
    )
    grandchild = int(line.split()[1])
    assert alive(grandchild)
    sup.stop(grace_s=5.0)
    wait_for(lambda: not alive(grandchild))


def test_env_and_duplicate_names(tmp_path, supervisors):
    marker = tmp_path / "env.txt"
    code = f"import os; open({str(marker)!r}, 'w').write(os.environ['DDM_TEST_VALUE'])"
    sup = Supervisor([ChildSpec("env", py(code), env={"DDM_TEST_VALUE": "42"})], stable_s=0.0)
    supervisors.append(sup)
    sup.start()
    wait_for(lambda: marker.exists() and marker.read_text() == "42")
    with pytest.raises(ValueError, match="two children named"):
        Supervisor([ChildSpec("x", py("")), ChildSpec("x", py(""))])
