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
    """uint8 [N, H, W] (greyscale) or [N, H, W, 3] (RGB) -> one uint8 [rows*(H+pad)+pad,
    cols*(W+pad)+pad] (and 3 channels for RGB) mosaic, row-major."""
    n, h, w = images.shape[:3]
    rows = max(1, -(-n // cols))
    out = np.full((rows * (h + pad) + pad, cols * (w + pad) + pad, *images.shape[3:]), 40, np.uint8)
    for i, img in enumerate(images):
        r, c = divmod(i, cols)
        out[pad + r * (h + pad) : pad + r * (h + pad) + h, pad + c * (w + pad) : pad + c * (w + pad) + w] = (
            img
        )
    return out


def _grid_image(x: np.ndarray, cols: int, scale: int, value_range=(-1.0, 1.0)):
    """Latents float [N,C,H,W] in about value_range -> a PIL grid (greyscale for 1 channel, RGB for 3
    or more), upscaled with crisp pixels."""
    Image = _pil_image()
    pixels = to_uint8(x, value_range)
    img = Image.fromarray(grid(pixels, cols), mode="RGB" if pixels.ndim == 4 else "L")
    if scale > 1:
        img = img.resize((img.width * scale, img.height * scale), Image.NEAREST)
    return img


def save_grid(x: np.ndarray, path: str | Path, cols: int, scale: int = 3, value_range=(-1.0, 1.0)) -> Path:
    """Latents float [N,C,H,W] in about value_range (the sample space's) -> PNG grid file (RGB for 3
    channels), upscaled with crisp pixels."""
    img = _grid_image(x, cols, scale, value_range)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def png_bytes(x: np.ndarray, cols: int | None = None, scale: int = 3, value_range=(-1.0, 1.0)) -> bytes:
    """Latents float [N,C,H,W] (Client.result) -> one PNG grid as bytes (cols: all in one row when
    None, at most 10; RGB for 3 channels)."""
    buf = io.BytesIO()
    _grid_image(x, cols or max(1, min(len(x), 10)), scale, value_range).save(buf, format="PNG")
    return buf.getvalue()


def pil_images(x: np.ndarray, scale: int = 1, value_range=(-1.0, 1.0)) -> list:
    """Latents float [N,C,H,W] -> N PIL images (mode L for 1 channel, RGB for 3; H*scale x W*scale)."""
    Image = _pil_image()
    pixels = to_uint8(x, value_range)
    mode = "RGB" if pixels.ndim == 4 else "L"
    images = [Image.fromarray(img, mode=mode) for img in pixels]
    if scale > 1:
        images = [img.resize((img.width * scale, img.height * scale), Image.NEAREST) for img in images]
    return images
