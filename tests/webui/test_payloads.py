"""What the browser gets of a frame in any sample space (webui/payloads.py frame_payload), and the
experts' cards in the cluster panel's words (webui/cards.py)."""

from __future__ import annotations

import base64
import hashlib
from types import SimpleNamespace

import numpy as np
import pytest

from ddm.schema.messages import Frame
from ddm.webui.cards import card_detail, card_text
from ddm.webui.jobs import SubmitError, deployment_payload, labels_text, parse_form
from ddm.webui.payloads import frame_payload
from tests.support.descriptors import demo_descriptor
from tests.webui.colour_fake import GROUPS, emoji_descriptor
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


def test_the_page_gets_the_sample_space_the_null_label_and_the_cards_of_the_descriptor():
    d = emoji_descriptor()
    page = deployment_payload(d)
    assert page["sample_space"] == {
        "shape": [3, 32, 32],
        "value_range": [-1.0, 1.0],
        "num_classes": 9,
        "class_names": list(GROUPS),
    }
    assert page["sample_text"].startswith("3x32x32 in [-1, 1], 9 classes (Smileys & Emotion")
    assert page["class_names"] == list(GROUPS)
    assert (page["null_label"], page["null_name"]) == (9, "unconditional")  # 9 classes: label 9 is null
    assert [e["card_text"] for e in page["experts"]] == [
        "UNet · PyTorch · flow velocity",
        "DiT · Flax · DDPM ε (cosine)",
        "DiT · PyTorch · flow velocity",
        "UNet · Flax · DDPM v (linear)",
    ]
    assert page["experts"][1]["card"]["schedule"] == {"name": "cosine", "s": 0.008}
    # the form in this space: "all" is its 9 classes, null an unconditional image, 9 (K) a class past
    # the last (issue 40 item 3)
    assert parse_form({"labels": "all"}, d).labels == tuple(range(9))
    assert parse_form({"labels": [None, 2]}, d).labels == (2, None)
    assert labels_text(d, [9, 2]) == labels_text(d, [None, 2]) == "Animals & Nature, unconditional"
    with pytest.raises(SubmitError, match=r"labels 0\.\.8, or null \(or 'unconditional'\).*got 9"):
        parse_form({"labels": [9]}, d)


def test_a_descriptor_from_before_cards_shows_no_card_line():
    page = deployment_payload(demo_descriptor())
    assert [(e["card"], e["card_text"], e["card_detail"]) for e in page["experts"]] == [(None, "", "")] * 2
    assert page["sample_space"]["shape"] == [1, 32, 32] and page["null_label"] == 10


def test_a_latent_frame_is_drawn_through_the_decoders_preview_at_the_pixels_size():
    from ddm.schema.autoencoder_card import DecoderInfo, LatentPreview
    from ddm.schema.sample_space import SampleSpace
    from ddm.webui.pixels import to_pixels

    preview = LatentPreview(((0.5, 0, 0, 0), (0, 0.5, 0, 0), (0, 0, 0.5, 0.25)), (0.0, 0.1, -0.1))
    decoder = DecoderInfo("ae-0123456789ab", SampleSpace((3, 32, 32), (-1.0, 1.0)), preview)
    z = np.random.default_rng(0).normal(size=(2, 4, 8, 8)).astype(np.float32)
    p = frame_payload(_frame(z), (-1.0, 1.0), decoder)
    assert p["shape"] == [3, 32, 32] and p["channels"] == 3 and p["preview"] is True
    rgb = preview.apply(z.astype(np.float16).astype(np.float32), 4)  # frames travel as float16
    want, _ = to_pixels(rgb)
    assert base64.b64decode(p["pixels"]) == want.tobytes()
    assert frame_payload(_frame(z))["preview"] is False  # a pixel deployment's frame is drawn as it is
