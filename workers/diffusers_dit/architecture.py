"""The diffusers DiT's record in the registry of expert architectures (ddm.workers.architectures,
REGISTERED). Imports no framework: the model is named, and imported on first use. PyTorch only (no Flax
twin): its weights are the diffusers folder's own diffusion_pytorch_model.safetensors, whose names are
the model's state_dict (the canonical layout of this architecture)."""

from __future__ import annotations

from ddm.workers.architectures import ExpertArchitecture
from ddm.workers.diffusers_dit.config import PRESETS, DiffusersDiTConfig
from ddm.workers.frameworks import EntryPoint

DIFFUSERS_DIT = ExpertArchitecture(
    "diffusers-dit",
    DiffusersDiTConfig,
    PRESETS,
    {"torch": {"model": EntryPoint("ddm.workers.diffusers_dit.torch_model:served_expert")}},
    title="diffusers DiTTransformer2DModel (class-conditional DiT, adaLN-Zero)",
)
