"""What the browser gets of a frame in any sample space (webui/payloads.py frame_payload), and the
experts' cards in the cluster panel's words (webui/cards.py)."""

from __future__ import annotations

import base64
from types import SimpleNamespace

import numpy as np

from ddm.schema.messages import Frame
from ddm.webui.cards import card_detail, card_text
from ddm.webui.payloads import frame_payload
from tests.webui.test_pixels import FIXED_FRAME_PIXELS_SHA256, fixed_frame


def _frame(x: np.ndarray) -> SimpleNamespace:
    """What frame_payload reads of a Frame, for a latent of any shape."""
    n = x.shape[0]
    return SimpleNamespace(
        job_id="j1",
        step=2,
        t=0.5,
        x=x.astype(np.float16),
        experts=(0,),
        missing=(),
        weights=np.tile(np.array([[1.0, 0.0]], np.float32), (n, 1)),
        latency_ms=3.0,
        compute_ms=1.0,
    )


def test_a_legacy_frame_sends_the_same_pixels_as_before():
    import hashlib

    x = fixed_frame().astype(np.float32)
    weights = np.zeros((3, 2), np.float32)
    weights[:, 0] = 1.0
    payload = frame_payload(Frame.from_latent("j1", 1, 0.1, x, (0,), weights, 5.0))
    assert hashlib.sha256(payload["pixels"].encode()).hexdigest() == FIXED_FRAME_PIXELS_SHA256
    assert (payload["n"], payload["shape"], payload["channels"]) == (3, [1, 32, 32], 1)


def test_an_rgb_frame_sends_interleaved_rgb_of_its_own_size():
    x = np.full((2, 3, 16, 24), -1.0, np.float32)
    x[:, 2] = 1.0  # blue
    x[1, 0, 5, 7] = 1.0  # one magenta pixel in image 1
    payload = frame_payload(_frame(x))
    assert (payload["n"], payload["shape"], payload["channels"]) == (2, [3, 16, 24], 3)
    raw = base64.b64decode(payload["pixels"])
    assert len(raw) == 2 * 16 * 24 * 3
    pixels = np.frombuffer(raw, np.uint8).reshape(2, 16, 24, 3)
    assert (pixels[0] == [0, 0, 255]).all()
    assert pixels[1, 5, 7].tolist() == [255, 0, 255]


def test_the_value_range_of_the_space_maps_to_black_and_white():
    x = np.array([0.0, 0.5, 1.0], np.float32).reshape(1, 1, 1, 3)
    payload = frame_payload(_frame(x), (0.0, 1.0))
    assert list(base64.b64decode(payload["pixels"])) == [0, 128, 255]


CARDS = [
    (
        {
            "framework": "jax",
            "architecture": "dit",
            "objective": "ddpm-eps",
            "schedule": {"name": "cosine", "s": 0.008},
            "time_convention": "t0-data",
        },
        "DiT · Flax · DDPM ε (cosine)",
    ),
    (
        {
            "framework": "torch",
            "architecture": "unet",
            "objective": "flow-velocity",
            "schedule": None,
            "time_convention": "t0-noise",
        },
        "UNet · PyTorch · flow velocity",
    ),
    (
        {"framework": "torch", "architecture": "unet", "objective": "ddpm-v", "schedule": "linear"},
        "UNet · PyTorch · DDPM v (linear)",
    ),
    ({"framework": "mlx", "architecture": "mmdit", "objective": "rectified"}, "mmdit · mlx · rectified"),
]


def test_a_card_in_the_panel_s_words():
    for card, text in CARDS:
        assert card_text(card) == text
    assert card_text(None) == "" and card_detail(None) == ""


def test_a_card_s_detail_names_every_field():
    detail = card_detail(CARDS[0][0])
    assert detail == (
        "architecture dit, framework jax, objective ddpm-eps under the cosine VP schedule (s=0.008), "
        "time t0-data (0 = data); served as the deployment's velocity"
    )
