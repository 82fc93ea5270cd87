"""A frame's latent as the page draws it: uint8 pixels of any sample space, one byte per channel shown.

    pixels, channels = to_pixels(x, value_range)   # [n, C, H, W] -> uint8 [n, H, W] or [n, H, W, 3]

- 1 channel: greyscale, [n, H, W], exactly the bytes the page got before sample spaces (schema/flow.py
  `to_uint8` for [-1, 1]: the same float32 operations, so MNIST frames are identical byte for byte).
- 3 channels: RGB, interleaved per pixel ([n, H, W, 3], row-major), as canvas ImageData wants it.
- Any other count (a VAE's 4-channel latents): the first three channels as RGB, 2 channels as
  greyscale of the first; `channels` says what the bytes hold, and the page says what it shows.

Values are mapped from the sample space's value range (lo, hi) to 0..255, clipped, rounded.
"""

from __future__ import annotations

import numpy as np

DEFAULT_RANGE = (-1.0, 1.0)  # the legacy space's, and what a space that names none means


def shown_channels(c: int) -> int:
    """Channels the pixels carry for a latent of c channels: 1 (greyscale) or 3 (RGB)."""
    return 3 if c >= 3 else 1


def to_pixels(x: np.ndarray, value_range: tuple[float, float] = DEFAULT_RANGE) -> tuple[np.ndarray, int]:
    """float [n, C, H, W] in about value_range -> (uint8 pixels, channels shown: 1 or 3).

    C == 1 (or 2): [n, H, W] greyscale of channel 0; C >= 3: [n, H, W, 3], channels 0, 1, 2 as R, G, B.
    """
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 4:
        raise ValueError(f"expected a latent [n, C, H, W], got shape {x.shape}")
    lo, hi = float(value_range[0]), float(value_range[1])
    if not hi > lo:
        raise ValueError(f"expected a value range lo < hi, got {value_range}")
    channels = shown_channels(x.shape[1])
    # [n, H, W] or [n, H, W, 3]; python floats keep the arithmetic in float32 (NEP 50), as to_uint8's
    picked = x[:, 0] if channels == 1 else np.moveaxis(x[:, :3], 1, -1)
    scaled = np.clip((picked - lo) * (255.0 / (hi - lo)), 0, 255)
    return np.ascontiguousarray(np.round(scaled).astype(np.uint8)), channels
