"""JAX/Flax expert on cpu or gpu.

Every batch bucket is compiled ahead of time at load (jit(...).lower(...).compile()), and only those
executables are ever called: a shape outside the buckets cannot trigger a recompile mid-serving.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ddm.schema.errors import ConfigError, DeviceError
from ddm.schema.precision import DEFAULT_PRECISION, check_precision
from ddm.workers.checkpoint import architecture_of, config_of, weights_path
from ddm.workers.expert import DEFAULT_BUCKETS, Expert, ExpertMeta
from ddm.workers.jax_common import condition_template, enable_compilation_cache
from ddm.workers.jax_expert.checkpoint import flax_template, load_weights
from ddm.workers.memory import check_load

DEVICES = ("auto", "cpu", "gpu")
# precision -> the matmul and convolution precision XLA compiles float32 dots with. fp32 asks for
# "highest": on Ampere and newer GPUs XLA's default for float32 is TF32. bf16 is not offered: XLA's
# "bfloat16" setting only selects its default precision, which is not bf16 compute (JAX issue 18934);
# it would need the params and inputs cast, which this expert does not do.
MATMUL_PRECISION = {"fp32": "highest", "tf32": "tensorfloat32"}


def condition_spec(cfg, batch: int) -> jax.ShapeDtypeStruct:
    """The compiled bucket's conditioning input: labels int32 [b], or embeddings float32 [b, width]."""
    zeros = jax.eval_shape(lambda: condition_template(cfg, batch))
    return jax.ShapeDtypeStruct(zeros.shape, zeros.dtype)


def resolve_device(device: str) -> jax.Device:
    if device not in DEVICES:
        raise ConfigError(f"expected a JAX device in {DEVICES}, got {device!r}")
    if device == "auto":
        return jax.devices()[0]
    try:
        return jax.devices(device)[0]
    except RuntimeError as exc:
        raise DeviceError(
            f"expected a JAX {device} backend, but none is available ({exc}); install jax[cuda12] for GPUs"
        ) from None


def toolchain_line(device: str) -> str:
    """The toolchain as the expert worker's start-up line shows it: "jax 0.x, backend cpu"."""
    return f"jax {jax.__version__}, backend {jax.default_backend()}"


class JaxExpert(Expert):
    def __init__(self, model, params: dict, meta: ExpertMeta, device, buckets=DEFAULT_BUCKETS):
        """model: the architecture's Flax module (NHWC inside); params: its tree. Compiles every bucket
        at meta.precision."""
        self.meta = meta
        self.buckets = tuple(sorted(buckets))
        params = jax.device_put(params, device)

        def apply(p, x, t, y):
            v = model.apply({"params": p}, jnp.transpose(x, (0, 2, 3, 1)), t, y)  # NHWC inside
            return jnp.transpose(v, (0, 3, 1, 2))

        jitted = jax.jit(apply)
        self._compiled = {}
        shape = self.card.sample_space.shape  # the expert's sample space (its card)
        for b in self.buckets:
            spec = (
                jax.ShapeDtypeStruct((b, *shape), jnp.float32),
                jax.ShapeDtypeStruct((b,), jnp.float32),
                condition_spec(model.cfg, b),
            )
            with jax.default_matmul_precision(MATMUL_PRECISION[meta.precision]):
                self._compiled[b] = jitted.lower(params, *spec).compile()
        self._params = params

    def _forward(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        c = y.astype(np.float32 if self.text_width else np.int32)  # embeddings, or labels
        v = self._compiled[len(x)](self._params, x, t, c)
        return np.asarray(v)


def load(
    path: str | Path,
    meta: dict,
    device: str = "auto",
    buckets=DEFAULT_BUCKETS,
    precision: str = DEFAULT_PRECISION,
) -> JaxExpert:
    dev = resolve_device(device)
    check_precision(precision)
    offered = ("fp32",) if dev.platform == "cpu" else tuple(MATMUL_PRECISION)
    if precision not in offered:
        raise ConfigError(
            f"precision {precision} is not available on a JAX {dev.platform} expert; expected one of "
            f"{offered}"
        )
    weights = weights_path(path, meta)
    what = f"expert {meta.get('expert', 0)} ({weights})"
    free = None if dev.platform == "cpu" else _device_free(dev)
    check_load(what, weights, 4, dev.platform, precision, free)  # float32 params
    enable_compilation_cache()
    architecture = architecture_of(meta)
    model, like = flax_template(architecture, config_of(meta))
    params = architecture.to_flax(load_weights(Path(path), architecture, weights), like)
    expert_meta = ExpertMeta.from_json(meta, dev.platform, str(path), precision)
    expert = JaxExpert(model, params, expert_meta, dev, buckets)
    expert.weights_bytes = sum(int(leaf.nbytes) for leaf in jax.tree_util.tree_leaves(params))
    return expert


def _device_free(dev: jax.Device) -> int | None:
    """An accelerator's free memory where it reports memory stats (bytes_limit less bytes_in_use)."""
    stats = dev.memory_stats() or {}
    if "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return None
