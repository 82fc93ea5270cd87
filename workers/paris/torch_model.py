"""Paris's expert and router in PyTorch, written from the facts of issue 38 (workers/paris/__init__.py):
the module tree is the one the public Neuron port builds. That port loads the real files with
strict=False, so these names are proven to hold what it uses, not that the files hold nothing else: a
real checkpoint with extra tensors would be refused by weights.check_tensors as "unexpected" until we
have seen one.

Both take the time on Paris's scale, 0..1000 with 1000 pure noise, and the expert answers noise minus
data (x_t = (1 - s) x0 + s eps, s = t / 1000). Built with time_scale=TIME_SCALE (`served_expert`,
`served_router`: what the registry and the router build) they take s in [0, 1] instead and scale it
themselves. Converting the rest to this system's flow (time runs the other way; noise minus data is
minus our velocity) is the expert card's job (flow-velocity, t0-data; workers/objectives.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ddm.workers.paris.config import (
    FREQUENCY_DIM,
    MLP_RATIO,
    TIME_SCALE,
    ParisExpertConfig,
    ParisRouterConfig,
)

LN_EPS = 1e-5  # F.layer_norm's default, as Paris's blocks call it (no affine)


def timestep_features(t: torch.Tensor, dim: int = FREQUENCY_DIM) -> torch.Tensor:
    """Sinusoidal features of t as given (Paris's 0..1000 scale): [B] -> [B, dim], cos then sin."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class TimeEmbed(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(FREQUENCY_DIM, width), nn.SiLU(), nn.Linear(width, width))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.mlp(timestep_features(t).to(self.mlp[0].weight.dtype))


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale) + shift


def mlp(width: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(width, MLP_RATIO * width), nn.GELU(approximate="tanh"), nn.Linear(MLP_RATIO * width, width)
    )


