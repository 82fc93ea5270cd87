"""A diffusers AutoencoderKL as the decoder stage (workers/autoencoder/diffusers_vae.py, diffusers_card.py):
the folder is served in place through load_autoencoder, decoding equals AutoencoderKL.decode(z /
scaling_factor) by hand, the card is derived from the folder, and what cannot be served is refused."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from ddm.ops.random_diffusers import write_vae
from ddm.router.deployment_loader import decoder_card, load_decoder
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError
from ddm.schema.sample_space import SampleSpace
from ddm.workers.autoencoder.checkpoint import load_autoencoder, read_card
from ddm.workers.autoencoder.diffusers_card import write_diffusers_decoder
from ddm.workers.autoencoder.diffusers_vae import DiffusersAutoencoder

LATENT = (4, 8, 8)


@pytest.fixture(scope="module")
def vae_and_decoder(tmp_path_factory):
    root = tmp_path_factory.mktemp("vae")
    vae = write_vae(root / "vae", seed=1)
    return vae, write_diffusers_decoder(vae, root / "decoder", LATENT, preview_samples=4)


def diffusers_vae(folder):
    from diffusers import AutoencoderKL

    return AutoencoderKL.from_pretrained(str(folder), use_safetensors=True, low_cpu_mem_usage=False).eval()


def test_decode_and_encode_are_the_vaes_own_scaled_by_hand(vae_and_decoder):
    import torch

    vae, decoder = vae_and_decoder
    loaded = load_autoencoder(decoder)
    assert isinstance(loaded, DiffusersAutoencoder) and loaded.device == "cpu"
    z = np.random.default_rng(2).standard_normal((3, *LATENT)).astype(np.float32)
    model = diffusers_vae(vae)
    with torch.no_grad():
        want = model.decode(torch.from_numpy(z) / 0.18215).sample.numpy()
        x = torch.from_numpy(want)
        want_z = (model.encode(x).latent_dist.mean * 0.18215).numpy()
    pixels = loaded.decode(z)
    assert pixels.shape == (3, 3, 16, 16) and np.abs(want).max() > 0
    np.testing.assert_allclose(pixels, want, atol=1e-6)
    np.testing.assert_allclose(loaded.encode(pixels), want_z, atol=1e-5)
    assert loaded.decode(np.zeros((0, *LATENT), np.float32)).shape == (0, 3, 16, 16)


def test_the_card_is_derived_from_the_folder_and_nothing_is_copied(vae_and_decoder):
    vae, decoder = vae_and_decoder
    assert sorted(p.name for p in decoder.iterdir()) == ["meta.json"]
    meta = json.loads((decoder / "meta.json").read_text())
    assert meta["source"] == {"format": "diffusers-autoencoderkl", "folder": str(vae.resolve())}
    card = read_card(decoder)
    digest = hashlib.sha256((vae / "diffusion_pytorch_model.safetensors").read_bytes()).hexdigest()
    assert card.encoder_id == "ae-" + digest[:12]
    assert card.pixel_space == SampleSpace((3, 16, 16), (-1.0, 1.0))  # 2 down blocks: 2x the latent side
    assert (card.latent_shape, card.shift, card.scale) == (LATENT, (0.0,) * 4, 0.18215)
    assert card.trained_on["measured"] == card.reconstruction["measured"] == "not measured here"
    # the preview: the least-squares linear map, better than its mean on fresh decodings
    z = np.random.default_rng(9).standard_normal((4, *LATENT)).astype(np.float32)
    pooled = load_autoencoder(decoder).decode(z).reshape(4, 3, 8, 2, 8, 2).mean(axis=(3, 5))
    residual = np.mean((card.preview.apply(z) - pooled) ** 2)
    assert residual < np.mean((pooled - pooled.mean(axis=(0, 2, 3), keepdims=True)) ** 2)


def test_a_deployment_serves_it_as_its_decoder(vae_and_decoder, tmp_path):
    from ddm.ops.random_experts import make_random_expert

    _, decoder = vae_and_decoder
    space = SampleSpace(LATENT, (-8.0, 8.0), 10, tuple(map(str, range(10))))
    make_random_expert(tmp_path / "e0", "torch", range(10), sample_space=space)
    decoder_table = {"checkpoint": str(decoder), "device": "cpu"}
    dep = Deployment.build(tmp_path / "d.toml", ["e0"], sample_space=space, decoder=decoder_table)
    assert decoder_card(dep) == read_card(decoder)
    assert isinstance(load_decoder(dep), DiffusersAutoencoder)
    other = SampleSpace(LATENT, (-4.0, 4.0), 10, space.class_names)
    with pytest.raises(ConfigError, match="value_range"):
        decoder_card(Deployment.build(tmp_path / "o.toml", ["e0"], sample_space=other, decoder=decoder_table))


def test_what_cannot_be_served_is_refused(vae_and_decoder, tmp_path):
    vae, decoder = vae_and_decoder
    meta = json.loads((decoder / "meta.json").read_text())
    bad = tmp_path / "bad"
    bad.mkdir()
    for source, match in (
        ({"format": "ckpt", "folder": str(vae)}, '"format": "diffusers-autoencoderkl"'),
        ({"format": "diffusers-autoencoderkl", "folder": str(tmp_path)}, "config.json"),
    ):
        (bad / "meta.json").write_text(json.dumps({**meta, "source": source}))
        with pytest.raises(ConfigError, match=match):
            load_autoencoder(bad)
    other = write_vae(tmp_path / "other", seed=7)  # another VAE's weights under this card
    (bad / "meta.json").write_text(json.dumps({**meta, "source": {**meta["source"], "folder": str(other)}}))
    with pytest.raises(ConfigError, match="digest"):
        load_autoencoder(bad)
    per_channel = write_vae(tmp_path / "sdxl_like", latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    with pytest.raises(ConfigError, match="without latents_mean"):
        write_diffusers_decoder(per_channel, tmp_path / "d2", LATENT)
    with pytest.raises(ConfigError, match="latent_shape with the VAE's 4 channels"):
        write_diffusers_decoder(vae, tmp_path / "d3", (3, 8, 8))
