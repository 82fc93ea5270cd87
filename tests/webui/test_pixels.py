"""How a frame's latent becomes the pixels the page draws (webui/pixels.py), for any sample space: one
channel exactly as before sample spaces (MNIST and Fashion-MNIST look as they did, byte for byte),
three channels as RGB, any height and width, scaled from the space's value range."""

from __future__ import annotations

import base64
import hashlib

import numpy as np
import pytest

from ddm.webui.pixels import to_pixels


def before_sample_spaces(x: np.ndarray) -> np.ndarray:
    """What the UI sent before sample spaces (schema/flow.py to_uint8 at the time, copied here so a
    later change there cannot move this reference): float [N, 1, 32, 32] -> uint8 [N, 32, 32]."""
    x = np.clip((np.asarray(x, dtype=np.float32)[:, 0] + 1.0) * 127.5, 0, 255)
    return np.round(x).astype(np.uint8)


def fixed_frame() -> np.ndarray:
    """A fixed float16 latent [3, 1, 32, 32] sweeping [-1.25, 1.25]: clipped ends, every grey level."""
    return np.linspace(-1.25, 1.25, 3 * 32 * 32, dtype=np.float32).reshape(3, 1, 32, 32).astype(np.float16)


# sha256 of the base64 "pixels" string the UI sent for fixed_frame() before sample spaces (computed with
# the code of commit 3513548, webui/payloads.py frame_payload -> schema/flow.py to_uint8)
FIXED_FRAME_PIXELS_SHA256 = "14ccceb39dd4becc6bffcc869f3ff77ff6dac588acf3cfe72e3330a22c1cbdeb"


def test_one_channel_is_byte_for_byte_what_the_page_got_before():
    pixels, channels = to_pixels(fixed_frame())
    assert channels == 1 and pixels.shape == (3, 32, 32) and pixels.dtype == np.uint8
    sent = base64.b64encode(pixels.tobytes()).decode("ascii")
    assert hashlib.sha256(sent.encode()).hexdigest() == FIXED_FRAME_PIXELS_SHA256
    assert np.array_equal(pixels, before_sample_spaces(fixed_frame()))


def test_one_channel_equals_the_old_mapping_for_every_float16_value():
    # every finite float16 there is (rounding ties at .5 included): the frame's stored dtype
    values = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    values = values[np.isfinite(values)]
    x = np.resize(values, (values.size // 1024 + 1) * 1024).reshape(-1, 1, 32, 32)
    pixels, _ = to_pixels(x, (-1.0, 1.0))
    assert np.array_equal(pixels, before_sample_spaces(x))


def test_three_channels_are_rgb_interleaved_per_pixel():
    x = np.full((2, 3, 4, 5), -1.0, np.float32)
    x[0, 0] = 1.0  # image 0: pure red
    x[1, 1] = 1.0  # image 1: green, with blue at half
    x[1, 2] = 0.0
    x[1, 0, 2, 3] = 1.0  # ... and one white-ish pixel at row 2, column 3
    pixels, channels = to_pixels(x)
    assert channels == 3 and pixels.shape == (2, 4, 5, 3)
    assert (pixels[0] == [255, 0, 0]).all()
    assert (pixels[1, 0, 0] == [0, 255, 128]).all()
    assert (pixels[1, 2, 3] == [255, 255, 128]).all()
    # the bytes the page reads: image after image, row-major, R G B per pixel
    flat = pixels.tobytes()
    i = ((1 * 4 + 2) * 5 + 3) * 3
    assert flat[i : i + 3] == bytes([255, 255, 128])


def test_any_size_and_the_value_range_of_the_space():
    x = np.linspace(0.0, 1.0, 7 * 9, dtype=np.float32).reshape(1, 1, 7, 9)
    pixels, _ = to_pixels(x, (0.0, 1.0))  # a space in [0, 1]: 0 black, 1 white
    assert pixels.shape == (1, 7, 9)
    assert pixels[0, 0, 0] == 0 and pixels[0, -1, -1] == 255
    assert np.array_equal(pixels[0].ravel(), np.round(np.linspace(0, 255, 63)).astype(np.uint8))
    wide = np.array([-3.0, 0.0, 3.0, 9.0], np.float32).reshape(1, 1, 1, 4)
    assert to_pixels(wide, (-3.0, 3.0))[0].ravel().tolist() == [0, 128, 255, 255]  # clipped


def test_other_channel_counts_show_what_they_can():
    latent = np.zeros((1, 4, 8, 8), np.float32)  # a VAE's 4-channel latent: its first 3 as RGB
    latent[0, 3] = 1.0
    pixels, channels = to_pixels(latent)
    assert channels == 3 and pixels.shape == (1, 8, 8, 3) and (pixels == 128).all()
    two = np.ones((1, 2, 8, 8), np.float32)
    pixels, channels = to_pixels(two)
    assert channels == 1 and pixels.shape == (1, 8, 8)


def test_bad_input_says_what_it_expected():
    with pytest.raises(ValueError, match=r"\[n, C, H, W\]"):
        to_pixels(np.zeros((32, 32), np.float32))
    with pytest.raises(ValueError, match="lo < hi"):
        to_pixels(np.zeros((1, 1, 2, 2), np.float32), (1.0, 1.0))
