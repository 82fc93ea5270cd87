"""The registry of expert frameworks: the one table that knows which frameworks an expert may be
written in. Whatever used to ask "torch or jax?" asks it: load_expert, make_trainer, convert, the
worker's start-up line, the random experts, the expert-meta builder and reader, `ddm doctor`, the
install extras (ddm.ops.extras) and the CLI's --framework / --to choices. Which model an expert is
(its config class, presets, the model each framework builds) is the other dimension:
ddm.workers.architectures.

A record is plain data (its name, files, install extra) plus entry points named as
"module:function" and imported on their first call. Importing this module (and ddm.workers) therefore
imports neither torch nor jax: a client-only install reads the table (`ddm doctor`, `ddm --help`).

Adding a framework: docs/ARCHITECTURE.md, "Adding an expert framework".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ddm.schema.errors import ConfigError, expected


@dataclass(frozen=True)
class EntryPoint:
    """A function named "package.module:function", imported when first called, so that a record can
    name its framework's code without importing the framework."""

    target: str

    def resolve(self) -> Callable[..., Any]:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)


@dataclass(frozen=True)
class ExpertFramework:
    """What the rest of the code may know about one expert framework."""

    name: str  # meta.json's `framework`, the CLI's --framework and --to
    extra: str  # the pyproject.toml optional dependency that installs it
    modules: tuple[str, ...]  # the top-level imports that extra brings (ddm.ops.extras)
    weights_file: str  # the EMA weights inference loads, beside meta.json
    train_state_file: str  # the resumable state: raw weights, optimizer, step
    load: EntryPoint  # (folder, meta, device=, buckets=, precision=) -> Expert, buckets compiled
    # (TrainConfig, device, architecture, SampleSpace, text_width=0) -> Trainer (workers.training)
    make_trainer: EntryPoint
    load_canonical: EntryPoint  # (folder, ExpertArchitecture) -> weights in the canonical layout
    save_canonical: EntryPoint  # (folder, canonical weights, config) -> None, written atomically
    toolchain: EntryPoint  # device -> "versions and backend" for the worker's start-up line


def twin_code(package: str, toolchain_module: str = "expert") -> dict[str, EntryPoint]:
    """The entry points of a framework folder laid out as the twins are (the same file and function
    names in every framework: DESIGN.md's habit 8)."""
    return {
        "load": EntryPoint(f"{package}.expert:load"),
        "make_trainer": EntryPoint(f"{package}.train:make_trainer"),
        "load_canonical": EntryPoint(f"{package}.checkpoint:load_weights"),
        "save_canonical": EntryPoint(f"{package}.checkpoint:save_canonical"),
        "toolchain": EntryPoint(f"{package}.{toolchain_module}:toolchain_line"),
    }


TORCH = ExpertFramework(
    "torch", "torch", ("torch", "safetensors"), "model.safetensors", "train_state.safetensors",
    **twin_code("ddm.workers.torch_expert", toolchain_module="devices"),
)  # fmt: skip
JAX = ExpertFramework(
    "jax", "jax", ("jax", "jaxlib", "flax", "optax"), "model.msgpack", "train_state.msgpack",
    **twin_code("ddm.workers.jax_expert"),
)  # fmt: skip

FRAMEWORKS: dict[str, ExpertFramework] = {f.name: f for f in (TORCH, JAX)}


def framework_names() -> list[str]:
    """The known frameworks, sorted: the CLI's choices and the wording of every refusal."""
    return sorted(FRAMEWORKS)


def expert_framework(name: object, what: str = "framework") -> ExpertFramework:
    """The record of framework `name`; ConfigError naming the known ones otherwise.
    what: where the name came from, for the message ("meta.json framework", "--to")."""
    framework = FRAMEWORKS.get(name) if isinstance(name, str) else None
    if framework is None:
        raise ConfigError(expected(f"{what} one of {', '.join(framework_names())}", name))
    return framework
