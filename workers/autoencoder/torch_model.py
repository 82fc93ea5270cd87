"""The autoencoder in PyTorch: Encoder (pixels -> mean and log-variance of the latent) and Decoder."""

from __future__ import annotations

import torch
from torch import nn

from ddm.workers.autoencoder.config import AutoencoderConfig


class ResBlock(nn.Module):
    def __init__(self, c: int, groups: int):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(groups, c), nn.Conv2d(c, c, 3, padding=1)
        self.norm2, self.conv2 = nn.GroupNorm(groups, c), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(nn.functional.silu(self.norm1(x)))
        return x + self.conv2(nn.functional.silu(self.norm2(h)))


class Encoder(nn.Module):
    """x [B, C, S, S] in [-1, 1] -> (mean, logvar) each [B, latent_channels, S / 2**levels, ...]."""

    def __init__(self, cfg: AutoencoderConfig):
        super().__init__()
        c = cfg.base_channels
        layers: list[nn.Module] = [nn.Conv2d(cfg.in_channels, c, 3, padding=1)]
        for i in range(cfg.levels):
            layers += [ResBlock(c * 2**i, cfg.groups), nn.Conv2d(c * 2**i, c * 2 ** (i + 1), 3, 2, 1)]
        top = c * 2**cfg.levels
        layers += [ResBlock(top, cfg.groups), nn.GroupNorm(cfg.groups, top), nn.SiLU()]
        layers += [nn.Conv2d(top, 2 * cfg.latent_channels, 3, padding=1)]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, logvar = self.net(x).chunk(2, dim=1)
        return mean, logvar.clamp(-30.0, 20.0)


class Decoder(nn.Module):
    """z [B, latent_channels, s, s] (the encoder's scale, not normalised) -> x [B, C, S, S]."""

    def __init__(self, cfg: AutoencoderConfig):
        super().__init__()
        c = cfg.base_channels
        top = c * 2**cfg.levels
        layers: list[nn.Module] = [
            nn.Conv2d(cfg.latent_channels, top, 3, padding=1),
            ResBlock(top, cfg.groups),
        ]
        for i in reversed(range(cfg.levels)):
            layers += [
                nn.Upsample(scale_factor=2, mode="nearest"),
                nn.Conv2d(c * 2 ** (i + 1), c * 2**i, 3, padding=1),
            ]
            layers += [ResBlock(c * 2**i, cfg.groups)]
        layers += [nn.GroupNorm(cfg.groups, c), nn.SiLU(), nn.Conv2d(c, cfg.in_channels, 3, padding=1)]
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


class Autoencoder(nn.Module):
    def __init__(self, cfg: AutoencoderConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
