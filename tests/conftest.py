"""Shared fixtures: small random-weight experts and deployments (no training needed), and
per-test isolation on the real RabbitMQ and Redis (unique prefixes, cleaned up)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

# Single-threaded math keeps tests predictable on the 2-core CI machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

TEST_BUCKETS = (1, 2, 4, 8, 16, 32)

from ddm.ops.random_experts import make_random_expert, write_deployment  # noqa: E402 - after the env


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
