"""A latent deployment at test size, built in seconds: a tiny autoencoder trained a few steps on
synthetic colour images (3x32x32 -> 4x8x8 latents), two random-weight experts (PyTorch and JAX) in its
latent space, label-prior routing, and the autoencoder as the [decoder]."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ddm.schema.sample_space import SampleSpace

CLASSES = ("red", "green", "blue")
PIXELS = SampleSpace((3, 32, 32), (-1.0, 1.0), len(CLASSES), CLASSES)


def synthetic_images(n: int, seed: int = 0) -> np.ndarray:
    """float32 [n, 3, 32, 32] in [-1, 1]: smooth colour blobs (something an autoencoder can learn)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32] / 31.0
    out = np.empty((n, 3, 32, 32), np.float32)
    for i in range(n):
        cy, cx, r = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.1, 0.4)
        blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
        colour = rng.uniform(-1, 1, 3)
        out[i] = (colour[:, None, None] * blob[None] + 0.1 * rng.standard_normal((3, 1, 1))).clip(-1, 1)
    return out


def train_tiny_autoencoder(folder: Path, steps: int = 30) -> Path:
    from ddm.workers.autoencoder.config import preset
    from ddm.workers.autoencoder.train import train_autoencoder
    from ddm.workers.training import FitOptions

    cfg = preset("tiny", 3, 32)
    trained_on = {"dataset": "synthetic", "split": "none", "sha256": "", "count": 256}
    train_autoencoder(
        synthetic_images(256), synthetic_images(64, seed=1), cfg, folder,
        pixel_space=PIXELS, trained_on=trained_on, fit=FitOptions(steps=steps, batch=32, progress=False),
    )  # fmt: skip
    return folder


def write_latent_deployment(root: Path) -> Path:
    """root/deployment.toml: the tiny autoencoder as decoder, two random experts in its latent space."""
    from ddm.ops.random_experts import make_random_expert
    from ddm.schema.deployment import Deployment
    from ddm.workers.autoencoder.checkpoint import read_card

    card = read_card(train_tiny_autoencoder(root / "autoencoder"))
    space = card.latent_space()
    make_random_expert(root / "e0_torch", "torch", range(0, 2), seed=0, sample_space=space)
    make_random_expert(root / "e1_jax", "jax", range(1, 3), seed=1, sample_space=space)
    experts = [("e0_torch", "cpu"), ("e1_jax", "cpu")]
    decoder = {"checkpoint": "autoencoder", "device": "cpu"}
    path = root / "deployment.toml"
    return Deployment.build(
        path, experts, "label-prior", name="latent-test", sample_space=space, decoder=decoder
    ).write()
