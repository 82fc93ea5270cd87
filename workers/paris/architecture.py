"""The Paris expert's record in the registry of expert architectures (ddm.workers.architectures,
REGISTERED). Imports no framework: the models are named, and imported on first use.

Nothing trains it here (no presets): its experts come in through `ddm import paris`, which writes
their meta.json and card beside Paris's own safetensors files (ops/importers/paris.py).
"""

from __future__ import annotations

from ddm.workers.architectures import ExpertArchitecture
from ddm.workers.frameworks import EntryPoint
from ddm.workers.paris.config import ParisExpertConfig

PARIS = ExpertArchitecture(
    "paris",
    ParisExpertConfig,
    {},
    {
        "torch": {"model": EntryPoint("ddm.workers.paris.torch_model:served_expert")},
        "jax": {
            "model": EntryPoint("ddm.workers.paris.flax_model:served_expert"),
            "init_params": EntryPoint("ddm.workers.paris.flax_model:init_params"),
        },
    },
    title="Paris DiT (adaLN-single, cross-attention on CLIP tokens)",
    to_flax=EntryPoint("ddm.workers.paris.flax_model:canonical_to_flax"),
    from_flax=EntryPoint("ddm.workers.paris.flax_model:flax_to_canonical"),
    trainable=False,
)
