"""A local RabbitMQ cluster for tests and demos: N nodes on this machine, joined into one cluster, each
on its own ports (AMQP and Erlang distribution), data and log folders, all with an Erlang cookie of
their own. It never touches a broker already running here: other node names (rabbit-ddm1@localhost,
...), other ports (refused if taken), its own config files (/etc/rabbitmq's are not read) and cookie.

    python -m ddm.ops.up.broker_cluster start [--nodes 3] [--base-port 5701] [--dir DIR]
    python -m ddm.ops.up.broker_cluster stop [--dir DIR]
    ddm up --broker-nodes 3     starts one, runs the deployment on it with quorum queues, stops it after

RabbitMQ's own scripts do the work (rabbitmq-server; rabbitmqctl stop_app, join_cluster, start_app).
Node i listens for AMQP on base_port + i - 1 and for the Erlang distribution on that + 20000 (the
broker's own rule: 5672 -> 25672), on 127.0.0.1 only; the nodes register with this machine's epmd.
A node's boot time is from its launch to its AMQP port answering (all nodes boot at once); memory is the
resident size of each node's beam.smp.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ddm.ops.up.broker_node import (
    DIST_OFFSET,
    Node,
    port_in_use,
    process_alive,
    process_rss,
    rabbitmq_scripts,
    tool_env,
)
from ddm.schema.errors import ConfigError, ServiceUnavailableError

DEFAULT_BASE_PORT = 5701
DEFAULT_NAME = "rabbit-ddm"
DEFAULT_FOLDER = Path(tempfile.gettempdir()) / "ddm-broker-cluster"
HOST = "localhost"
BOOT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ClusterReport:
    """What a start measured."""

    boot_s: dict[str, float]  # node -> seconds from launch to its AMQP port answering
    join_s: float  # stop_app + join_cluster + start_app on every other node, one after another
    total_s: float
    rss_bytes: dict[str, int]  # node -> resident memory of its beam.smp, after the join

    def lines(self) -> list[str]:
        boots = ", ".join(f"{n} {s:.1f} s" for n, s in self.boot_s.items())
        rss = sum(self.rss_bytes.values())
        per_node = ", ".join(f"{r / 2**20:.0f}" for r in self.rss_bytes.values())
        return [
            f"booted (all at once): {boots}",
            f"joined in {self.join_s:.1f} s; cluster up in {self.total_s:.1f} s",
            f"memory: {rss / 2**20:.0f} MiB resident in all ({per_node} MiB per node)",
        ]


class BrokerCluster:
    """N local RabbitMQ nodes joined into one cluster. start() then stop() (or a with-block)."""

    def __init__(
        self,
        nodes: int = 3,
        base_port: int = DEFAULT_BASE_PORT,
        folder: Path | str = DEFAULT_FOLDER,
        name: str = DEFAULT_NAME,
    ):
        if not 1 <= nodes <= 9:
            raise ConfigError(f"a local cluster has 1 to 9 nodes, got {nodes}")
        if not 1024 <= base_port <= 65535 - DIST_OFFSET - nodes:
            raise ConfigError(f"--base-port: expected 1024..{65535 - DIST_OFFSET - nodes}, got {base_port}")
        self.folder = Path(folder).resolve()
        self.name = name
        self.base_port = base_port
        self.nodes = [
            Node(f"{name}{i}@{HOST}", base_port + i - 1, self.folder / f"node{i}")
            for i in range(1, nodes + 1)
        ]
        self._pids: dict[str, int] = {}  # node -> its launcher (rabbitmq-server), a process group leader
        self._procs: list[subprocess.Popen] = []  # the launchers this process started (to reap them)
        self._launched_at: dict[str, float] = {}
        self._scripts: Path | None = None

    @property
    def scripts(self) -> Path:
        if self._scripts is None:
            self._scripts = rabbitmq_scripts()
        return self._scripts

    # ------------------------------------------------------------ addresses

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    @property
    def amqp_url(self) -> str:
        """DDM_AMQP_URL for this cluster: every node, comma-separated."""
        return ",".join(self.urls)

    def service_env(self) -> dict[str, str]:
        """What a ddm process needs to use this cluster."""
        return {"DDM_AMQP_URL": self.amqp_url, "DDM_QUEUE_TYPE": "quorum"}

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    # ------------------------------------------------------------ start

    def start(self) -> ClusterReport:
        """Boot every node at once, join the others to the first, check the cluster. On any failure
        every node started is stopped and its folder removed."""
        self._refuse_if_running()
        taken = [(n.name, p) for n in self.nodes for p in (n.amqp_port, n.dist_port) if port_in_use(p)]
        if taken:
            name, port = taken[0]
            raise ConfigError(
                f"port {port} (for {name}) is in use here: another broker or program holds it; pick "
                "other ports with --base-port"
            )
        t0 = time.monotonic()
        try:
            self._write_files()
            launched = {n.name: self._launch(n) for n in self.nodes}
            self._write_state()
            boot_s = self._wait_ports(launched)
            joined = time.monotonic()
            self._join_all()
            join_s = time.monotonic() - joined
            self._check_members()
        except BaseException:
            self.stop()
            raise
        rss = {n.name: process_rss(n.beam_pid() or 0) for n in self.nodes}
        return ClusterReport(boot_s, join_s, time.monotonic() - t0, rss)

    def _refuse_if_running(self) -> None:
        """An earlier cluster in this folder: refused while it runs, cleared when it is dead."""
        state = self.folder / "cluster.json"
        if not state.is_file():
            return
        earlier = BrokerCluster.from_folder(self.folder)
        running = [n.name for n in earlier.nodes if earlier._ours(n.beam_pid())]
        if running:
            raise ConfigError(
                f"a local cluster already runs from {self.folder} ({', '.join(running)}); stop it with "
                f"`python -m ddm.ops.up.broker_cluster stop --dir {self.folder}` or use another --dir"
            )
        earlier.stop()

    def _write_files(self) -> None:
        if self.folder.exists():
            shutil.rmtree(self.folder)
        self.folder.mkdir(parents=True, mode=0o700)
        cookie = self.folder / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(20).upper())
        cookie.chmod(0o400)  # Erlang refuses a cookie others may read
        (self.folder / "rabbitmq-env.conf").write_text("")
        (self.folder / "enabled_plugins").write_text("[].\n")  # no plugins: quicker boot, less memory
        for n in self.nodes:
            n.folder.mkdir()
            (n.folder / "rabbitmq.conf").write_text(
                f"listeners.tcp.1 = 127.0.0.1:{n.amqp_port}\nlog.console = false\n"
            )

    def _write_state(self) -> None:
        """What a stop from another process needs (from_folder)."""
        state = {"name": self.name, "nodes": len(self.nodes), "base_port": self.base_port}
        (self.folder / "cluster.json").write_text(json.dumps(state | {"launchers": self._pids}) + "\n")

    def _launch(self, node: Node) -> subprocess.Popen:
        out = open(node.folder / "server.log", "ab")  # noqa: SIM115 - the node's, for its lifetime
        self._launched_at[node.name] = time.monotonic()
        proc = subprocess.Popen(
            [str(self.scripts / "rabbitmq-server")],
            env=node.env(self.folder),
            cwd=node.folder,  # where Erlang drops crash dumps (erl_crash.dump, MnesiaCore.*)
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a Ctrl-C here does not reach it
        )
        out.close()
        self._pids[node.name] = proc.pid
        self._procs.append(proc)
        return proc

    def _wait_ports(self, launched: dict[str, subprocess.Popen]) -> dict[str, float]:
        """Seconds from each node's launch to its AMQP port accepting connections (polled together)."""
        boot_s: dict[str, float] = {}
        while len(boot_s) < len(self.nodes):
            for node in self.nodes:
                proc, at = launched[node.name], self._launched_at[node.name]
                if node.name in boot_s:
                    continue
                if proc.poll() is not None:
                    raise ServiceUnavailableError(
                        f"{node.name} exited with {proc.returncode}:\n{self.tail(node)}"
                    )
                if time.monotonic() > at + BOOT_TIMEOUT_S:
                    raise ServiceUnavailableError(f"{node.name} did not open its port:\n{self.tail(node)}")
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", node.amqp_port), 0.5),
                ):
                    boot_s[node.name] = time.monotonic() - at
            time.sleep(0.1)
        return {n.name: boot_s[n.name] for n in self.nodes}

    def tail(self, node: Node, lines: int = 15) -> str:
        text = ""
        for log in (node.folder / "server.log", node.folder / "log" / f"{node.name}.log"):
            with contextlib.suppress(OSError):
                text += "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    def ctl(self, node: Node | str, *args: str, timeout: float = 60.0) -> str:
        """`rabbitmqctl -n NODE ARGS` with this cluster's cookie; its stdout."""
        name = node if isinstance(node, str) else node.name
        done = subprocess.run(
            [str(self.scripts / "rabbitmqctl"), "-n", name, *args],
            env=tool_env(self.folder),
            cwd=self.folder,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise ServiceUnavailableError(
                f"rabbitmqctl -n {name} {' '.join(args)} failed ({done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-800:]}"
            )
        return done.stdout

    def _join_all(self) -> None:
        """Every other node joins the first: stop_app, join_cluster, start_app, one node at a time (two
        joining at once raced in Mnesia here: a start_app failed now and then)."""
        first = self.nodes[0].name
        for node in self.nodes[1:]:
            self.ctl(node, "stop_app")
            self.ctl(node, "join_cluster", first)
            self.ctl(node, "start_app")

    def _check_members(self) -> None:
        status = json.loads(self.ctl(self.nodes[0], "cluster_status", "--formatter", "json"))
        running = set(status.get("running_nodes", []))
        missing = [n.name for n in self.nodes if n.name not in running]
        if missing:
            raise ServiceUnavailableError(f"{', '.join(missing)} did not join the cluster: {status}")
        for n in self.nodes:  # start_app reopened their listeners
            with socket.create_connection(("127.0.0.1", n.amqp_port), 10):
                pass

    # ------------------------------------------------------------ while running

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each node's beam.smp now (0 for a node that is down)."""
        return {n.name: process_rss(n.beam_pid() or 0) for n in self.nodes}

    def leaders(self, vhost: str = "/") -> dict[str, str]:
        """Queue name -> the node that leads it (quorum queues) or hosts it (classic), asked of a live
        node."""
        live = next(n for n in self.nodes if self._ours(n.beam_pid()))
        out = self.ctl(live, "list_queues", "-p", vhost, "name", "leader", "--formatter", "json", "-q")
        return {q["name"]: q["leader"] for q in json.loads(out)}

    def kill9(self, node: Node | str) -> None:
        """SIGKILL a node's Erlang VM: the host is gone, no goodbye to its peers or clients."""
        node = self.node(node) if isinstance(node, str) else node
        pid = node.beam_pid()
        if not self._ours(pid):
            raise ServiceUnavailableError(f"{node.name} is not running")
        os.kill(pid, signal.SIGKILL)

    # ------------------------------------------------------------ stop

    @classmethod
    def from_folder(cls, folder: Path | str = DEFAULT_FOLDER) -> BrokerCluster:
        """The cluster a start() left in `folder` (for a stop from another process)."""
        folder = Path(folder).resolve()
        try:
            state = json.loads((folder / "cluster.json").read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"no local cluster in {folder} ({exc})") from None
        cluster = cls(state["nodes"], state["base_port"], folder, state["name"])
        cluster._pids = {k: int(v) for k, v in state.get("launchers", {}).items()}
        return cluster

    def _ours(self, pid: int | None) -> bool:
        """pid is alive and one of this cluster's processes (its environment names our folder), so a
        reused pid or another broker is never signalled."""
        if not process_alive(pid):
            return False
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return False
        return f"HOME={self.folder}".encode() in environ

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM each node's process group (the launcher stops its node cleanly), SIGKILL what is
        left after grace_s, then remove the folder. Safe to call twice, or after a failed start."""
        groups = [pid for pid in self._pids.values() if self._ours(pid)]
        beams = [pid for n in self.nodes if self._ours(pid := n.beam_pid())]
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while any(self._ours(p) for p in beams + groups) and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.1)
        for pid in beams + groups:
            if self._ours(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self._reap(wait=True)
        self._pids.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _reap(self, wait: bool = False) -> None:
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5) if wait else proc.poll()

    def __enter__(self) -> BrokerCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ddm.ops.up.broker_cluster", description=__doc__.split("\n")[0]
    )
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--nodes", type=int, default=3, help="nodes (default 3)")
    parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT, help="AMQP port of node 1")
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_FOLDER, help=f"data folder (default {DEFAULT_FOLDER})"
    )
    args = parser.parse_args(argv)
    try:
        if args.action == "stop":
            BrokerCluster.from_folder(args.dir).stop()
            print(f"stopped the cluster in {args.dir}")
            return 0
        cluster = BrokerCluster(args.nodes, args.base_port, args.dir)
        report = cluster.start()
    except (ConfigError, ServiceUnavailableError) as exc:
        print(f"broker cluster: error: {exc}", file=sys.stderr)
        return 2
    for line in [*report.lines(), *(f"export {k}='{v}'" for k, v in cluster.service_env().items())]:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
