"""Paris's own sampling loop, written from the issue's description alone and sharing nothing with the
importer or the serving path (no card, no conversion, no sampler, no router worker): the independent
check that `ddm import paris` + `ddm sample` draw what Paris draws.

    CLIP: tokenizer(padding="max_length", max_length=77, truncation) -> last_hidden_state [77, width]
    diffusers' FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000): its timesteps, its step
    router: softmax of its logits at (x, t), the top-2 renormalised over the two
    each chosen expert: v_u + g (v_c - v_u), the unconditional branch being CLIP("")
    x <- scheduler.step(sum_k w_k v_k, t, x); pixels = vae.decode(x / scaling_factor)

The models are the PyTorch modules of workers/paris/torch_model.py (checked on their own against the
tensor names and against Flax), built from the fixture's own configs, at Paris's 0..1000 time.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.support.paris_fixture import TINY_EXPERT, TINY_ROUTER


def paris_sample(
    root: Path, prompt: str, noise: np.ndarray, steps: int, guidance: float = 7.5
) -> tuple[np.ndarray, np.ndarray]:
    """(latents, pixels) float32 for `noise` [n, C, H, W] as Paris samples `prompt` from it."""
    import torch
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler
    from safetensors.torch import load_file
    from transformers import CLIPTextModel, CLIPTokenizer

    from ddm.workers.paris.torch_model import ParisExpert, ParisRouter

    tokenizer = CLIPTokenizer.from_pretrained(str(root / "tokenizer"))
    text_model = CLIPTextModel.from_pretrained(str(root / "text_encoder"), use_safetensors=True).eval()

    def encode(text: str) -> torch.Tensor:
        ids = tokenizer([text], padding="max_length", max_length=77, truncation=True, return_tensors="pt")
        return text_model(input_ids=ids.input_ids).last_hidden_state  # [1, 77, width]

    count = json.loads((root / "config.json").read_text())["num_experts"]
    experts = []
    for i in range(count):
        expert = ParisExpert(TINY_EXPERT)
        expert.load_state_dict(load_file(str(root / f"expert_{i}" / "diffusion_pytorch_model.safetensors")))
        experts.append(expert.eval())
    router = ParisRouter(TINY_ROUTER)
    router.load_state_dict(load_file(str(root / "router" / "pytorch_model.safetensors")))
    router.eval()
    vae = AutoencoderKL.from_pretrained(str(root / "vae"), use_safetensors=True).eval()
    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000)
    scheduler.set_timesteps(steps)

    n = len(noise)
    with torch.no_grad():
        cond, uncond = encode(prompt).expand(n, -1, -1), encode("").expand(n, -1, -1)
        x = torch.from_numpy(noise.astype(np.float32))
        for t in scheduler.timesteps:
            tt = t.expand(n).float()
            top = torch.softmax(router(x, tt), dim=-1).topk(2, dim=-1)
            weights = top.values / top.values.sum(dim=-1, keepdim=True)
            v = torch.zeros_like(x)
            for row in range(n):
                for slot in range(2):
                    expert = experts[int(top.indices[row, slot])]
                    xr, tr = x[row : row + 1], tt[row : row + 1]
                    v_c, v_u = expert(xr, tr, cond[row : row + 1]), expert(xr, tr, uncond[row : row + 1])
                    v[row] += weights[row, slot] * (v_u + guidance * (v_c - v_u))[0]
            x = scheduler.step(v, t, x).prev_sample
        pixels = vae.decode(x / vae.config.scaling_factor).sample
    return x.numpy(), pixels.numpy()
