"""The learned router's network (JAX/Flax): (x_t, t, y) -> K logits of p(cluster | x_t, t, y).

Small on purpose (about 0.38M parameters at the default width, against 1.7M per small expert): the
DDM paper's router costs about 4% of expert training compute, and it runs once per sample per step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import flax.linen as nn
import jax.numpy as jnp

from ddm.schema.flow import NUM_CLASSES
from ddm.workers.jax_expert.unet import PAD1, timestep_embedding


@dataclass(frozen=True)
class RouterConfig:
    num_clusters: int
    channels: int = 32
    emb_dim: int = 64
    hidden: int = 128
    num_classes: int = NUM_CLASSES  # plus the null class: the router also works unconditionally

    def to_dict(self) -> dict:
        return asdict(self)


class RouterNet(nn.Module):
    """x [B,32,32,1] (NHWC), t [B], y [B] int (10 = null) -> logits [B, K]."""

    cfg: RouterConfig

    @nn.compact
    def __call__(self, x: jnp.ndarray, t: jnp.ndarray, y: jnp.ndarray) -> jnp.ndarray:
        c, e = self.cfg.channels, self.cfg.emb_dim
        emb = nn.silu(nn.Dense(e, name="time")(timestep_embedding(t, e)))
        emb = emb + nn.Embed(self.cfg.num_classes + 1, e, name="label")(y)  # [B, e]
        h = x
        for i, width in enumerate((c, 2 * c, 4 * c)):  # 32 -> 16 -> 8 -> 4
            h = nn.Conv(width, (3, 3), padding=PAD1, name=f"conv{i}")(h)
            h = h + nn.Dense(width, name=f"film{i}")(emb)[:, None, None, :]  # tell each level the noise level
            h = nn.avg_pool(nn.silu(h), (2, 2), strides=(2, 2))
        h = jnp.concatenate([h.reshape(h.shape[0], -1), emb], axis=-1)  # [B, 16*4c + e]: keeps the layout
        h = nn.silu(nn.Dense(self.cfg.hidden, name="hidden")(h))
        return nn.Dense(self.cfg.num_clusters, name="out")(h)  # [B, K]
