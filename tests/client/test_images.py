"""Images for people: a PNG grid as bytes and one PIL image per latent (the client's helpers), and a
plain error naming the fix where pillow is not installed."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

from ddm.client import pil_images, png_bytes
from ddm.schema.errors import ConfigError


def latents(n: int) -> np.ndarray:
    x = -np.ones((n, 1, 32, 32), np.float32)
    x[:, :, 8:24, 8:24] = 1.0  # a white square on black
    return x


def test_png_bytes_is_one_grid():
    from PIL import Image

    img = Image.open(io.BytesIO(png_bytes(latents(4), cols=2, scale=1)))
    assert img.format == "PNG" and img.mode == "L"
    assert img.size == (2 * 34 + 2, 2 * 34 + 2)  # 32 px tiles, 2 px padding
    assert Image.open(io.BytesIO(png_bytes(latents(3)))).size == (3 * 34 * 3 + 6, 34 * 3 + 6)  # one row


def test_pil_images_one_per_latent():
    images = pil_images(latents(3), scale=2)
    assert [im.size for im in images] == [(64, 64)] * 3
    assert images[0].getpixel((32, 32)) == 255 and images[0].getpixel((0, 0)) == 0


def test_without_pillow_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # `from PIL import Image` raises ImportError
    with pytest.raises(ConfigError, match="pip install pillow"):
        png_bytes(latents(1))
