"""The JAX pieces shared beyond the JAX expert: the UNet's sinusoidal time embedding and PyTorch-style
padding (the router net uses both, so its Flax code reads like the expert's), and the persistent
compilation cache every JAX process turns on (the expert, the learned router), and the zeros of an
expert model's conditioning input (labels or prompt embeddings: condition_template). Public: the router
imports these, never the expert's internals."""

from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp

PAD1 = ((1, 1), (1, 1))  # explicit, like PyTorch's padding=1


def timestep_embedding(t: jnp.ndarray, dim: int) -> jnp.ndarray:
    """Sinusoidal embedding of t in [0, 1] (scaled by 1000 like DDPM steps). [B] -> [B, dim]."""
    half = dim // 2
    freqs = jnp.exp(-math.log(10000.0) * jnp.arange(half, dtype=jnp.float32) / half)
    args = (t.astype(jnp.float32) * 1000.0)[:, None] * freqs[None, :]
    return jnp.concatenate([jnp.sin(args), jnp.cos(args)], axis=1)


def condition_template(cfg, batch: int = 1) -> jnp.ndarray:
    """Zeros of what an expert model's third input is: int32 labels [batch], or for a text expert
    (cfg.text_width > 0) its prompt embeddings float32 [batch, *condition_shape(cfg)] (init, compiling)."""
    from ddm.workers.config import condition_shape

    shape = condition_shape(cfg)
    return jnp.zeros((batch, *shape), jnp.float32) if shape else jnp.zeros((batch,), jnp.int32)


def enable_compilation_cache() -> None:
    """Persist compiled buckets across processes ($DDM_JAX_CACHE_DIR, default ~/.cache/ddm/jax):
    a restarted worker or a second replica loads in seconds instead of recompiling every bucket."""
    from ddm.schema.settings import Settings

    path = Settings.from_env().jax_cache_dir
    if path.lower() in ("", "0", "off", "none"):
        return
    path = os.path.expanduser(path)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
