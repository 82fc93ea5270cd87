"""The DiT's record in the registry of expert architectures (ddm.workers.architectures, REGISTERED).
Imports no framework: the models are named, and imported on first use."""

from __future__ import annotations

from ddm.workers.architectures import ExpertArchitecture, twin_models
from ddm.workers.dit.config import PRESETS, DiTConfig

DIT = ExpertArchitecture(
    "dit",
    DiTConfig,
    PRESETS,
    twin_models(
        "ddm.workers.dit.torch_model:DiT",
        "ddm.workers.dit.flax_model:DiT",
        "ddm.workers.dit.flax_model:init_params",
    ),
    title="class-conditional DiT (adaLN-Zero)",
)
