"""DiT presets as frozen dataclasses; the config is saved with every checkpoint (meta.json `config`).

Peebles & Xie, "Scalable Diffusion Models with Transformers" (ICCV 2023), at this repository's sample
sizes: patchify, N transformer blocks conditioned by adaLN-Zero on t and the class, unpatchify. Two
departures from the paper, both this repository's conventions: the output is the velocity alone
(learn_sigma off: a flow-matching expert has no variance to learn, so out channels = in channels), and
t in [0, 1] is scaled by 1000 before its sinusoidal embedding, as the UNet's is.

Parameters (counted by tests/workers/test_dit.py, the same in both frameworks):
    tiny   patch 4, hidden  64, depth  2, heads 2:    181,136  (tests; CPU)
    small  patch 4, hidden 128, depth  4, heads 4:  1,275,408  (trains on 2 CPU cores)
    base   patch 2, hidden 384, depth 12, heads 6: 32,469,508  (DiT-S/2 at 32 x 32; a GPU's)
"""

from __future__ import annotations

from dataclasses import dataclass

from ddm.schema.errors import ConfigError, expected
from ddm.schema.flow import NUM_CLASSES
from ddm.workers.config import check_text_width, config_from_dict, config_to_dict


@dataclass(frozen=True)
class DiTConfig:
    """Shape of the class-conditional DiT shared by the PyTorch and Flax twins."""

    patch_size: int = 4  # p: the image is cut into (image_size / p)^2 tokens of p x p pixels
    hidden_size: int = 128  # token width; a multiple of 4 (the 2D sin-cos position table) and of heads
    depth: int = 4  # DiT blocks
    num_heads: int = 4
    mlp_ratio: float = 4.0  # MLP hidden width = hidden_size * mlp_ratio
    freq_dim: int = 256  # sinusoidal timestep features before the timestep MLP (the paper's 256)
    num_classes: int = NUM_CLASSES  # plus one null class for classifier-free guidance (label num_classes)
    image_size: int = 32
    in_channels: int = 1  # = out channels (learn_sigma off)
    # 0: class-conditioned (the y_embed table). > 0: text-conditioned, a Linear (text_embed) of the pooled
    # prompt embedding [B, text_width] into the adaLN conditioning takes the table's place
    text_width: int = 0

    def __post_init__(self):
        check_text_width(self.text_width)
        if self.image_size % self.patch_size:
            raise ConfigError(
                expected(f"image_size a multiple of patch_size {self.patch_size}", self.image_size)
            )
        if self.hidden_size % self.num_heads or self.hidden_size % 4:
            raise ConfigError(
                expected(f"hidden_size a multiple of 4 and of num_heads {self.num_heads}", self.hidden_size)
            )
        if self.freq_dim % 2:
            raise ConfigError(expected("an even freq_dim", self.freq_dim))

    @property
    def grid(self) -> int:
        """Tokens per side: image_size / patch_size."""
        return self.image_size // self.patch_size

    @property
    def mlp_hidden(self) -> int:
        return int(self.hidden_size * self.mlp_ratio)

    def to_dict(self) -> dict:
        return config_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> DiTConfig:
        return config_from_dict(cls, data)


PRESETS: dict[str, DiTConfig] = {
    "base": DiTConfig(patch_size=2, hidden_size=384, depth=12, num_heads=6),  # DiT-S/2
    "small": DiTConfig(patch_size=4, hidden_size=128, depth=4, num_heads=4),  # CPU training
    "tiny": DiTConfig(patch_size=4, hidden_size=64, depth=2, num_heads=2),  # tests
}
