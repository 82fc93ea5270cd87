"""The class-conditional DiT in Flax (linen), the twin of workers/dit/torch_model.py: the same module
names (so ddm.workers.layout maps every parameter by name), NHWC inside."""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from ddm.workers.dit.config import DiTConfig
from ddm.workers.dit.layout import pos_embed_2d
from ddm.workers.jax_common import condition_template

LN_EPS = 1e-6  # the paper's; set explicitly in both twins
XAVIER = nn.initializers.xavier_uniform()
# the patch kernel [p, p, C, h]: fan in p*p*C, as torch's xavier on weight.view(h, -1)
XAVIER_PATCH = nn.initializers.variance_scaling(1.0, "fan_avg", "uniform", in_axis=(0, 1, 2), out_axis=-1)
ZEROS = nn.initializers.zeros
NORMAL_002 = nn.initializers.normal(0.02)


def timestep_embedding(t: jnp.ndarray, dim: int) -> jnp.ndarray:
    """Sinusoidal features of t in [0, 1] (scaled by 1000, as the UNet's): [B] -> [B, dim], cos then sin."""
    half = dim // 2
    freqs = jnp.exp(-math.log(10000.0) * jnp.arange(half, dtype=jnp.float32) / half)
    args = (t.astype(jnp.float32) * 1000.0)[:, None] * freqs[None, :]
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=1)


def layer_norm(x: jnp.ndarray) -> jnp.ndarray:
    """LayerNorm over the last axis without scale or bias (two-pass variance, as PyTorch's)."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + LN_EPS)


def modulate(x: jnp.ndarray, shift: jnp.ndarray, scale: jnp.ndarray) -> jnp.ndarray:
    """x [B, N, h] * (1 + scale [B, h]) + shift [B, h], per sample."""
    return x * (1.0 + scale[:, None, :]) + shift[:, None, :]


def dense(features: int, name: str, zero: bool = False, kernel_init=XAVIER) -> nn.Dense:
    return nn.Dense(features, kernel_init=ZEROS if zero else kernel_init, bias_init=ZEROS, name=name)


class Attention(nn.Module):
    """Multi-head self-attention: qkv, softmax(q k^T / sqrt(head_dim)) v, proj."""

    heads: int

    @nn.compact
    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        B, N, h = x.shape
        hd = h // self.heads
        qkv = dense(3 * h, "qkv")(x).reshape(B, N, 3, self.heads, hd)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [B, N, heads, head_dim]
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)  # [B, heads, N, N]
        out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v)  # [B, N, heads, head_dim]
        return dense(h, "proj")(out.reshape(B, N, h))  # [B, N, h]


class Mlp(nn.Module):
    hidden: int
    mlp_hidden: int

    @nn.compact
    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        return dense(self.hidden, "fc2")(nn.gelu(dense(self.mlp_hidden, "fc1")(x), approximate=True))


class DiTBlock(nn.Module):
    """Self-attention and an MLP behind adaLN-Zero (the twin of torch_model.DiTBlock)."""

    hidden: int
    heads: int
    mlp_hidden: int

    @nn.compact
    def __call__(self, x: jnp.ndarray, c: jnp.ndarray) -> jnp.ndarray:
        mods = jnp.split(dense(6 * self.hidden, "ada", zero=True)(nn.silu(c)), 6, axis=1)  # 6 x [B, h]
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = mods
        attn = Attention(self.heads, name="attn")(modulate(layer_norm(x), shift_a, scale_a))
        x = x + gate_a[:, None, :] * attn
        mlp = Mlp(self.hidden, self.mlp_hidden, name="mlp")(modulate(layer_norm(x), shift_m, scale_m))
        return x + gate_m[:, None, :] * mlp  # [B, N, h]


class DiT(nn.Module):
    """Class-conditional DiT: x [B,H,W,C] (NHWC), t [B] in [0,1], y [B] int (num_classes = null)
    -> v [B,H,W,C]. A text DiT (cfg.text_width > 0) reads y as the pooled prompt embedding [B, width]."""

    cfg: DiTConfig

    @nn.compact
    def __call__(self, x: jnp.ndarray, t: jnp.ndarray, y: jnp.ndarray) -> jnp.ndarray:
        cfg = self.cfg
        B, H, W, C = x.shape
        h, p, g = cfg.hidden_size, cfg.patch_size, cfg.grid
        patches = nn.Conv(
            h,
            (p, p),
            strides=(p, p),
            padding="VALID",
            kernel_init=XAVIER_PATCH,
            bias_init=ZEROS,
            name="patch_embed",
        )(x)  # [B, g, g, h]
        tokens = patches.reshape(B, g * g, h) + jnp.asarray(pos_embed_2d(h, g))  # [B, N, h]
        temb = dense(h, "t_mlp1", kernel_init=NORMAL_002)(timestep_embedding(t, cfg.freq_dim))
        temb = dense(h, "t_mlp2", kernel_init=NORMAL_002)(nn.silu(temb))  # [B, h]
        if cfg.text_width:  # the pooled prompt embedding in the class embedding's place
            c = temb + dense(h, "text_embed")(y)  # [B, h]
        else:
            table = nn.Embed(cfg.num_classes + 1, h, embedding_init=NORMAL_002, name="y_embed")
            c = temb + table(y)  # [B, h]
        for i in range(cfg.depth):
            tokens = DiTBlock(h, cfg.num_heads, cfg.mlp_hidden, name=f"block{i}")(tokens, c)  # [B, N, h]
        shift, scale = jnp.split(dense(2 * h, "final_ada", zero=True)(nn.silu(c)), 2, axis=1)  # [B, h]
        out = dense(p * p * C, "final_linear", zero=True)(modulate(layer_norm(tokens), shift, scale))
        out = out.reshape(B, g, g, p, p, C).transpose(0, 1, 3, 2, 4, 5)  # [B, g, p, g, p, C]
        return out.reshape(B, H, W, C)  # [B, H, W, C]


def init_params(model: DiT, seed: int) -> dict:
    """A fresh params tree (also the template for restoring checkpoints)."""
    cfg = model.cfg
    x = jnp.zeros((1, cfg.image_size, cfg.image_size, cfg.in_channels), jnp.float32)
    # jitted: eager init dispatches every op one by one (tens of seconds on a busy CPU)
    init = jax.jit(model.init)
    return init(jax.random.PRNGKey(seed), x, jnp.zeros((1,), jnp.float32), condition_template(cfg))["params"]
