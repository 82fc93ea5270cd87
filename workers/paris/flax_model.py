"""The Paris expert in Flax (linen), the twin of torch_model.ParisExpert, NHWC as every Flax expert here
(x [B, H, W, C], t [B] on 0..1000, text [B, T, text_width] -> [B, H, W, C]); `flax_params` converts
Paris's state dict (torch layout, by name) into its parameters at load, so one checkpoint serves on
PyTorch and on JAX hosts (tests/workers/test_paris.py: parity within 1e-4)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ddm.schema.errors import ConfigError
from ddm.workers.paris.config import FREQUENCY_DIM, MLP_RATIO, TIME_SCALE, ParisExpertConfig

LN_EPS = 1e-5  # as torch_model's


def timestep_features(t: jnp.ndarray, dim: int = FREQUENCY_DIM) -> jnp.ndarray:
    half = dim // 2
    freqs = jnp.exp(-math.log(10000.0) * jnp.arange(half, dtype=jnp.float32) / half)
    args = t.astype(jnp.float32)[:, None] * freqs[None]
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)


def layer_norm(x: jnp.ndarray) -> jnp.ndarray:
    """Over the last axis, no scale or bias, two-pass variance (as torch's F.layer_norm)."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + LN_EPS)


def modulate(x, shift, scale):
    return x * (1 + scale) + shift


class Attention(nn.Module):
    """torch's nn.MultiheadAttention: one fused in_proj (kept in torch's [3d, d] layout), softmax of
    q k^T / sqrt(head_dim) per head, out_proj."""

    heads: int

    @nn.compact
    def __call__(self, q_in: jnp.ndarray, kv_in: jnp.ndarray) -> jnp.ndarray:
        d = q_in.shape[-1]
        w = self.param("in_proj_weight", nn.initializers.lecun_normal(), (3 * d, d))
        b = self.param("in_proj_bias", nn.initializers.zeros, (3 * d,))
        q = q_in @ w[:d].T + b[:d]
        k = kv_in @ w[d : 2 * d].T + b[d : 2 * d]
        v = kv_in @ w[2 * d :].T + b[2 * d :]
        hd = d // self.heads

        def split(a):  # [B, N, d] -> [B, N, heads, hd]
            return a.reshape(*a.shape[:2], self.heads, hd)

        logits = jnp.einsum("bqhd,bkhd->bhqk", split(q), split(k)) / math.sqrt(hd)
        out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), split(v))
        return nn.Dense(d, name="out_proj")(out.reshape(*q_in.shape[:2], d))


class Mlp(nn.Module):
    @nn.compact
    def __call__(self, x):
        d = x.shape[-1]
        return nn.Dense(d, name="fc2")(jax.nn.gelu(nn.Dense(MLP_RATIO * d, name="fc1")(x), approximate=True))


class ExpertBlock(nn.Module):
    heads: int

    @nn.compact
    def __call__(self, x, t0, text):
        d = x.shape[-1]
        table = self.param("scale_shift_table", nn.initializers.zeros, (6, d))
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = jnp.split(table[None] + t0, 6, axis=1)
        h = modulate(layer_norm(x), shift_a, scale_a)
        x = x + gate_a * Attention(self.heads, name="attn")(h, h)
        x = x + Attention(self.heads, name="cross_attn")(x, text)
        return x + gate_m * Mlp(name="mlp")(modulate(layer_norm(x), shift_m, scale_m))


class ParisExpert(nn.Module):
    config: ParisExpertConfig
    time_scale: float = 1.0  # TIME_SCALE: t given in [0, 1] (served_expert)

    @property
    def cfg(self) -> ParisExpertConfig:  # what the expert runtime reads (text_width, text_tokens)
        return self.config

    @nn.compact
    def __call__(self, x: jnp.ndarray, t: jnp.ndarray, text: jnp.ndarray) -> jnp.ndarray:
        c = self.config
        t = t * self.time_scale
        b, d, p, side = x.shape[0], c.width, c.patch, c.image_size // c.patch
        tokens = nn.Conv(d, (p, p), strides=(p, p), padding="VALID", name="patch_embed")(x).reshape(b, -1, d)
        tokens = tokens + self.param("pos_embed", nn.initializers.zeros, (1, c.patches, d))
        t_emb = nn.Dense(d, name="time_fc2")(nn.silu(nn.Dense(d, name="time_fc1")(timestep_features(t))))
        t0 = nn.Dense(6 * d, name="t_block")(nn.silu(t_emb)).reshape(b, 6, d)
        text = nn.Dense(d, name="text_proj")(text)
        for i in range(c.depth):
            tokens = ExpertBlock(c.heads, name=f"layers_{i}")(tokens, t0, text)
        table = self.param("final_scale_shift_table", nn.initializers.zeros, (2, d))
        shift, scale = jnp.split(table[None] + t_emb[:, None], 2, axis=1)
        out = nn.Dense(p * p * c.channels, name="final_linear")(modulate(layer_norm(tokens), shift, scale))
        out = out.reshape(b, side, side, p, p, c.channels).transpose(0, 1, 3, 2, 4, 5)
        return out.reshape(b, side * p, side * p, c.channels)


