"""A trained router behind the Router protocol (router/policies.py): probs(x, t, y) -> [B, K].

Like the JAX expert, every batch bucket is compiled at load and inputs are padded to the next
bucket, so the router worker never recompiles whatever the job sizes.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from ddm.router.router_net import RouterConfig, RouterNet
from ddm.schema.checkpoint_meta import read_meta
from ddm.schema.errors import ConfigError, expected
from ddm.workers.buckets import run_bucketed

WEIGHTS = "model.msgpack"
# Larger batches run in chunks of 16: XLA:CPU ran this net on 64 rows in 20.6 ms against 10.2 ms as four
# calls of 16 rows, and on 32 rows in 9.3 against 5.2 ms (2-core VM; `python -m ddm.ops.bench.models`).
ROUTER_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 16)


def condition_struct(cfg: RouterConfig, batch: int) -> jax.ShapeDtypeStruct:
    """What the router reads as y for `batch` rows: class ids, or pooled prompt embeddings."""
    if cfg.text_width:
        return jax.ShapeDtypeStruct((batch, cfg.text_width), jnp.float32)
    return jax.ShapeDtypeStruct((batch,), jnp.int32)


def init_router_params(model: RouterNet, seed: int = 0) -> dict:
    size, channels = model.cfg.image_size, model.cfg.in_channels
    x = jnp.zeros((1, size, size, channels), jnp.float32)
    y = condition_struct(model.cfg, 1)
    init = jax.jit(model.init)
    return init(jax.random.PRNGKey(seed), x, jnp.zeros((1,), jnp.float32), jnp.zeros(y.shape, y.dtype))[
        "params"
    ]


def read_router_meta(path: Path) -> dict:
    """A router checkpoint's meta.json (the schema's checked record), with its weights file present."""
    meta = read_meta(path, kind="router")
    if not (Path(path) / WEIGHTS).is_file():
        raise ConfigError(expected(f"a router checkpoint (meta.json + {WEIGHTS}) at {path}", "missing files"))
    return meta


class LearnedRouter:
    def __init__(self, cfg: RouterConfig, params: dict, meta: dict, buckets=ROUTER_BUCKETS):
        self.cfg = cfg
        self.meta = meta
        self.buckets = tuple(sorted(buckets))
        model = RouterNet(cfg)

        def probs(p, x, t, y):
            return jax.nn.softmax(model.apply({"params": p}, jnp.transpose(x, (0, 2, 3, 1)), t, y), axis=-1)

        jitted = jax.jit(probs)
        self._params = params
        self._compiled = {
            b: jitted.lower(
                params,
                jax.ShapeDtypeStruct((b, cfg.in_channels, cfg.image_size, cfg.image_size), jnp.float32),
                jax.ShapeDtypeStruct((b,), jnp.float32),
                condition_struct(cfg, b),
            ).compile()
            for b in self.buckets
        }

    @property
    def num_experts(self) -> int:
        return self.cfg.num_clusters

    def probs(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        """x f32 [B,C,H,W] (its config's sample shape), t f32 [B], y int [B] (a prompt-aware router: f32
        [B, text_width], the pooled prompt embeddings) -> p(cluster) f32 [B, K]."""

        def forward(xs, ts, ys):
            return self._compiled[len(xs)](self._params, xs, ts, ys)

        y = np.asarray(y, condition_struct(self.cfg, 1).dtype)
        return run_bucketed(forward, (x, t, y), self.buckets, self.buckets[-1])


def load_router(path: str | Path, buckets=ROUTER_BUCKETS) -> LearnedRouter:
    from ddm.workers.jax_common import enable_compilation_cache

    path = Path(path)
    meta = read_router_meta(path)
    cfg = RouterConfig(**meta["config"])
    template = init_router_params(RouterNet(cfg))
    params = serialization.from_bytes(template, (path / WEIGHTS).read_bytes())
    enable_compilation_cache()
    return LearnedRouter(cfg, params, meta, buckets)
