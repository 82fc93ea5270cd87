"""Shared fixtures: small random-weight experts and deployments (no training needed), and
per-test isolation on the real RabbitMQ and Redis (unique prefixes, cleaned up)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

# Single-threaded math keeps tests predictable on the 2-core CI machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

TEST_BUCKETS = (1, 2, 4, 8, 16, 32)


def make_random_expert(folder: Path, framework: str, classes, preset: str = "tiny", seed: int = 0) -> Path:
    """A checkpoint folder with random (not trained) weights, O(1) outputs, and a real meta.json."""
    import torch

    from ddm.workers.config import get_preset
    from ddm.workers.torch_expert.checkpoint import save_weights as save_torch
    from ddm.workers.torch_expert.unet import UNet

    cfg = get_preset(preset)
    torch.manual_seed(seed)
    model = UNet(cfg)
    for p in model.parameters():  # out_conv is zero-initialised; give every weight a real value
        torch.nn.init.normal_(p, std=0.04)
    canonical = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    folder.mkdir(parents=True, exist_ok=True)
    if framework == "torch":
        save_torch(folder, canonical)
    else:
        from ddm.workers.jax_expert.checkpoint import save_weights as save_jax
        from ddm.workers.jax_expert.train import init_params
        from ddm.workers.jax_expert.unet import UNet as FlaxUNet

        save_jax(folder, canonical, init_params(FlaxUNet(cfg), 0))
    counts = [100 if c in classes else 0 for c in range(10)]
    meta = {
        "format": 1,
        "framework": framework,
        "preset": preset,
        "config": cfg.to_dict(),
        "expert": 0,
        "partition": {"id": "test", "dataset": "synthetic", "split": "none"},
        "classes": sorted(classes),
        "label_counts": counts,
        "steps": 0,
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def write_deployment(folder: Path, experts: list[tuple[str, str]], router: str = "oracle") -> Path:
    """experts: [(checkpoint folder relative to `folder`, device)] -> folder/deployment.toml."""
    lines = ['name = "test"']
    for i, (ckpt, device) in enumerate(experts):
        lines += ["[[experts]]", f"id = {i}", f'checkpoint = "{ckpt}"', f'device = "{device}"']
    lines += ["[router]", f'kind = "{router}"']
    path = folder / "deployment.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def label_split_deployment(tmp_path_factory) -> Path:
    """The seed's shape at test size: expert 0 (digits 0-4) in PyTorch, expert 1 (5-9) in JAX."""
    root = tmp_path_factory.mktemp("label_split")
    make_random_expert(root / "e0_torch", "torch", range(0, 5), seed=0)
    make_random_expert(root / "e1_jax", "jax", range(5, 10), seed=1)
    return write_deployment(root, [("e0_torch", "cpu"), ("e1_jax", "cpu")], router="oracle")


@pytest.fixture(scope="session")
def shared_labels_deployment(tmp_path_factory) -> Path:
    """Two torch experts whose label sets overlap, routed by the label prior (top-k/full differ)."""
    root = tmp_path_factory.mktemp("shared_labels")
    make_random_expert(root / "a", "torch", range(0, 7), seed=2)
    make_random_expert(root / "b", "torch", range(3, 10), seed=3)
    return write_deployment(root, [("a", "cpu"), ("b", "cpu")], router="label-prior")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
