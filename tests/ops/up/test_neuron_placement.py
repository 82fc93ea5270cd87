"""`ddm up` on a Trainium / Inferentia2 host: one worker per NeuronCore, each told its own core.

The Neuron runtime gives every core it can see to the first process that opens it; so every worker of
an expert whose deployment device is neuron gets NEURON_RT_VISIBLE_CORES (a counter over all the neuron
workers of one `ddm up`), and a neuron expert without --replicas gets one worker per core of a device.
Nothing is started here: build_children only builds the child specs.
"""

from __future__ import annotations

import re

import pytest

from ddm.ops.up.bringup import (
    NEURON_CORES_PER_DEVICE,
    UpOptions,
    build_children,
    default_replicas,
    neuron_core_env,
    parse_core_list,
    parse_replicas,
)
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError
from tests.support.fakes import write_fake_deployment

# expert 0 and 2: PyTorch on neuron; expert 1: JAX on the CPU
EXPERTS = (("e0", "torch", range(0, 4)), ("e1", "jax", range(4, 7)), ("e2", "torch", range(7, 10)))
DEVICES = ("neuron", "cpu", "neuron")


def neuron_deployment(tmp_path, devices=DEVICES) -> Deployment:
    path = write_fake_deployment(tmp_path, EXPERTS)
    blocks = path.read_text().split("[[experts]]")  # [header, expert 0, expert 1, ...]
    for k, device in enumerate(devices):
        blocks[k + 1] = blocks[k + 1].replace('device = "cpu"', f'device = "{device}"')
    path.write_text("[[experts]]".join(blocks))
    deployment = Deployment.load(path)
    assert [e.device for e in deployment.experts] == list(devices)
    return deployment


def expert_envs(children) -> dict[str, dict[str, str]]:
    return {spec.name: dict(spec.env or {}) for spec, role, _ in children if role == "expert"}


def cores_of(children) -> dict[str, str | None]:
    return {name: env.get("NEURON_RT_VISIBLE_CORES") for name, env in expert_envs(children).items()}


def test_a_neuron_expert_gets_one_worker_per_core_of_a_device(tmp_path):
    deployment = neuron_deployment(tmp_path)
    assert NEURON_CORES_PER_DEVICE == 2  # a trn1 or inf2 device
    defaults = default_replicas(deployment)
    assert defaults == {0: 2, 1: 1, 2: 2}
    assert parse_replicas([], 3, defaults) == {0: 2, 1: 1, 2: 2}
    assert parse_replicas(["0=1", "1=3"], 3, defaults) == {0: 1, 1: 3, 2: 2}  # --replicas wins
    assert default_replicas(deployment, cores_per_device=8) == {0: 8, 1: 1, 2: 8}  # e.g. a trn2 device
    assert UpOptions().neuron_cores_per_device == NEURON_CORES_PER_DEVICE
    with pytest.raises(ConfigError, match="NeuronCores per device"):
        default_replicas(deployment, cores_per_device=0)
    assert default_replicas(neuron_deployment(tmp_path / "cpu", ("cpu", "cpu", "cpu"))) == {0: 1, 1: 1, 2: 1}


def test_every_neuron_worker_gets_its_own_core_across_experts(tmp_path):
    deployment = neuron_deployment(tmp_path)
    replicas = parse_replicas([], 3, default_replicas(deployment))
    children = build_children(deployment, replicas, UpOptions(), environ={})
    assert cores_of(children) == {
        "up-e0-0": "0",
        "up-e0-1": "1",
        "up-e1-0": None,  # the CPU expert: no core, and no NEURON_RT_VISIBLE_CORES at all
        "up-e2-0": "2",  # the next device's cores: two neuron experts never share one
        "up-e2-1": "3",
    }
    envs = expert_envs(children)
    assert all(env["OMP_NUM_THREADS"] for env in envs.values())  # the thread rule still applies
    (router,) = [spec for spec, role, _ in children if role == "router"]
    assert "NEURON_RT_VISIBLE_CORES" not in (router.env or {})
    # the argv is the same as on the CPU: the worker reads its device from the deployment
    argv = " ".join(children[1][0].argv)
    assert re.search(r"--expert 0 --worker-id up-e0-1$", argv), argv


def test_the_cores_the_user_made_visible_are_shared_out(tmp_path):
    deployment = neuron_deployment(tmp_path)
    environ = {"NEURON_RT_VISIBLE_CORES": "4-5,8,9", "OMP_NUM_THREADS": "3"}
    children = build_children(deployment, {0: 2, 1: 1, 2: 2}, UpOptions(), environ=environ)
    assert cores_of(children) == {
        "up-e0-0": "4",
        "up-e0-1": "5",
        "up-e1-0": None,
        "up-e2-0": "8",
        "up-e2-1": "9",
    }
    assert "OMP_NUM_THREADS" not in expert_envs(children)["up-e0-0"]  # the user's setting is kept
    assert expert_envs(children)["up-e1-0"] == {}
    with pytest.raises(ConfigError, match="naming 4 NeuronCores, one per neuron worker"):
        build_children(
            deployment, {0: 2, 1: 1, 2: 2}, UpOptions(), environ={"NEURON_RT_VISIBLE_CORES": "0-2"}
        )


def test_core_lists():
    assert parse_core_list("0") == [0]
    assert parse_core_list("0-3") == [0, 1, 2, 3]
    assert parse_core_list("4,5") == [4, 5]
    assert parse_core_list("0-1, 6") == [0, 1, 6]
    for bad in ("", "a", "3-1", "0-", "-1", "0,,1", "0-1,1"):
        with pytest.raises(ConfigError, match="NEURON_RT_VISIBLE_CORES"):
            parse_core_list(bad)
    assert neuron_core_env(0, environ={}) == []
    assert neuron_core_env(2, environ={}) == [
        {"NEURON_RT_VISIBLE_CORES": "0"},
        {"NEURON_RT_VISIBLE_CORES": "1"},
    ]
