"""The learned router's network (JAX/Flax): (x_t, t, y) -> K logits of p(cluster | x_t, t, y).

Small on purpose (about 0.38M parameters at the default width, against 1.7M per small expert): the
DDM paper's router costs about 4% of expert training compute, and it runs once per sample per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import flax.linen as nn
import jax.numpy as jnp

from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.workers.config import config_to_dict
from ddm.workers.jax_common import PAD1, timestep_embedding


@dataclass(frozen=True)
class RouterConfig:
    num_clusters: int
    channels: int = 32
    emb_dim: int = 64
    hidden: int = 128
    num_classes: int = LEGACY.num_classes  # plus the null class: the router also works unconditionally
    # the sample space it reads (a config written before the fields: the legacy 1x32x32)
    in_channels: int = LEGACY.shape[0]
    image_size: int = LEGACY.shape[1]
    # a prompt-aware router's: the width of the pooled prompt embedding it reads as y (f32 [B, width])
    # in the label embedding's place, as a text expert does; 0: y is a class id
    text_width: int = 0

    def to_dict(self) -> dict:
        return config_to_dict(self)  # without text_width when 0: a class router's meta.json is unchanged

    @classmethod
    def for_space(cls, num_clusters: int, space: SampleSpace, **fields) -> RouterConfig:
        """A router for `space` (square samples; height and width divisible by 8: three 2x poolings)."""
        c, h, w = space.shape
        return cls(num_clusters, num_classes=space.num_classes, in_channels=c, image_size=h, **fields)

    def check_space(self, space: SampleSpace) -> str:
        """'' when this router reads `space`, else what differs (for a refusal at load)."""
        ours = (self.in_channels, self.image_size, self.image_size)
        diffs = []
        if ours != space.shape:
            diffs.append(f"input {'x'.join(map(str, ours))} vs {'x'.join(map(str, space.shape))}")
        if self.num_classes != space.num_classes:
            diffs.append(f"num_classes {self.num_classes} vs {space.num_classes}")
        return "; ".join(diffs)


class RouterNet(nn.Module):
    """x [B,H,W,C] (NHWC; the sample space), t [B], y [B] int (num_classes = null) or, for a prompt-aware
    router, f32 [B, text_width] (the empty prompt's embedding: no prompt) -> logits [B, K]."""

    cfg: RouterConfig

    @nn.compact
    def __call__(self, x: jnp.ndarray, t: jnp.ndarray, y: jnp.ndarray) -> jnp.ndarray:
        c, e = self.cfg.channels, self.cfg.emb_dim
        emb = nn.silu(nn.Dense(e, name="time")(timestep_embedding(t, e)))
        if self.cfg.text_width:
            emb = emb + nn.Dense(e, name="prompt")(y)  # [B, e]
        else:
            emb = emb + nn.Embed(self.cfg.num_classes + 1, e, name="label")(y)  # [B, e]
        h = x
        for i, width in enumerate((c, 2 * c, 4 * c)):  # 32 -> 16 -> 8 -> 4 (H / 8 at the end)
            h = nn.Conv(width, (3, 3), padding=PAD1, name=f"conv{i}")(h)
            h = h + nn.Dense(width, name=f"film{i}")(emb)[:, None, None, :]  # tell each level the noise level
            h = nn.avg_pool(nn.silu(h), (2, 2), strides=(2, 2))
        h = jnp.concatenate(
            [h.reshape(h.shape[0], -1), emb], axis=-1
        )  # [B, (H/8)^2*4c + e]: keeps the layout
        h = nn.silu(nn.Dense(self.cfg.hidden, name="hidden")(h))
        return nn.Dense(self.cfg.num_clusters, name="out")(h)  # [B, K]
