"""Pictures: image grids as PNG, and images as PIL images, used by sample, submit, result, partition
previews, eval and the Python client (ddm.client). pillow is imported only when a picture is made."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ddm.schema.errors import ConfigError
from ddm.schema.flow import to_uint8


def _pil_image():
    """PIL.Image, or a ConfigError saying how to install pillow."""
    try:
        from PIL import Image
    except ImportError:
        raise ConfigError("pillow is not installed here: `pip install pillow` to make PNGs") from None
    return Image


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


def _grid_image(x: np.ndarray, cols: int, scale: int):
    """Latents float [N,1,32,32] in about [-1, 1] -> a PIL grid, upscaled with crisp pixels."""
    Image = _pil_image()
    img = Image.fromarray(grid(to_uint8(x), cols), mode="L")
    if scale > 1:
        img = img.resize((img.width * scale, img.height * scale), Image.NEAREST)
    return img


def save_grid(x: np.ndarray, path: str | Path, cols: int, scale: int = 3) -> Path:
    """Latents float [N,1,32,32] in about [-1, 1] -> PNG grid file, upscaled with crisp pixels."""
    img = _grid_image(x, cols, scale)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def png_bytes(x: np.ndarray, cols: int | None = None, scale: int = 3) -> bytes:
    """Latents float [N,1,32,32] (Client.result) -> one PNG grid as bytes (cols: all in one row when
    None, at most 10)."""
    buf = io.BytesIO()
    _grid_image(x, cols or max(1, min(len(x), 10)), scale).save(buf, format="PNG")
    return buf.getvalue()


def pil_images(x: np.ndarray, scale: int = 1) -> list:
    """Latents float [N,1,32,32] -> N grayscale PIL images (mode L, 32*scale pixels square)."""
    Image = _pil_image()
    images = [Image.fromarray(img, mode="L") for img in to_uint8(x)]
    if scale > 1:
        images = [img.resize((img.width * scale, img.height * scale), Image.NEAREST) for img in images]
    return images
