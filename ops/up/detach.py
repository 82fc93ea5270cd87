"""`ddm up --detach` and `ddm down`: `ddm up` as a background process, one per prefix on this machine.

The state of a detached bring-up lives in a folder per prefix (state_dir):

    ${XDG_CACHE_HOME:-~/.cache}/ddm/up/prefix=<DDM_PREFIX>/
        up.pid     the pid of the background `ddm up` (its own session: a closed terminal does not stop it)
        up.log     its output (stdout and stderr, the workers' lines included), kept after `ddm down`
        up.json    how it was started: argv, pid, prefix, started_at

start_detached returns once `ddm up` says it is ready (every worker's heartbeat, and the web UI answering),
and stops it again if it dies or is not ready within the timeout. stop_detached sends SIGTERM, on which
`ddm up` stops its workers in order (their grace, then SIGKILL) and exits; after the timeout it kills its
process group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from ddm.ops.up.supervisor import python_module
from ddm.schema.atomic import write_text_atomic
from ddm.schema.errors import ConfigError, DDMError
from ddm.schema.names import Names

# The line `ddm up` prints once everything is ready (ops/up/bringup.py, _Running.supervise).
READY_MARK = "ddm up: ready"


def state_dir(prefix: str, environ=os.environ) -> Path:
    """The state folder of the detached bring-up under `prefix` (its name keeps '' apart from any other)."""
    Names(prefix)  # a valid prefix: it becomes a folder name
    cache = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", "~")).expanduser() / ".cache")
    return Path(cache) / "ddm" / "up" / f"prefix={prefix}"


def _alive_up(pid: int) -> bool:
    """Whether `pid` is a live `ddm up` (not a zombie, not a recycled pid of another program)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
        return False
    return b"ddm.ops.cli" in cmdline and b"up" in cmdline


def running_pid(prefix: str) -> int | None:
    """The pid of the live detached `ddm up` under `prefix`, or None (a stale pid file is removed)."""
    pid_file = state_dir(prefix) / "up.pid"
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    if _alive_up(pid):
        return pid
    pid_file.unlink(missing_ok=True)
    return None


def _tail(log: Path, n: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no output)"


def start_detached(up_args: list[str], prefix: str, timeout: float) -> dict:
    """Start `ddm up UP_ARGS` in the background; return its state once it is ready. Raises ConfigError
    when one already runs under `prefix`, DDMError (with the end of its log) when it exits or is not
    ready within `timeout` seconds (it is stopped then)."""
    folder = state_dir(prefix)
    if (pid := running_pid(prefix)) is not None:
        raise ConfigError(
            f"expected no `ddm up` under prefix {prefix!r} on this machine, found pid {pid} "
            f"(log {folder / 'up.log'}): `ddm down` first, or set another DDM_PREFIX"
        )
    folder.mkdir(parents=True, exist_ok=True)
    log_path, pid_file = folder / "up.log", folder / "up.pid"
    argv = [*python_module("ddm.ops.cli"), "up", *up_args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    write_text_atomic(pid_file, f"{proc.pid}\n")
    state = {"pid": proc.pid, "prefix": prefix, "argv": argv, "started_at": time.time()}
    write_text_atomic(folder / "up.json", json.dumps(state, indent=2) + "\n")
    t0 = time.monotonic()
    while True:
        if READY_MARK in log_path.read_text(errors="replace"):
            break
        if (rc := proc.poll()) is not None:
            pid_file.unlink(missing_ok=True)
            raise DDMError(
                f"`ddm up` exited with code {rc} before it was ready; its log {log_path}:\n{_tail(log_path)}"
            )
        if time.monotonic() - t0 > timeout:
            stop_detached(prefix, timeout=30.0)
            raise DDMError(
                f"`ddm up` not ready after {timeout:.0f} s (stopped); its log {log_path}:\n{_tail(log_path)}"
            )
        time.sleep(0.2)
    return {
        **state,
        "ready_s": round(time.monotonic() - t0, 1),
        "log": str(log_path),
        "state_dir": str(folder),
    }


def stop_detached(prefix: str, timeout: float = 60.0) -> dict:
    """Stop the detached `ddm up` under `prefix`: SIGTERM, wait up to `timeout` for it (it stops its
    workers first), then SIGKILL its process group. Nothing running is not an error (stopped: False)."""
    folder = state_dir(prefix)
    out = {"prefix": prefix, "state_dir": str(folder), "log": str(folder / "up.log")}
    pid = running_pid(prefix)
    if pid is None:
        return {**out, "pid": None, "stopped": False}
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    killed = False
    while _alive_up(pid):
        if time.monotonic() - t0 > timeout:
            os.killpg(pid, signal.SIGKILL)  # its own session: the group is the supervisor and no worker
            killed = True
            break
        time.sleep(0.2)
    (folder / "up.pid").unlink(missing_ok=True)
    return {**out, "pid": pid, "stopped": True, "killed": killed, "seconds": round(time.monotonic() - t0, 1)}


def follow_log(prefix: str, *, lines: int, follow: bool, poll_s: float = 0.5) -> int:
    """`ddm logs`: the last `lines` lines of the detached bring-up's log (all with 0), then, with
    `follow`, each new one as it is written. DDMError when this prefix never ran detached here."""
    log = state_dir(prefix) / "up.log"
    if not log.is_file():
        raise DDMError(
            f"no log of a detached `ddm up` under prefix {prefix!r} on this machine ({log}): start one with "
            "`ddm up --detach`"
        )
    with open(log, errors="replace") as f:
        text = f.read().splitlines()
        print("\n".join(text[-lines:] if lines else text), flush=True)
        while follow:
            line = f.readline()
            if line:
                print(line, end="", flush=True)
            else:
                time.sleep(poll_s)
    return 0
