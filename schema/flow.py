"""The one flow-matching convention, written once and imported by everything.

    t in [0, 1]; t = 0 is Gaussian noise, t = 1 is data.
    x_t = t * x1 + (1 - t) * x0, x0 ~ N(0, I), x1 data scaled to [-1, 1].
    target velocity v = x1 - x0.
    Euler on a uniform grid of N steps: x <- x + (t[i+1] - t[i]) * v(x, t[i]).
    Classifier-free guidance: v = v_null + g * (v_y - v_null).

Functions are written with plain arithmetic so they work on numpy arrays, torch tensors and jax
arrays alike (the training loops in both frameworks call these, not copies of them).
"""

from __future__ import annotations

import numpy as np

from ddm.schema.sample_space import LEGACY

# Today's sample space (schema/sample_space.py LEGACY), under the names its users import.
NUM_CLASSES = LEGACY.num_classes  # 10
NULL_CLASS = LEGACY.null_class  # = NUM_CLASSES: the label of the unconditional branch (label dropout)
IMAGE_SHAPE = LEGACY.shape  # channels, height, width: (1, 32, 32), MNIST 28x28 padded to 32


def _bcast_t(t, x):
    """Reshape per-sample times [B] so they broadcast against x [B, ...]."""
    return t.reshape((-1,) + (1,) * (x.ndim - 1))


def interpolate(x0, x1, t):
    """x_t = t * x1 + (1 - t) * x0.  x0, x1: [B, C, H, W] (or any [B, ...]); t: [B]."""
    tb = _bcast_t(t, x1)
    return tb * x1 + (1 - tb) * x0


def target_velocity(x0, x1):
    """The regression target of flow matching: v = x1 - x0."""
    return x1 - x0


def time_grid(num_steps: int) -> np.ndarray:
    """Uniform grid t[0] = 0 ... t[N] = 1 with N + 1 points, float32."""
    if num_steps < 1:
        raise ValueError(f"expected num_steps >= 1, got {num_steps}")
    return np.linspace(0.0, 1.0, num_steps + 1, dtype=np.float32)


def euler_step(x, v, t_now, t_next):
    """One Euler update x + (t_next - t_now) * v. Pure: no hidden step counter."""
    return x + (t_next - t_now) * v


def guided_velocity(v_cond, v_null, guidance):
    """Classifier-free guidance v_null + g * (v_cond - v_null); g may be a scalar or [B]."""
    g = guidance
    if not np.isscalar(g):
        g = _bcast_t(g, v_cond)
    return v_null + g * (v_cond - v_null)


def pad_to_32(images_28: np.ndarray) -> np.ndarray:
    """uint8 [N, 28, 28] -> float32 [N, 1, 32, 32] in [-1, 1], zero border = -1 (black)."""
    x = images_28.astype(np.float32) / 127.5 - 1.0
    x = np.pad(x, ((0, 0), (2, 2), (2, 2)), constant_values=-1.0)
    return x[:, None, :, :]


def to_uint8(x: np.ndarray, value_range: tuple[float, float] = (-1.0, 1.0)) -> np.ndarray:
    """float [N, C, H, W] in about value_range (the sample space's) -> uint8 for pictures: [N, H, W]
    greyscale of channel 0 when C < 3 (the legacy [N, 1, 32, 32] gives the bytes it always gave), else
    [N, H, W, 3] RGB of channels 0, 1, 2."""
    x = np.asarray(x, dtype=np.float32)
    picked = x[:, 0] if x.shape[1] < 3 else np.moveaxis(x[:, :3], 1, -1)
    lo, hi = float(value_range[0]), float(value_range[1])
    if (lo, hi) == (-1.0, 1.0):
        scaled = np.clip((picked + 1.0) * 127.5, 0, 255)
    else:
        scaled = np.clip((picked - lo) * (255.0 / (hi - lo)), 0, 255)
    return np.round(scaled).astype(np.uint8)
