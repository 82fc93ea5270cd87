"""A diffusers `AutoencoderKL` folder as a latent deployment's decoder, served in place (issue 38).

The decoder folder holds only meta.json: kind "autoencoder", framework "torch", the VAE's config.json
as `config` (for the record; the model is built from the folder itself), its card, and

    "source": {"format": "diffusers-autoencoderkl", "folder": the VAE folder (absolute, or relative
               to the decoder folder)}

(not "format" at the top: that key is meta.json's own record version). The weights stay where they
are: config.json and diffusion_pytorch_model.safetensors, loaded with
`AutoencoderKL.from_pretrained(folder, use_safetensors=True)`, so a .bin is never unpickled. The
card's encoder_id is the sha256 of that safetensors file, checked at every load as the trained
autoencoder's is.

Normalisation as the card states it (schema/autoencoder_card.py): z = (mean - shift) * scale with
scale = config.json's scaling_factor (SD: 0.18215) and shift = its shift_factor (0 when it has none)
on every channel; decoding divides by the scale and adds the shift back, as diffusers' pipelines do
(`vae.decode(latents / scaling_factor)`). A VAE that normalises per channel (latents_mean,
latents_std) is refused: one scale number cannot say it.

The card is written by ddm.workers.autoencoder.diffusers_card.write_diffusers_decoder; the one door
to either kind of decoder folder is ddm.workers.autoencoder.checkpoint.load_autoencoder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ddm.schema.autoencoder_card import AutoencoderCard, encoder_id_of
from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.errors import ConfigError, SchemaError, expected

FORMAT = "diffusers-autoencoderkl"
SOURCE_FIELD = "source"
WEIGHTS = "diffusion_pytorch_model.safetensors"
CHUNK = 8  # latents per decoder pass: a full-size VAE's activations at 256 x 256 are large (CPU memory)


def bin_note(folder: Path) -> str:
    """What a refusal adds when a diffusers folder has only pickled weights ('' otherwise)."""
    if any(Path(folder).glob("*.bin")):
        return " (its .bin weights are never unpickled here: save them as safetensors first)"
    return ""


def is_diffusers(meta: dict) -> bool:
    """True when an autoencoder meta serves a diffusers folder (its "source" names the format)."""
    source = meta.get(SOURCE_FIELD)
    return isinstance(source, dict) and source.get("format") == FORMAT


def source_folder(folder: str | Path, meta: dict) -> Path:
    """The VAE folder a decoder meta serves, resolved against the decoder folder; ConfigError when
    "source" is not {"format": FORMAT, "folder": a path} or the folder lacks its safetensors weights."""
    source = meta.get(SOURCE_FIELD)
    if not (is_diffusers(meta) and isinstance(source.get("folder"), str) and source["folder"]):
        want = f'"{SOURCE_FIELD}": {{"format": "{FORMAT}", "folder": a path}}'
        raise ConfigError(expected(f"{Path(folder) / 'meta.json'} with {want}", source))
    vae = Path(folder) / source["folder"]  # an absolute path stays itself
    for name in ("config.json", WEIGHTS):
        if not (vae / name).is_file():
            raise ConfigError(
                expected(f"a diffusers AutoencoderKL folder with {name} at {vae}", "no such file")
                + bin_note(vae)
            )
    return vae


def check_normalisation(config: dict) -> tuple[float, float]:
    """(shift, scale) of a VAE's config.json: shift_factor (None: 0) and scaling_factor; ConfigError for
    per-channel latents_mean / latents_std."""
    for key in ("latents_mean", "latents_std"):
        if config.get(key) is not None:
            raise ConfigError(expected(f"an AutoencoderKL without {key} (one scale for every channel)", key))
    scale = config.get("scaling_factor", 0.18215)
    shift = config.get("shift_factor") or 0.0
    return float(shift), float(scale)


def load_vae(vae_dir: Path, device: str = "cpu"):
    """diffusers.AutoencoderKL from its folder, safetensors only, in eval mode on `device` (fp32)."""
    from ddm.workers.diffusers_dit.torch_model import require_diffusers

    model = require_diffusers().AutoencoderKL.from_pretrained(
        str(vae_dir), use_safetensors=True, low_cpu_mem_usage=False
    )
    return model.to(device).eval().requires_grad_(False)


class DiffusersAutoencoder:
    """encode: pixels -> scaled latents; decode: scaled latents -> pixels; numpy in and out, as
    LoadedAutoencoder. `device`: a torch device name, already resolved (checkpoint.torch_device)."""

    def __init__(self, folder: str | Path, meta: dict, card: AutoencoderCard, device: str):
        import torch

        self.folder = Path(folder)
        self.vae_dir = source_folder(self.folder, meta)
        self.card = card
        digest = encoder_id_of(file_sha256(self.vae_dir / WEIGHTS))
        if digest != card.encoder_id:  # the card names the latent space by these very weights
            raise ConfigError(
                expected(f"{self.vae_dir / WEIGHTS} whose digest is the card's {card.encoder_id}", digest)
            )
        self.device = device
        self.model = load_vae(self.vae_dir, device)
        self._torch = torch
        self._shift = torch.tensor(card.shift, dtype=torch.float32, device=device)[None, :, None, None]

    def encode(self, x: np.ndarray) -> np.ndarray:
        """x float32 [N, 3, H, W] in [-1, 1] -> z float32 [N, *latent_shape]: the posterior's mean,
        (mean - shift) * scale."""
        want = self.card.pixel_space.shape
        if x.ndim != 4 or tuple(x.shape[1:]) != want:
            raise ConfigError(expected(f"images [N, {', '.join(map(str, want))}]", x.shape))
        scale = self.card.scale
        return self._chunked(
            x, self.card.latent_shape, lambda b: (self.model.encode(b).latent_dist.mean - self._shift) * scale
        )

    def decode(self, z: np.ndarray) -> np.ndarray:
        """z float32 [N, *latent_shape] (scaled) -> pixels float32 [N, 3, H, W]: vae.decode(z / scale +
        shift)."""
        want = self.card.latent_shape
        if z.ndim != 4 or tuple(z.shape[1:]) != want:
            raise SchemaError(expected(f"latents [N, {', '.join(map(str, want))}]", z.shape))
        scale = self.card.scale
        return self._chunked(
            z, self.card.pixel_space.shape, lambda b: self.model.decode(b / scale + self._shift).sample
        )

    def _chunked(self, a: np.ndarray, shape: tuple[int, ...], fn) -> np.ndarray:
        """fn over CHUNK rows at a time; `shape`: one output row's (an empty batch's answer)."""
        torch = self._torch
        if not len(a):
            return np.zeros((0, *shape), np.float32)
        out = []
        with torch.inference_mode():
            for s in range(0, len(a), CHUNK):
                b = torch.from_numpy(np.ascontiguousarray(a[s : s + CHUNK], dtype=np.float32)).to(self.device)
                out.append(fn(b).float().cpu().numpy())
        return np.concatenate(out)
