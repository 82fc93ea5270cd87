"""Autoencoder presets as frozen dataclasses; the config is saved with every checkpoint."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ddm.schema.errors import ConfigError, expected
from ddm.workers.config import config_from_dict


@dataclass(frozen=True)
class AutoencoderConfig:
    """Encoder: conv, then per level a residual block and a 2x downsampling; the latent has
    `latent_channels` channels at image_size / 2**levels. The decoder mirrors it."""

    in_channels: int = 3
    image_size: int = 32
    base_channels: int = 32  # level i has base * 2**i channels
    levels: int = 2  # 32x32 -> 8x8
    latent_channels: int = 4
    groups: int = 8

    @property
    def latent_shape(self) -> tuple[int, int, int]:
        side = self.image_size // 2**self.levels
        return (self.latent_channels, side, side)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> AutoencoderConfig:
        return config_from_dict(cls, data)


PRESETS: dict[str, AutoencoderConfig] = {
    "small": AutoencoderConfig(base_channels=32),  # about 1M parameters, 4 MB: the shipped one
    "tiny": AutoencoderConfig(base_channels=8),  # tests
}


def preset(name: str, in_channels: int, image_size: int) -> AutoencoderConfig:
    """The preset sized for the data: its channels and side."""
    if name not in PRESETS:
        raise ConfigError(expected(f"an autoencoder preset in {sorted(PRESETS)}", name))
    cfg = PRESETS[name]
    if image_size % 2**cfg.levels:
        raise ConfigError(expected(f"an image side divisible by {2**cfg.levels}", image_size))
    return AutoencoderConfig(**{**cfg.to_dict(), "in_channels": in_channels, "image_size": image_size})
