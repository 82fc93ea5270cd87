"""The local RabbitMQ cluster's plan and its refusals, without booting a node (the cluster itself runs
in tests/pipeline/test_cluster.py): names, ports and files of its own, a taken port refused before
anything starts, and never a signal to a process that is not one of its nodes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ddm.ops.cli import build_parser
from ddm.ops.up.bringup import UpOptions, run_up
from ddm.ops.up.broker_cluster import BrokerCluster
from ddm.ops.up.broker_node import port_in_use
from ddm.schema.errors import ConfigError
from ddm.schema.settings import Settings


def test_names_ports_and_settings(tmp_path):
    cluster = BrokerCluster(3, 5701, tmp_path / "c", "rabbit-ddm")
    assert [n.name for n in cluster.nodes] == [f"rabbit-ddm{i}@localhost" for i in (1, 2, 3)]
    assert [(n.amqp_port, n.dist_port) for n in cluster.nodes] == [
        (5701, 25701),
        (5702, 25702),
        (5703, 25703),
    ]
    env = cluster.service_env()
    assert env["DDM_QUEUE_TYPE"] == "quorum"
    settings = Settings.from_env(env)  # a setting every process accepts
    assert settings.amqp_urls == tuple(f"amqp://guest:guest@127.0.0.1:{p}/%2F" for p in (5701, 5702, 5703))


def test_a_node_reads_only_its_own_files(tmp_path):
    cluster = BrokerCluster(3, 5701, tmp_path / "c")
    env = cluster.nodes[1].env(cluster.folder)
    own = [
        "HOME",  # the cookie
        "RABBITMQ_CONF_ENV_FILE",  # not /etc/rabbitmq/rabbitmq-env.conf (the system node's name)
        "RABBITMQ_CONFIG_FILE",  # not /etc/rabbitmq/rabbitmq.conf (its listener on 5672)
        "RABBITMQ_ADVANCED_CONFIG_FILE",
        "RABBITMQ_MNESIA_BASE",
        "RABBITMQ_LOG_BASE",
        "RABBITMQ_PID_FILE",
        "RABBITMQ_ENABLED_PLUGINS_FILE",
    ]
    for var in own:
        assert Path(env[var]).is_relative_to(cluster.folder), var
    assert env["RABBITMQ_NODENAME"] == "rabbit-ddm2@localhost" and env["RABBITMQ_DIST_PORT"] == "25702"


def test_a_taken_port_is_refused_before_anything_starts(tmp_path):
    base = next(b for b in range(7301, 7400, 2) if not port_in_use(b) and not port_in_use(b + 1))
    with socket.socket() as s:
        s.bind(("127.0.0.1", base + 1))  # node 2's AMQP port
        s.listen()
        cluster = BrokerCluster(2, base, tmp_path / "c")
        with pytest.raises(ConfigError, match=rf"port {base + 1} \(for rabbit-ddm2@localhost\) is in use"):
            cluster.start()
    assert not cluster.folder.exists()


def test_the_system_broker_is_never_ours(tmp_path):
    """Whatever broker runs here already (the system one on 5672): its port is refused, and no pid of
    another beam.smp counts as one of the cluster's (stop and kill9 only signal their own)."""
    cluster = BrokerCluster(1, 5672, tmp_path / "c")
    if port_in_use(5672):
        with pytest.raises(ConfigError, match="port 5672"):
            cluster.start()
    beams = [p for p in Path("/proc").glob("[0-9]*") if (p / "comm").is_file() and _comm(p) == "beam.smp"]
    assert not any(cluster._ours(int(p.name)) for p in beams)
    cluster.stop()  # nothing started: nothing signalled, the folder removed


def _comm(proc: Path) -> str:
    try:
        return (proc / "comm").read_text().strip()
    except OSError:
        return ""


@pytest.mark.parametrize("nodes, base_port", [(0, 5701), (10, 5701), (3, 80), (3, 65000)])
def test_bad_sizes_and_ports(tmp_path, nodes, base_port):
    with pytest.raises(ConfigError):
        BrokerCluster(nodes, base_port, tmp_path)


def test_stop_needs_a_cluster_folder(tmp_path):
    with pytest.raises(ConfigError, match="no local cluster"):
        BrokerCluster.from_folder(tmp_path)


def test_ddm_up_broker_nodes(tmp_path):
    args = build_parser(["up", "--broker-nodes", "3"]).parse_args(["up", "--broker-nodes", "3"])
    assert args.broker_nodes == 3
    assert build_parser(["up"]).parse_args(["up"]).broker_nodes == 0  # off: DDM_AMQP_URL as before
    with pytest.raises(ConfigError, match="--broker-nodes in 3..9"):
        run_up(UpOptions(broker_nodes=2))  # refused before a node starts