def _dense(state: Mapping[str, np.ndarray], name: str) -> dict:
    return {"kernel": np.asarray(state[f"{name}.weight"]).T, "bias": np.asarray(state[f"{name}.bias"])}


def _attention(state: Mapping[str, np.ndarray], name: str) -> dict:
    return {
        "in_proj_weight": np.asarray(state[f"{name}.in_proj_weight"]),
        "in_proj_bias": np.asarray(state[f"{name}.in_proj_bias"]),
        "out_proj": _dense(state, f"{name}.out_proj"),
    }


def flax_params(state: Mapping[str, np.ndarray], depth: int) -> dict:
    """Paris's state dict (by its names, torch layout, float32 numpy) -> ParisExpert's {"params": ...}."""
    params = {
        "patch_embed": {
            "kernel": np.asarray(state["patch_embed.weight"]).transpose(2, 3, 1, 0),
            "bias": np.asarray(state["patch_embed.bias"]),
        },
        "pos_embed": np.asarray(state["pos_embed"]),
        "time_fc1": _dense(state, "time_embed.mlp.0"),
        "time_fc2": _dense(state, "time_embed.mlp.2"),
        "t_block": _dense(state, "t_block.1"),
        "text_proj": _dense(state, "text_proj"),
        "final_scale_shift_table": np.asarray(state["final_layer.scale_shift_table"]),
        "final_linear": _dense(state, "final_layer.linear"),
    }
    for i in range(depth):
        name = f"layers.{i}"
        params[f"layers_{i}"] = {
            "scale_shift_table": np.asarray(state[f"{name}.scale_shift_table"]),
            "attn": _attention(state, f"{name}.attn"),
            "cross_attn": _attention(state, f"{name}.cross_attn"),
            "mlp": {"fc1": _dense(state, f"{name}.mlp.0"), "fc2": _dense(state, f"{name}.mlp.2")},
        }
    return {"params": jax.tree_util.tree_map(jnp.asarray, params)}


def served_expert(config: ParisExpertConfig) -> ParisExpert:
    """The expert as the registry builds it: t in [0, 1] (its card's time input, 1 = noise)."""
    return ParisExpert(config, time_scale=TIME_SCALE)


def init_params(model: ParisExpert, seed: int) -> dict:
    """A fresh params tree: the template Paris's converted weights are checked against."""
    c = model.config
    x = jnp.zeros((1, c.image_size, c.image_size, c.channels), jnp.float32)
    text = jnp.zeros((1, c.text_tokens, c.text_width), jnp.float32)
    return jax.jit(model.init)(jax.random.PRNGKey(seed), x, jnp.zeros((1,), jnp.float32), text)["params"]


def canonical_to_flax(flat: Mapping[str, np.ndarray], like: dict) -> dict:
    """The registry's layout hook: Paris's state dict -> the params tree, every leaf's shape checked
    against `like` (a fresh init_params tree)."""
    depth = sum(1 for name in like if name.startswith("layers_"))
    params = flax_params(flat, depth)["params"]
    want = jax.tree_util.tree_map(np.shape, like)
    got = jax.tree_util.tree_map(np.shape, params)
    if want != got:
        raise ConfigError(f"a Paris expert's converted weights are shaped {got}, its config's {want}")
    return params


def flax_to_canonical(params: dict) -> dict:
    """Not written: a Paris expert serves from its own safetensors file, never from model.msgpack."""
    raise ConfigError("a Paris expert's weights are its own safetensors file: there is no Flax checkpoint")
