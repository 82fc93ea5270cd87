"""Checkpoint folders shared by both frameworks.

    meta.json                 framework, preset, config, partition, expert, classes, steps, ... (JSON,
                              the record of ddm.schema.checkpoint_meta)
    model.safetensors         PyTorch: EMA weights in the canonical layout (ddm.workers.layout)
    model.msgpack             JAX: EMA weights, flax.serialization msgpack of the params tree
    train_state.*             the resumable state (raw weights, optimizer, step)
    loss.csv                  step, loss, lr, wall seconds

Nothing here is ever unpickled: safetensors and msgpack only.
"""

from __future__ import annotations

from pathlib import Path

from ddm.schema import checkpoint_meta
from ddm.schema.errors import ConfigError, expected
from ddm.workers.config import UNetConfig, get_preset

FRAMEWORKS = ("torch", "jax")
WEIGHTS_FILE = {"torch": "model.safetensors", "jax": "model.msgpack"}
TRAIN_STATE_FILE = {"torch": "train_state.safetensors", "jax": "train_state.msgpack"}
# What must match between a run and the run it resumes.
RESUME_KEYS = ("framework", "preset", "expert", "partition")


def read_meta(path: str | Path) -> dict:
    """An expert checkpoint's meta.json, checked: an expert's record, framework known, weights file
    present, config valid."""
    folder = Path(path)
    meta = checkpoint_meta.read_meta(folder, kind="expert")
    framework = meta["framework"]
    if framework not in FRAMEWORKS:
        raise ConfigError(expected(f"meta.json framework in {FRAMEWORKS}", framework))
    if not (folder / WEIGHTS_FILE[framework]).is_file():
        raise ConfigError(expected(f"{WEIGHTS_FILE[framework]} in {folder}", "missing"))
    UNetConfig.from_dict(meta["config"])  # fail early on a malformed config
    return meta


def config_of(meta: dict) -> UNetConfig:
    return UNetConfig.from_dict(meta["config"])


def expert_meta(framework: str, preset: str, expert: int, partition: dict, label_counts, device: str) -> dict:
    """What an expert checkpoint records before training adds its numbers (steps, loss, wall time).

    partition: the manifest's identity (PartitionManifest.identity()); label_counts: int [10], the
    expert's cluster's samples per class.
    """
    counts = [int(n) for n in label_counts]
    return {
        "kind": "expert",
        "framework": framework,
        "preset": preset,
        "config": get_preset(preset).to_dict(),
        "expert": int(expert),
        "partition": partition,
        "classes": [c for c, n in enumerate(counts) if n > 0],
        "label_counts": counts,
        "device": device,
        "created": checkpoint_meta.utc_now(),
    }


def check_resume(out: Path, meta: dict, resume: bool) -> None:
    """Refuse to mix runs: resuming must be asked for and must match framework, preset and data."""
    framework = meta["framework"]
    if not (out / TRAIN_STATE_FILE[framework]).exists():
        if resume and out.exists() and any(out.iterdir()):
            raise ConfigError(expected(f"a {framework} train state in {out} to resume", "none"))
        return
    if not resume:
        raise ConfigError(
            f"{out} already holds a training run; pass --resume to continue it or pick another --out"
        )
    old = checkpoint_meta.read_meta(out, kind="expert")
    for key in RESUME_KEYS:
        if old.get(key) != meta[key]:
            raise ConfigError(
                expected(f"--resume with the same {key} as {out}", f"{meta[key]} vs {old.get(key)}")
            )
