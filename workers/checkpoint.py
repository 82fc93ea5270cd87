"""Checkpoint folders shared by both frameworks.

    meta.json                 framework, preset, config, partition, expert, classes, steps, ... (JSON)
    model.safetensors         PyTorch: EMA weights in the canonical layout (ddm.workers.layout)
    model.msgpack             JAX: EMA weights, flax.serialization msgpack of the params tree
    train_state.*             the resumable state (raw weights, optimizer, step)
    loss.csv                  step, loss, lr, wall seconds

Nothing here is ever unpickled: safetensors and msgpack only.
"""

from __future__ import annotations

import json
from pathlib import Path

from ddm.schema.errors import ConfigError, expected
from ddm.workers.config import UNetConfig

FRAMEWORKS = ("torch", "jax")
WEIGHTS_FILE = {"torch": "model.safetensors", "jax": "model.msgpack"}
TRAIN_STATE_FILE = {"torch": "train_state.safetensors", "jax": "train_state.msgpack"}


def read_meta(path: str | Path) -> dict:
    """Read and check a checkpoint folder's meta.json (framework, config, weights file present)."""
    folder = Path(path)
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        raise ConfigError(expected(f"a checkpoint folder with meta.json at {folder}", "no such file"))
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{meta_path}: not valid JSON ({exc})") from None
    framework = meta.get("framework")
    if framework not in FRAMEWORKS:
        raise ConfigError(expected(f"meta.json framework in {FRAMEWORKS}", framework))
    if not (folder / WEIGHTS_FILE[framework]).is_file():
        raise ConfigError(expected(f"{WEIGHTS_FILE[framework]} in {folder}", "missing"))
    UNetConfig.from_dict(meta.get("config", {}))  # fail early on a malformed config
    return meta


def config_of(meta: dict) -> UNetConfig:
    return UNetConfig.from_dict(meta["config"])
