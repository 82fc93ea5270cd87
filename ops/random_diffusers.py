"""Tiny diffusers folders written with diffusers' own `save_pretrained(safe_serialization=True)`, random
weights (issue 38 part 3: the real facebook/DiT-XL-2-256 is never downloaded here):

    write_dit(folder)  a DiTTransformer2DModel: sample_size 8, in_channels 4, patch 2, 2 layers,
                       2 heads x 8, num_embeds_ada_norm 10, learned sigma (out_channels 8)
    write_vae(folder)  an AutoencoderKL: 3 -> 4 latent channels, 2 down blocks (8, 16 wide: pixels
                       2 x the latent's side), SD's scaling_factor 0.18215

Each folder holds config.json and diffusion_pytorch_model.safetensors, as the Hub's do.
"""

from __future__ import annotations

from pathlib import Path

from ddm.workers.diffusers_dit.config import PRESETS

TINY_DIT = PRESETS["tiny"]
TINY_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"],
    "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"],
    "block_out_channels": [8, 16],
    "layers_per_block": 1,
    "latent_channels": 4,
    "norm_num_groups": 4,
    "sample_size": 16,
    "scaling_factor": 0.18215,
}


def _randomise(model, seed: int, std: float) -> None:
    """Every parameter drawn from N(0, std^2): diffusers' DiT zero-initialises nothing, but a random
    draw over every tensor makes sure no part of the model can be wrong unnoticed."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * std)


def write_dit(folder: Path, seed: int = 0, num_classes: int = TINY_DIT.num_classes) -> Path:
    """A tiny class-conditional DiTTransformer2DModel folder (learned sigma); returns the folder."""
    from dataclasses import replace

    from diffusers import DiTTransformer2DModel

    model = DiTTransformer2DModel(**replace(TINY_DIT, num_classes=num_classes).diffusers_kwargs())
    _randomise(model, seed, 0.1)
    model.save_pretrained(str(folder), safe_serialization=True)
    return Path(folder)


def write_vae(folder: Path, seed: int = 0, **config) -> Path:
    """A tiny AutoencoderKL folder (TINY_VAE, updated by `config`); returns the folder."""
    from diffusers import AutoencoderKL

    model = AutoencoderKL(**{**TINY_VAE, **config})
    _randomise(model, seed, 0.05)
    model.save_pretrained(str(folder), safe_serialization=True)
    return Path(folder)
