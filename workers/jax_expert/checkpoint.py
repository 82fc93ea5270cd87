"""JAX checkpoints: flax.serialization msgpack (msgpack_restore never unpickles)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from flax import serialization

from ddm.workers.config import UNetConfig
from ddm.workers.frameworks import JAX
from ddm.workers.jax_expert.unet import UNet, init_params
from ddm.workers.layout import canonical_to_flax, flax_to_canonical


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def save_weights(folder: Path, canonical: dict[str, np.ndarray], like: dict) -> None:
    """Canonical flat layout -> folder/model.msgpack (the Flax params tree)."""
    params = canonical_to_flax(canonical, like)
    _write_atomic(Path(folder) / JAX.weights_file, serialization.msgpack_serialize(params))


def save_canonical(folder: Path, canonical: dict[str, np.ndarray], config: UNetConfig) -> None:
    """The registry's writer (convert, random experts): the Flax tree's shape comes from a fresh init."""
    save_weights(folder, canonical, init_params(UNet(config), 0))


def load_weights(folder: Path) -> dict[str, np.ndarray]:
    """folder/model.msgpack -> canonical flat layout (numpy float32)."""
    params = serialization.msgpack_restore((Path(folder) / JAX.weights_file).read_bytes())
    return flax_to_canonical(params)


def save_train_state(folder: Path, state: dict) -> None:
    """state: {"params", "ema", "opt", "step", "wall_s"} pytree -> train_state.msgpack."""
    _write_atomic(Path(folder) / JAX.train_state_file, serialization.to_bytes(state))


def load_train_state(folder: Path, template: dict) -> dict:
    return serialization.from_bytes(template, (Path(folder) / JAX.train_state_file).read_bytes())
