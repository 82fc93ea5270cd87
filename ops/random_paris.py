"""A random-weight checkpoint folder in Bagel's Paris layout, at any size (issue 38: the real weights are
gated and never loaded here). The tests' fixtures (tests/support/paris_fixture.py: tiny widths) and the
cost benchmark at full size (ops/bench/paris_cost.py) write it:

    DIR/config.json                                   num_experts, image_size, num_channels, vae_name,
                                                      text_encoder_name (Paris's top config)
    DIR/expert_<i>/diffusion_pytorch_model.safetensors, DIR/expert_<i>/config.json
    DIR/router/pytorch_model.safetensors, DIR/router/config.json
    DIR/vae/                   a tiny diffusers AutoencoderKL (ops/random_diffusers.py)
    DIR/text_encoder/, DIR/tokenizer/   a small CLIPTextModel as wide as the experts' text input, and
                               CLIP's real BPE vocabulary (ops/random_clip.py)

Every tensor is random, so that no part of a model can be wrong unnoticed. The per-model config.json
keys (hidden_size, depth, num_heads, patch_size, in_channels) are a guess at Paris's; the importer reads
only num_heads (or num_attention_heads) from them.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ddm.workers.paris.config import ParisExpertConfig, ParisRouterConfig


def random_state(module, seed: int) -> dict:
    """`module`'s state dict with every tensor drawn at random (N(0, 0.1)), contiguous for safetensors."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return {
        k: (torch.randn(v.shape, generator=gen) * 0.1).contiguous() for k, v in module.state_dict().items()
    }


def _write(folder: Path, filename: str, state: dict, config) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file(state, str(folder / filename))
    c = asdict(config)
    keys = {"hidden_size": c["width"], "depth": c["depth"], "num_heads": c["heads"], "patch_size": c["patch"]}
    (folder / "config.json").write_text(json.dumps({**keys, "in_channels": c["channels"]}))


def write_random_paris(
    root: Path, expert: ParisExpertConfig, router: ParisRouterConfig, seed: int = 0, stages: bool = True
) -> Path:
    """A Paris folder at `root` with router.num_experts experts; returns `root`. stages: also the vae/,
    text_encoder/ and tokenizer/ folders (the models' own checks need none of them)."""
    from ddm.workers.paris.torch_model import ParisExpert, ParisRouter

    root.mkdir(parents=True, exist_ok=True)
    top = {
        "num_experts": router.num_experts,
        "image_size": expert.image_size,
        "num_channels": expert.channels,
        "vae_name": "vae",
        "text_encoder_name": "text_encoder",
    }
    (root / "config.json").write_text(json.dumps(top))
    for i in range(router.num_experts):
        state = random_state(ParisExpert(expert), seed + i)
        _write(root / f"expert_{i}", "diffusion_pytorch_model.safetensors", state, expert)
    _write(
        root / "router", "pytorch_model.safetensors", random_state(ParisRouter(router), seed + 100), router
    )
    if stages:
        from ddm.ops.random_clip import write_clip_fixture
        from ddm.ops.random_diffusers import write_vae

        write_clip_fixture(root / "text_encoder", root / "tokenizer", hidden=expert.text_width, seed=seed)
        write_vae(root / "vae", seed=seed)
    return root
