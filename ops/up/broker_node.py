"""One node of a local RabbitMQ cluster (ops/up/broker_cluster.py): its name, ports, folder and the
environment RabbitMQ's own scripts run it with; and the few process facts the cluster reads from /proc.
"""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.errors import ConfigError

DIST_OFFSET = 20000
# Debian's /usr/sbin scripts switch to the rabbitmq user (and its HOME, so its cookie); these run as us
DEBIAN_SCRIPTS = Path("/usr/lib/rabbitmq/bin")


def rabbitmq_scripts() -> Path:
    """The folder of rabbitmq-server and rabbitmqctl."""
    if (DEBIAN_SCRIPTS / "rabbitmq-server").is_file():
        return DEBIAN_SCRIPTS
    found = shutil.which("rabbitmq-server")
    if found is None:
        raise ConfigError(
            "rabbitmq-server is not installed here (apt-get install rabbitmq-server); or run three "
            "nodes in containers: docker compose --profile ha up -d"
        )
    return Path(found).resolve().parent


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def process_rss(pid: int) -> int:
    """Resident memory of a process (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def process_alive(pid: int | None) -> bool:
    """pid runs (a zombie, dead but not yet reaped, does not count)."""
    if not pid:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@dataclass(frozen=True)
class Node:
    """One node: its name, AMQP port and folder (data, logs, config, pid file)."""

    name: str  # rabbit-ddm1@localhost
    amqp_port: int
    folder: Path

    @property
    def dist_port(self) -> int:
        return self.amqp_port + DIST_OFFSET

    @property
    def url(self) -> str:
        # guest may log in from loopback only, which is all this cluster listens on
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/%2F"

    @property
    def pid_file(self) -> Path:
        return self.folder / "beam.pid"

    def beam_pid(self) -> int | None:
        """The node's Erlang VM (written by the broker once it boots)."""
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def env(self, home: Path) -> dict[str, str]:
        """The environment rabbitmq-server runs this node with."""
        return {
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(self.folder / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.folder / "advanced.config"),  # absent: none
            "RABBITMQ_MNESIA_BASE": str(self.folder / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.folder / "log"),
            "RABBITMQ_PID_FILE": str(self.pid_file),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            **tool_env(home),
        }


def tool_env(home: Path) -> dict[str, str]:
    """What the broker's scripts need for this cluster alone: its cookie (in HOME), no /etc env file."""
    return {
        **os.environ,
        "HOME": str(home),
        "RABBITMQ_CONF_ENV_FILE": str(home / "rabbitmq-env.conf"),
        "ERL_EPMD_ADDRESS": "127.0.0.1",  # if epmd is not running yet, the one started here stays local
    }
