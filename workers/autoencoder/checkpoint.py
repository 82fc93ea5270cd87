"""An autoencoder checkpoint folder: meta.json (kind "autoencoder", config, card) and
autoencoder.safetensors; or meta.json alone, serving a diffusers AutoencoderKL folder in place (its
"source": ddm.workers.autoencoder.diffusers_vae). `load_autoencoder` is the one door to either (the
decoder worker, `ddm sample`, `ddm eval`, `ddm data encode`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ddm.schema.autoencoder_card import AutoencoderCard, encoder_id_of
from ddm.schema.checkpoint_meta import file_sha256, read_meta
from ddm.schema.errors import ConfigError, SchemaError, expected
from ddm.workers.autoencoder.config import AutoencoderConfig

WEIGHTS = "autoencoder.safetensors"
CHUNK = 256  # rows per forward pass


def read_card(folder: str | Path) -> AutoencoderCard:
    """The card of an autoencoder folder, checked (no torch needed)."""
    meta = read_meta(folder, kind="autoencoder")
    try:
        return AutoencoderCard.from_dict(meta["card"], f"{Path(folder) / 'meta.json'} card")
    except SchemaError as exc:
        raise ConfigError(str(exc)) from None


class LoadedAutoencoder:
    """encode: pixels -> normalised latents; decode: normalised latents -> pixels. numpy in and out."""

    def __init__(self, folder: str | Path, device: str = "cpu"):
        import torch
        from safetensors.torch import load_file

        from ddm.workers.autoencoder.torch_model import Autoencoder

        self.folder = Path(folder)
        meta = read_meta(self.folder, kind="autoencoder")
        self.card = read_card(self.folder)
        weights = self.folder / WEIGHTS
        if not weights.is_file():
            raise ConfigError(expected(f"{WEIGHTS} beside meta.json in {self.folder}", "no such file"))
        digest = encoder_id_of(file_sha256(weights))
        if digest != self.card.encoder_id:  # the card names the latent space by these very weights
            raise ConfigError(
                expected(f"{weights} whose digest is the card's {self.card.encoder_id}", digest)
            )
        self.config = AutoencoderConfig.from_dict(meta["config"])
        self.device = torch_device(device, torch)
        self.model = Autoencoder(self.config)
        self.model.load_state_dict(load_file(str(weights)))
        self.model.to(self.device).eval()
        self._torch = torch
        c = self.card
        self._shift = torch.tensor(c.shift, dtype=torch.float32, device=self.device)[None, :, None, None]

    def encode(self, x: np.ndarray) -> np.ndarray:
        """x float32 [N, *pixel shape] in the pixel range -> z float32 [N, *latent_shape]: the encoder's
        mean, normalised by the card's shift and scale."""
        want = self.card.pixel_space.shape
        if x.ndim != 4 or tuple(x.shape[1:]) != want:
            raise ConfigError(expected(f"images [N, {', '.join(map(str, want))}]", x.shape))
        return self._chunked(x, lambda b: (self.model.encoder(b)[0] - self._shift) * self.card.scale)

    def decode(self, z: np.ndarray) -> np.ndarray:
        """z float32 [N, *latent_shape] (normalised) -> pixels float32 [N, *pixel shape]."""
        want = self.card.latent_shape
        if z.ndim != 4 or tuple(z.shape[1:]) != want:
            raise SchemaError(expected(f"latents [N, {', '.join(map(str, want))}]", z.shape))
        return self._chunked(z, lambda b: self.model.decoder(b / self.card.scale + self._shift))

    def _chunked(self, a: np.ndarray, fn) -> np.ndarray:
        torch = self._torch
        out = []
        with torch.inference_mode():
            for s in range(0, max(len(a), 1), CHUNK):  # an empty batch still has its output shape
                b = torch.from_numpy(np.ascontiguousarray(a[s : s + CHUNK], dtype=np.float32)).to(self.device)
                out.append(fn(b).float().cpu().numpy())
        return np.concatenate(out)


def torch_device(device: str | None, torch) -> str:
    """The torch device for a deployment's device name: auto -> cuda when there is one, else cpu; an
    expert's names map too (cpu-traced -> cpu, gpu -> cuda). Neuron is refused: the decoder is not traced
    for it (not run on Trainium here)."""
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    named = {"cpu": "cpu", "cpu-traced": "cpu", "cuda": "cuda", "gpu": "cuda"}
    if device not in named:
        raise ConfigError(expected(f"a decoder device in {sorted(named)} or auto", device))
    return named[device]


def load_autoencoder(folder: str | Path, device: str = "cpu"):
    """The autoencoder of a folder: a LoadedAutoencoder (trained here), or a DiffusersAutoencoder when
    its meta names a diffusers folder as its "source". Both: encode, decode, card, device."""
    from ddm.workers.autoencoder.diffusers_vae import SOURCE_FIELD, DiffusersAutoencoder

    meta = read_meta(folder, kind="autoencoder")
    if SOURCE_FIELD in meta:  # an unknown format is refused there, naming the known one
        import torch

        return DiffusersAutoencoder(folder, meta, read_card(folder), torch_device(device, torch))
    return LoadedAutoencoder(folder, device)
