"""Writing a decoder folder that serves a diffusers AutoencoderKL in place: meta.json and the card derived
from the VAE folder (ddm.workers.autoencoder.diffusers_vae says what the folder holds).

What the card says, and where each number comes from:
    encoder_id      "ae-" + the sha256 of the VAE's diffusion_pytorch_model.safetensors (12 hex digits)
    latent_shape    given (the experts' sample: 4 x 32 x 32 for a 256 x 256 DiT); its channels must be
                    config.json's latent_channels
    pixel_space     out_channels x (f h) x (f w) in [-1, 1], no classes; f = 2^(down blocks - 1)
                    (8 for SD's VAE)
    value_range     given: the range of the scaled latents a deployment declares. It bounds the data
                    estimate of a DDPM expert's conversion (ddm.workers.objectives, "Low SNR"), so the
                    default is wide enough (DEFAULT_LATENT_RANGE) never to bind on SD latents (unit
                    variance after scaling), as DiT's own sampler never clips
    shift, scale    config.json's shift_factor (0) on every channel, and its scaling_factor
    preview         a linear latent -> RGB map fitted by least squares on `preview_samples` random
                    latents z ~ N(0, I) (the scaled latents' own scale) and their decodings, pooled per
                    latent position: the decoder's best linear response around that distribution, not
                    fitted on real images (none are at hand). Each latent gives h x w equations for the
                    C + 1 unknowns of each colour, so 2 suffice (a full-size VAE's CPU decode takes seconds)
    trained_on,     {"measured": "not measured here", ...}: the VAE was trained elsewhere, and no
    reconstruction  held-out set is at hand to score it
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ddm.schema.autoencoder_card import AutoencoderCard, LatentPreview, encoder_id_of
from ddm.schema.checkpoint_meta import file_sha256, utc_now, write_meta
from ddm.schema.errors import ConfigError, expected
from ddm.schema.sample_space import SampleSpace
from ddm.workers.autoencoder.diffusers_vae import FORMAT, SOURCE_FIELD, WEIGHTS, bin_note, check_normalisation

DEFAULT_LATENT_RANGE = (-8.0, 8.0)
NOT_MEASURED = "not measured here"
BOOKKEEPING = ("_class_name", "_diffusers_version", "_name_or_path")


def read_vae_config(vae_dir: Path) -> dict:
    """The VAE folder's config.json, checked to be an AutoencoderKL's with its safetensors weights."""
    path = Path(vae_dir) / "config.json"
    if not path.is_file() or not (Path(vae_dir) / WEIGHTS).is_file():
        raise ConfigError(
            expected(f"a diffusers AutoencoderKL folder (config.json, {WEIGHTS})", str(vae_dir))
            + bin_note(vae_dir)
        )
    config = json.loads(path.read_text())
    if config.get("_class_name", "AutoencoderKL") != "AutoencoderKL":
        raise ConfigError(expected(f"{path} of an AutoencoderKL", config.get("_class_name")))
    return config


def draft_card(
    vae_dir: Path, config: dict, latent_shape, value_range, preview: LatentPreview | None = None
) -> AutoencoderCard:
    """The card of the module docstring; `preview` None: a zero map (before the fit)."""
    c, h, w = (int(n) for n in latent_shape)
    if c != config.get("latent_channels", 4):
        raise ConfigError(
            expected(f"latent_shape with the VAE's {config.get('latent_channels')} channels", c)
        )
    shift, scale = check_normalisation(config)
    factor = 2 ** (len(config.get("block_out_channels", (64,))) - 1)
    pixels = SampleSpace((int(config.get("out_channels", 3)), factor * h, factor * w), (-1.0, 1.0))
    source = {"measured": NOT_MEASURED, "source": str(vae_dir)}
    return AutoencoderCard(
        encoder_id=encoder_id_of(file_sha256(Path(vae_dir) / WEIGHTS)),
        pixel_space=pixels,
        latent_shape=(c, h, w),
        value_range=tuple(value_range),
        shift=(shift,) * c,
        scale=scale,
        preview=preview or LatentPreview(((0.0,) * c,) * 3, (0.0, 0.0, 0.0)),
        trained_on={**source, "note": "a diffusers AutoencoderKL trained elsewhere"},
        reconstruction={"measured": NOT_MEASURED},
    )


def write_diffusers_decoder(
    vae_dir: str | Path,
    out_dir: str | Path,
    latent_shape,
    value_range: tuple[float, float] = DEFAULT_LATENT_RANGE,
    preview_samples: int = 2,
    seed: int = 0,
) -> Path:
    """Write out_dir/meta.json: a decoder that serves the AutoencoderKL folder `vae_dir` in place (its
    absolute path; no weights copied), with the card the module docstring derives. latent_shape (C, h,
    w): one latent the experts sample. Returns out_dir."""
    from ddm.workers.autoencoder.checkpoint import load_autoencoder
    from ddm.workers.autoencoder.train import fit_preview

    vae_dir, out_dir = Path(vae_dir).resolve(), Path(out_dir)
    config = read_vae_config(vae_dir)
    card = draft_card(vae_dir, config, latent_shape, value_range)
    meta = {
        "kind": "autoencoder",
        "framework": "torch",
        "config": {k: v for k, v in config.items() if k not in BOOKKEEPING},
        SOURCE_FIELD: {"format": FORMAT, "folder": str(vae_dir)},
        "created": utc_now(),
        "card": card.to_dict(),
    }
    write_meta(out_dir, meta)  # the draft: load_autoencoder (the one door) decodes what the fit reads
    z = np.random.default_rng(seed).standard_normal((preview_samples, *card.latent_shape)).astype(np.float32)
    images = load_autoencoder(out_dir, "cpu").decode(z)
    preview = fit_preview(z, images, card.pixel_space.shape[1] // card.latent_shape[1])
    write_meta(
        out_dir, {**meta, "card": draft_card(vae_dir, config, latent_shape, value_range, preview).to_dict()}
    )
    return out_dir
