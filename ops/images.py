"""Pictures: image grids as PNG (pillow), used by sample, partition previews, eval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from ddm.schema.flow import to_uint8


def grid(images: np.ndarray, cols: int, pad: int = 2) -> np.ndarray:
    """uint8 [N, H, W] -> one uint8 [rows*(H+pad)+pad, cols*(W+pad)+pad] mosaic, row-major."""
    n, h, w = images.shape
    rows = max(1, -(-n // cols))
    out = np.full((rows * (h + pad) + pad, cols * (w + pad) + pad), 40, np.uint8)
    for i, img in enumerate(images):
        r, c = divmod(i, cols)
        out[pad + r * (h + pad) : pad + r * (h + pad) + h, pad + c * (w + pad) : pad + c * (w + pad) + w] = (
            img
        )
    return out


def save_grid(x: np.ndarray, path: str | Path, cols: int, scale: int = 3) -> Path:
    """Latents float [N,1,32,32] in about [-1, 1] -> PNG grid, upscaled with crisp pixels."""
    mosaic = grid(to_uint8(x), cols)
    img = Image.fromarray(mosaic, mode="L")
    if scale > 1:
        img = img.resize((img.width * scale, img.height * scale), Image.NEAREST)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path
