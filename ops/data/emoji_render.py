"""Draw one emoji with the Noto Color Emoji font into a square uint8 RGB array [3, size, size].

Colour bitmap fonts draw only at the size their bitmaps were made at (109 for Noto Color Emoji; any
other size raises `OSError: invalid pixel size`) and only with `embedded_color=True`. Layout goes
through libraqm (HarfBuzz), which joins ZWJ sequences, flags and keycaps into their one glyph; Pillow's
basic layout would draw them as their separate parts, so rendering refuses to run without raqm.

Each bitmap (136x128 for Noto) is composited onto a flat background, padded to a square with the
same background (the emoji keeps its aspect and its size relative to the font's em: a small
symbol stays small), then resized with a box filter (the exact average of the source pixels each
target pixel covers; no ringing, unlike Lanczos, on the flat-coloured shapes emoji are made of).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ddm.schema.errors import ConfigError, expected

BITMAP_SIZE = 109  # the only size Noto Color Emoji's CBDT bitmaps draw at
# Neutral grey, not white: many emoji are mostly white (cloud, ghost, white flag, snowman, eggs, rice,
# paper) and Noto draws no outlines, so on white they lose their silhouette. Measured on the font's
# 1870 base emoji: 9.4% of opaque pixels lie within 24 levels (each channel) of white, 1.2% of this
# grey (1.7% of black).
BACKGROUND = (128, 128, 128)
SIZES = (32, 64)
# A glyph whose drawn bitmap is wider than this many single-emoji advances is a sequence the font
# cannot join (it drew the parts side by side): dropped, like blank (.notdef) glyphs.
MAX_ADVANCES = 1.5
_REFERENCE = "\U0001f600"  # grinning face: in every version of the font


RAQM_FIX = "install a Pillow wheel (it bundles libraqm), or apt-get install -y libraqm0"


def require_raqm() -> None:
    """ConfigError (with RAQM_FIX) unless Pillow lays text out with libraqm: rendering and `ddm doctor`
    both ask here."""
    from PIL import features

    if not features.check("raqm"):
        raise ConfigError(
            "rendering emoji needs Pillow with libraqm (to join ZWJ sequences and flags into one "
            "glyph); " + expected("PIL.features.check('raqm') True", False) + f": {RAQM_FIX}"
        )


def open_font(path: str | Path):
    """The font at the bitmap size, laid out by raqm; ConfigError when raqm is missing."""
    from PIL import ImageFont

    require_raqm()
    try:
        return ImageFont.truetype(str(path), BITMAP_SIZE, layout_engine=ImageFont.Layout.RAQM)
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot open as the colour emoji font at size {BITMAP_SIZE}: {exc}"
        ) from exc


def draw_rgba(font, text: str):
    """(RGBA image of the glyph on transparency, None) or (None, why it was dropped)."""
    from PIL import Image, ImageDraw

    advance = font.getlength(text)
    if advance > MAX_ADVANCES * font.getlength(_REFERENCE):
        return None, "not one glyph"
    left, top, right, bottom = font.getbbox(text)
    if right <= 0 or bottom <= 0:
        return None, "blank"
    img = Image.new("RGBA", (int(right), int(bottom)), (0, 0, 0, 0))
    ImageDraw.Draw(img).text((0, 0), text, font=font, embedded_color=True)
    if img.getchannel("A").getbbox() is None:
        return None, "blank"
    return img, None


def to_square_rgb(rgba, size: int, background: tuple[int, int, int] = BACKGROUND) -> np.ndarray:
    """uint8 [3, size, size]: composited onto the background, padded square (centred), box-resized."""
    from PIL import Image

    if size not in SIZES:
        raise ConfigError(expected(f"an emoji size in {SIZES}", size))
    w, h = rgba.size
    side = max(w, h)
    canvas = Image.new("RGBA", (side, side), (*background, 255))
    canvas.alpha_composite(rgba, ((side - w) // 2, (side - h) // 2))
    rgb = canvas.convert("RGB").resize((size, size), Image.Resampling.BOX)
    return np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1).copy()


def render(font, text: str, size: int) -> tuple[np.ndarray | None, str | None]:
    """(uint8 [3, size, size], None), or (None, why the font cannot draw it)."""
    rgba, why = draw_rgba(font, text)
    if rgba is None:
        return None, why
    return to_square_rgb(rgba, size), None