class ExpertBlock(nn.Module):
    """adaLN-single: this block's scale_shift_table plus the shared t_block's output give its six
    modulations; the cross-attention on the text is added without a gate."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.scale_shift_table = nn.Parameter(torch.zeros(6, width))
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = mlp(width)

    def forward(self, x: torch.Tensor, t0: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1]
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = (self.scale_shift_table[None] + t0).chunk(
            6, dim=1
        )
        h = modulate(F.layer_norm(x, (d,), eps=LN_EPS), shift_a, scale_a)
        x = x + gate_a * self.attn(h, h, h, need_weights=False)[0]
        x = x + self.cross_attn(x, text, text, need_weights=False)[0]
        h = modulate(F.layer_norm(x, (d,), eps=LN_EPS), shift_m, scale_m)
        return x + gate_m * self.mlp(h)


class FinalLayer(nn.Module):
    def __init__(self, width: int, out: int):
        super().__init__()
        self.linear = nn.Linear(width, out)
        self.scale_shift_table = nn.Parameter(torch.zeros(2, width))


def add_stem(module: nn.Module, config) -> int:
    """The expert's and the router's shared front, under the names both state dicts give it:
    patch_embed, pos_embed, time_embed. Returns the width."""
    d, p = config.width, config.patch
    module.patch_embed = nn.Conv2d(config.channels, d, kernel_size=p, stride=p)
    module.pos_embed = nn.Parameter(torch.zeros(1, config.patches, d))
    module.time_embed = TimeEmbed(d)
    return d


def patchify_in(x: torch.Tensor, patch_embed: nn.Conv2d, pos_embed: torch.Tensor) -> torch.Tensor:
    """[B, C, H, W] -> tokens [B, N, d], the learned positions added."""
    return patch_embed(x).flatten(2).transpose(1, 2) + pos_embed


class ParisExpert(nn.Module):
    """forward(x [B, C, H, W], t [B] on 0..1000 (times time_scale), text [B, T, text_width] CLIP's last
    hidden states) -> noise minus data, [B, C, H, W]."""

    def __init__(self, config: ParisExpertConfig, time_scale: float = 1.0):
        super().__init__()
        self.config = self.cfg = config  # cfg: what the expert runtime reads (text_width)
        self.time_scale = time_scale
        d = add_stem(self, config)
        self.text_proj = nn.Linear(config.text_width, d)
        self.t_block = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))
        self.layers = nn.ModuleList([ExpertBlock(d, config.heads) for _ in range(config.depth)])
        self.final_layer = FinalLayer(d, config.patch**2 * config.channels)

    def forward(self, x: torch.Tensor, t: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        b, d = x.shape[0], self.config.width
        tokens = patchify_in(x, self.patch_embed, self.pos_embed)
        t_emb = self.time_embed(t * self.time_scale)
        t0 = self.t_block(t_emb).reshape(b, 6, d)
        text = self.text_proj(text)
        for layer in self.layers:
            tokens = layer(tokens, t0, text)
        shift, scale = (self.final_layer.scale_shift_table[None] + t_emb[:, None]).chunk(2, dim=1)
        tokens = self.final_layer.linear(modulate(F.layer_norm(tokens, (d,), eps=LN_EPS), shift, scale))
        return unpatchify(tokens, self.config)


def unpatchify(tokens: torch.Tensor, config) -> torch.Tensor:
    """[B, N, p * p * C] -> [B, C, H, W] (each token's values in (row, column, channel) order)."""
    p, c, side = config.patch, config.channels, config.image_size // config.patch
    x = tokens.reshape(tokens.shape[0], side, side, p, p, c)
    return torch.einsum("nhwpqc->nchpwq", x).reshape(tokens.shape[0], c, side * p, side * p)


class RouterBlock(nn.Module):
    """adaLN-zero: each block's own SiLU + Linear of the time embedding gives its six modulations."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(width, 6 * width))
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = mlp(width)

    def forward(self, x: torch.Tensor, t_emb: torch.Tensor) -> torch.Tensor:
        b, _, d = x.shape
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = (
            self.adaLN_modulation(t_emb).reshape(b, 6, d).chunk(6, dim=1)
        )
        h = modulate(F.layer_norm(x, (d,), eps=LN_EPS), shift_a, scale_a)
        x = x + gate_a * self.attn(h, h, h, need_weights=False)[0]
        h = modulate(F.layer_norm(x, (d,), eps=LN_EPS), shift_m, scale_m)
        return x + gate_m * self.mlp(h)


class ParisRouter(nn.Module):
    """forward(x [B, C, H, W], t [B] on 0..1000 (times time_scale)) -> logits [B, num_experts] (no
    text)."""

    def __init__(self, config: ParisRouterConfig, time_scale: float = 1.0):
        super().__init__()
        self.config = config
        self.time_scale = time_scale
        d = add_stem(self, config)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.layers = nn.ModuleList([RouterBlock(d, config.heads) for _ in range(config.depth)])
        self.head = nn.Sequential(
            nn.Linear(d, d),
            nn.GELU(approximate="tanh"),
            nn.LayerNorm(d),
            nn.GELU(approximate="tanh"),
            nn.Linear(d, config.num_experts),
        )

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        tokens = patchify_in(x, self.patch_embed, self.pos_embed)  # positions before the CLS
        tokens = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), tokens], dim=1)
        t_emb = self.time_embed(t * self.time_scale)
        for layer in self.layers:
            tokens = layer(tokens, t_emb)
        return self.head(tokens[:, 0])


def served_expert(config: ParisExpertConfig) -> ParisExpert:
    """The expert as the registry builds it: t in [0, 1] (its card's time input, 1 = noise)."""
    return ParisExpert(config, time_scale=TIME_SCALE)


def served_router(config: ParisRouterConfig) -> ParisRouter:
    """The router as the router worker runs it: t in [0, 1] (1 = noise)."""
    return ParisRouter(config, time_scale=TIME_SCALE)
