"""The twin DiTs (workers/dit/): one canonical layout in both frameworks, parity within 1e-4 through
load_expert, exact conversion torch -> jax -> torch, adaLN-Zero's zero start, one training step per
framework on the tiny preset, and an expert worker serving a DiT from a deployment (real RabbitMQ)."""

from __future__ import annotations

import math
import threading
from functools import partial
from pathlib import Path

import jax
import numpy as np
import pytest
import torch

from ddm.ops.random_experts import make_random_expert
from ddm.schema.checkpoint_meta import write_meta
from ddm.schema.errors import ConfigError
from ddm.schema.flow import NULL_CLASS
from ddm.schema.settings import Settings
from ddm.workers import load_expert
from ddm.workers.architectures import architecture_names, expert_architecture
from ddm.workers.checkpoint import expert_meta, read_meta
from ddm.workers.convert import convert
from ddm.workers.dit.config import PRESETS, DiTConfig
from ddm.workers.dit.flax_model import DiT as FlaxDiT
from ddm.workers.dit.flax_model import init_params
from ddm.workers.dit.layout import canonical_shapes, parameter_count, pos_embed_2d
from ddm.workers.dit.torch_model import DiT as TorchDiT
from ddm.workers.frameworks import FRAMEWORKS
from ddm.workers.layout import flax_to_canonical
from ddm.workers.training import TrainConfig, make_trainer, train_loop
from ddm.workers.worker import ExpertWorker
from tests.support.fakes import write_deployment

TOLERANCE = 1e-4
PARTITION = {"id": "dit", "dataset": "synthetic", "split": "none"}
COUNTS = [10] * 10
# the counts workers/dit/config.py's docstring gives
PARAMS = {"tiny": 181_136, "small": 1_275_408, "base": 32_469_508}


def flax_shapes(cfg: DiTConfig) -> dict[str, tuple[int, ...]]:
    """The Flax twin's parameters in the canonical layout, by shape (traced, not run)."""
    shapes = jax.eval_shape(partial(init_params, FlaxDiT(cfg), 0))
    zeros = jax.tree_util.tree_map(lambda s: np.zeros(s.shape, np.float32), shapes)
    return {k: v.shape for k, v in flax_to_canonical(zeros).items()}


def randomized(cfg: DiTConfig, seed: int = 1) -> dict[str, np.ndarray]:
    """Canonical weights with every parameter random, the adaLN modulations and the final layer too (at
    their zero init the output is exactly 0 and parity would be trivial). N(0, 1/fan_in) keeps the
    activations O(1)."""
    model = TorchDiT(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if name.startswith("y_embed"):
                p.copy_(noise)
            elif p.ndim >= 2:
                p.copy_(noise / math.sqrt(p[0].numel()))
            else:
                p.copy_(0.1 * noise)
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def write_expert(folder: Path, framework: str, preset: str, canonical: dict[str, np.ndarray]) -> Path:
    meta = expert_meta(framework, preset, 0, PARTITION, COUNTS, steps=0, architecture="dit")
    folder.mkdir(parents=True)
    FRAMEWORKS[framework].save_canonical(folder, canonical, PRESETS[preset])
    write_meta(folder, meta)
    return folder


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 1, 32, 32)).astype(np.float32)
    t = np.array([0.0, 0.37, 0.81, 1.0], np.float32)
    y = np.array([0, 3, 9, NULL_CLASS], np.int64)
    guidance = np.array([1.0, 2.5, 1.0, 1.0], np.float32)  # one guided row: its null twin rides along
    return x, t, y, guidance


def test_registered_beside_the_unet():
    assert {"dit", "unet"} <= set(architecture_names())  # beside the others (diffusers-dit, ...)
    record = expert_architecture("dit")
    assert record.config is DiTConfig and set(record.models) == {"torch", "jax"}
    assert record.preset("tiny") == PRESETS["tiny"]
    with pytest.raises(ConfigError, match="a dit preset in"):
        expert_meta("torch", "huge", 0, PARTITION, COUNTS, architecture="dit")
    with pytest.raises(ConfigError, match="image_size a multiple of patch_size 5"):
        DiTConfig(patch_size=5)
    with pytest.raises(ConfigError, match="DiTConfig fields"):
        DiTConfig.from_dict({"channels": 3})


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_one_layout_in_both_frameworks(preset):
    cfg = PRESETS[preset]
    model = TorchDiT(cfg)
    torch_shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}  # no buffers: the table is not
    assert torch_shapes == canonical_shapes(cfg) == flax_shapes(cfg)
    assert sum(p.numel() for p in model.parameters()) == parameter_count(cfg) == PARAMS[preset]


def test_position_table_is_the_papers():
    table = pos_embed_2d(8, 3)  # [9 tokens, 8]: 4 features of the column, then 4 of the row
    assert table.shape == (9, 8) and table.dtype == np.float32
    col, row = 2, 1
    token = table[row * 3 + col]
    np.testing.assert_allclose(token[:2], np.sin([col, col / 100]), atol=1e-6)  # omega = 1/10000^(i/2)
    np.testing.assert_allclose(token[4:6], np.sin([row, row / 100]), atol=1e-6)
    np.testing.assert_allclose(token[6:], np.cos([row, row / 100]), atol=1e-6)


