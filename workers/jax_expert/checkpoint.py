"""JAX checkpoints: flax.serialization msgpack (msgpack_restore never unpickles)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from flax import serialization

from ddm.schema.atomic import write_bytes_atomic
from ddm.workers.architectures import ExpertArchitecture, architecture_of_config
from ddm.workers.frameworks import JAX
from ddm.workers.layout import canonical_to_flax, flax_to_canonical


def save_weights(
    folder: Path, canonical: dict[str, np.ndarray], like: dict, architecture: ExpertArchitecture | None = None
) -> None:
    """Canonical flat layout -> folder/model.msgpack (the Flax params tree shaped like `like`), through
    the architecture's layout hook (None: ddm.workers.layout's)."""
    to_flax = architecture.to_flax if architecture is not None else canonical_to_flax
    params = to_flax(canonical, like)
    write_bytes_atomic(Path(folder) / JAX.weights_file, serialization.msgpack_serialize(params))


def flax_template(architecture: ExpertArchitecture, config) -> tuple[object, dict]:
    """(the architecture's Flax model for `config`, a fresh params tree: the template weights fill)."""
    model = architecture.build("jax", config)
    return model, architecture.code("jax", "init_params")(model, 0)


def save_canonical(folder: Path, canonical: dict[str, np.ndarray], config) -> None:
    """The registry's writer (convert, random experts): the Flax tree's shape comes from a fresh init of
    the architecture whose config `config` is."""
    architecture = architecture_of_config(config)
    save_weights(folder, canonical, flax_template(architecture, config)[1], architecture)


def load_weights(
    folder: Path, architecture: ExpertArchitecture | None = None, file: Path | None = None
) -> dict[str, np.ndarray]:
    """folder/model.msgpack (or `file`: the one meta.json's "weights" names) -> canonical flat layout
    (numpy float32), through the architecture's layout hook (None: ddm.workers.layout's). A named
    .safetensors file (an imported checkpoint's own, e.g. a Paris expert's) holds the canonical layout
    itself, in any dtype safetensors has (bf16 included), widened to float32."""
    path = Path(file or Path(folder) / JAX.weights_file)
    if path.suffix == ".safetensors":
        from safetensors.flax import load_file  # jax arrays: bf16 readable without torch

        return {name: np.asarray(value, np.float32) for name, value in load_file(str(path)).items()}
    params = serialization.msgpack_restore(path.read_bytes())
    return (architecture.from_flax if architecture is not None else flax_to_canonical)(params)


def save_train_state(folder: Path, state: dict) -> None:
    """state: {"params", "ema", "opt", "step", "wall_s"} pytree -> train_state.msgpack."""
    write_bytes_atomic(Path(folder) / JAX.train_state_file, serialization.to_bytes(state))


def load_train_state(folder: Path, template: dict) -> dict:
    return serialization.from_bytes(template, (Path(folder) / JAX.train_state_file).read_bytes())
