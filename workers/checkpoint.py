"""Expert checkpoint folders, whatever their framework: the expert meta's one builder and its checked
reader, and the rules of resuming.

    meta.json                 framework, preset, config, partition, expert, classes, steps, ... (JSON,
                              the record of ddm.schema.checkpoint_meta, built by `expert_meta`)
    <weights file>            EMA weights: model.safetensors (torch, the canonical layout of
                              ddm.workers.layout), model.msgpack (jax, the Flax params tree)
    <train state file>        the resumable state (raw weights, optimizer, step)
    loss.csv                  step, loss, lr, wall seconds

Each framework's file names are in its record (ddm.workers.frameworks).
Nothing here is ever unpickled: safetensors and msgpack only.
"""

from __future__ import annotations

from pathlib import Path

from ddm.schema import checkpoint_meta
from ddm.schema.errors import ConfigError, expected
from ddm.workers.frameworks import ExpertFramework, expert_framework

# What must match between a run and the run it resumes.
RESUME_KEYS = ("framework", "preset", "expert", "partition")


def check_expert_meta(meta: dict, source: str = checkpoint_meta.META_FILE) -> ExpertFramework:
    """The framework of an expert's meta record, its `config` checked by that framework's config class.
    The schema checks the record's shape only (ddm.schema.checkpoint_meta); this is its expert half."""
    framework = expert_framework(meta.get("framework"), f"{source} framework")
    try:
        framework.config_from(meta.get("config"))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return framework


def read_meta(path: str | Path) -> dict:
    """An expert checkpoint's meta.json, checked: an expert's record, framework known, config valid,
    weights file present."""
    folder = Path(path)
    meta = checkpoint_meta.read_meta(folder, kind="expert")
    framework = check_expert_meta(meta, str(folder / checkpoint_meta.META_FILE))
    if not (folder / framework.weights_file).is_file():
        raise ConfigError(expected(f"{framework.weights_file} in {folder}", "missing"))
    return meta


def config_of(meta: dict):
    """The meta's config as its framework's config object (a UNetConfig for torch and jax)."""
    return expert_framework(meta["framework"], "meta.json framework").config_from(meta["config"])


def expert_meta(
    framework: str,
    preset: str,
    expert: int,
    partition: dict,
    label_counts,
    device: str | None = None,
    **more,
) -> dict:
    """THE builder of an expert's meta record (training, distillation, random experts, test fakes),
    before training adds its numbers (steps, loss, wall time); write it with schema's write_meta.

    partition: the manifest's identity (PartitionManifest.identity()), or what stands for one;
    label_counts: int [classes], the samples per class the expert learns from (classes follow);
    device: where it trains (omitted when None); more: further fields (steps, distilled_from).
    """
    record = expert_framework(framework)
    counts = [int(n) for n in label_counts]
    meta = {
        "kind": "expert",
        "framework": framework,
        "preset": preset,
        "config": record.preset(preset).to_dict(),
        "expert": int(expert),
        "partition": partition,
        "classes": [c for c, n in enumerate(counts) if n > 0],
        "label_counts": counts,
        "created": checkpoint_meta.utc_now(),
    }
    if device is not None:
        meta["device"] = device
    if clash := sorted(meta.keys() & more.keys()):
        raise TypeError(f"expert_meta: {clash} are built here, not passed in")
    return {**meta, **more}


def check_resume(out: Path, meta: dict, resume: bool) -> None:
    """Refuse to mix runs: resuming must be asked for and must match framework, preset and data."""
    framework = meta["framework"]
    if not (out / expert_framework(framework).train_state_file).exists():
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