def test_adaln_zero_starts_at_the_zero_velocity():
    cfg = PRESETS["tiny"]
    x, t, y, _ = inputs()
    with torch.no_grad():
        v = TorchDiT(cfg)(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(y))
    assert v.shape == x.shape and not v.any()
    model = FlaxDiT(cfg)
    v = model.apply({"params": init_params(model, 0)}, x.transpose(0, 2, 3, 1), t, y.astype(np.int32))
    assert v.shape == (4, 32, 32, 1) and not np.asarray(v).any()


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_torch_and_flax_agree_through_load_expert(tmp_path, preset):
    canonical = randomized(PRESETS[preset])
    experts = {
        fw: load_expert(write_expert(tmp_path / fw, fw, preset, canonical), device="cpu", buckets=(8,))
        for fw in ("torch", "jax")
    }
    assert {e.meta.architecture for e in experts.values()} == {"dit"}
    assert experts["jax"].meta.config == PRESETS[preset]
    x, t, y, guidance = inputs()
    v_torch = experts["torch"].velocity(x, t, y, guidance)
    v_jax = experts["jax"].velocity(x, t, y, guidance)
    assert v_torch.shape == v_jax.shape == x.shape
    assert np.std(v_torch) > 0.05, "random weights should give a non-trivial velocity"
    assert np.max(np.abs(v_torch[0] - v_torch[3])) > 1e-3  # t and y reach the output
    diff = float(np.max(np.abs(v_torch - v_jax)))
    print(f"\nDiT parity {preset}: max |v_torch - v_jax| = {diff:.3e} (|v| max {np.abs(v_torch).max():.2f})")
    assert diff <= TOLERANCE


def test_conversion_round_trip_is_exact(tmp_path):
    src = make_random_expert(tmp_path / "torch", "torch", range(10), seed=5, architecture="dit")
    via_jax = convert(src, "jax", tmp_path / "jax")
    back = convert(tmp_path / "jax", "torch", tmp_path / "back")
    assert via_jax["architecture"] == back["architecture"] == "dit"
    assert read_meta(tmp_path / "back")["config"] == read_meta(src)["config"] == PRESETS["tiny"].to_dict()
    dit = expert_architecture("dit")
    original = FRAMEWORKS["torch"].load_canonical(src, dit)
    assert {k: v.shape for k, v in original.items()} == canonical_shapes(PRESETS["tiny"])
    for name, folder, framework in (("jax", "jax", "jax"), ("back", "back", "torch")):
        weights = FRAMEWORKS[framework].load_canonical(tmp_path / folder, dit)
        assert weights.keys() == original.keys(), name
        for key, value in original.items():
            np.testing.assert_array_equal(weights[key], value, err_msg=f"{name}: {key}")


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_one_training_step_on_tiny(tmp_path, framework):
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (8, 1, 32, 32)).astype(np.float32)
    labels = (np.arange(8) % 10).astype(np.int64)
    tcfg = TrainConfig(preset="tiny", steps=1, batch=4, warmup=1, save_every=1)
    meta = expert_meta(framework, "tiny", 0, PARTITION, COUNTS, "cpu", architecture="dit")
    trainer = make_trainer(framework, tcfg, architecture="dit")
    final = train_loop(trainer, images, labels, tcfg, tmp_path, meta, progress=False)
    assert final["steps"] == 1 and math.isfinite(final["final_loss"]) and final["architecture"] == "dit"
    weights = FRAMEWORKS[framework].load_canonical(tmp_path, expert_architecture("dit"))
    assert {k: v.shape for k, v in weights.items()} == canonical_shapes(PRESETS["tiny"])
    # adaLN-Zero: the first step moves the zero final layer; the blocks' modulations see gradient only
    # once it is not zero (from the second step on)
    assert np.abs(weights["final_linear.weight"]).max() > 0
    assert not weights["block0.ada.weight"].any()
    expert = load_expert(tmp_path, device="cpu", buckets=(4,))
    x, t, y, _ = inputs()
    assert np.isfinite(expert.velocity(x, t, y)).all()


def test_an_expert_worker_serves_a_dit(tmp_path, prefix, amqp_url, redis_url):
    from tests.workers.test_expert_worker import Client, make_request

    make_random_expert(tmp_path / "dit_jax", "jax", range(10), seed=2, architecture="dit")
    deployment = write_deployment(tmp_path, ["dit_jax"])
    settings = Settings(amqp_url=amqp_url, redis_url=redis_url, prefix=prefix, heartbeat_s=0.2)
    worker = ExpertWorker(settings, deployment, 0, buckets=(4, 8), max_batch=8, worker_id="dit0")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    client = Client(settings)
    try:
        assert worker.ready.wait(120), "worker did not start consuming"
        rng = np.random.default_rng(0)
        reqs = [make_request(rng, 3, 4), make_request(rng, 2, 8, guidance=2.0)]
        replies = client.wait([client.send(0, r.encode()) for r in reqs])
        reference = load_expert(tmp_path / "dit_jax", "cpu", buckets=(4, 8))
        for req, reply in zip(reqs, replies.values(), strict=True):
            want = reference.velocity(req.x, req.t, req.y, req.guidance)
            assert np.std(want) > 0.01
            np.testing.assert_allclose(reply.v, want, atol=1e-5, rtol=0)
    finally:
        client.close()
        worker.stop()
        thread.join(30)
