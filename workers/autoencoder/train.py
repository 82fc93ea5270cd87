"""Training the autoencoder, then fitting what its card records: the latent normalisation, the linear
preview and the reconstruction quality on held-out data.

Why KL-regularised (a VAE with a small KL weight, as the DDM paper's SD-VAE) and not plain: the KL
term keeps the latent near unit scale and smooth, and the decoder is trained on sampled latents, so it
stays sensible on the imperfect latents a flow generates; a plain autoencoder's decoder has only ever
seen the encoder's exact codes. The weight is small so reconstructions stay sharp; the latents are
normalised afterwards anyway (shift, scale on the card), as LDM's scale_factor does.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch.nn import functional as F
from tqdm import tqdm

from ddm.schema.autoencoder_card import AutoencoderCard, LatentPreview, encoder_id_of
from ddm.schema.checkpoint_meta import file_sha256, utc_now, write_meta
from ddm.schema.sample_space import SampleSpace
from ddm.workers.autoencoder.checkpoint import WEIGHTS, load_autoencoder
from ddm.workers.autoencoder.config import AutoencoderConfig
from ddm.workers.autoencoder.torch_model import Autoencoder
from ddm.workers.training import FitOptions

KL_WEIGHT = 1e-4  # per latent number, against the per-pixel squared error
RANGE_STEP = 0.5  # the latent value range is the training latents' largest |z|, rounded up to this
AUTOENCODER_FIT = FitOptions(steps=3000, batch=64)  # train_autoencoder's default


def train_autoencoder(
    images: np.ndarray,
    heldout: np.ndarray,
    cfg: AutoencoderConfig,
    out: Path,
    *,
    pixel_space: SampleSpace,
    trained_on: dict,
    fit: FitOptions = AUTOENCODER_FIT,
    kl_weight: float = KL_WEIGHT,
    score_fd=None,
) -> dict:
    """images / heldout float32 [N, C, S, S] in [-1, 1] -> the checkpoint in `out`; its meta (with
    the card) is returned. score_fd(real, recon) -> {"fd", "fd_floor", ...} when a classifier is at hand."""
    t0 = time.perf_counter()
    model = Autoencoder(cfg)
    recent = _fit(model, images, fit, kl_weight)

    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(out / WEIGHTS))
    shift, scale, value_range = _normalisation(model, images)
    draft = AutoencoderCard(
        encoder_id=encoder_id_of(file_sha256(out / WEIGHTS)),
        pixel_space=pixel_space,
        latent_shape=cfg.latent_shape,
        value_range=value_range,
        shift=shift,
        scale=scale,
        preview=LatentPreview(((0.0,) * cfg.latent_channels,) * 3, (0.0, 0.0, 0.0)),  # fitted below
        trained_on=trained_on,
        reconstruction={},
    )
    meta = {
        "kind": "autoencoder",
        "framework": "torch",
        "config": cfg.to_dict(),
        "created": utc_now(),
        **fit.record(),  # steps, batch, lr
        "seed": fit.seed,
        "kl_weight": kl_weight,
        "num_params": sum(p.numel() for p in model.parameters()),
        "final_loss": float(np.mean(recent)),
        "card": draft.to_dict(),
    }
    write_meta(out, meta)
    loaded = load_autoencoder(out)  # the one door: what is measured is what the decoder worker serves
    z = loaded.encode(images)
    preview = fit_preview(z, images, draft.downsample)
    scores = reconstruction_scores(heldout, loaded.encode(heldout), preview, loaded, score_fd)
    card = dataclasses.replace(draft, preview=preview, reconstruction=scores)
    meta.update(card=card.to_dict(), wall_time_s=round(time.perf_counter() - t0, 1))
    write_meta(out, meta)
    return meta


def _fit(model: Autoencoder, images, fit: FitOptions, kl_weight: float) -> list[float]:
    """Train `model` in place (AdamW, one-cycle schedule); returns the last 100 losses (the card's final
    loss is their mean), the model in eval mode."""
    steps, batch, lr = fit.length("steps"), fit.batch, fit.lr
    torch.manual_seed(fit.seed)
    rng = np.random.default_rng(fit.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    bar = tqdm(total=steps, desc="autoencoder", disable=not fit.progress)
    recent: list[float] = []
    for _ in range(steps):
        x = torch.from_numpy(images[rng.integers(0, len(images), batch)])
        mean, logvar = model.encoder(x)
        z = mean + torch.exp(0.5 * logvar) * torch.randn_like(mean)  # the decoder learns sampled latents
        recon = F.mse_loss(model.decoder(z), x)
        kl = 0.5 * torch.mean(mean**2 + logvar.exp() - 1.0 - logvar)
        loss = recon + kl_weight * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        recent = [*recent[-99:], float(loss.item())]
        bar.update(1)
        bar.set_postfix(mse=f"{recon.item():.4f}", kl=f"{kl.item():.2f}")
    bar.close()
    model.eval()
    return recent


@torch.inference_mode()
def _normalisation(model: Autoencoder, images: np.ndarray) -> tuple[tuple, float, tuple]:
    """shift (per channel mean), scale (1 / std after the shift) and the value range of the training
    latents (their largest |z| after normalising, rounded up to RANGE_STEP)."""
    mean = torch.cat(
        [model.encoder(torch.from_numpy(images[s : s + 256]))[0] for s in range(0, len(images), 256)]
    )
    shift = mean.mean(dim=(0, 2, 3))
    centred = mean - shift[None, :, None, None]
    scale = float(1.0 / centred.std())
    bound = float(np.ceil(float((centred * scale).abs().max()) / RANGE_STEP) * RANGE_STEP)
    return tuple(float(v) for v in shift), scale, (-bound, bound)


def fit_preview(z: np.ndarray, images: np.ndarray, downsample: int) -> LatentPreview:
    """Least squares: RGB of each latent position's pixel block (its mean) ~ matrix @ z + bias."""
    n, c, h, w = z.shape
    pooled = images[:, :3].reshape(n, -1, h, downsample, w, downsample).mean(axis=(3, 5))  # [n, 3, h, w]
    if images.shape[1] == 1:  # greyscale data: the preview is grey
        pooled = np.repeat(pooled, 3, axis=1)
    a = np.concatenate([z.transpose(0, 2, 3, 1).reshape(-1, c), np.ones((n * h * w, 1))], axis=1)
    b = pooled.transpose(0, 2, 3, 1).reshape(-1, 3)
    sol, *_ = np.linalg.lstsq(a.astype(np.float64), b.astype(np.float64), rcond=None)  # [c + 1, 3]
    return LatentPreview(tuple(tuple(sol[:c, k]) for k in range(3)), tuple(sol[c]))


def psnr_db(real: np.ndarray, recon: np.ndarray, value_range=(-1.0, 1.0)) -> float:
    """Peak signal-to-noise ratio over the whole set, peak = the value range's width."""
    mse = float(np.mean((np.clip(recon, *value_range) - real) ** 2))
    return float(10 * np.log10((value_range[1] - value_range[0]) ** 2 / mse))


def reconstruction_scores(heldout, z, preview, loaded, score_fd) -> dict:
    """PSNR of reconstructions and of the preview (upscaled) of held-out images whose latents are z;
    FD when scorable."""
    recon = loaded.decode(z)
    shown = preview.apply(z, loaded.card.downsample)
    if heldout.shape[1] == 1:
        shown = shown.mean(axis=1, keepdims=True)
    out = {
        "n": int(len(heldout)),
        "psnr_db": round(psnr_db(heldout, recon), 2),
        "preview_psnr_db": round(psnr_db(heldout, shown), 2),
    }
    if score_fd is not None:
        out.update(score_fd(heldout, recon))
    return out
