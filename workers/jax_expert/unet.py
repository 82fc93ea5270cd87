"""The conditional UNet in Flax (linen), the twin of workers/torch_expert/unet.py.

Module names match the PyTorch attribute names one for one, so ddm.workers.layout can map every
parameter by name. Arrays are NHWC inside; the public expert API stays NCHW.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ddm.workers.config import UNetConfig
from ddm.workers.jax_common import PAD1, condition_template, timestep_embedding

GN_EPS = 1e-5  # PyTorch's default; Flax's would be 1e-6


def group_norm(groups: int, name: str) -> nn.GroupNorm:
    # use_fast_variance=False: the two-pass variance PyTorch computes, for parity
    return nn.GroupNorm(num_groups=groups, epsilon=GN_EPS, use_fast_variance=False, name=name)


class ResBlock(nn.Module):
    """GroupNorm-SiLU-Conv twice, the conditioning embedding added in between, residual skip."""

    cout: int
    groups: int

    @nn.compact
    def __call__(self, x: jnp.ndarray, emb: jnp.ndarray) -> jnp.ndarray:
        h = nn.Conv(self.cout, (3, 3), padding=PAD1, name="conv1")(
            nn.silu(group_norm(self.groups, "norm1")(x))
        )
        h = h + nn.Dense(self.cout, name="emb")(nn.silu(emb))[:, None, None, :]
        h = nn.Conv(self.cout, (3, 3), padding=PAD1, name="conv2")(
            nn.silu(group_norm(self.groups, "norm2")(h))
        )
        if x.shape[-1] != self.cout:
            x = nn.Conv(self.cout, (1, 1), name="skip")(x)
        return x + h


def downsample(x: jnp.ndarray) -> jnp.ndarray:
    """2x2 average pooling: [B, H, W, C] -> [B, H/2, W/2, C]."""
    return nn.avg_pool(x, (2, 2), strides=(2, 2))


def upsample(x: jnp.ndarray) -> jnp.ndarray:
    """Nearest-neighbour x2: [B, H, W, C] -> [B, 2H, 2W, C]. The next ResBlock's conv mixes."""
    return jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)


class UNet(nn.Module):
    """Conditional UNet: x [B,32,32,1] (NHWC), t [B] in [0,1], y [B] int (10 = null) -> [B,32,32,1].
    A text UNet (cfg.text_width > 0) reads y as the pooled prompt embedding, float [B, text_width]."""

    cfg: UNetConfig

    @nn.compact
    def __call__(self, x: jnp.ndarray, t: jnp.ndarray, y: jnp.ndarray) -> jnp.ndarray:
        c, e, g = self.cfg.base_channels, self.cfg.emb_dim, self.cfg.groups
        temb = timestep_embedding(t, e)
        emb = nn.Dense(e, name="time_mlp2")(nn.silu(nn.Dense(e, name="time_mlp1")(temb)))
        if self.cfg.text_width:  # the pooled prompt embedding in the class embedding's place
            emb = emb + nn.Dense(e, name="text_emb")(y)  # [B, e]
        else:
            emb = emb + nn.Embed(self.cfg.num_classes + 1, e, name="class_emb")(y)  # [B, e]
        h = nn.Conv(c, (3, 3), padding=PAD1, name="in_conv")(x)  # [B, 32, 32, c]
        s0 = ResBlock(c, g, name="enc0")(h, emb)  # [B, 32, 32, c]
        s1 = ResBlock(2 * c, g, name="enc1")(downsample(s0), emb)  # [B, 16, 16, 2c]
        s2 = ResBlock(4 * c, g, name="enc2")(downsample(s1), emb)  # [B, 8, 8, 4c]
        h = downsample(s2)  # [B, 4, 4, 4c]
        h = ResBlock(4 * c, g, name="mid1")(ResBlock(4 * c, g, name="mid0")(h, emb), emb)
        h = ResBlock(4 * c, g, name="dec2")(jnp.concatenate([upsample(h), s2], axis=-1), emb)  # [B, 8, 8, 4c]
        h = ResBlock(2 * c, g, name="dec1")(jnp.concatenate([upsample(h), s1], axis=-1), emb)  # [B,16,16,2c]
        h = ResBlock(c, g, name="dec0")(jnp.concatenate([upsample(h), s0], axis=-1), emb)  # [B, 32, 32, c]
        h = nn.silu(group_norm(g, "out_norm")(h))
        # zero init: start as the zero velocity, like the PyTorch twin
        return nn.Conv(
            self.cfg.in_channels,
            (3, 3),
            padding=PAD1,
            kernel_init=nn.initializers.zeros,
            name="out_conv",
        )(h)  # [B, 32, 32, 1]


def init_params(model: UNet, seed: int) -> dict:
    """A fresh params tree (also the template for restoring checkpoints)."""
    size = model.cfg.image_size
    x = jnp.zeros((1, size, size, model.cfg.in_channels), jnp.float32)
    # jitted: eager init dispatches every op one by one (tens of seconds on a busy CPU)
    init = jax.jit(model.init)
    return init(jax.random.PRNGKey(seed), x, jnp.zeros((1,), jnp.float32), condition_template(model.cfg))[
        "params"
    ]
