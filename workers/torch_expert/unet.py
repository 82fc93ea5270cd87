"""The conditional UNet in PyTorch. Parameter names and shapes define the canonical layout;
ddm.workers.layout converts them to and from the Flax twin in workers/jax_expert/unet.py."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ddm.workers.config import UNetConfig

GN_EPS = 1e-5  # set explicitly in both frameworks (Flax defaults to 1e-6)


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of t in [0, 1] (scaled by 1000 like DDPM steps). [B] -> [B, dim]."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = (t.float() * 1000.0)[:, None] * freqs[None, :]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1)


class ResBlock(nn.Module):
    """GroupNorm-SiLU-Conv twice, the conditioning embedding added in between, residual skip."""

    def __init__(self, cin: int, cout: int, emb_dim: int, groups: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin, eps=GN_EPS)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.emb = nn.Linear(emb_dim, cout)
        self.norm2 = nn.GroupNorm(groups, cout, eps=GN_EPS)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))  # [B, cout, H, W]
        h = h + self.emb(F.silu(emb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return (x if self.skip is None else self.skip(x)) + h


def downsample(x: torch.Tensor) -> torch.Tensor:
    """2x2 average pooling: [B, C, H, W] -> [B, C, H/2, W/2]."""
    return F.avg_pool2d(x, 2)


def upsample(x: torch.Tensor) -> torch.Tensor:
    """Nearest-neighbour x2: [B, C, H, W] -> [B, C, 2H, 2W]. The next ResBlock's conv mixes."""
    return F.interpolate(x, scale_factor=2, mode="nearest")


class UNet(nn.Module):
    """Conditional UNet: x [B,1,32,32], t [B] in [0,1], y [B] int (10 = null) -> velocity [B,1,32,32].
    A text UNet (cfg.text_width > 0) reads y as the pooled prompt embedding, float [B, text_width].

    Encoder c, 2c, 4c at 32, 16, 8 (each level ends in 2x2 average pooling), bottleneck of two
    ResBlocks at 4x4, decoder mirroring it with skip concatenations.
    """

    def __init__(self, cfg: UNetConfig):
        super().__init__()
        self.cfg = cfg
        c, e, g = cfg.base_channels, cfg.emb_dim, cfg.groups
        self.time_mlp1 = nn.Linear(e, e)
        self.time_mlp2 = nn.Linear(e, e)
        if cfg.text_width:  # the pooled prompt embedding in the class embedding's place
            self.text_emb = nn.Linear(cfg.text_width, e)
        else:
            self.class_emb = nn.Embedding(cfg.num_classes + 1, e)  # +1: the null class
        self.in_conv = nn.Conv2d(cfg.in_channels, c, 3, padding=1)
        self.enc0 = ResBlock(c, c, e, g)
        self.enc1 = ResBlock(c, 2 * c, e, g)
        self.enc2 = ResBlock(2 * c, 4 * c, e, g)
        self.mid0 = ResBlock(4 * c, 4 * c, e, g)
        self.mid1 = ResBlock(4 * c, 4 * c, e, g)
        self.dec2 = ResBlock(8 * c, 4 * c, e, g)
        self.dec1 = ResBlock(6 * c, 2 * c, e, g)
        self.dec0 = ResBlock(3 * c, c, e, g)
        self.out_norm = nn.GroupNorm(g, c, eps=GN_EPS)
        self.out_conv = nn.Conv2d(c, cfg.in_channels, 3, padding=1)
        nn.init.zeros_(self.out_conv.weight)  # start as the zero velocity: stabler first steps
        nn.init.zeros_(self.out_conv.bias)

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        temb = timestep_embedding(t, self.cfg.emb_dim)
        cond = self.text_emb(y) if self.cfg.text_width else self.class_emb(y)  # [B, e]
        emb = self.time_mlp2(F.silu(self.time_mlp1(temb))) + cond  # [B, e]
        h = self.in_conv(x)  # [B, c, 32, 32]
        s0 = self.enc0(h, emb)  # [B, c, 32, 32]
        s1 = self.enc1(downsample(s0), emb)  # [B, 2c, 16, 16]
        s2 = self.enc2(downsample(s1), emb)  # [B, 4c, 8, 8]
        h = downsample(s2)  # [B, 4c, 4, 4]
        h = self.mid1(self.mid0(h, emb), emb)
        h = self.dec2(torch.cat([upsample(h), s2], dim=1), emb)  # [B, 4c, 8, 8]
        h = self.dec1(torch.cat([upsample(h), s1], dim=1), emb)  # [B, 2c, 16, 16]
        h = self.dec0(torch.cat([upsample(h), s0], dim=1), emb)  # [B, c, 32, 32]
        return self.out_conv(F.silu(self.out_norm(h)))  # [B, 1, 32, 32]
