"""A simulated host: a Linux network namespace joined to the root namespace by a veth pair.

    with Namespace() as ns:               # ns.isolated is False (and a warning logged) on fallback
        proxy listens on (ns.root_ip, port)    # the root side of the veth, e.g. 10.213.7.1
        subprocess.run([*ns.exec_prefix, "python", ...])   # runs inside; reaches ns.root_ip only

Addresses come from a /30 of 10.213.0.0/16 that no interface uses; nothing is routed or forwarded,
so a process inside reaches only its own loopback and the root side of its veth. Everything is
removed on exit, also on exceptions. Names carry the creating pid, so parallel runs never collide and
a later run removes the namespaces of runs that died (sweep_stale). Without root, without `ip`, or
when creation fails, the namespace falls back to loopback: root_ip = inner_ip = 127.0.0.1, an empty
exec_prefix, isolated = False and `fallback_reason` says why.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import time

log = logging.getLogger(__name__)
IP = "ip"
POOL = ipaddress.ip_network("10.213.0.0/16")
NAME_RE = re.compile(r"ddm-ns-(\d+)-[0-9a-f]{6}")
LOOPBACK = "127.0.0.1"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([IP, *args], capture_output=True, text=True, check=check, timeout=20)


def list_namespaces() -> list[str]:
    """Names from `ip netns list` (empty when `ip` is missing or fails)."""
    try:
        out = _ip("netns", "list").stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def sweep_stale() -> list[str]:
    """Delete namespaces this module made in runs whose process is gone; returns their names."""
    removed = []
    for name in list_namespaces():
        m = NAME_RE.fullmatch(name)
        if m and not _pid_alive(int(m.group(1))):
            _ip("netns", "del", name, check=False)
            removed.append(name)
    if removed:
        log.warning("removed namespaces left by dead runs: %s", ", ".join(removed))
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def unavailable() -> str | None:
    """Why this process cannot make namespaces (None: it can try)."""
    if os.geteuid() != 0:
        return "not root"
    if shutil.which(IP) is None:
        return f"no `{IP}` command"
    return None


def _free_subnet() -> ipaddress.IPv4Network:
    """A /30 of POOL that no interface has an address in (random: parallel runs rarely draw alike)."""
    used = set(re.findall(r"inet (10\.213\.\d+\.\d+)", _ip("-o", "-4", "addr", "show").stdout))
    subnets = list(POOL.subnets(new_prefix=30))
    for _ in range(100):
        net = random.choice(subnets)
        if not any(ipaddress.ip_address(a) in net for a in used):
            return net
    raise RuntimeError(f"no free /30 in {POOL}")


class Namespace:
    """A network namespace with a veth pair to the root namespace (or the loopback fallback)."""

    def __init__(self, isolate: bool = True):
        self.isolate = isolate
        self.isolated = False
        self.fallback_reason: str | None = None
        self.name: str | None = None
        self.root_ip = self.inner_ip = LOOPBACK

    @property
    def exec_prefix(self) -> list[str]:
        """Put this in front of a command line to run it inside the namespace."""
        return [IP, "netns", "exec", self.name] if self.isolated else []

    def run(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([*self.exec_prefix, *argv], **kwargs)

    def __enter__(self) -> Namespace:
        reason = "asked for loopback (isolate=False)" if not self.isolate else unavailable()
        if reason is None:
            try:
                self._create()
                self.isolated = True
            except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
                detail = getattr(exc, "stderr", None) or exc
                reason = f"creating a namespace failed: {str(detail).strip()}"
                self._remove()
        if reason is not None:
            self.fallback_reason = reason
            self.root_ip = self.inner_ip = LOOPBACK
            log.warning("netsim: no network namespace (%s); falling back to loopback", reason)
        return self

    def __exit__(self, *exc) -> None:
        self._remove()

    def _create(self) -> None:
        sweep_stale()
        token = secrets.token_hex(3)
        self.name = f"ddm-ns-{os.getpid()}-{token}"
        self._veth = f"vd{token}r"  # at most 15 characters (IFNAMSIZ)
        inner_veth = f"vd{token}n"
        net = _free_subnet()
        root, inner = list(net.hosts())
        _ip("netns", "add", self.name)
        # one command creates both ends with the inner one already inside: no half-made pair to leak
        _ip("link", "add", self._veth, "type", "veth", "peer", "name", inner_veth, "netns", self.name)
        _ip("addr", "add", f"{root}/30", "dev", self._veth)
        _ip("link", "set", self._veth, "up")
        _ip("-n", self.name, "addr", "add", f"{inner}/30", "dev", inner_veth)
        _ip("-n", self.name, "link", "set", inner_veth, "up")
        _ip("-n", self.name, "link", "set", "lo", "up")
        self.root_ip, self.inner_ip = str(root), str(inner)
        log.info("netsim: namespace %s at %s, root side %s", self.name, self.inner_ip, self.root_ip)

    def _remove(self) -> None:
        """Stop what still runs inside (our own children), delete the namespace and the veth pair."""
        if self.name is None:
            return
        self._stop_leftovers()
        _ip("netns", "del", self.name, check=False)
        _ip("link", "del", self._veth, check=False)  # gone with its peer already, unless made half-way
        self.name, self.isolated = None, False

    def _stop_leftovers(self, grace_s: float = 5.0) -> None:
        """A namespace lives on while a process is in it: SIGTERM the ones still there (each was
        started inside this fresh namespace by us), SIGKILL after grace_s."""
        pids = self._pids()
        if not pids:
            return
        log.warning("netsim: processes %s still in %s; stopping them", pids, self.name)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + grace_s
            while (pids := self._pids()) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not pids:
                return

    def _pids(self) -> list[int]:
        out = _ip("netns", "pids", self.name, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]
