"""A small process supervisor for `ddm up`: start children, restart the ones that die, stop them all.

    sup = Supervisor([ChildSpec("up-e0-0", (*python_module("ddm.ops.cli"), "worker", ...)), ...])
    sup.start()
    while running:
        sup.poll()          # reaps dead children, restarts them after a backoff
        time.sleep(0.5)
    sup.stop()              # SIGTERM to each child's process group, grace period, then SIGKILL

Each child runs in its own session (process group), so a Ctrl-C in the terminal reaches only the
supervisor, which then stops the children in order instead of all of them dying at once. Restarts back
off exponentially (min_backoff_s doubling up to max_backoff_s); a child that ran for stable_s before
dying starts again from the minimum. Output: with `output` set, the children's stdout and stderr are
merged and copied line by line to it, each line prefixed with the child's name; the last lines of
each child are kept in Child.tail for error reports.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TextIO

log = logging.getLogger(__name__)
MAX_START_FAILURES = 3  # a child that dies this often before it is ready aborts a bring-up


def python_module(module: str) -> tuple[str, ...]:
    """argv that runs `module` with this interpreter, the working folder left off sys.path (-P, Python
    3.11+): `python -m` puts it first, and `ddm up` run from the repository root would then import the
    checkout's thin ddm/ folder (no ddm.ops in it) instead of the installed package, and every child
    would die with "No module named 'ddm.ops'". An editable install finds the checkout without it."""
    return (sys.executable, "-P", "-m", module)


@dataclass(frozen=True)
class ChildSpec:
    """What to run: argv, extra environment variables (merged onto ours), working directory."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] | None = None
    cwd: str | None = None


@dataclass
class Child:
    """A supervised child's state. `proc` is None while it waits for a restart."""

    spec: ChildSpec
    proc: subprocess.Popen | None = None
    started_at: float = 0.0  # time.monotonic() of the latest start
    starts: int = 0
    failures: int = 0  # consecutive deaths that came sooner than stable_s after a start
    restart_at: float | None = None  # monotonic time of the scheduled restart
    last_rc: int | None = None
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=40))
    reader: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def restarts(self) -> int:
        return max(0, self.starts - 1)


def stop_processes(procs, grace_s: float) -> None:
    """SIGTERM every process still running, wait up to grace_s for all of them, SIGKILL the rest."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exited with code {rc}"


class Supervisor:
    def __init__(
        self,
        specs: Iterable[ChildSpec],
        *,
        grace_s: float = 10.0,
        min_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        stable_s: float = 30.0,
        stop_signal: int = signal.SIGTERM,
        output: TextIO | None = None,
    ):
        self.children: dict[str, Child] = {}
        for spec in specs:
            if spec.name in self.children:
                raise ValueError(f"two children named {spec.name!r}")
            self.children[spec.name] = Child(spec)
        self.grace_s = grace_s
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s
        self.stable_s = stable_s
        self.stop_signal = stop_signal
        self.output = output
        self._out_lock = threading.Lock()
        self._width = max((len(n) for n in self.children), default=0)
        self._stopping = False

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start every child that is not running."""
        self._stopping = False
        for child in self.children.values():
            if not child.running:
                self._spawn(child)

    def poll(self) -> list[tuple[str, int]]:
        """Reap children that exited (scheduling their restart) and restart those whose backoff is over.

        Returns [(name, exit code)] of the children that exited since the last call.
        """
        exited = []
        now = time.monotonic()
        for child in self.children.values():
            if child.proc is not None and (rc := child.proc.poll()) is not None:
                exited.append((child.name, rc))
                self._reap(child, rc, now)
            if (
                not self._stopping
                and child.proc is None
                and child.restart_at is not None
                and now >= child.restart_at
            ):
                log.warning("restarting %s (restart #%d)", child.name, child.starts)
                self._spawn(child)
        return exited

    def stop(self, grace_s: float | None = None) -> dict[str, int | None]:
        """Stop every child: stop_signal to its process group, wait up to grace_s, then SIGKILL.

        Returns {name: exit code} (None for a child that was not running). No restarts happen after this.
        """
        self._stopping = True
        grace = self.grace_s if grace_s is None else grace_s
        alive = [c for c in self.children.values() if c.running]
        for child in alive:
            self._signal(child, self.stop_signal)
        deadline = time.monotonic() + grace
        for child in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        for child in alive:
            if child.proc.poll() is None:
                log.warning("%s did not stop within %.1f s; sending SIGKILL", child.name, grace)
                self._signal(child, signal.SIGKILL)
                child.proc.wait()
        codes: dict[str, int | None] = {}
        for child in self.children.values():
            codes[child.name] = child.proc.returncode if child.proc is not None else None
            if child.reader is not None:
                child.reader.join(timeout=1.0)  # it closes the pipe at EOF
            child.last_rc = codes[child.name] if codes[child.name] is not None else child.last_rc
            child.proc, child.restart_at = None, None
        return codes

    def pids(self) -> dict[str, int | None]:
        return {name: c.pid for name, c in self.children.items()}

    # ------------------------------------------------------------ internals

    def _spawn(self, child: Child) -> None:
        env = None
        if child.spec.env:
            env = {**os.environ, **child.spec.env}
        piped = self.output is not None
        child.proc = subprocess.Popen(
            list(child.spec.argv),
            env=env,
            cwd=child.spec.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if piped else None,
            stderr=subprocess.STDOUT if piped else None,
            start_new_session=True,  # its own process group: Ctrl-C reaches only us; killpg reaches all
            text=piped,
            bufsize=1 if piped else -1,
            errors="replace" if piped else None,
        )
        child.started_at = time.monotonic()
        child.starts += 1
        child.restart_at = None
        log.info("started %s (pid %d)", child.name, child.proc.pid)
        if piped:
            child.reader = threading.Thread(
                target=self._copy_output,
                args=(child, child.proc.stdout),
                name=f"out-{child.name}",
                daemon=True,
            )
            child.reader.start()

    def _reap(self, child: Child, rc: int, now: float) -> None:
        ran = now - child.started_at
        child.last_rc = rc
        if child.reader is not None:
            # EOF comes right after exit, unless a grandchild still holds the pipe: then the
            # daemon reader keeps copying its output and closes the pipe when it ends.
            child.reader.join(timeout=0.5)
        child.proc, child.reader = None, None
        if self._stopping:
            return
        child.failures = child.failures + 1 if ran < self.stable_s else 1
        delay = min(self.max_backoff_s, self.min_backoff_s * 2 ** (child.failures - 1))
        child.restart_at = now + delay
        log.warning("%s %s after %.1f s; restarting in %.1f s", child.name, describe_exit(rc), ran, delay)

    def _signal(self, child: Child, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.proc.pid, sig)  # pid == pgid: start_new_session made it a group leader

    def _copy_output(self, child: Child, stream) -> None:
        prefix = f"{child.name:<{self._width}} | "
        try:
            for line in stream:
                line = line.rstrip("\n")
                child.tail.append(line)
                with self._out_lock, contextlib.suppress(ValueError, OSError):
                    # our output may be gone (closed terminal); keep draining so the child never blocks
                    self.output.write(prefix + line + "\n")
                    self.output.flush()
        except (ValueError, OSError):
            pass
        finally:
            stream.close()
