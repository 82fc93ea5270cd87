"""The registry of expert frameworks (workers/frameworks.py): importing it imports no framework, every
entry point resolves, an unknown framework is refused naming the known ones wherever a name arrives
(meta.json, the meta builder, load_expert), and the install extras follow the records."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from ddm.ops.doctor.packages import needed_extras
from ddm.ops.extras import EXTRA_OF_MODULE
from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.errors import ConfigError
from ddm.workers import load_expert
from ddm.workers.checkpoint import check_expert_meta, config_of, expert_meta, read_meta
from ddm.workers.config import get_preset
from ddm.workers.frameworks import FRAMEWORKS, TORCH, EntryPoint, expert_framework, framework_names

PARTITION = {"id": "abc", "dataset": "synthetic", "split": "none"}
COUNTS = [1] * 5 + [0] * 5
KNOWN = ", ".join(framework_names())  # "jax, torch"
REFUSAL = rf"framework one of {KNOWN}, got 'mlx'"


def test_importing_the_registry_imports_no_framework():
    # a fresh interpreter: this one has imported torch and jax for other tests
    code = (
        "import sys; import ddm.workers, ddm.workers.frameworks, ddm.workers.checkpoint, ddm.ops.extras, "
        "ddm.ops.doctor.files, ddm.ops.doctor.packages; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'jax', 'flax', 'safetensors'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_every_entry_point_resolves_to_a_function(name):
    record = FRAMEWORKS[name]
    assert record.name == name and record.weights_file != record.train_state_file
    points = [getattr(record, f.name) for f in dataclasses.fields(record)]
    points = [p for p in points if isinstance(p, EntryPoint)]
    assert len(points) == 5
    for point in points:
        assert callable(point.resolve()), point.target


def test_an_unknown_framework_in_meta_json_is_refused_naming_the_known_ones(tmp_path):
    meta = expert_meta("torch", "tiny", 0, PARTITION, COUNTS)
    write_meta(tmp_path, {**meta, "framework": "mlx"})  # the schema's record holds any framework name
    (tmp_path / TORCH.weights_file).write_bytes(b"")
    with pytest.raises(ConfigError, match=rf"meta.json framework one of {KNOWN}, got 'mlx'"):
        read_meta(tmp_path)
    with pytest.raises(ConfigError, match=REFUSAL):
        load_expert(tmp_path)
    with pytest.raises(ConfigError, match=REFUSAL):
        config_of({**meta, "framework": "mlx"})
    with pytest.raises(ConfigError, match=REFUSAL):
        expert_meta("mlx", "tiny", 0, PARTITION, COUNTS)


def test_the_framework_checks_its_config():
    meta = expert_meta("jax", "tiny", 3, PARTITION, COUNTS, "cpu", steps=0)
    assert check_expert_meta(meta) is FRAMEWORKS["jax"]
    assert config_of(meta) == get_preset("tiny")
    assert meta["classes"] == [0, 1, 2, 3, 4] and meta["device"] == "cpu" and meta["steps"] == 0
    with pytest.raises(ConfigError, match=r"here/meta.json: expected UNetConfig fields .*'channels'"):
        check_expert_meta({**meta, "config": {"channels": 16}}, "here/meta.json")
    with pytest.raises(ConfigError, match="a unet preset in"):
        expert_meta("jax", "huge", 0, PARTITION, COUNTS)
    with pytest.raises(TypeError, match="built here"):
        expert_meta("jax", "tiny", 0, PARTITION, COUNTS, kind="router")


def test_expert_framework_names_where_the_name_came_from():
    assert expert_framework("torch") is TORCH
    with pytest.raises(ConfigError, match=rf"expected --to one of {KNOWN}, got None"):
        expert_framework(None, "--to")


def test_the_install_extras_follow_the_records(monkeypatch):
    for record in FRAMEWORKS.values():
        assert {m: EXTRA_OF_MODULE[m] for m in record.modules} == dict.fromkeys(record.modules, record.extra)
    # a framework whose extra is not its name: the doctor asks for the extra
    monkeypatch.setitem(FRAMEWORKS, "mlx", dataclasses.replace(TORCH, name="mlx", extra="apple"))
    assert "mlx" in framework_names()
    assert needed_extras("expert", {0: "mlx", 1: "jax"}, None) == {"apple", "jax"}
