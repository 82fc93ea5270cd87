"""The registry of expert architectures (workers/architectures.py): the UNet is its first record, a meta
without `architecture` is a UNet's, an unknown architecture is refused naming the known ones wherever a
name arrives, and the shipped checkpoints (written before the field) load and answer as before, bit for
bit: the velocity through load_expert equals the twin UNets' own forward pass on the stored weights."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from ddm.ops.random_experts import make_random_expert
from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.errors import ConfigError
from ddm.workers import load_expert
from ddm.workers.architectures import (
    DEFAULT_ARCHITECTURE,
    ExpertArchitecture,
    architecture_names,
    architecture_of_config,
    architectures,
    expert_architecture,
    preset_names,
)
from ddm.workers.checkpoint import architecture_of, check_expert_meta, check_resume, expert_meta, read_meta
from ddm.workers.config import PRESETS, UNET, UNetConfig
from ddm.workers.frameworks import FRAMEWORKS, TORCH, EntryPoint
from ddm.workers.training import TrainConfig, make_trainer

REPO = Path(__file__).resolve().parents[2]
# the deployments shipped before the architecture field (the later ones came with it: their cards name it)
LEGACY_SHIPPED = ("mnist", "fashion-mnist")
SHIPPED = sorted(
    p.parent for name in LEGACY_SHIPPED for p in (REPO / "checkpoints" / name).glob("expert*/meta.json")
)
PARTITION = {"id": "abc", "dataset": "synthetic", "split": "none"}
COUNTS = [1] * 10
KNOWN = ", ".join(architecture_names())


def test_the_unet_is_registered_and_the_default():
    assert DEFAULT_ARCHITECTURE == "unet" and expert_architecture("unet") is UNET
    assert UNET.config is UNetConfig and UNET.presets is PRESETS
    assert set(preset_names()) >= set(PRESETS)
    assert architecture_of_config(PRESETS["tiny"]) is UNET
    with pytest.raises(ConfigError, match="the config of a registered architecture, got 'dict'"):
        architecture_of_config({})


@pytest.mark.parametrize("name", architecture_names())
def test_every_architecture_is_written_in_known_frameworks_and_its_entry_points_resolve(name):
    record = architectures()[name]
    assert record.name == name and (set(record.presets) >= {"tiny", "small"} or not record.trainable)
    assert set(record.models) <= set(FRAMEWORKS)
    for framework, entries in record.models.items():
        assert "model" in entries, framework
        for entry in entries.values():
            assert callable(entry.resolve()), entry.target
    for preset, cfg in record.presets.items():
        assert isinstance(cfg, record.config), preset
        assert record.config_from(cfg.to_dict()) == cfg
    assert callable(record.to_flax.resolve()) and callable(record.from_flax.resolve())


def test_meta_records_the_architecture_and_a_meta_without_one_is_a_unet():
    meta = expert_meta("torch", "tiny", 0, PARTITION, COUNTS)
    assert meta["architecture"] == "unet"
    old = {k: v for k, v in meta.items() if k != "architecture"}  # written before the field
    assert architecture_of(old) is UNET and check_expert_meta(old) is TORCH


def test_an_unknown_architecture_is_refused_naming_the_known_ones(tmp_path):
    meta = expert_meta("torch", "tiny", 0, PARTITION, COUNTS)
    write_meta(tmp_path, {**meta, "architecture": "mamba"})
    (tmp_path / TORCH.weights_file).write_bytes(b"")
    refusal = rf"architecture one of {KNOWN}, got 'mamba'"
    with pytest.raises(ConfigError, match=rf"meta.json {refusal}"):
        read_meta(tmp_path)
    with pytest.raises(ConfigError, match=refusal):
        load_expert(tmp_path)
    with pytest.raises(ConfigError, match=refusal):
        expert_meta("torch", "tiny", 0, PARTITION, COUNTS, architecture="mamba")
    with pytest.raises(ConfigError, match=rf"--arch one of {KNOWN}, got 'mamba'"):
        make_trainer("torch", TrainConfig(preset="tiny"), architecture="mamba")


def test_an_architecture_not_written_in_a_framework_is_refused(monkeypatch):
    torch_only = dataclasses.replace(
        UNET, name="torchnet", models={"torch": UNET.models["torch"]}, config=type("C", (UNetConfig,), {})
    )
    monkeypatch.setattr(
        "ddm.workers.architectures.architectures", lambda: {"unet": UNET, "torchnet": torch_only}
    )
    assert isinstance(torch_only, ExpertArchitecture)
    with pytest.raises(ConfigError, match=r"written in \(\['torch'\]\), got 'jax'"):
        expert_meta("jax", "tiny", 0, PARTITION, COUNTS, architecture="torchnet")


def test_resuming_must_keep_the_architecture(tmp_path):
    meta = expert_meta("torch", "tiny", 0, PARTITION, COUNTS)
    old = {k: v for k, v in meta.items() if k != "architecture"}  # a run from before the field
    write_meta(tmp_path, old)
    (tmp_path / TORCH.train_state_file).write_bytes(b"")
    check_resume(tmp_path, meta, resume=True)  # absent = unet: the same
    with pytest.raises(ConfigError, match="same architecture"):
        check_resume(tmp_path, {**meta, "architecture": "other"}, resume=True)


def test_entry_points_name_functions_not_modules():
    assert EntryPoint("ddm.workers.config:UNET").resolve() is UNET


def _inputs(n: int = 4):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 1, 32, 32)).astype(np.float32)
    return x, np.array([0.0, 0.3, 0.7, 1.0], np.float32)[:n], np.array([0, 4, 7, 10], np.int64)[:n]


def _direct_velocity(folder: Path, meta: dict) -> np.ndarray:
    """The stored weights run by the twin UNet itself, as load_expert did before the registry."""
    x, t, y = _inputs()
    cfg = UNetConfig.from_dict(meta["config"])
    if meta["framework"] == "torch":
        import torch

        from ddm.workers.torch_expert.checkpoint import load_weights
        from ddm.workers.torch_expert.unet import UNet

        model = UNet(cfg)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in load_weights(folder).items()})
        with torch.inference_mode():
            return model.eval()(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(y)).numpy()
    import jax
    import jax.numpy as jnp

    from ddm.workers.jax_expert.checkpoint import load_weights
    from ddm.workers.jax_expert.expert import MATMUL_PRECISION
    from ddm.workers.jax_expert.unet import UNet, init_params
    from ddm.workers.layout import canonical_to_flax

    model = UNet(cfg)
    params = canonical_to_flax(load_weights(folder), init_params(model, 0))

    def apply(p, x, t, y):
        return jnp.transpose(model.apply({"params": p}, jnp.transpose(x, (0, 2, 3, 1)), t, y), (0, 3, 1, 2))

    with jax.default_matmul_precision(MATMUL_PRECISION["fp32"]):
        return np.asarray(jax.jit(apply)(params, x, t, y.astype(np.int32)))


@pytest.mark.parametrize("folder", SHIPPED, ids=[f"{p.parent.name}/{p.name}" for p in SHIPPED])
def test_shipped_checkpoints_load_unchanged(folder):
    meta = read_meta(folder)
    assert "architecture" not in meta  # written before the field: a UNet
    expert = load_expert(folder, device="cpu", buckets=(4,))
    assert expert.meta.architecture == "unet" and isinstance(expert.meta.config, UNetConfig)
    v = expert.velocity(*_inputs())
    np.testing.assert_array_equal(v, _direct_velocity(folder, meta))


def test_a_random_expert_records_its_architecture(tmp_path):
    folder = make_random_expert(tmp_path / "e", "torch", range(10))
    assert read_meta(folder)["architecture"] == "unet"
