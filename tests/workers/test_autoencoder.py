"""The latent deployment's autoencoder (issue 29): training writes a card that names its own weights,
the latents are normalised, the linear preview is a least-squares fit (a known answer), and bad input
is refused with what was expected."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ddm.schema.autoencoder_card import AutoencoderCard, LatentPreview, encoder_id_of, split_latent_name
from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.errors import ConfigError, SchemaError
from ddm.workers.autoencoder.checkpoint import WEIGHTS, load_autoencoder, read_card
from ddm.workers.autoencoder.train import fit_preview
from tests.support.latent import synthetic_images, train_tiny_autoencoder


@pytest.fixture(scope="module")
def tiny_ae(tmp_path_factory):
    return train_tiny_autoencoder(tmp_path_factory.mktemp("ae") / "ae")


def test_training_writes_a_card_naming_its_weights_and_its_latent_space(tiny_ae):
    card = read_card(tiny_ae)
    assert card.encoder_id == encoder_id_of(file_sha256(tiny_ae / WEIGHTS))
    assert card.latent_shape == (4, 8, 8) and card.downsample == 4
    lo, hi = card.value_range
    assert lo == -hi and hi > 0
    rec = card.reconstruction
    assert rec["n"] == 64 and np.isfinite(rec["psnr_db"]) and np.isfinite(rec["preview_psnr_db"])
    assert card.latent_space().describe().startswith("4x8x8")
    assert AutoencoderCard.from_dict(json.loads(json.dumps(card.to_dict()))) == card


def test_latents_are_normalised_inside_the_declared_range_and_decode_to_pixels(tiny_ae):
    ae = load_autoencoder(tiny_ae)
    z = ae.encode(synthetic_images(256))  # the training images: what the normalisation was fitted on
    assert z.shape == (256, 4, 8, 8)
    assert abs(float(z.std()) - 1.0) < 0.02 and np.abs(z.mean(axis=(0, 2, 3))).max() < 0.02
    assert np.abs(z).max() <= ae.card.value_range[1]
    assert ae.decode(z[:5]).shape == (5, 3, 32, 32)
    assert ae.decode(z[:0]).shape == (0, 3, 32, 32)


def test_the_preview_fit_recovers_a_linear_map_exactly():
    rng = np.random.default_rng(0)
    matrix, bias = rng.normal(size=(3, 4)), rng.normal(size=3)
    z = rng.normal(size=(20, 4, 8, 8)).astype(np.float32)
    rgb = np.einsum("kc,nchw->nkhw", matrix, z) + bias[None, :, None, None]
    images = rgb.repeat(4, axis=2).repeat(4, axis=3)  # every 4x4 block is its latent position's colour
    preview = fit_preview(z, images, 4)
    np.testing.assert_allclose(np.asarray(preview.matrix), matrix, atol=1e-5)
    np.testing.assert_allclose(preview.bias, bias, atol=1e-5)
    np.testing.assert_allclose(preview.apply(z, 4), images, atol=1e-4)


def test_weights_that_are_not_the_cards_are_refused(tiny_ae, tmp_path):
    import shutil

    copy = tmp_path / "ae"
    shutil.copytree(tiny_ae, copy)
    data = bytearray((copy / WEIGHTS).read_bytes())
    data[-1] ^= 1
    (copy / WEIGHTS).write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="digest is the card's ae-"):
        load_autoencoder(copy)


def test_latents_of_the_wrong_shape_are_refused_by_the_decoder(tiny_ae):
    ae = load_autoencoder(tiny_ae)
    with pytest.raises(SchemaError, match=r"expected latents \[N, 4, 8, 8\], got \(2, 3, 8, 8\)"):
        ae.decode(np.zeros((2, 3, 8, 8), np.float32))
    with pytest.raises(ConfigError, match=r"expected images \[N, 3, 32, 32\]"):
        ae.encode(np.zeros((2, 1, 32, 32), np.float32))


def test_bad_cards_and_names_say_what_was_expected(tiny_ae):
    card = read_card(tiny_ae).to_dict()
    card["preview"] = LatentPreview(((0.0,) * 3,) * 3, (0, 0, 0)).to_dict()  # reads 3 channels, not 4
    with pytest.raises(SchemaError, match="a preview reading 4 latent channels"):
        AutoencoderCard.from_dict(card)
    assert split_latent_name("emoji") is None
    assert split_latent_name("emoji~ae-0123456789ab") == ("emoji", "ae-0123456789ab")
    with pytest.raises(ConfigError, match="<dataset>~ae-<12 hex digits>"):
        split_latent_name("emoji~vae")
